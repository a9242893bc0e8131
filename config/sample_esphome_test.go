package config

import (
	"os"
	"strings"
	"testing"
)

// TestSampleESPHome keeps configs/esphome.yaml parsing, with the service
// defaults and addresses it documents.
func TestSampleESPHome(t *testing.T) {
	b, err := os.ReadFile("../configs/esphome.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c, err := Parse("configs/esphome.yaml", b)
	if err != nil {
		t.Fatalf("Parse(configs/esphome.yaml) error:\n%v", err)
	}
	s, _ := c.Service("esphome")
	if s.Protocol != ProtocolESPHome || s.BaseTopic != "esphome" || s.Retry.MaxAttempts != 3 || !s.Retry.ReadBack || len(c.Devices) != 4 {
		t.Errorf("service %+v with %d devices; want esphome under base topic esphome, 3 attempts, read_back, 4 devices", s, len(c.Devices))
	}
	if d, _ := c.Device("front_door"); d.Address != "frontdoor/lock/front_door" || !d.ReadBack {
		t.Errorf("front_door: address %q, read_back %v", d.Address, d.ReadBack)
	}
}

// An address that cannot be ESPHome's is an error naming the file, line
// and key.
func TestESPHomeImpossibleAddressesNameFileLineAndKey(t *testing.T) {
	for _, tc := range []struct{ class, addr, want string }{
		{"lock", "frontdoor/front_door", "x.yaml:7: devices.d.address: \"frontdoor/front_door\" is not an ESPHome address"},
		{"lock", "frontdoor/switch/front_door", "a lock is ESPHome component lock, not \"switch\""},
		{"switch", "kitchen/switch/Relay", "object_id \"Relay\" is not ESPHome's"},
		{"switch", "+/switch/relay", "an MQTT wildcard"},
		{"valve", "a/valve/b", "a valve is not an ESPHome switch, light, cover or lock"},
	} {
		yaml := "services:\n  s:\n    protocol: esphome\ndevices:\n  d:\n    class: " + tc.class + "\n    address: \"" + tc.addr + "\"\n"
		_, err := Parse("x.yaml", []byte(yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "x.yaml:7: devices.d.address") {
			t.Errorf("%s %q: error %v; want one at x.yaml:7: devices.d.address saying %q", tc.class, tc.addr, err, tc.want)
		}
	}
}
