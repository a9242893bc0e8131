package homeassistant

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"reflect"
	"regexp"
	"testing"

	"github.com/hearthd/hearth/devices"
)

// render renders a Home Assistant template with Jinja2 (testdata/render.py,
// Jinja2's sandbox as Home Assistant uses it): vars are the template's
// variables; payload, if not nil, is the message a value template reads
// (value and value_json).
func render(t *testing.T, template string, vars map[string]any, payload []byte) string {
	t.Helper()
	req := map[string]any{"template": template, "vars": vars}
	if payload != nil {
		req["payload"] = string(payload)
	}
	in, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("python3", "testdata/render.py")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rendering %q: %v\n%s", template, err, stderr.String())
	}
	return string(out)
}

func configOf(t *testing.T, configs []Config, topic string) map[string]any {
	t.Helper()
	for _, c := range configs {
		if c.Topic == topic {
			return decode(t, c.Payload)
		}
	}
	var topics []string
	for _, c := range configs {
		topics = append(topics, c.Topic)
	}
	t.Fatalf("no config on %s; have %v", topic, topics)
	return nil
}

var opIDPattern = regexp.MustCompile(`^ha-[0-9]+-[0-9]+$`)

// A command template publishes the absolute payload Hearth's intake takes,
// with an op_id that differs at every press.
func TestCommandTemplatesRenderAbsolutePayloadsWithFreshOpIDs(t *testing.T) {
	d := Discovery{}
	for _, tc := range []struct {
		class    devices.Class
		key      string
		vars     map[string]any
		want     map[string]any
		bridge   Bridge
		topicKey string
	}{
		{devices.Lock, "command_template", map[string]any{"value": "UNLOCK"}, map[string]any{"state": "UNLOCK"}, Bridge{}, "command_topic"},
		{devices.Switch, "command_template", map[string]any{"value": "ON"}, map[string]any{"state": "ON"}, Bridge{}, "command_topic"},
		{devices.Cover, "set_position_template", map[string]any{"position": 50}, map[string]any{"position": 50.0}, Bridge{}, "set_position_topic"},
		{devices.Cover, "tilt_command_template", map[string]any{"tilt_position": 30}, map[string]any{"tilt": 30.0}, Bridge{Tilt: true}, "tilt_command_topic"},
		{devices.Climate, "mode_command_template", map[string]any{"value": "heat"}, map[string]any{"system_mode": "heat"}, Bridge{}, "mode_command_topic"},
		{devices.Climate, "temperature_command_template", map[string]any{"value": 21.5}, map[string]any{"occupied_heating_setpoint": 21.5}, Bridge{Setpoint: "occupied_heating_setpoint"}, "temperature_command_topic"},
		{devices.Climate, "preset_mode_command_template", map[string]any{"value": "eco"}, map[string]any{"preset": "eco"}, Bridge{Presets: []string{"eco", "comfort"}}, "preset_mode_command_topic"},
	} {
		dev := Device{Device: devices.Device{ID: "front_door", Class: tc.class, Service: "z2m"}, Bridge: tc.bridge}
		cfg := decode(t, d.DeviceConfigs(dev)[0].Payload)
		if got := cfg[tc.topicKey]; got != "hearth/front_door/set" {
			t.Errorf("%s %s = %v; want hearth/front_door/set", tc.class, tc.topicKey, got)
		}
		tpl, _ := cfg[tc.key].(string)
		var ids []string
		for range 2 {
			out := render(t, tpl, tc.vars, nil)
			var got map[string]any
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("%s %s renders %q: not JSON: %v", tc.class, tc.key, out, err)
			}
			id, _ := got["op_id"].(string)
			if !opIDPattern.MatchString(id) || len(id) > devices.MaxOpIDBytes {
				t.Errorf("%s %s: op_id %q; want ha-<µs>-<random>, at most %d bytes", tc.class, tc.key, id, devices.MaxOpIDBytes)
			}
			ids = append(ids, id)
			delete(got, "op_id")
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%s %s renders %v; want %v", tc.class, tc.key, got, tc.want)
			}
			// What Hearth's intake makes of it.
			if _, err := devices.ParseCommand(tc.class, []byte(out)); err != nil {
				t.Errorf("%s %s renders %s, which the intake rejects: %v", tc.class, tc.key, out, err)
			}
		}
		if ids[0] == ids[1] {
			t.Errorf("%s %s: two presses share op_id %s", tc.class, tc.key, ids[0])
		}
	}
}

