package config

import (
	"testing"
	"time"
)

// An http service takes its base URL, headers, method and timeout, and
// its protocol's defaults: 3 attempts of 5s, a request timeout of 5s, no
// MQTT account.
func TestHTTPService(t *testing.T) {
	c, err := Parse("hearth.yaml", []byte(`
services:
  garage-ctl:
    protocol: http
    url: https://garage.local/api
    method: post
    headers:
      Authorization: Bearer tk_secret
devices:
  garage:
    class: cover
    safety: critical
    address: doors/1
  heatpump:
    class: climate
`))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := c.Service("garage-ctl")
	if s.URL != "https://garage.local/api" || s.Method != "POST" || s.Timeout != 5*time.Second || s.Headers["Authorization"] != "Bearer tk_secret" ||
		s.Retry.MaxAttempts != 3 || s.Retry.AttemptTimeout != 5*time.Second || s.UsesMQTT() || !s.Commands() || s.MQTTUsername != "" {
		t.Fatalf("service %+v", s)
	}
	if d, _ := c.Device("heatpump"); d.Address != "heatpump" || d.Service != "garage-ctl" {
		t.Fatalf("device %+v; want address heatpump (its ID) on garage-ctl", d)
	}
	if d, _ := c.Device("garage"); d.Address != "doors/1" {
		t.Fatalf("device %+v", d)
	}
}

// Plain http:// is for loopback, or says allow_insecure.
func TestHTTPServiceInsecureAllowed(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:8090/api", "http://localhost/x", "http://[::1]:80"} {
		if _, err := Parse("hearth.yaml", []byte("services:\n  h:\n    protocol: http\n    url: "+u+"\n")); err != nil {
			t.Errorf("url %s: %v", u, err)
		}
	}
	if _, err := Parse("hearth.yaml", []byte("services:\n  h:\n    protocol: http\n    url: http://192.168.1.20/api\n    allow_insecure: true\n")); err != nil {
		t.Error(err)
	}
}

// Every mistake in an http service or its devices' addresses names the
// file, the line and the key.
func TestHTTPErrors(t *testing.T) {
	svc := "services:\n  h:\n    protocol: http\n"
	dev := svc + "    url: https://h/api\ndevices:\n  d:\n    class: switch\n    address: "
	tests := []struct{ name, yaml, want string }{
		{"no url", svc, `hearth.yaml:2: services.h.url: missing; an http service needs the base URL its devices' addresses are paths under, such as https://garage.local/api`},
		{"plain http beyond loopback", svc + "    url: http://192.168.1.20/api\n", `hearth.yaml:4: services.h.url: plain http:// to 192.168.1.20, which is not loopback: use https://, or set allow_insecure: true to send commands and headers in clear on this network`},
		{"query in the url", svc + "    url: https://h/api?token=x\n", `hearth.yaml:4: services.h.url: an http service's url takes no query or fragment: each device's address is a path under it`},
		{"bad method", svc + "    url: https://h/\n    method: DELETE\n", `hearth.yaml:5: services.h.method: "DELETE": want PUT, POST or PATCH`},
		{"base_topic", svc + "    url: https://h/\n    base_topic: x\n", `hearth.yaml:5: services.h.base_topic: an http service takes no base_topic: Hearth reaches it over HTTP, at its url`},
		{"mqtt account", svc + "    url: https://h/\n    mqtt_username: x\n", `hearth.yaml:5: services.h.mqtt_username: only for services that use MQTT (esphome, homie, shelly, status_topic, tasmota, zigbee2mqtt, zwavejs), not http: Hearth reaches it over HTTP`},
		{"method on zigbee2mqtt", "services:\n  z:\n    protocol: zigbee2mqtt\n    method: PUT\n", `hearth.yaml:4: services.z.method: only for protocol http, not zigbee2mqtt`},
		{"dot-dot address", dev + "a/../b\n", `hearth.yaml:8: devices.d.address: "a/../b": no '.' or '..' segments: the address stays under the service's url`},
		{"query in an address", dev + "a?b\n", `hearth.yaml:8: devices.d.address: "a?b": '?' is not allowed in an http address (no '?', '#', '%', '\', spaces or control characters)`},
		{"leading slash", dev + "/doors\n", `hearth.yaml:8: devices.d.address: "/doors" has an empty topic level; separate levels with one '/' and put none at either end`},
		{"two devices on one resource", dev + "doors/1\n  e:\n    class: switch\n    address: doors/1\n", `hearth.yaml:11: devices.e.address: "doors/1" is already the address of devices.d (line 6) on service h`},
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

// FuzzHTTPService parses any http service and device: a config or a
// clear error, never a panic.
func FuzzHTTPService(f *testing.F) {
	f.Add("https://garage.local/api", "PUT", "doors/1", false)
	f.Add("http://10.0.0.2", "post", "a/../b", true)
	f.Add("http://h/?x#y", "GET", "%2e", false)
	f.Fuzz(func(t *testing.T, url, method, addr string, insecure bool) {
		in := "true"
		if !insecure {
			in = "false"
		}
		doc := "services:\n  h:\n    protocol: http\n    url: " + quote(url) + "\n    method: " + quote(method) + "\n    allow_insecure: " + in +
			"\ndevices:\n  d:\n    class: cover\n    address: " + quote(addr) + "\n"
		c, err := Parse("f.yaml", []byte(doc))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if s, _ := c.Service("h"); s.URL != url || s.Method == "" {
			t.Fatalf("service %+v from url %q", s, url)
		}
	})
}

// quote writes s as a YAML double-quoted scalar.
func quote(s string) string {
	b := []byte{'"'}
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r < 0x20 || r == 0x7f:
			b = append(b, []byte("\\x")...)
			b = append(b, "0123456789abcdef"[r>>4], "0123456789abcdef"[r&15])
		default:
			b = append(b, string(r)...)
		}
	}
	return string(append(b, '"'))
}
