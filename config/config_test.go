package config

import (
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestSampleLoads(t *testing.T) {
	got, err := Load("../configs/hearth.yaml")
	if err != nil {
		t.Fatalf("Load() error: %v", err)
	}
	z2mRetry := Retry{
		Policy: retry.Policy{
			MaxAttempts:    2,
			AttemptTimeout: 5 * time.Second,
			Backoff:        retry.Backoff{Strategy: retry.Exponential, Base: time.Second, Multiplier: 2, Cap: 10 * time.Second, Jitter: retry.Full},
			RetryOn:        []retry.Class{retry.GroupTransient},
			MaxRetryAfter:  time.Hour,
		},
		Budget: Budget{Ratio: 0.2, MinRetries: 3, Window: 10 * time.Second},
	}
	// The tasmota service's: zigbee's but for 3 attempts (Wi-Fi has no
	// radio layer that retries).
	tasmotaRetry := z2mRetry
	tasmotaRetry.MaxAttempts = 3
	// Each device's attempt timeout: its class's default, or the
	// service's 5s (ClassAttemptTimeouts).
	dev := func(id string, class devices.Class, address string, ttl time.Duration) Device {
		return Device{Device: devices.Device{ID: id, Service: "zigbee", Class: class, Address: address}, TTL: ttl,
			AttemptTimeout: max(ClassAttemptTimeouts[class], 5*time.Second)}
	}
	want := &Config{
		Prefix:   "hearth",
		DataDir:  "data",
		Defaults: Defaults{TTL: time.Minute},
		MQTT: MQTT{
			Listen:         "127.0.0.1:1883",
			KeepAlive:      30 * time.Second,
			SessionExpiry:  5 * time.Minute,
			Reconnect:      retry.Backoff{Base: time.Second, Multiplier: 2, Cap: time.Minute},
			RepublishRate:  100,
			MaxConnectRate: 100,
			ConnectBurst:   10,
			MaxInflight:    1024,

			ConnectTimeout:         5 * time.Second,
			MaxUnauthenticated:     64,
			MaxClientKeepAlive:     5 * time.Minute,
			LoginFailuresPerMinute: 10,
		},
		HTTP:          HTTP{Listen: "127.0.0.1:8080"},
		HomeAssistant: HomeAssistant{Discovery: true, DiscoveryPrefix: "homeassistant"},
		Services: []Service{
			{Name: "zigbee", Protocol: ProtocolZigbee2MQTT, BaseTopic: "zigbee2mqtt", MQTTUsername: "zigbee", ReadTimeout: 5 * time.Second, Retry: z2mRetry, Breaker: Breaker{
				Enabled: true, FailureThreshold: 5, FailureRatio: 0.5, Window: 30 * time.Second, MinCalls: 10,
				OpenFor: 30 * time.Second, MaxOpenFor: 5 * time.Minute, MaxProbes: 1, ProbeTimeout: 30 * time.Second, SuccessesToClose: 1,
			}},
			{Name: "tasmota", Protocol: ProtocolTasmota, FullTopic: "%prefix%/%topic%/", MQTTUsername: "tasmota", ReadTimeout: 5 * time.Second, Retry: tasmotaRetry, Breaker: Breaker{
				Enabled: true, FailureThreshold: 5, FailureRatio: 0.5, Window: 30 * time.Second, MinCalls: 10,
				OpenFor: 30 * time.Second, MaxOpenFor: 5 * time.Minute, MaxProbes: 1, ProbeTimeout: 10 * time.Second, SuccessesToClose: 1,
			}},
		},
		Devices: []Device{
			dev("hall_light", devices.Light, "hall_light", time.Minute),
			dev("kitchen_light", devices.Light, "kitchen_light", time.Minute),
			dev("coffee_maker", devices.Switch, "coffee_maker", time.Minute),
			func() Device {
				d := dev("front_door", devices.Lock, "Front Door", 30*time.Second)
				d.Offline = devices.OfflineFail
				return d
			}(),
			dev("living_blinds", devices.Cover, "living_blinds", time.Minute),
			dev("bedroom_trv", devices.Climate, "bedroom_trv", time.Minute),
			func() Device {
				d := dev("porch_plug", devices.Switch, "porch_plug", time.Minute)
				d.Service = "tasmota"
				return d
			}(),
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Load(sample):\ngot  %+v\nwant %+v", got, want)
	}
}

// TestSampleShowsDefaults keeps the sample honest: the values it writes
// out are the defaults its comments name.
func TestSampleShowsDefaults(t *testing.T) {
	c, err := Load("../configs/hearth.yaml")
	if err != nil {
		t.Fatalf("Load() error: %v", err)
	}
	got := *c
	got.Services, got.Devices = nil, nil
	if want := Default(); !reflect.DeepEqual(&got, want) {
		t.Errorf("sample settings:\ngot  %+v\nwant %+v (Default())", &got, want)
	}
	s, _ := c.Service("zigbee")
	want := (Service{Name: "zigbee", Protocol: ProtocolZigbee2MQTT, Breaker: Breaker{Enabled: true}}).withDefaults()
	// probe_timeout's default grows to the longest attempt timeout of the
	// service's devices: living_blinds, a cover.
	want.Breaker.ProbeTimeout = ClassAttemptTimeouts[devices.Cover]
	if got := s; !reflect.DeepEqual(got, want) {
		t.Errorf("sample service:\ngot  %+v\nwant %+v (protocol defaults)", got, want)
	}
	s, _ = c.Service("tasmota")
	want = (Service{Name: "tasmota", Protocol: ProtocolTasmota, Breaker: Breaker{Enabled: true}}).withDefaults()
	if got := s; !reflect.DeepEqual(got, want) {
		t.Errorf("sample service tasmota:\ngot  %+v\nwant %+v (protocol defaults)", got, want)
	}
}

func TestDefault(t *testing.T) {
	c := Default()
	tests := []struct {
		key       string
		got, want any
	}{
		{"prefix", c.Prefix, "hearth"},
		{"data_dir", c.DataDir, "data"},
		{"defaults.ttl", c.Defaults.TTL, 60 * time.Second},
		{"mqtt.listen", c.MQTT.Listen, "127.0.0.1:1883"},
		{"mqtt.url", c.MQTT.URL, ""},
		{"mqtt.username", c.MQTT.Username, ""},
		{"mqtt.password", c.MQTT.Password, ""},
		{"mqtt.client_id", c.MQTT.ClientID, ""},
		{"mqtt.keepalive", c.MQTT.KeepAlive, 30 * time.Second},
		{"mqtt.session_expiry", c.MQTT.SessionExpiry, 5 * time.Minute},
		{"mqtt.tls", c.MQTT.TLS, TLS{}},
		{"mqtt.reconnect", c.MQTT.Reconnect, retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 60 * time.Second}},
		{"mqtt.max_connect_rate", c.MQTT.MaxConnectRate, 100.0},
		{"mqtt.connect_burst", c.MQTT.ConnectBurst, 10},
		{"mqtt.max_connections (none)", c.MQTT.MaxConnections, 0},
		{"mqtt.max_inflight", c.MQTT.MaxInflight, 1024},
		{"mqtt.connect_timeout", c.MQTT.ConnectTimeout, 5 * time.Second},
		{"mqtt.max_unauthenticated", c.MQTT.MaxUnauthenticated, 64},
		{"mqtt.max_keepalive", c.MQTT.MaxClientKeepAlive, 5 * time.Minute},
		{"mqtt.login_failures_per_minute", c.MQTT.LoginFailuresPerMinute, 10.0},
		{"http.listen", c.HTTP.Listen, "127.0.0.1:8080"},
		{"services", len(c.Services), 0},
		{"devices", len(c.Devices), 0},
		{"automations", len(c.Automations), 0},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("Default() %s = %v, want %v", tt.key, tt.got, tt.want)
		}
	}
}

