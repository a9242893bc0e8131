package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/configs"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/simulator"
)

// sampleConfig is the documented sample configuration on free ports.
func sampleConfig() string {
	s := strings.Replace(string(configs.Sample), "listen: 127.0.0.1:1883", "listen: 127.0.0.1:0", 1)
	return strings.Replace(s, "listen: 127.0.0.1:8080", "listen: 127.0.0.1:0", 1)
}

// sampleConfigTopics are the discovery configs Home Assistant finds for
// the sample configuration: the zigbee and tasmota services' problem
// entities, and for each device the entity of its class and its command
// event entity.
var sampleConfigTopics = []string{
	"homeassistant/binary_sensor/hearth/service_zigbee/config",
	"homeassistant/binary_sensor/hearth/service_tasmota/config",
	"homeassistant/light/hearth/hall_light_light/config", "homeassistant/event/hearth/hall_light_command/config",
	"homeassistant/light/hearth/kitchen_light_light/config", "homeassistant/event/hearth/kitchen_light_command/config",
	"homeassistant/switch/hearth/coffee_maker_switch/config", "homeassistant/event/hearth/coffee_maker_command/config",
	"homeassistant/lock/hearth/front_door_lock/config", "homeassistant/event/hearth/front_door_command/config",
	"homeassistant/cover/hearth/living_blinds_cover/config", "homeassistant/event/hearth/living_blinds_command/config",
	"homeassistant/climate/hearth/bedroom_trv_climate/config", "homeassistant/event/hearth/bedroom_trv_command/config",
	"homeassistant/switch/hearth/porch_plug_switch/config", "homeassistant/event/hearth/porch_plug_command/config",
}

// haRender renders a Home Assistant template as Home Assistant does, with
// Jinja2's sandbox (../../homeassistant/testdata/render.py).
func haRender(t *testing.T, template string, vars map[string]any) string {
	t.Helper()
	in, _ := json.Marshal(map[string]any{"template": template, "vars": vars})
	cmd := exec.Command("python3", filepath.Join("..", "..", "homeassistant", "testdata", "render.py"))
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("rendering %q: %v\n%s", template, err, stderr.String())
	}
	return string(out)
}

// haConfigs collects the discovery configs as Home Assistant receives
// them, newest per topic.
type haConfigs struct {
	t   *testing.T
	ch  <-chan paho.Message
	got map[string]map[string]any
}

func (c *haConfigs) await(topic, what string, cond func(map[string]any) bool) map[string]any {
	c.t.Helper()
	deadline := time.After(eventWait)
	for {
		if cfg, ok := c.got[topic]; ok && cond(cfg) {
			return cfg
		}
		select {
		case m := <-c.ch:
			if !m.Retained() && len(m.Payload()) == 0 {
				continue
			}
			var cfg map[string]any
			if err := json.Unmarshal(m.Payload(), &cfg); err != nil {
				c.t.Fatalf("config on %s is not JSON: %s", m.Topic(), m.Payload())
			}
			c.got[m.Topic()] = cfg
		case <-deadline:
			c.t.Fatalf("no config on %s with %s; have %v", topic, what, c.got[topic])
		}
	}
}

// awaitSetTo waits for the next set that reaches the device named name,
// skipping others' (there are none in these tests, but a fresh read's get
// is not a set).
func (h *harness) awaitSetTo(name string) simulator.SetEvent {
	h.t.Helper()
	for {
		if e := h.nextSet(); e.Device == name && strings.HasSuffix(e.Topic, "/set") {
			return e
		}
	}
}

// awaitPayload waits for a message on ch whose payload is want.
func awaitPayload(t *testing.T, ch <-chan paho.Message, want string) {
	t.Helper()
	deadline := time.After(eventWait)
	var seen []string
	for {
		select {
		case m := <-ch:
			if string(m.Payload()) == want {
				return
			}
			seen = append(seen, string(m.Payload()))
		case <-deadline:
			t.Fatalf("no %q on the topic; saw %q", want, seen)
		}
	}
}

