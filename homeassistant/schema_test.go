package homeassistant

import (
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/hearthd/hearth/devices"
)

// haSchema is testdata/ha_mqtt_schema.json: the keys Home Assistant core's
// MQTT platform schemas accept (its "source" says which files). Home
// Assistant drops a key it does not know without a word, so a misspelt
// key would fail quietly there; here it fails the test.
type haSchema struct {
	Common       []string            `json:"common"`
	Availability []string            `json:"availability_item"`
	Device       []string            `json:"device"`
	Origin       []string            `json:"origin"`
	Platforms    map[string][]string `json:"platforms"`
}

func loadSchema(t *testing.T) haSchema {
	t.Helper()
	b, err := os.ReadFile("testdata/ha_mqtt_schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var s haSchema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// Every key of every config Hearth publishes is one Home Assistant accepts
// for that platform, in full (no abbreviations), and unique_id is stable
// across builds.
func TestEveryDiscoveryKeyIsOneHomeAssistantAccepts(t *testing.T) {
	s := loadSchema(t)
	d := Discovery{Version: "1.0.0"}
	full := Bridge{ColorModes: []string{"color_temp", "xy"}, MinMireds: 153, MaxMireds: 500, Effects: []string{"blink"},
		Presets: []string{"eco"}, Tilt: true, Identifiers: []string{"zigbee2mqtt_0x1"}, Manufacturer: "m", Model: "x"}
	var devs []Device
	for _, c := range devices.Classes {
		devs = append(devs,
			Device{Device: devices.Device{ID: "plain_" + string(c), Class: c, Service: "z2m"}},
			Device{Device: devices.Device{ID: "full_" + string(c), Class: c, Service: "z2m", Safety: devices.SafetyCritical}, Breaker: true, Availability: true, Bridge: full})
	}
	configs := d.Configs([]string{"z2m"}, devs)
	if len(configs) == 0 {
		t.Fatal("no configs")
	}
	for _, c := range configs {
		var cfg map[string]any
		if err := json.Unmarshal(c.Payload, &cfg); err != nil {
			t.Fatal(err)
		}
		component := topicComponent(c.Topic)
		platform := component
		if component == "light" {
			platform = "light_" + cfg["schema"].(string)
		}
		keys, ok := s.Platforms[platform]
		if !ok {
			t.Fatalf("%s: platform %s not in the schema list", c.Topic, platform)
		}
		for k, v := range cfg {
			if !slices.Contains(keys, k) && !slices.Contains(s.Common, k) {
				t.Errorf("%s: key %q is not one Home Assistant's %s accepts", c.Topic, k, platform)
			}
			switch k {
			case "availability":
				for _, a := range v.([]any) {
					for ak := range a.(map[string]any) {
						if !slices.Contains(s.Availability, ak) {
							t.Errorf("%s: availability key %q unknown to Home Assistant", c.Topic, ak)
						}
					}
				}
			case "device", "origin":
				allowed := s.Device
				if k == "origin" {
					allowed = s.Origin
				}
				for bk := range v.(map[string]any) {
					if !slices.Contains(allowed, bk) {
						t.Errorf("%s: %s key %q unknown to Home Assistant", c.Topic, k, bk)
					}
				}
			}
		}
	}
	again := d.Configs([]string{"z2m"}, devs)
	for i := range configs {
		var a, b map[string]any
		json.Unmarshal(configs[i].Payload, &a)
		json.Unmarshal(again[i].Payload, &b)
		if a["unique_id"] != b["unique_id"] || configs[i].Topic != again[i].Topic {
			t.Errorf("unique_id or topic not stable: %v %s, then %v %s", a["unique_id"], configs[i].Topic, b["unique_id"], again[i].Topic)
		}
	}
}

// topicComponent is the <component> level of a config topic.
func topicComponent(topic string) string {
	var parts []string
	start := 0
	for i := range len(topic) {
		if topic[i] == '/' {
			parts = append(parts, topic[start:i])
			start = i + 1
		}
	}
	return parts[1]
}