// TestEmptyFileIsDefault: a file that sets nothing, however it says so,
// gives Default().
func TestEmptyFileIsDefault(t *testing.T) {
	tests := []struct{ name, yaml string }{
		{"empty", ""},
		{"comments only", "# nothing here\n\n# yet\n"},
		{"null document", "~\n"},
		{"bare document marker", "---\n"},
		{"trailing empty document", "prefix: hearth\n---\n"},
		{"every section null", "prefix:\ndata_dir: ~\ndefaults:\nmqtt:\n  tls:\n  reconnect:\nhttp:\nservices:\ndevices:\nautomations:\n"},
		{"every section empty", "defaults: {}\nmqtt: {tls: {}, reconnect: {}}\nhttp: {}\nservices: {}\ndevices: {}\nautomations: {}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("hearth.yaml", []byte(tt.yaml))
			if err != nil {
				t.Fatalf("Parse() error: %v", err)
			}
			if want := Default(); !reflect.DeepEqual(got, want) {
				t.Errorf("Parse():\ngot  %+v\nwant %+v", got, want)
			}
		})
	}
}

// TestZeroValuesTakeDefaults: a service and a device that say only what is
// required get every other value from the documented defaults.
func TestZeroValuesTakeDefaults(t *testing.T) {
	c, err := Parse("hearth.yaml", []byte(`
defaults:
  ttl: 2m
services:
  zigbee:
    protocol: zigbee2mqtt
    retry:
      base: 500ms
devices:
  lamp:
    class: light
`))
	if err != nil {
		t.Fatalf("Parse() error: %v", err)
	}
	s, d := c.Services[0], c.Devices[0]
	tests := []struct {
		key       string
		got, want any
	}{
		{"services.zigbee.base_topic", s.BaseTopic, "zigbee2mqtt"},
		{"services.zigbee.retry.max_attempts", s.Retry.MaxAttempts, 2},
		{"services.zigbee.retry.attempt_timeout", s.Retry.AttemptTimeout, 5 * time.Second},
		{"services.zigbee.retry.base", s.Retry.Backoff.Base, 500 * time.Millisecond},
		{"services.zigbee.retry.multiplier", s.Retry.Backoff.Multiplier, 2.0},
		{"services.zigbee.retry.cap", s.Retry.Backoff.Cap, 10 * time.Second},
		{"devices.lamp.service (the only one)", d.Service, "zigbee"},
		{"devices.lamp.address (the ID)", d.Address, "lamp"},
		{"devices.lamp.ttl (defaults.ttl)", d.TTL, 2 * time.Minute},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.key, tt.got, tt.want)
		}
	}
}