// Home Assistant, with the sample configuration, finds an entity for every
// device on Hearth's topics and commands each as its template publishes;
// the devices get the bridge's payloads, and what Home Assistant shows is
// the confirmed state.
func TestHomeAssistantCommandsEveryClassThroughHearth(t *testing.T) {
	h := newHarness(t, harnessOptions{config: sampleConfig()})
	h.settle("hall_light", "kitchen_light", "coffee_maker", "front_door", "living_blinds", "bedroom_trv", "porch_plug")
	if got := h.d.ha.announced(); got != len(sampleConfigTopics) {
		t.Fatalf("hearthd announces %d configs; want %d (%v)", got, len(sampleConfigTopics), sampleConfigTopics)
	}
	c := &haConfigs{t: t, ch: h.watch(sampleConfigTopics...), got: map[string]map[string]any{}}
	for _, topic := range sampleConfigTopics {
		c.await(topic, "a config", func(map[string]any) bool { return true })
	}

	// A light: the bridge's description gives its color modes, and its
	// device is Zigbee2MQTT's.
	light := c.await("homeassistant/light/hearth/hall_light_light/config", "the bulb's color modes",
		func(cfg map[string]any) bool { return slices.Contains(asStrings(cfg["supported_color_modes"]), "xy") })
	if ids := asStrings(light["device"].(map[string]any)["identifiers"]); len(ids) != 1 || !strings.HasPrefix(ids[0], "zigbee2mqtt_0x") {
		t.Errorf("the light's device identifiers %v; want Zigbee2MQTT's zigbee2mqtt_<ieee_address>", ids)
	}
	if light["brightness_scale"] != 254.0 {
		t.Fatalf("brightness_scale %v; want 254", light["brightness_scale"])
	}
	lightState := h.watch(light["state_topic"].(string))
	// Home Assistant's brightness 255, scaled to 254, and a color: its JSON
	// light publishes them as they are.
	for _, tc := range []struct {
		payload string
		want    map[string]any
	}{
		{`{"state":"ON","brightness":254}`, map[string]any{"state": "ON", "brightness": 254.0}},
		{`{"state":"ON","color":{"x":0.7006,"y":0.2993}}`, map[string]any{"state": "ON", "color": map[string]any{"x": 0.7006, "y": 0.2993}}},
	} {
		mustToken(t, h.client.Publish(light["command_topic"].(string), 1, false, tc.payload))
		if e := h.awaitSetTo("hall_light"); !reflect.DeepEqual(e.Attrs, tc.want) {
			t.Errorf("the bulb got %s; want %v", e.Payload, tc.want)
		}
		r := h.await(func(r devices.Result) bool { return r.Device == "hall_light" && r.Status.Terminal() }, "the light's result")
		if r.Status != devices.Succeeded {
			t.Fatalf("%s: %s (%s: %s); want succeeded", tc.payload, r.Status, r.Reason, r.Detail)
		}
	}
	awaitJSON(t, lightState, func(s map[string]any) bool {
		col, _ := s["color"].(map[string]any)
		return s["state"] == "ON" && s["brightness"] == 254.0 && col["x"] == 0.7006
	}, "the light on at 254 in red")

	// A switch, a lock, a cover and a climate device take their command
	// templates' payloads.
	sw := c.got["homeassistant/switch/hearth/coffee_maker_switch/config"]
	mustToken(t, h.client.Publish(sw["command_topic"].(string), 1, false, haRender(t, sw["command_template"].(string), map[string]any{"value": "ON"})))
	if e := h.awaitSetTo("coffee_maker"); e.Attrs["state"] != "ON" || len(e.Attrs) != 1 {
		t.Errorf("the switch got %s; want {\"state\":\"ON\"} (the op_id stays with Hearth)", e.Payload)
	}
	h.await(func(r devices.Result) bool { return r.Device == "coffee_maker" && r.Status == devices.Succeeded }, "the switch succeeded")
	// The same template on the Wi-Fi plug: the Tasmota gets POWER ON.
	plug := c.got["homeassistant/switch/hearth/porch_plug_switch/config"]
	mustToken(t, h.client.Publish(plug["command_topic"].(string), 1, false, haRender(t, plug["command_template"].(string), map[string]any{"value": "ON"})))
	e := h.nextSet()
	for e.Device != "porch_plug" {
		e = h.nextSet()
	}
	if e.Topic != "cmnd/porch_plug/POWER" || string(e.Payload) != "ON" {
		t.Errorf("the Tasmota plug got %s %s; want cmnd/porch_plug/POWER ON", e.Topic, e.Payload)
	}
	h.await(func(r devices.Result) bool { return r.Device == "porch_plug" && r.Status == devices.Succeeded }, "the plug succeeded")

	lock := c.got["homeassistant/lock/hearth/front_door_lock/config"]
	shown := h.watch(lock["state_topic"].(string))
	awaitPayload(t, shown, "LOCKED")
	for _, step := range []struct{ value, moving, done string }{{"UNLOCK", "UNLOCKING", "UNLOCKED"}, {"LOCK", "LOCKING", "LOCKED"}} {
		payload := haRender(t, lock["command_template"].(string), map[string]any{"value": step.value})
		var sent map[string]any
		json.Unmarshal([]byte(payload), &sent)
		mustToken(t, h.client.Publish(lock["command_topic"].(string), 1, false, payload))
		awaitPayload(t, shown, step.moving)
		if e := h.awaitSetTo("Front Door"); e.Attrs["state"] != step.value {
			t.Errorf("the lock got %s; want state %s", e.Payload, step.value)
		}
		r := h.await(func(r devices.Result) bool { return r.OpID == sent["op_id"] && r.Status.Terminal() }, "the lock's result")
		if r.Status != devices.Succeeded {
			t.Fatalf("%s: %s (%s: %s); want succeeded", step.value, r.Status, r.Reason, r.Detail)
		}
		awaitPayload(t, shown, step.done)
	}

	cover := c.got["homeassistant/cover/hearth/living_blinds_cover/config"]
	coverShown := h.watch(cover["state_topic"].(string))
	mustToken(t, h.client.Publish(cover["set_position_topic"].(string), 1, false, haRender(t, cover["set_position_template"].(string), map[string]any{"position": 50})))
	if e := h.awaitSetTo("living_blinds"); e.Attrs["position"] != 50.0 {
		t.Errorf("the cover got %s; want position 50", e.Payload)
	}
	h.await(func(r devices.Result) bool { return r.Device == "living_blinds" && r.Status == devices.Succeeded }, "the cover succeeded")
	awaitPayload(t, coverShown, "open")

	trv := c.await("homeassistant/climate/hearth/bedroom_trv_climate/config", "the valve's modes",
		func(cfg map[string]any) bool {
			return cfg["temp_step"] == 0.5 && len(asStrings(cfg["preset_modes"])) > 0
		})
	mustToken(t, h.client.Publish(trv["mode_command_topic"].(string), 1, false, haRender(t, trv["mode_command_template"].(string), map[string]any{"value": "heat"})))
	if e := h.awaitSetTo("bedroom_trv"); e.Attrs["system_mode"] != "heat" {
		t.Errorf("the valve got %s; want system_mode heat", e.Payload)
	}
	h.await(func(r devices.Result) bool { return r.Device == "bedroom_trv" && r.Status == devices.Succeeded }, "the mode succeeded")
	// 21.3 °C, which the valve rounds to its 0.5 °C step: confirmed.
	mustToken(t, h.client.Publish(trv["temperature_command_topic"].(string), 1, false, haRender(t, trv["temperature_command_template"].(string), map[string]any{"value": 21.3})))
	h.awaitSetTo("bedroom_trv")
	r := h.await(func(r devices.Result) bool { return r.Device == "bedroom_trv" && r.Status.Terminal() }, "the setpoint's result")
	if r.Status != devices.Succeeded || r.State[trv["temperature_state_template"].(string)[len("{{ value_json."):len(trv["temperature_state_template"].(string))-3]] != 21.5 {
		t.Errorf("setpoint 21.3: %s (%s) with state %v; want succeeded at 21.5", r.Status, r.Detail, r.State)
	}
}

