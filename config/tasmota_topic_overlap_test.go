package config

import (
	"strings"
	"testing"
)

// A tasmota service's topics (its full_topic under cmnd, stat and tele)
// may not overlap Hearth's prefix or another bridge's base topic: the
// service's account may publish on its stat and tele topics, so an
// overlap would let every Tasmota on the LAN publish Hearth's or another
// bridge's commands (stat/front_door/set to a Zigbee2MQTT on base topic
// stat). Each is an error naming the file, line and key.
func TestTasmotaTopicsMayNotOverlapOtherTopics(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"under the prefix", tasmotaService + "    full_topic: 'hearth/%prefix%/%topic%/'\n",
			`hearth.yaml:4: services.wifi.full_topic: full topic "hearth/%prefix%/%topic%/" overlaps prefix "hearth"`},
		{"a bridge on stat", tasmotaService + "  z:\n    protocol: zigbee2mqtt\n    base_topic: stat\n",
			`hearth.yaml:6: services.z.base_topic: base topic "stat" overlaps services.wifi.full_topic`},
		{"a bridge before it", "services:\n  z:\n    protocol: zigbee2mqtt\n    base_topic: tele\n  wifi:\n    protocol: tasmota\n",
			`hearth.yaml:5: services.wifi.full_topic: default full topic "%prefix%/%topic%/" overlaps services.z.base_topic "tele"`},
	} {
		_, err := Parse("hearth.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant it to contain: %s", tc.name, err, tc.want)
		}
	}
	for _, ok := range []string{
		tasmotaService,
		tasmotaService + "    full_topic: 'tasmota/%prefix%/%topic%/'\n  z:\n    protocol: zigbee2mqtt\n",
		tasmotaService + "  sh:\n    protocol: shelly\n  e:\n    protocol: esphome\n  h:\n    protocol: homie\n",
	} {
		if _, err := Parse("hearth.yaml", []byte(ok)); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
}
