package simulator

import (
	"encoding/json"
	"testing"
)

// The sim publishes bridge/devices, retained, as Zigbee2MQTT does at start:
// each device with its class's exposes (a light's brightness 0–254 and
// color_temp 150–500, a lock's lock_state published only).
func TestBridgeDevicesDescribesEveryDevice(t *testing.T) {
	_, broker := startBroker(t)
	startSim(t, Options{Broker: broker, Devices: []Device{
		{Name: "hall/lamp", Class: ClassLight},
		{Name: "door", Class: ClassLock},
	}})
	m := retained(t, broker, "zigbee2mqtt/bridge/devices")
	var list []struct {
		FriendlyName string `json:"friendly_name"`
		Type         string `json:"type"`
		Definition   *struct {
			Model   string `json:"model"`
			Exposes []struct {
				Type     string `json:"type"`
				Features []struct {
					Property string   `json:"property"`
					Access   int      `json:"access"`
					ValueMin *float64 `json:"value_min"`
					ValueMax *float64 `json:"value_max"`
				} `json:"features"`
			} `json:"exposes"`
		} `json:"definition"`
	}
	if err := json.Unmarshal(m.payload, &list); err != nil {
		t.Fatalf("bridge/devices %s: %v", m.payload, err)
	}
	if len(list) != 3 || list[0].Type != "Coordinator" || list[0].Definition != nil {
		t.Fatalf("bridge/devices has %d entries (%s); want the coordinator without a definition and 2 devices", len(list), m.payload)
	}
	got := map[string]string{}
	for _, d := range list[1:] {
		for _, e := range d.Definition.Exposes {
			for _, f := range e.Features {
				r := ""
				if f.ValueMin != nil && f.ValueMax != nil {
					r = " " + jsonNum(*f.ValueMin) + "–" + jsonNum(*f.ValueMax)
				}
				got[d.FriendlyName+" "+e.Type+" "+f.Property] = jsonNum(float64(f.Access)) + r
			}
		}
	}
	want := map[string]string{
		"hall/lamp light state":      "7",
		"hall/lamp light brightness": "7 0–254",
		"hall/lamp light color_temp": "7 150–500",
		"door lock state":            "7",
		"door lock lock_state":       "1",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
}

func jsonNum(f float64) string { b, _ := json.Marshal(f); return string(b) }

// A light with MinLevel reports a lower brightness as its lowest level,
// as a real bulb's dimmer does; above it the level is kept.
func TestMinLevelRoundsALowBrightnessUp(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zigbee2mqtt/#")
	startSim(t, Options{Broker: broker, Devices: []Device{{Name: "lamp", Class: ClassLight, MinLevel: 2}}})
	w.next(t, "zigbee2mqtt/lamp") // initial state
	w.publish(t, "zigbee2mqtt/lamp/set", `{"brightness":1}`)
	wantState(t, w.next(t, "zigbee2mqtt/lamp").json(t), map[string]any{"state": "ON", "brightness": 2})
	w.publish(t, "zigbee2mqtt/lamp/set", `{"brightness":3}`)
	wantState(t, w.next(t, "zigbee2mqtt/lamp").json(t), map[string]any{"state": "ON", "brightness": 3})
}

func TestMinLevelIsForALight(t *testing.T) {
	for _, d := range []Device{{Name: "plug", Class: ClassSwitch, MinLevel: 2}, {Name: "lamp", Class: ClassLight, MinLevel: 255}, {Name: "lamp", Class: ClassLight, MinLevel: -1}} {
		if _, err := New(Options{Broker: "tcp://127.0.0.1:1", Devices: []Device{d}}); err == nil {
			t.Errorf("New(%+v) = nil error; want MinLevel refused", d)
		}
	}
}
