package config

import (
	"reflect"
	"testing"
	"time"

	"github.com/hearthd/hearth/retry"
)

// webhookDefaults is a webhook service as a file that gives only its
// protocol and url gets it.
func webhookDefaults(name, url string) Service {
	return Service{
		Name: name, Protocol: ProtocolWebhook, URL: url, Timeout: 10 * time.Second,
		Retry: Retry{
			Policy: retry.Policy{
				MaxAttempts:    3,
				AttemptTimeout: 10 * time.Second,
				Backoff:        retry.Backoff{Strategy: retry.Exponential, Base: 2 * time.Second, Multiplier: 2, Cap: time.Minute, Jitter: retry.Full},
				RetryOn:        []retry.Class{retry.GroupTransient},
				MaxRetryAfter:  time.Hour,
			},
			Budget: Budget{Ratio: 0.2, MinRetries: 3, Window: 10 * time.Second},
		},
		Breaker: Breaker{
			Enabled: true, FailureThreshold: 5, FailureRatio: 0.5, Window: 30 * time.Second, MinCalls: 10,
			OpenFor: 30 * time.Second, MaxOpenFor: 5 * time.Minute, MaxProbes: 1, ProbeTimeout: 10 * time.Second, SuccessesToClose: 1,
		},
	}
}

// A webhook service takes its defaults, its headers as written, and no
// devices: a device without a service still goes to the only commanded
// service.
func TestWebhookService(t *testing.T) {
	c, err := Parse("hearth.yaml", []byte(`
services:
  zigbee:
    protocol: zigbee2mqtt
  ntfy:
    protocol: webhook
    url: https://ntfy.sh/hearth-alerts
    headers:
      Authorization: Bearer tk_secret
      X-Priority: "5"
  gotify:
    protocol: webhook
    url: http://gotify.local:8080/message?token=abc
    timeout: 30s
devices:
  front_door:
    class: lock
`))
	if err != nil {
		t.Fatal(err)
	}
	want := webhookDefaults("ntfy", "https://ntfy.sh/hearth-alerts")
	want.Headers = map[string]string{"Authorization": "Bearer tk_secret", "X-Priority": "5"}
	if got, _ := c.Service("ntfy"); !reflect.DeepEqual(got, want) {
		t.Errorf("service ntfy:\ngot  %+v\nwant %+v", got, want)
	}
	// A longer timeout is the attempt timeout, and the probe's grows to it.
	want = webhookDefaults("gotify", "http://gotify.local:8080/message?token=abc")
	want.Timeout, want.Retry.AttemptTimeout, want.Breaker.ProbeTimeout = 30*time.Second, 30*time.Second, 30*time.Second
	if got, _ := c.Service("gotify"); !reflect.DeepEqual(got, want) {
		t.Errorf("service gotify:\ngot  %+v\nwant %+v", got, want)
	}
	if s, _ := c.Service("ntfy"); s.Commands() || !s.Notifies() {
		t.Errorf("ntfy: Commands() %v, Notifies() %v; want false, true", s.Commands(), s.Notifies())
	}
	if d, _ := c.Device("front_door"); d.Service != "zigbee" {
		t.Errorf("front_door's service %q, want zigbee (the only commanded service)", d.Service)
	}
}