// asStrings converts a decoded JSON list of strings.
func asStrings(v any) []string {
	var out []string
	for _, x := range asSlice(v) {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func asSlice(v any) []any {
	s, _ := v.([]any)
	return s
}

// awaitJSON waits for a JSON message on ch that satisfies cond.
func awaitJSON(t *testing.T, ch <-chan paho.Message, cond func(map[string]any) bool, what string) {
	t.Helper()
	deadline := time.After(eventWait)
	for {
		select {
		case m := <-ch:
			var s map[string]any
			if json.Unmarshal(m.Payload(), &s) == nil && cond(s) {
				return
			}
		case <-deadline:
			t.Fatalf("no message with %s", what)
		}
	}
}

// A lock whose bolt jams shows JAMMED in Home Assistant, and its command
// event entity fires failed with the reason.
func TestHomeAssistantLockShowsJammed(t *testing.T) {
	h := newHarness(t, harnessOptions{config: sampleConfig(), faults: simulator.Faults{Jam: []string{"Front Door"}}})
	h.settle("front_door")
	c := &haConfigs{t: t, ch: h.watch(sampleConfigTopics...), got: map[string]map[string]any{}}
	lock := c.await("homeassistant/lock/hearth/front_door_lock/config", "a config", func(map[string]any) bool { return true })
	event := c.await("homeassistant/event/hearth/front_door_command/config", "a config", func(map[string]any) bool { return true })
	shown := h.watch(lock["state_topic"].(string))
	events := h.watch(event["state_topic"].(string))
	mustToken(t, h.client.Publish(lock["command_topic"].(string), 1, false, haRender(t, lock["command_template"].(string), map[string]any{"value": "UNLOCK"})))
	awaitPayload(t, shown, "UNLOCKING")
	awaitPayload(t, shown, "JAMMED")
	deadline := time.After(eventWait)
	for {
		select {
		case m := <-events:
			out := haRender(t, event["value_template"].(string), map[string]any{"value": string(m.Payload()), "value_json": decodeJSON(m.Payload())})
			if out == "" {
				continue // accepted: not an event
			}
			var ev map[string]any
			if err := json.Unmarshal([]byte(out), &ev); err != nil {
				t.Fatalf("the event renders %q: %v", out, err)
			}
			if ev["event_type"] != "failed" || ev["reason"] != "jammed" {
				t.Errorf("the event: %v; want event_type failed, reason jammed", ev)
			}
			return
		case <-deadline:
			t.Fatal("no event of the jammed lock's command")
		}
	}
}

func decodeJSON(p []byte) any {
	var v any
	json.Unmarshal(p, &v)
	return v
}

// An entity of a device removed from the config is removed from Home
// Assistant at the next start, and discovery turned off removes them all.
// The broker outlives hearthd, as Home Assistant's Mosquitto add-on does.
func TestHomeAssistantEntitiesOfRemovedDevicesAreCleared(t *testing.T) {
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	dir := t.TempDir()
	trvTopics := []string{"homeassistant/climate/hearth/bedroom_trv_climate/config", "homeassistant/event/hearth/bedroom_trv_command/config"}
	const lockTopic = "homeassistant/lock/hearth/front_door_lock/config"

	h := newHarness(t, harnessOptions{dataDir: dir, brokerURL: b.URL(), config: sampleConfig()})
	trv := h.watch(trvTopics...) // Home Assistant, which stays
	for range trvTopics {
		if m := <-trv; len(m.Payload()) == 0 {
			t.Fatalf("%s announced empty", m.Topic())
		}
	}
	h.stop()

	without := strings.Replace(sampleConfig(), "  bedroom_trv:\n    service: zigbee\n    class: climate\n", "", 1)
	if without == sampleConfig() {
		t.Fatal("the sample has no bedroom_trv to remove")
	}
	h = newHarness(t, harnessOptions{dataDir: dir, brokerURL: b.URL(), config: without})
	removed := map[string]bool{}
	deadline := time.After(eventWait)
	for len(removed) < len(trvTopics) {
		select {
		case m := <-trv:
			if len(m.Payload()) == 0 {
				removed[m.Topic()] = true
			}
		case <-deadline:
			t.Fatalf("removed %v of the trv's %d entities", removed, len(trvTopics))
		}
	}
	lock := h.watch(lockTopic)
	if m := <-lock; len(m.Payload()) == 0 {
		t.Fatal("the lock's entity was removed; it is still configured")
	}
	h.stop()

	off := strings.Replace(without, "  discovery: true", "  discovery: false", 1)
	h = newHarness(t, harnessOptions{dataDir: dir, brokerURL: b.URL(), config: off})
	awaitPayload(t, lock, "")
	// Once every removal is out, the record says nothing is announced.
	var rec []byte
	h.eventually("the record empty", func() bool {
		var r haRecord
		rec, err = os.ReadFile(filepath.Join(dir, haRecordFile))
		return err == nil && json.Unmarshal(rec, &r) == nil && len(r.Announced) == 0
	})
}

// A configured sensor's readings, announced by an earlier run once its
// bridge described them, are not removed at the next start, before the
// bridge describes them again; a removed sensor's are.
func TestHomeAssistantKeepsAConfiguredSensorsReadingsAtStart(t *testing.T) {
	dir := t.TempDir()
	rec, _ := json.Marshal(haRecord{Announced: []string{
		"homeassistant/binary_sensor/hearth/hall_motion_occupancy/config",
		"homeassistant/sensor/hearth/hall_motion_battery/config",
		"homeassistant/sensor/hearth/gone_motion_battery/config",
	}})
	if err := os.WriteFile(filepath.Join(dir, haRecordFile), rec, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("test.yaml", []byte(testConfig+"  hall_motion:\n    class: sensor\n"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = dir
	h := newHomeAssistant(cfg, nil, testLogger(t), "test")
	var removed []string
	for _, c := range h.removals {
		removed = append(removed, c.Topic)
	}
	if want := []string{"homeassistant/sensor/hearth/gone_motion_battery/config"}; !reflect.DeepEqual(removed, want) {
		t.Errorf("removals at start %v; want %v", removed, want)
	}
}