// The event entity fires on terminal results only, with the result's
// fields as attributes; interim results render empty, which Home
// Assistant's event entity ignores.
func TestEventEntityFiresOnTerminalResultsOnly(t *testing.T) {
	dev := Device{Device: devices.Device{ID: "front_door", Class: devices.Lock, Service: "z2m"}}
	cfg := configOf(t, Discovery{}.DeviceConfigs(dev), "homeassistant/event/hearth/front_door_command/config")
	if cfg["state_topic"] != "hearth/front_door/result" {
		t.Errorf("state_topic %v; want hearth/front_door/result", cfg["state_topic"])
	}
	if !reflect.DeepEqual(cfg["event_types"], []any{"succeeded", "failed", "expired", "rejected", "superseded"}) {
		t.Errorf("event_types %v", cfg["event_types"])
	}
	tpl := cfg["value_template"].(string)
	failed := []byte(`{"op_id":"01J","device":"front_door","status":"failed","reason":"jammed","detail":"after attempt 1 the device reported jammed","attempts":1,"target":{"state":"LOCK"},"at":"2026-12-02T10:00:00Z"}`)
	var got map[string]any
	if err := json.Unmarshal([]byte(render(t, tpl, nil, failed)), &got); err != nil {
		t.Fatal(err)
	}
	if got["event_type"] != "failed" || got["reason"] != "jammed" || got["op_id"] != "01J" || got["attempts"] != 1.0 {
		t.Errorf("failed result renders %v; want event_type failed with reason jammed, op_id 01J, attempts 1", got)
	}
	for _, status := range []string{"accepted", "queued"} {
		if out := render(t, tpl, nil, []byte(`{"op_id":"01J","device":"front_door","status":"`+status+`","attempts":0}`)); out != "" {
			t.Errorf("%s result renders %q; want empty (ignored)", status, out)
		}
	}
}

// Each class becomes the Home Assistant entity of its class, on Hearth's
// topics, with availability that holds with Zigbee2MQTT's defaults.
func TestDeviceConfigsPerClass(t *testing.T) {
	d := Discovery{Version: "1.2.3"}
	for _, tc := range []struct {
		class devices.Class
		topic string
		want  map[string]any
	}{
		{devices.Light, "homeassistant/light/hearth/hall_light/config", map[string]any{
			"schema": "json", "command_topic": "hearth/hall_light/set", "state_topic": "hearth/hall_light",
			"brightness": true, "brightness_scale": 254.0, "supported_color_modes": []any{"brightness"},
		}},
		{devices.Switch, "homeassistant/switch/hearth/hall_light_switch/config", map[string]any{
			"command_topic": "hearth/hall_light/set", "state_topic": "hearth/hall_light", "value_template": "{{ value_json.state }}",
		}},
		{devices.Lock, "homeassistant/lock/hearth/hall_light_lock/config", map[string]any{
			"command_topic": "hearth/hall_light/set", "state_topic": "hearth/hall_light/ha_state",
			"state_locking": "LOCKING", "state_unlocking": "UNLOCKING", "state_jammed": "JAMMED",
		}},
		{devices.Cover, "homeassistant/cover/hearth/hall_light_cover/config", map[string]any{
			"command_topic": "hearth/hall_light/set", "state_topic": "hearth/hall_light/ha_state",
			"position_topic": "hearth/hall_light", "set_position_topic": "hearth/hall_light/set",
		}},
		{devices.Climate, "homeassistant/climate/hearth/hall_light_climate/config", map[string]any{
			"mode_command_topic": "hearth/hall_light/set", "mode_state_topic": "hearth/hall_light",
			"modes": []any{"off", "heat", "auto"}, "temperature_unit": "C",
		}},
	} {
		dev := Device{Device: devices.Device{ID: "hall_light", Class: tc.class, Service: "z2m"}, Breaker: true}
		configs := d.DeviceConfigs(dev)
		if len(configs) != 2 {
			t.Fatalf("%s: %d configs; want the class entity and the event entity", tc.class, len(configs))
		}
		topic := tc.topic
		if tc.class == devices.Light {
			topic = "homeassistant/light/hearth/hall_light_light/config"
		}
		cfg := configOf(t, configs, topic)
		for k, want := range tc.want {
			if got := cfg[k]; !reflect.DeepEqual(got, want) {
				t.Errorf("%s %s = %v; want %v", tc.class, k, got, want)
			}
		}
		if cfg["unique_id"] != "hearth_hearth_hall_light_"+string(tc.class) {
			t.Errorf("%s unique_id %v", tc.class, cfg["unique_id"])
		}
		if cfg["availability_mode"] != "all" {
			t.Errorf("%s availability_mode %v; want all", tc.class, cfg["availability_mode"])
		}
		var topics []any
		for _, a := range cfg["availability"].([]any) {
			topics = append(topics, a.(map[string]any)["topic"])
		}
		if want := []any{"hearth/bridge/state", "hearth/services/z2m/state"}; !reflect.DeepEqual(topics, want) {
			t.Errorf("%s availability topics %v; want %v (no device availability until its bridge reports one)", tc.class, topics, want)
		}
		if o := cfg["origin"].(map[string]any); o["sw_version"] != "1.2.3" {
			t.Errorf("%s origin %v; want sw_version 1.2.3", tc.class, o)
		}
	}
	for _, class := range []devices.Class{devices.Sensor, devices.Alarm, devices.Valve} {
		if got := d.DeviceConfigs(Device{Device: devices.Device{ID: "x", Class: class}}); len(got) != 0 {
			t.Errorf("%s takes no commands: %d configs; want none", class, len(got))
		}
	}
}