// TestParseAccepts covers values near the edges of what is valid.
func TestParseAccepts(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		get  func(*Config) any
		want any
	}{
		{"prefix of several levels", "prefix: home/hearth\n", func(c *Config) any { return c.Prefix }, "home/hearth"},
		{"number taken as text", "prefix: 2024\n", func(c *Config) any { return c.Prefix }, "2024"},
		{"password of digits, as written", "mqtt:\n  password: 0123\n", func(c *Config) any { return c.MQTT.Password }, "0123"},
		{"listen on every interface", "http:\n  listen: :8080\n", func(c *Config) any { return c.HTTP.Listen }, ":8080"},
		{"listen on any port", "http:\n  listen: 127.0.0.1:0\n", func(c *Config) any { return c.HTTP.Listen }, "127.0.0.1:0"},
		{"listen on IPv6", "mqtt:\n  listen: '[::1]:1883'\n", func(c *Config) any { return c.MQTT.Listen }, "[::1]:1883"},
		{"listen on a host name", "mqtt:\n  listen: hub.local:1883\n", func(c *Config) any { return c.MQTT.Listen }, "hub.local:1883"},
		{"mqtts listener", "mqtt:\n  mqtts: {listen: ':8883', cert_file: /etc/hearth/cert.pem, key_file: /etc/hearth/key.pem}\n",
			func(c *Config) any { return c.MQTT.MQTTS }, MQTTS{Listen: ":8883", Cert: ServerCert{CertFile: "/etc/hearth/cert.pem", KeyFile: "/etc/hearth/key.pem"}}},
		{"https", "http:\n  tls: {cert_file: cert.pem, key_file: key.pem}\n",
			func(c *Config) any { return c.HTTP.TLS }, ServerCert{CertFile: "cert.pem", KeyFile: "key.pem"}},
		{"external broker with TLS", "mqtt:\n  url: mqtts://broker:8883\n  tls: {ca_file: ca.pem, cert_file: c.pem, key_file: k.pem}\n",
			func(c *Config) any { return c.MQTT.TLS }, TLS{CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem"}},
		{"upper-case scheme", "mqtt:\n  url: TCP://broker:1883\n", func(c *Config) any { return c.MQTT.URL }, "TCP://broker:1883"},
		{"empty tls with embedded broker", "mqtt:\n  tls:\n    ca_file: ''\n    insecure_skip_verify: false\n", func(c *Config) any { return c.MQTT.TLS }, TLS{}},
		{"ttl at the limit", "defaults:\n  ttl: 720h\n", func(c *Config) any { return c.Defaults.TTL }, devices.MaxTTL},
		{"keepalive at the limit", "mqtt:\n  keepalive: 65535s\n", func(c *Config) any { return c.MQTT.KeepAlive }, MaxKeepAlive},
		{"session expiry zero: a clean session", "mqtt:\n  url: tcp://broker:1883\n  session_expiry: 0s\n", func(c *Config) any { return c.MQTT.SessionExpiry }, time.Duration(0)},
		{"session expiry of a day", "mqtt:\n  url: tcp://broker:1883\n  session_expiry: 24h\n", func(c *Config) any { return c.MQTT.SessionExpiry }, 24 * time.Hour},
		{"session expiry at the limit", "mqtt:\n  session_expiry: 4294967294s\n", func(c *Config) any { return c.MQTT.SessionExpiry }, MaxSessionExpiry},
		{"session expiry with no value: the default", "mqtt:\n  session_expiry:\n", func(c *Config) any { return c.MQTT.SessionExpiry }, 5 * time.Minute},
		{"multiplier of one", z2m + "    retry: {multiplier: 1}\n", func(c *Config) any { return c.Services[0].Retry.Backoff.Multiplier }, 1.0},
		{"fractional multiplier", z2m + "    retry: {multiplier: 1.5}\n", func(c *Config) any { return c.Services[0].Retry.Backoff.Multiplier }, 1.5},
		{"cap equal to base", z2m + "    retry: {base: 2s, cap: 2s}\n", func(c *Config) any { return c.Services[0].Retry.Backoff.Cap }, 2 * time.Second},
		{"three attempts", z2m + "    retry: {max_attempts: 3}\n", func(c *Config) any { return c.Services[0].Retry.MaxAttempts }, 3},
		{"more attempts when allowed", z2m + "    retry: {max_attempts: 5, allow_more_attempts: true}\n", func(c *Config) any { return c.Services[0].Retry.MaxAttempts }, 5},
		{"allowed, before max_attempts", z2m + "    retry:\n      allow_more_attempts: true\n      max_attempts: 100\n", func(c *Config) any { return c.Services[0].Retry.MaxAttempts }, 100},
		{"every backoff and jitter named", z2m + "    retry: {backoff: fibonacci, jitter: decorrelated}\n", func(c *Config) any {
			b := c.Services[0].Retry.Backoff
			return b.Strategy.String() + "/" + b.Jitter.String()
		}, "fibonacci/decorrelated"},
		{"no jitter", z2m + "    retry: {backoff: linear, jitter: none}\n", func(c *Config) any { return c.Services[0].Retry.Backoff.Jitter }, retry.None},
		{"server-provided backoff", z2m + "    retry: {backoff: retry_after}\n", func(c *Config) any { return c.Services[0].Retry.Backoff.Strategy }, retry.ServerProvided},
		{"fractional connect rate", "mqtt:\n  max_connect_rate: 0.5\n", func(c *Config) any { return c.MQTT.MaxConnectRate }, 0.5},
		{"connect rate as a whole number", "mqtt:\n  max_connect_rate: 1000\n", func(c *Config) any { return c.MQTT.MaxConnectRate }, 1000.0},
		{"connect burst of one", "mqtt:\n  connect_burst: 1\n", func(c *Config) any { return c.MQTT.ConnectBurst }, 1},
		{"one connection", "mqtt:\n  max_connections: 1\n", func(c *Config) any { return c.MQTT.MaxConnections }, 1},
		{"max_connections with no value: none", "mqtt:\n  max_connections:\n", func(c *Config) any { return c.MQTT.MaxConnections }, 0},
		{"max inflight at the limits", "mqtt:\n  max_inflight: 65535\n", func(c *Config) any { return c.MQTT.MaxInflight }, MaxInflight},
		{"max inflight of one", "mqtt:\n  max_inflight: 1\n", func(c *Config) any { return c.MQTT.MaxInflight }, 1},
		{"connect timeout", "mqtt:\n  connect_timeout: 500ms\n", func(c *Config) any { return c.MQTT.ConnectTimeout }, 500 * time.Millisecond},
		{"one unauthenticated", "mqtt:\n  max_unauthenticated: 1\n", func(c *Config) any { return c.MQTT.MaxUnauthenticated }, 1},
		{"max keepalive at the limit", "mqtt:\n  max_keepalive: 65535s\n", func(c *Config) any { return c.MQTT.MaxClientKeepAlive }, MaxKeepAlive},
		{"fractional login failures", "mqtt:\n  login_failures_per_minute: 0.5\n", func(c *Config) any { return c.MQTT.LoginFailuresPerMinute }, 0.5},
		{"broker limits at their defaults with url", "mqtt:\n  url: tcp://broker:1883\n  max_connect_rate: 100\n  connect_burst: 10\n  max_connections:\n  max_inflight: 1024\n",
			func(c *Config) any { return c.MQTT.URL }, "tcp://broker:1883"},
		{"broker reconnect with equal jitter", "mqtt:\n  reconnect: {backoff: fixed, jitter: equal}\n", func(c *Config) any { return c.MQTT.Reconnect.Jitter }, retry.Equal},
		{"deadline", z2m + "    retry: {deadline: 20s}\n", func(c *Config) any { return c.Services[0].Retry.Deadline }, 20 * time.Second},
		{"retry_on classes and codes", z2m + "    retry: {retry_on: [transient, http_409]}\n", func(c *Config) any { return c.Services[0].Retry.RetryOn }, []retry.Class{retry.GroupTransient, "http_409"}},
		{"retry_on empty: retry nothing", z2m + "    retry: {retry_on: []}\n", func(c *Config) any { return c.Services[0].Retry.RetryOn }, []retry.Class{}},
		{"never_retry a class", z2m + "    retry: {never_retry: [rate_limited]}\n", func(c *Config) any { return c.Services[0].Retry.NeverRetry }, []retry.Class{retry.RateLimited}},
		{"max_retry_after", z2m + "    retry: {max_retry_after: 10m}\n", func(c *Config) any { return c.Services[0].Retry.MaxRetryAfter }, 10 * time.Minute},
		{"budget, partly given", z2m + "    retry: {budget: {ratio: 0.1}}\n", func(c *Config) any { return c.Services[0].Retry.Budget }, Budget{Ratio: 0.1, MinRetries: 3, Window: 10 * time.Second}},
		{"breaker, partly given", z2m + "    breaker: {failure_threshold: 3, hold: true, open_for: 10s}\n", func(c *Config) any { return c.Services[0].Breaker }, Breaker{
			Enabled: true, FailureThreshold: 3, FailureRatio: 0.5, Window: 30 * time.Second, MinCalls: 10,
			OpenFor: 10 * time.Second, MaxOpenFor: 5 * time.Minute, MaxProbes: 1, ProbeTimeout: 10 * time.Second, SuccessesToClose: 1, Hold: true,
		}},
		{"breaker off", z2m + "    breaker: {enabled: false}\n", func(c *Config) any { return c.Services[0].Breaker.Enabled }, false},
		{"breaker on when not said", z2m + "    breaker: {enabled: ~}\n", func(c *Config) any { return c.Services[0].Breaker.Enabled }, true},
		{"breaker open duration backoff", z2m + "    breaker: {open_for: 10s, max_open_for: 1m}\n", func(c *Config) any { return c.Services[0].Breaker.OpenBackoff() },
			retry.Backoff{Strategy: retry.Exponential, Base: 10 * time.Second, Multiplier: 2, Cap: time.Minute, Jitter: retry.Equal}},
		{"budget ratio one", z2m + "    retry: {budget: {ratio: 1, min_retries: 10, window: 1m}}\n", func(c *Config) any { return c.Services[0].Retry.Budget }, Budget{Ratio: 1, MinRetries: 10, Window: time.Minute}},
		{"address of several levels", z2m + "devices:\n  lamp: {class: light, address: kitchen/lamp}\n", func(c *Config) any { return c.Devices[0].Address }, "kitchen/lamp"},
		{"same address on two services", z2m + "    base_topic: z2m_a\n  b:\n    protocol: zigbee2mqtt\n    base_topic: z2m_b\ndevices:\n  x: {service: zigbee, class: light, address: lamp}\n  y: {service: b, class: light, address: lamp}\n",
			func(c *Config) any { return c.Devices[1].Address }, "lamp"},
		{"garage door safety critical", z2m + "devices:\n  garage: {class: cover, safety: critical}\n", func(c *Config) any { return c.Devices[0].Safety }, devices.SafetyCritical},
		{"safety normal", z2m + "devices:\n  blinds: {class: cover, safety: normal}\n", func(c *Config) any { return c.Devices[0].Safety }, devices.SafetyNormal},
		{"device ID with a space", z2m + "devices:\n  Hall Light: {class: light}\n", func(c *Config) any { return c.Devices[0].Address }, "Hall Light"},
		{"anchors and aliases", "services:\n  a: {protocol: zigbee2mqtt, base_topic: za, retry: &r {max_attempts: 3}}\n  b: {protocol: zigbee2mqtt, base_topic: zb, retry: *r}\n",
			func(c *Config) any { return c.Services[1].Retry.MaxAttempts }, 3},
		{"devices before services", "devices:\n  lamp: {class: light}\n" + z2m, func(c *Config) any { return c.Devices[0].Service }, "zigbee"},
		{"file order kept", "services:\n  b: {protocol: zigbee2mqtt, base_topic: zb}\n  a: {protocol: zigbee2mqtt, base_topic: za}\n",
			func(c *Config) any { return c.Services[0].Name + "," + c.Services[1].Name }, "b,a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("hearth.yaml", []byte(tt.yaml))
			if err != nil {
				t.Fatalf("Parse() error: %v", err)
			}
			if got := tt.get(c); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %#v, want %#v", got, tt.want)
			}
		})
	}
}

