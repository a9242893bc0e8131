package config

import (
	"strings"
	"testing"
)

// A bridge's base topic (or a tasmota service's full_topic) may not
// overlap Home Assistant's discovery prefix: the bridge's account may
// publish under its base topic, and whoever writes a discovery config can
// make Home Assistant's own principal command a device (a switch whose
// command_topic is hearth/front_door/set with payload_on UNLOCK). Each is
// an error naming the file, line and key.
func TestBaseTopicMayNotOverlapDiscoveryPrefix(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"esphome on the discovery prefix", "services:\n  e:\n    protocol: esphome\n    base_topic: homeassistant\n",
			`hearth.yaml:4: services.e.base_topic: base topic "homeassistant" overlaps homeassistant.discovery_prefix "homeassistant"`},
		{"shelly under it", "services:\n  s:\n    protocol: shelly\n    base_topic: homeassistant/shelly\n",
			`hearth.yaml:4: services.s.base_topic: base topic "homeassistant/shelly" overlaps homeassistant.discovery_prefix "homeassistant"`},
		{"tasmota under it", tasmotaService + "    full_topic: 'homeassistant/%prefix%/%topic%/'\n",
			`hearth.yaml:4: services.wifi.full_topic: full topic "homeassistant/%prefix%/%topic%/" overlaps homeassistant.discovery_prefix "homeassistant"`},
	} {
		_, err := Parse("hearth.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant it to contain: %s", tc.name, err, tc.want)
		}
	}
	if _, err := Parse("hearth.yaml", []byte("services:\n  e:\n    protocol: esphome\n    base_topic: esphome\n")); err != nil {
		t.Errorf("esphome on its default base topic: %v", err)
	}
}