// A device the bridge reports availability for depends on it too; the
// service state's template makes an open breaker unavailable.
func TestAvailabilityFollowsBridgeReportsAndBreaker(t *testing.T) {
	dev := Device{Device: devices.Device{ID: "lamp", Class: devices.Switch, Service: "z2m"}, Breaker: true, Availability: true}
	cfg := decode(t, Discovery{}.DeviceConfigs(dev)[0].Payload)
	avail := cfg["availability"].([]any)
	if len(avail) != 3 || avail[2].(map[string]any)["topic"] != "hearth/lamp/availability" {
		t.Fatalf("availability %v; want Hearth's, the service's and the device's", avail)
	}
	tpl := avail[1].(map[string]any)["value_template"].(string)
	for state, want := range map[string]string{"open": "offline", "half_open": "online", "closed": "online"} {
		if got := render(t, tpl, nil, []byte(`{"state":"`+state+`","since":"2026-12-02T10:00:00Z"}`)); got != want {
			t.Errorf("breaker %s renders %q; want %q", state, got, want)
		}
	}
}

// With the bridge's own identifiers, Home Assistant shows one device: the
// bridge's entities and Hearth's together.
func TestDeviceBlockTakesTheBridgesIdentifiers(t *testing.T) {
	dev := Device{Device: devices.Device{ID: "lamp", Class: devices.Switch}, Name: "Lamp",
		Bridge: Bridge{Identifiers: []string{"zigbee2mqtt_0x00158d0001a2b3c4"}, Manufacturer: "IKEA", Model: "E1603"}}
	got := decode(t, Discovery{}.DeviceConfigs(dev)[0].Payload)["device"]
	want := map[string]any{"identifiers": []any{"zigbee2mqtt_0x00158d0001a2b3c4"}, "name": "Lamp", "manufacturer": "IKEA", "model": "E1603"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("device %v; want %v", got, want)
	}
	dev.Bridge = Bridge{}
	got = decode(t, Discovery{}.DeviceConfigs(dev)[0].Payload)["device"]
	if want := map[string]any{"identifiers": []any{"hearth_hearth_lamp"}, "name": "Lamp"}; !reflect.DeepEqual(got, want) {
		t.Errorf("device without the bridge's description %v; want %v", got, want)
	}
}

// Entities announced before and no longer configured are removed; the
// ones still announced, and other instances', are left alone.
func TestRemovalsOfEntitiesNoLongerConfigured(t *testing.T) {
	d := Discovery{}
	current := Topics(d.Configs([]string{"z2m"}, []Device{{Device: devices.Device{ID: "lamp", Class: devices.Switch, Service: "z2m"}}}))
	previous := []string{
		"homeassistant/switch/hearth/lamp_switch/config",         // announced now
		"homeassistant/binary_sensor/hearth/service_z2m/config",  // announced now
		"homeassistant/lock/hearth/old_lock_lock/config",         // a removed device
		"homeassistant/binary_sensor/hearth/service_gone/config", // a removed service
		"homeassistant/lock/other/old_lock_lock/config",          // another instance's
		"homeassistant/lock/hearth/old_lock_lock/state",          // not a config
	}
	var got []string
	for _, c := range d.Removals(previous, current) {
		if len(c.Payload) != 0 {
			t.Errorf("removal of %s has payload %q; want empty", c.Topic, c.Payload)
		}
		got = append(got, c.Topic)
	}
	want := []string{"homeassistant/lock/hearth/old_lock_lock/config", "homeassistant/binary_sensor/hearth/service_gone/config"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("removals %v; want %v", got, want)
	}
	if n := len(d.Removals(previous, nil)); n != 4 {
		t.Errorf("with discovery off: %d removals; want all 4 of this node's", n)
	}
}