// TestEveryProblemReported: one file with many mistakes yields all of
// them, sorted by line.
func TestEveryProblemReported(t *testing.T) {
	_, err := Load("testdata/broken.yaml")
	if err == nil {
		t.Fatal("Load() succeeded, want problems")
	}
	golden := "testdata/broken.golden"
	got := err.Error() + "\n"
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("Load() error:\ngot\n%s\nwant\n%s", got, want)
	}
}

func TestProblemFields(t *testing.T) {
	_, err := Parse("configs/hearth.yaml", []byte(z2m+"devices:\n  hall_light:\n    class: lamp\n    colour: red\n"))
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("Parse() error is %T, want *Error", err)
	}
	want := []Problem{
		{File: "configs/hearth.yaml", Line: 6, Key: "devices.hall_light.class", Message: `unknown class "lamp" (known: light, switch, lock, cover, climate, valve, alarm, sensor)`},
		{File: "configs/hearth.yaml", Line: 7, Key: "devices.hall_light.colour", Message: "unknown key (known here: service, class, address, ttl, attempt_timeout, read_back, safety, sleepy, wake_interval, awake_window, offline)"},
	}
	if len(ce.Problems) != len(want) {
		t.Fatalf("got %d problems, want %d:\n%v", len(ce.Problems), len(want), err)
	}
	for i, p := range ce.Problems {
		if *p != want[i] {
			t.Errorf("problem %d:\ngot  %+v\nwant %+v", i, *p, want[i])
		}
	}
	var p *Problem
	if !errors.As(err, &p) || *p != want[0] {
		t.Errorf("errors.As(err, *Problem) = %+v, want %+v", p, want[0])
	}
}