// TestWebhookErrors checks, per kind of mistake in a webhook service, the
// exact problem reported: file, line, dotted key and message.
func TestWebhookErrors(t *testing.T) {
	const hook = "services:\n  ntfy:\n    protocol: webhook\n    url: https://ntfy.sh/a\n"
	tests := []struct {
		name string
		yaml string
		want string
	}{
		{"unknown key", hook + "    header: {X-A: b}\n", `hearth.yaml:5: services.ntfy.header: unknown key (did you mean headers? known here: protocol, base_topic, gateway_name, node_names, full_topic, status_topic, online_payload, offline_payload, url, headers, timeout, method, allow_insecure, read_timeout, mqtt_username, mqtt_password, client_id, retry, breaker)`},
		{"missing url", "services:\n  ntfy:\n    protocol: webhook\n", `hearth.yaml:2: services.ntfy.url: missing; a webhook service needs the http:// or https:// URL it POSTs notifications to`},
		{"empty url", "services:\n  ntfy:\n    protocol: webhook\n    url: ''\n", `hearth.yaml:4: services.ntfy.url: must not be empty (leave the key out for the default)`},
		{"url without scheme", "services:\n  ntfy:\n    protocol: webhook\n    url: ntfy.sh/a?token=secret\n", `hearth.yaml:4: services.ntfy.url: want an http:// or https:// URL such as https://ntfy.sh/hearth; this one has no scheme`},
		{"url of another scheme", "services:\n  ntfy:\n    protocol: webhook\n    url: mqtt://broker/a\n", `hearth.yaml:4: services.ntfy.url: want an http:// or https:// URL, not mqtt://`},
		{"url without host", "services:\n  ntfy:\n    protocol: webhook\n    url: https:///a\n", `hearth.yaml:4: services.ntfy.url: no host; want https://host/path`},
		{"url that does not parse", "services:\n  ntfy:\n    protocol: webhook\n    url: https://h/%zz\n", `hearth.yaml:4: services.ntfy.url: not a valid URL: invalid URL escape "%zz"`},
		{"header name with a space", hook + "    headers:\n      \"X Priority\": 5\n", `hearth.yaml:6: services.ntfy.headers."X Priority": "X Priority" is not an HTTP header name (letters, digits and !#$%&'*+-.^_` + "`" + `|~)`},
		{"header value with a newline", hook + "    headers:\n      Authorization: \"Bearer a\\nX-Evil: 1\"\n", `hearth.yaml:6: services.ntfy.headers.Authorization: the value holds control character U+000A, which an HTTP header cannot carry`},
		{"header without value", hook + "    headers:\n      Authorization:\n", `hearth.yaml:6: services.ntfy.headers.Authorization: want a string, got null`},
		{"headers as a list", hook + "    headers: [Authorization]\n", `hearth.yaml:5: services.ntfy.headers: want a mapping, got a list`},
		{"zero timeout", hook + "    timeout: 0s\n", `hearth.yaml:5: services.ntfy.timeout: must be positive, got 0s`},
		{"timeout without unit", hook + "    timeout: 10\n", `hearth.yaml:5: services.ntfy.timeout: want a duration, got 10 (no unit); use a Go duration such as 10s`},
		{"base_topic", hook + "    base_topic: ntfy\n", `hearth.yaml:5: services.ntfy.base_topic: a webhook service takes no base_topic: Hearth reaches it over HTTP, at its url`},
		{"attempt_timeout", hook + "    retry: {attempt_timeout: 5s}\n", `hearth.yaml:5: services.ntfy.retry.attempt_timeout: a webhook service takes no attempt_timeout: its timeout bounds each POST`},
		{"status_topic keys", hook + "    status_topic: ntfy/status\n", `hearth.yaml:5: services.ntfy.status_topic: only for protocol status_topic, not webhook`},
		{"four attempts", hook + "    retry: {max_attempts: 4}\n", `hearth.yaml:5: services.ntfy.retry.max_attempts: must be from 1 to 3, got 4; a few spaced tries within the notification's TTL ride out a short outage (set allow_more_attempts: true to go beyond)`},
		{"probe shorter than the timeout", hook + "    timeout: 20s\n    breaker: {probe_timeout: 5s}\n", `hearth.yaml:6: services.ntfy.breaker.probe_timeout: probe_timeout 5s is less than timeout 20s: a probe would count as failed before its POST had the time to answer`},
		{"url on zigbee2mqtt", z2m + "    url: https://ntfy.sh/a\n", `hearth.yaml:4: services.zigbee.url: only for protocols webhook and http, not zigbee2mqtt`},
		{"headers on status_topic", "services:\n  cloud:\n    protocol: status_topic\n    status_topic: s\n    headers: {A: b}\n", `hearth.yaml:5: services.cloud.headers: only for protocols webhook and http, not status_topic`},
		{"device on a webhook service", z2m + "  ntfy:\n    protocol: webhook\n    url: https://ntfy.sh/a\ndevices:\n  front_door:\n    service: ntfy\n    class: lock\n", `hearth.yaml:9: devices.front_door.service: service "ntfy" is a notify service (protocol webhook): it receives notifications, not commands, so no device can be reached through it`},
		{"device with only a webhook service", hook + "devices:\n  front_door:\n    class: lock\n", `hearth.yaml:6: devices.front_door.service: missing, and no configured service takes commands (a status_topic or webhook service reaches no device)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("hearth.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse() = %+v, want error %q", c, tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("Parse() error:\ngot  %s\nwant %s", got, tt.want)
			}
		})
	}
}