// A sensor gets a sensor or binary_sensor per read-only reading its bridge
// describes, each rendering its value from the mirror as Home Assistant
// compares it; a door's contact (Zigbee2MQTT: value_on false) is on when
// open.
func TestSensorReadingsBecomeEntities(t *testing.T) {
	caps := devices.NewCapabilities("MCCGQ11LM", "Aqara", "Door and window sensor", []devices.Property{
		{Name: "contact", Kind: devices.KindBinary, Access: devices.AccessPublished, ValueOn: false, ValueOff: true},
		{Name: "battery", Kind: devices.KindNumeric, Access: devices.AccessPublished, Unit: "%"},
		{Name: "temperature", Kind: devices.KindNumeric, Access: devices.AccessPublished, Unit: "°C"},
		{Name: "sensitivity", Kind: devices.KindEnum, Access: devices.AccessPublished | devices.AccessSet, Values: []string{"low", "high"}},
	})
	dev := Device{Device: devices.Device{ID: "back_door", Class: devices.Sensor, Service: "z2m"}, Bridge: BridgeOf(devices.Sensor, caps)}
	configs := Discovery{}.DeviceConfigs(dev)
	if len(configs) != 3 {
		t.Fatalf("%d configs; want contact, battery and temperature (sensitivity is set, not read)", len(configs))
	}
	contact := configOf(t, configs, "homeassistant/binary_sensor/hearth/back_door_contact/config")
	if contact["device_class"] != "door" || contact["default_entity_id"] != "binary_sensor.back_door_contact" {
		t.Errorf("contact: %v", contact)
	}
	for report, want := range map[string]any{`{"contact":false}`: contact["payload_on"], `{"contact":true}`: contact["payload_off"]} {
		if got := render(t, contact["value_template"].(string), nil, []byte(report)); got != want {
			t.Errorf("%s renders %q; want %q (open is on)", report, got, want)
		}
	}
	battery := configOf(t, configs, "homeassistant/sensor/hearth/back_door_battery/config")
	if battery["unit_of_measurement"] != "%" || battery["device_class"] != "battery" {
		t.Errorf("battery: %v", battery)
	}
	if got := render(t, battery["value_template"].(string), nil, []byte(`{"battery":87,"contact":true}`)); got != "87" {
		t.Errorf("battery renders %q; want 87", got)
	}
	if got := (Discovery{}).DeviceConfigs(Device{Device: devices.Device{ID: "x", Class: devices.Sensor}}); len(got) != 0 {
		t.Errorf("a sensor its bridge does not describe: %d configs; want none", len(got))
	}
}

// A sensor's reading configs are told from other configs by topic.
func TestReadingOf(t *testing.T) {
	d := Discovery{}
	for topic, want := range map[string]bool{
		"homeassistant/sensor/hearth/door_battery/config":        true,
		"homeassistant/binary_sensor/hearth/door_contact/config": true,
		"homeassistant/sensor/hearth/door_/config":               false,
		"homeassistant/lock/hearth/door_lock/config":             false,
		"homeassistant/sensor/other/door_battery/config":         false,
		"homeassistant/sensor/hearth/window_battery/config":      false,
	} {
		if got := d.ReadingOf(topic, "door"); got != want {
			t.Errorf("ReadingOf(%s, door) = %v; want %v", topic, got, want)
		}
	}
}

// Two devices whose IDs differ only where Home Assistant's object IDs
// allow no character ("Tür" and "Tör", "front door" and "front_door") get
// entities of their own; an ID Home Assistant accepts keeps its name.
func TestDevicesWithSimilarIDsGetTheirOwnEntities(t *testing.T) {
	d := Discovery{}
	devs := []Device{
		{Device: devices.Device{ID: "Tür", Class: devices.Lock, Service: "z"}},
		{Device: devices.Device{ID: "Tör", Class: devices.Lock, Service: "z"}},
		{Device: devices.Device{ID: "front door", Class: devices.Lock, Service: "z"}},
		{Device: devices.Device{ID: "front_door", Class: devices.Lock, Service: "z"}},
	}
	configs := d.Configs(nil, devs)
	if got := len(Topics(configs)); got != len(configs) {
		t.Fatalf("%d configs on %d topics: two devices share an entity", len(configs), got)
	}
	ids := map[any]bool{}
	for _, c := range configs {
		ids[decode(t, c.Payload)["unique_id"]] = true
	}
	if len(ids) != len(configs) {
		t.Errorf("%d unique_ids for %d configs", len(ids), len(configs))
	}
	configOf(t, configs, "homeassistant/lock/hearth/front_door_lock/config")
}

// Home Assistant's MQTT climate takes precision only as 0.1, 0.5 or 1 and
// refuses the whole entity otherwise; a bridge's step may be 0.2 or 2.
func TestClimatePrecisionIsOneHomeAssistantTakes(t *testing.T) {
	for step, want := range map[float64]float64{0.2: 0.1, 0.5: 0.5, 2: 1, 0.1: 0.1, 1: 1} {
		dev := Device{Device: devices.Device{ID: "trv", Class: devices.Climate, Service: "z"}, Bridge: Bridge{TempStep: step, Setpoint: "occupied_heating_setpoint"}}
		if got := decode(t, Discovery{}.DeviceConfigs(dev)[0].Payload)["precision"]; got != want {
			t.Errorf("value_step %g: precision %v; want %v", step, got, want)
		}
	}
}
