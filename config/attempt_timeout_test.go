package config

import (
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// TestDeviceAttemptTimeoutPrecedence checks which attempt timeout each
// device gets: its own attempt_timeout, else its service's written
// retry.attempt_timeout, else the longer of its class's default and the
// protocol's default.
func TestDeviceAttemptTimeoutPrecedence(t *testing.T) {
	tests := []struct {
		name    string
		service string // the service's retry section, "" for none
		device  string // the device's keys
		want    time.Duration
	}{
		{"a light takes the service's default", "", "class: light", 5 * time.Second},
		{"a switch takes the service's own", "retry: {attempt_timeout: 7s}", "class: switch", 7 * time.Second},
		{"a cover takes its class's default", "", "class: cover", 30 * time.Second},
		{"a lock takes its class's default", "", "class: lock", 15 * time.Second},
		{"a valve takes its class's default", "", "class: valve", 20 * time.Second},
		{"the service's own wins over a longer class default", "retry: {attempt_timeout: 8s}", "class: cover", 8 * time.Second},
		{"the service's own wins over a shorter class default", "retry: {attempt_timeout: 40s}", "class: lock", 40 * time.Second},
		{"a class default when the service gives only other retry keys", "retry: {max_attempts: 3}", "class: cover", 30 * time.Second},
		{"the device's own wins over its class", "", "class: cover\n    attempt_timeout: 45s", 45 * time.Second},
		{"the device's own wins over the service's, shorter too", "retry: {attempt_timeout: 8s}", "class: light\n    attempt_timeout: 2s", 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			yaml := "services:\n  zigbee:\n    protocol: zigbee2mqtt\n"
			if tt.service != "" {
				yaml += "    " + tt.service + "\n"
			}
			yaml += "devices:\n  d:\n    " + tt.device + "\n"
			c, err := Parse("hearth.yaml", []byte(yaml))
			if err != nil {
				t.Fatalf("Parse() error: %v", err)
			}
			d, _ := c.Device("d")
			if d.AttemptTimeout != tt.want {
				t.Errorf("attempt timeout = %s, want %s", d.AttemptTimeout, tt.want)
			}
			s, _ := c.Service("zigbee")
			if s.Breaker.ProbeTimeout < d.AttemptTimeout {
				t.Errorf("probe_timeout %s < the device's attempt timeout %s: a probe could not be confirmed", s.Breaker.ProbeTimeout, d.AttemptTimeout)
			}
		})
	}
}

// TestProbeTimeoutGrowsToTheLongestDeviceAttemptTimeout checks that a
// service whose file gives no probe_timeout gets the longest attempt
// timeout of its devices when that exceeds the 10 s default, and that
// another service keeps its own.
func TestProbeTimeoutGrowsToTheLongestDeviceAttemptTimeout(t *testing.T) {
	yaml := "services:\n  zigbee:\n    protocol: zigbee2mqtt\n  zwave:\n    protocol: zwavejs\n" +
		"devices:\n  blind:\n    service: zigbee\n    class: cover\n  awning:\n    service: zigbee\n    class: cover\n    attempt_timeout: 50s\n" +
		"  lamp:\n    service: zwave\n    class: light\n"
	c, err := Parse("hearth.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("Parse() error: %v", err)
	}
	zb, _ := c.Service("zigbee")
	if got, want := zb.Breaker.ProbeTimeout, 50*time.Second; got != want {
		t.Errorf("zigbee probe_timeout = %s, want %s (awning's attempt_timeout)", got, want)
	}
	zw, _ := c.Service("zwave")
	if got, want := zw.Breaker.ProbeTimeout, 10*time.Second; got != want {
		t.Errorf("zwave probe_timeout = %s, want the default %s", got, want)
	}
	if d, _ := c.Device("awning"); d.Class != devices.Cover || d.AttemptTimeout != 50*time.Second {
		t.Errorf("awning = %+v, want a cover with attempt timeout 50s", d)
	}
}

// TestDeviceAttemptTimeoutErrors checks the exact problem reported, with
// file, line and key, for each mistake about a device's attempt timeout.
func TestDeviceAttemptTimeoutErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"not a duration", z2m + "devices:\n  d:\n    class: cover\n    attempt_timeout: soon\n",
			`hearth.yaml:7: devices.d.attempt_timeout: want a duration, got "soon"; use a Go duration such as 10s`},
		{"zero", z2m + "devices:\n  d:\n    class: cover\n    attempt_timeout: 0s\n",
			`hearth.yaml:7: devices.d.attempt_timeout: must be positive, got 0s`},
		{"longer than the device's ttl", z2m + "devices:\n  d:\n    class: cover\n    ttl: 20s\n    attempt_timeout: 25s\n",
			`hearth.yaml:8: devices.d.attempt_timeout: 25s is longer than the device's ttl 20s: the TTL would end every attempt before its timeout`},
		{"longer than the default ttl", z2m + "devices:\n  d:\n    class: cover\n    attempt_timeout: 2m\n",
			`hearth.yaml:7: devices.d.attempt_timeout: 2m is longer than the device's ttl 1m: the TTL would end every attempt before its timeout`},
		{"a probe_timeout shorter than a device's own", "services:\n  zigbee:\n    protocol: zigbee2mqtt\n    breaker:\n      probe_timeout: 20s\ndevices:\n  d:\n    class: light\n    attempt_timeout: 25s\n",
			`hearth.yaml:5: services.zigbee.breaker.probe_timeout: probe_timeout 20s is less than the attempt timeout 25s of device d (devices.d.attempt_timeout, line 9): a probe to it would count as failed before the device had the time to answer`},
		{"a probe_timeout shorter than a class default", "services:\n  zigbee:\n    protocol: zigbee2mqtt\n    breaker:\n      probe_timeout: 10s\ndevices:\n  garage:\n    class: cover\n",
			`hearth.yaml:5: services.zigbee.breaker.probe_timeout: probe_timeout 10s is less than the attempt timeout 30s of device garage (the default of class cover): a probe to it would count as failed before the device had the time to answer`},
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

// TestReadBackPrecedence checks each device's read_back: its own, else
// its service's retry.read_back, else off.
func TestReadBackPrecedence(t *testing.T) {
	yaml := "services:\n  zigbee:\n    protocol: zigbee2mqtt\n    retry: {read_back: true}\n  zwave:\n    protocol: zwavejs\n" +
		"devices:\n  a:\n    service: zigbee\n    class: light\n  b:\n    service: zigbee\n    class: light\n    read_back: false\n" +
		"  c:\n    service: zwave\n    class: light\n  d:\n    service: zwave\n    class: light\n    read_back: true\n"
	c, err := Parse("hearth.yaml", []byte(yaml))
	if err != nil {
		t.Fatalf("Parse() error: %v", err)
	}
	for id, want := range map[string]bool{"a": true, "b": false, "c": false, "d": true} {
		if d, _ := c.Device(id); d.ReadBack != want {
			t.Errorf("device %s: read_back %v; want %v", id, d.ReadBack, want)
		}
	}
	if _, err := Parse("hearth.yaml", []byte(z2m+"devices:\n  d:\n    class: light\n    read_back: sometimes\n")); err == nil || !strings.Contains(err.Error(), "hearth.yaml:7: devices.d.read_back: ") {
		t.Errorf("read_back: sometimes: error %v; want one naming hearth.yaml:7 and devices.d.read_back", err)
	}
}