func TestLoadMissingFile(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(t.TempDir(), "hearth.yaml")
	tests := []struct {
		path string
		want string
	}{
		{"testdata/missing.yaml", "testdata/missing.yaml: cannot read config file: no such file or directory (the working directory is " + wd + ")"},
		{abs, abs + ": cannot read config file: no such file or directory"},
		{"testdata", "testdata: cannot read config file: is a directory"},
	}
	for _, tt := range tests {
		c, err := Load(tt.path)
		if err == nil {
			t.Fatalf("Load(%q) = %+v, want error", tt.path, c)
		}
		if got := err.Error(); got != tt.want {
			t.Errorf("Load(%q) error:\ngot  %s\nwant %s", tt.path, got, tt.want)
		}
	}
	if _, err := Load("testdata/missing.yaml"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Load(missing) error %v is not fs.ErrNotExist", err)
	}
}

func TestLookups(t *testing.T) {
	c, err := Load("../configs/hearth.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if d, ok := c.Device("front_door"); !ok || d.Address != "Front Door" || d.Class != devices.Lock {
		t.Errorf("Device(front_door) = %+v, %v; want the lock addressed Front Door", d, ok)
	}
	if d, ok := c.Device("attic"); ok {
		t.Errorf("Device(attic) = %+v, true; want not found", d)
	}
	if s, ok := c.Service("zigbee"); !ok || s.BaseTopic != "zigbee2mqtt" {
		t.Errorf("Service(zigbee) = %+v, %v; want base topic zigbee2mqtt", s, ok)
	}
	if s, ok := c.Service("zwave"); ok {
		t.Errorf("Service(zwave) = %+v, true; want not found", s)
	}
}

// Left out, a breaker's probe_timeout grows to the service's attempt
// timeout, so that a probe outlasts its attempt; written, it is kept.
func TestProbeTimeoutCoversTheAttemptTimeout(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want time.Duration
	}{
		{"services:\n  zigbee:\n    protocol: zigbee2mqtt\n    retry: {attempt_timeout: 15s}\n", 15 * time.Second},
		{"services:\n  zigbee:\n    protocol: zigbee2mqtt\n    retry: {attempt_timeout: 2s}\n", 10 * time.Second},
		{"services:\n  zigbee:\n    protocol: zigbee2mqtt\n    retry: {attempt_timeout: 2s}\n    breaker: {probe_timeout: 3s}\n", 3 * time.Second},
	} {
		cfg, err := Parse("hearth.yaml", []byte(tc.yaml))
		if err != nil {
			t.Fatal(err)
		}
		if got := cfg.Services[0].Breaker.ProbeTimeout; got != tc.want {
			t.Errorf("%s: probe_timeout %v, want %v", tc.yaml, got, tc.want)
		}
	}
}
