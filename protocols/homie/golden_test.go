package homie

import (
	"bufio"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/mqtt"
)

// message is one line of an example transcript (testdata/README.md):
// topic → "payload" (the device's) or topic ← "payload" (a controller's
// set).
type message struct {
	topic, payload string
	set            bool
}

func readExamples(t *testing.T, name string) []message {
	t.Helper()
	f, err := os.Open("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []message
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		arrow, set := " → ", false
		if strings.Contains(line, " ← ") {
			arrow, set = " ← ", true
		}
		topic, payload, ok := strings.Cut(line, arrow)
		if !ok {
			t.Fatalf("%s: %q is not topic → payload", name, line)
		}
		payload, _, _ = strings.Cut(payload, "  (") // "100  (after 5 seconds)"
		out = append(out, message{topic: topic, payload: strings.Trim(payload, `"`), set: set})
	}
	return out
}

// recorder is a Sink that keeps the reports.
type recorder struct{ reports []map[string]any }

func (r *recorder) Report(_ string, state map[string]any, _ bool) {
	r.reports = append(r.reports, state)
}
func (r *recorder) Availability(string, bool)                   {}
func (r *recorder) BridgeState(string, bool, bool)              {}
func (r *recorder) NodeStatus(string, devices.NodeStatus, bool) {}

// Homie 4.0.0's own examples: the super-car's engine temperature is
// described as a read-only float -20:120 (so Hearth refuses to write it),
// the kitchen light's set is the payload Hearth sends for ON, and its
// power value "true" reports ON.
func TestGoldenHomie4Examples(t *testing.T) {
	a := New(nil, Options{Service: "s", Devices: []devices.Device{
		{ID: "engine", Class: devices.Switch, Address: "super-car/engine/temperature"},
		{ID: "kitchen", Class: devices.Switch, Address: "kitchen-light/light/power"},
	}})
	r := &recorder{}
	a.sink = r
	// The convention's kitchen light power is "retained + settable (lamp
	// power)"; its attributes are not in the example.
	a.meta["kitchen-light/light/power"] = Meta{Datatype: Boolean, Settable: true, Retained: true}
	var sets []message
	for _, m := range readExamples(t, "homie4_examples.txt") {
		if m.set {
			sets = append(sets, m)
			continue
		}
		a.handle(mqtt.Message{Topic: m.topic, Payload: []byte(m.payload), Retained: true})
	}
	if got, want := a.meta["super-car/engine/temperature"], (Meta{Datatype: Float, Format: "-20:120", Settable: false, Retained: true}); got != want {
		t.Errorf("temperature described as %+v; want %+v", got, want)
	}
	if got := a.states["super-car"]; got != StateReady {
		t.Errorf("super-car $state %q; want ready", got)
	}
	if _, _, err := a.encode(a.byDev["engine"], devices.Target{"state": "ON"}); err == nil {
		t.Error("the read-only temperature was written")
	}
	got, _, err := a.encode(a.byDev["kitchen"], devices.Target{"state": "ON"})
	if err != nil || len(sets) != 1 || len(got) != 1 || "homie/kitchen-light/light/"+got[0].prop+"/set" != sets[0].topic || got[0].payload != sets[0].payload {
		t.Errorf("ON encodes to %+v (%v); the convention sets %+v", got, err, sets)
	}
	if want := []map[string]any{{"state": "ON"}}; !reflect.DeepEqual(r.reports, want) {
		t.Errorf("reports %v; want %v (the temperature is no device's power)", r.reports, want)
	}
}

// Homie 5's examples: the dimming light's $target (100) is in progress and
// reports nothing; the values on the way (20 … 100 of 0:100) report the
// brightness 51 … 254; the set of 100 is what Hearth sends for 254.
func TestGoldenHomie5Examples(t *testing.T) {
	a := New(nil, Options{Service: "s", BaseTopic: "homie/5", Devices: []devices.Device{
		{ID: "kitchen", Class: devices.Light, Address: "kitchen-light/light/power,brightness"},
	}})
	r := &recorder{}
	a.sink = r
	a.meta["kitchen-light/light/power"] = Meta{Datatype: Boolean, Settable: true, Retained: true}
	a.meta["kitchen-light/light/brightness"] = Meta{Datatype: Integer, Format: "0:100", Settable: true, Retained: true}
	var sets []string
	for _, m := range readExamples(t, "homie5_examples.txt") {
		if m.set {
			sets = append(sets, m.topic+" "+m.payload)
			continue
		}
		a.handle(mqtt.Message{Topic: m.topic, Payload: []byte(m.payload)})
	}
	want := []map[string]any{{"state": "ON"}, {"brightness": 51.0}, {"brightness": 102.0}, {"brightness": 152.0}, {"brightness": 203.0}, {"brightness": 254.0}}
	if !reflect.DeepEqual(r.reports, want) {
		t.Errorf("reports %v; want %v", r.reports, want)
	}
	got, _, err := a.encode(a.byDev["kitchen"], devices.Target{"state": "ON", "brightness": 254.0})
	var ours []string
	for _, s := range got {
		ours = append(ours, "homie/5/kitchen-light/light/"+s.prop+"/set "+s.payload)
	}
	if err != nil || !reflect.DeepEqual(ours, sets) {
		t.Errorf("ON at 254 encodes to %v (%v); the convention sets %v", ours, err, sets)
	}
}

// The convention's temperature property, in a Homie 5 document, decodes
// to a read-only float -20:120.
func TestGoldenHomie5Description(t *testing.T) {
	p, err := os.ReadFile("testdata/homie5_temperature_property.json")
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseDescription(p)
	if err != nil {
		t.Fatal(err)
	}
	want := Description{Homie: "5.0", Version: 7, Props: map[string]Meta{"engine/temperature": {Datatype: Float, Format: "-20:120", Retained: true}}}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("description %+v; want %+v", d, want)
	}
}
