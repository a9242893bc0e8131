package zigbee2mqtt

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/internal/testbroker"
)

// golden is testdata/bridge_devices.json: real devices' bridge/devices
// entries exported from zigbee-herdsman-converters by
// scripts/export-z2m-definitions.mjs (see its header to regenerate).
type golden struct {
	Package string            `json:"package"`
	Devices []json.RawMessage `json:"devices"`
}

// goldenDevice is an entry with the class Hearth would configure it with.
type goldenDevice struct {
	BridgeDevice
	Class devices.Class `json:"hearth_class"`
}

// loadGolden returns the exported devices and their bridge/devices
// payload, as Zigbee2MQTT publishes it (a JSON array).
func loadGolden(t testing.TB) ([]goldenDevice, []byte) {
	t.Helper()
	b, err := os.ReadFile("testdata/bridge_devices.json")
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(g.Package, "zigbee-herdsman-converters@") {
		t.Fatalf("testdata names package %q, want zigbee-herdsman-converters@<version>", g.Package)
	}
	payload, _ := json.Marshal(g.Devices)
	var out []goldenDevice
	if err := json.Unmarshal(payload, &out); err != nil {
		t.Fatal(err)
	}
	return out, payload
}

// The golden set is what the task needs: at least 20 devices, every class
// Hearth commands on Zigbee, colour and white-spectrum lights, endpoints.
func TestGoldenSetCoversEveryKindOfDevice(t *testing.T) {
	golden, payload := loadGolden(t)
	list, err := ParseBridgeDevices(payload)
	if err != nil {
		t.Fatalf("ParseBridgeDevices(golden) error %v", err)
	}
	if len(list) != len(golden) || len(list) < 20 {
		t.Fatalf("parsed %d devices of %d; want all, at least 20", len(list), len(golden))
	}
	classes := map[devices.Class]int{}
	var color, whiteSpectrum, endpoints, presets int
	for _, d := range golden {
		classes[d.Class]++
		caps := d.Definition.Capabilities()
		if p, ok := caps.Property("color"); ok && p.Access.Has(devices.AccessSet) {
			color++
		} else if _, ok := caps.Property("color_temp"); ok {
			whiteSpectrum++
		}
		if _, ok := caps.Property("preset"); ok {
			presets++
		}
		for _, n := range caps.Settable(d.Class) {
			if p, _ := caps.Property(n); p.Endpoint != "" {
				endpoints++
				break
			}
		}
	}
	for _, c := range []devices.Class{devices.Light, devices.Switch, devices.Lock, devices.Cover, devices.Climate} {
		if classes[c] < 3 {
			t.Errorf("%d %s devices; want at least 3", classes[c], c)
		}
	}
	if color < 3 || whiteSpectrum < 2 || endpoints < 3 || presets < 1 {
		t.Errorf("color %d, white spectrum %d, with endpoints %d, with presets %d; want at least 3, 2, 3, 1", color, whiteSpectrum, endpoints, presets)
	}
}

// The exposes are read as Zigbee2MQTT wrote them: a light's ranges, a
// TRV's step, a switch's endpoints, a lock's binary values.
func TestGoldenCapabilitiesReadTheExposes(t *testing.T) {
	golden, _ := loadGolden(t)
	byModel := map[string]*devices.Capabilities{}
	for _, d := range golden {
		byModel[d.Definition.Model] = d.Definition.Capabilities()
	}
	check := func(model, name string, want func(devices.Property) bool, what string) {
		t.Helper()
		p, ok := byModel[model].Property(name)
		if !ok || !want(p) {
			t.Errorf("%s %s = %+v (found %v); want %s", model, name, p, ok, what)
		}
	}
	check("LED1545G12", "color_temp", func(p devices.Property) bool { return p.HasMin && p.Min == 250 && p.Max == 454 && p.Unit == "mired" }, "250–454 mired")
	check("TRVZB", "occupied_heating_setpoint", func(p devices.Property) bool { return p.Min == 4 && p.Max == 35 && p.Step == 0.5 }, "4–35 step 0.5")
	check("TS0002", "state_l2", func(p devices.Property) bool { return p.Base == "state" && p.Endpoint == "l2" && p.ValueOn == "ON" }, "state on endpoint l2")
	check("YRD226HA2619", "state", func(p devices.Property) bool { return p.ValueOn == "LOCK" && p.ValueOff == "UNLOCK" }, "LOCK/UNLOCK")
	check("YRD226HA2619", "lock_state", func(p devices.Property) bool { return p.Access == devices.AccessPublished }, "published only")
	check("9290022166", "color", func(p devices.Property) bool {
		return p.Kind == devices.KindComposite && slices.Equal(p.Features, []string{"hue", "saturation", "x", "y"})
	}, "one composite of xy and hs")
	check("SRTS-A01", "preset", func(p devices.Property) bool { return slices.Equal(p.Values, []string{"manual", "away", "auto"}) }, "manual, away, auto")
}

// For every device of the golden set, every attribute a command may name
// is honoured at intake and at confirmation: numbers inside the device's
// range are taken and outside it refused with the range; enum values are
// taken and others refused with the list; an attribute the device lacks
// or cannot set is refused; a report within half the device's value_step
// of the target confirms it, the neighbouring step does not (a whole number
// without a step: one off inside the range, exact at its ends); endpoints
// are addressed by their own key.
func TestGoldenDevicesAtIntakeAndConfirmation(t *testing.T) {
	golden, _ := loadGolden(t)
	for _, d := range golden {
		t.Run(d.Definition.Model, func(t *testing.T) {
			caps := d.Definition.Capabilities()
			settable := caps.Settable(d.Class)
			if len(settable) == 0 {
				t.Fatalf("no settable attribute for a %s", d.Class)
			}
			for _, name := range settable {
				p, _ := caps.Property(name)
				honoured(t, d.Class, caps, p)
			}
			// What the device does not have, or cannot set, is refused.
			for _, name := range []string{"state", "brightness", "color_temp", "color", "position", "tilt", "system_mode", "preset", "occupied_heating_setpoint", "current_heating_setpoint"} {
				if slices.Contains(settable, name) {
					continue
				}
				_, err := devices.ParseCommandFor(d.Class, caps, []byte(fmt.Sprintf(`{%q:%s}`, name, sample(name))))
				if devices.ReasonOf(err) != devices.ReasonUnknownAttribute && devices.ReasonOf(err) != devices.ReasonUnsupported {
					t.Errorf("%s, which the device cannot set: ParseCommandFor = %v; want unknown_attribute", name, err)
				}
			}
		})
	}
}

// sample is a value of the right type for attribute name.
func sample(name string) string {
	switch name {
	case "state":
		return `"ON"`
	case "color":
		return `{"x":0.3,"y":0.3}`
	case "system_mode":
		return `"heat"`
	case "preset":
		return `"manual"`
	}
	return "20"
}

func honoured(t *testing.T, c devices.Class, caps *devices.Capabilities, p devices.Property) {
	t.Helper()
	parse := func(v any) (devices.Target, error) {
		raw := map[string]any{p.Name: v}
		if len(devices.Target(raw).Attributes()) == 0 {
			raw["state"] = "ON" // a parameter (effect) rides with a state
		}
		b, _ := json.Marshal(raw)
		cmd, err := devices.ParseCommandFor(c, caps, b)
		return cmd.Target, err
	}
	confirmedBy := func(target devices.Target, reported any) bool {
		return devices.SatisfiedBy(c, caps, target, map[string]any{p.Name: reported})
	}
	switch p.Kind {
	case devices.KindNumeric:
		if !p.HasMin || !p.HasMax {
			t.Fatalf("%s: numeric without a range in the golden set", p.Name)
		}
		step := p.Step
		if step == 0 {
			step = 1
		}
		for _, v := range []float64{p.Min, p.Max} {
			if v == 0 && c == devices.Light && p.Base == "brightness" {
				continue // brightness 0 alone is a valid off; tested in devices
			}
			if _, err := parse(v); err != nil {
				t.Errorf("%s %g, inside %g–%g: %v", p.Name, v, p.Min, p.Max, err)
			}
		}
		for _, v := range []float64{p.Min - step, p.Max + 2*step} {
			_, err := parse(v)
			wantRange := fmt.Sprintf("%g–%g", p.Min, p.Max)
			if devices.ReasonOf(err) != devices.ReasonOutOfRange || !strings.Contains(err.Error(), wantRange) {
				t.Errorf("%s %g: %v; want out_of_range naming %s", p.Name, v, err, wantRange)
			}
		}
		mid := p.Min + step*float64(int((p.Max-p.Min)/step/2))
		target, err := parse(mid)
		if err != nil {
			t.Fatalf("%s %g: %v", p.Name, mid, err)
		}
		if p.Step > 0 {
			// Rounded to its step: half a step off is the target, a
			// whole step off is the neighbouring value.
			if !confirmedBy(target, mid+step/2) {
				t.Errorf("%s %g not confirmed by %g, half a step (%g) off", p.Name, mid, mid+step/2, step)
			}
			if confirmedBy(target, mid+step) {
				t.Errorf("%s %g confirmed by %g, the neighbouring step", p.Name, mid, mid+step)
			}
		} else {
			// A whole number without a step: off by one inside the
			// range, exact at its ends.
			if !confirmedBy(target, mid+1) {
				t.Errorf("%s %g not confirmed by %g, one off", p.Name, mid, mid+1)
			}
			if confirmedBy(target, mid+2) {
				t.Errorf("%s %g confirmed by %g, two off", p.Name, mid, mid+2)
			}
			if end, err := parse(p.Max); err == nil && confirmedBy(end, p.Max-1) {
				t.Errorf("%s %g, the end of its range, confirmed by %g", p.Name, p.Max, p.Max-1)
			}
		}
	case devices.KindEnum:
		for i, v := range p.Values {
			target, err := parse(v)
			if err != nil {
				t.Errorf("%s %q, one of the device's values: %v", p.Name, v, err)
				continue
			}
			if _, isState := target["state"]; isState && p.Name != "state" {
				// A parameter: never confirmed, so only the state is.
				if !devices.SatisfiedBy(c, caps, target, map[string]any{"state": "ON"}) {
					t.Errorf("%s %q with state ON not confirmed by state ON alone", p.Name, v)
				}
				continue
			}
			if !confirmedBy(target, v) {
				t.Errorf("%s %q not confirmed by its report", p.Name, v)
			}
			if other := p.Values[(i+1)%len(p.Values)]; other != v && confirmedBy(target, other) && !(c == devices.Cover && v == "STOP") {
				t.Errorf("%s %q confirmed by a report of %q", p.Name, v, other)
			}
		}
		_, err := parse("no_such_value")
		if devices.ReasonOf(err) != devices.ReasonInvalidValue || !strings.Contains(err.Error(), strings.Join(p.Values, ", ")) {
			t.Errorf("%s no_such_value: %v; want invalid_value listing %v", p.Name, err, p.Values)
		}
	case devices.KindBinary:
		on, off := p.ValueOn.(string), p.ValueOff.(string)
		for _, v := range []string{on, off} {
			target, err := parse(v)
			if err != nil {
				t.Errorf("%s %q: %v", p.Name, v, err)
				continue
			}
			if c == devices.Lock {
				// Never the optimistic echo: lock_state only.
				if confirmedBy(target, v) {
					t.Errorf("lock %s %q confirmed by the echo of state", p.Name, v)
				}
				word := map[string]string{"LOCK": "locked", "UNLOCK": "unlocked"}[v]
				if !devices.SatisfiedBy(c, caps, target, map[string]any{"state": v, "lock_state": word}) {
					t.Errorf("lock %s %q not confirmed by lock_state %s", p.Name, v, word)
				}
				continue
			}
			if !confirmedBy(target, v) {
				t.Errorf("%s %q not confirmed by its report", p.Name, v)
			}
			if p.Endpoint != "" && devices.SatisfiedBy(c, caps, target, map[string]any{p.Base: v}) {
				t.Errorf("%s %q confirmed by %s, another endpoint's key", p.Name, v, p.Base)
			}
		}
		if _, err := parse("HALF"); devices.ReasonOf(err) != devices.ReasonInvalidValue {
			t.Errorf("%s HALF: %v; want invalid_value", p.Name, err)
		}
	case devices.KindComposite:
		target, err := parse(map[string]any{"x": 0.3, "y": 0.3})
		if err != nil {
			t.Fatalf("%s xy: %v", p.Name, err)
		}
		if !confirmedBy(target, map[string]any{"x": 0.301, "y": 0.299}) {
			t.Errorf("%s xy 0.3, 0.3 not confirmed by 0.301, 0.299", p.Name)
		}
		if confirmedBy(target, map[string]any{"x": 0.6, "y": 0.3}) {
			t.Errorf("%s xy 0.3, 0.3 confirmed by red", p.Name)
		}
	default:
		t.Errorf("%s: settable %s not covered by this test", p.Name, p.Kind)
	}
}

// The adapter passes each configured device's capabilities from a trusted
// bridge/devices message, nil for one the list does not describe, and
// again only when they change.
func TestAdapterPassesCapabilitiesFromBridgeDevices(t *testing.T) {
	golden, _ := loadGolden(t)
	var list []BridgeDevice
	for _, d := range golden {
		switch d.Definition.Model {
		case "LED1545G12":
			d.FriendlyName = "Living Room/Lamp 1"
		case "YRD226HA2619":
			d.FriendlyName = "front door"
		default:
			continue
		}
		list = append(list, d.BridgeDevice)
	}
	payload, _ := json.Marshal(list)
	addr := startBroker(t)
	_, s, _ := startAdapter(t, addr, Options{})
	z2m := newBridge(t, addr)
	z2m.publish(t, "zigbee2mqtt/bridge/devices", string(payload))
	got := map[string]*devices.Capabilities{}
	for range 2 {
		c := s.next(t)
		if c.kind != "capabilities" {
			t.Fatalf("Sink got %+v; want capabilities", c)
		}
		got[c.name] = c.caps
	}
	if got["lamp"] == nil || got["lamp"].Model != "LED1545G12" || got["door"] == nil || got["door"].Model != "YRD226HA2619" {
		t.Fatalf("capabilities %v; want lamp LED1545G12 and door YRD226HA2619", got)
	}
	// The same list again changes nothing; the lamp removed clears its
	// capabilities.
	z2m.publish(t, "zigbee2mqtt/bridge/devices", string(payload))
	z2m.publish(t, "zigbee2mqtt/bridge/devices", `not json`)
	rest, _ := json.Marshal(list[1:])
	if list[0].FriendlyName != "Living Room/Lamp 1" {
		rest, _ = json.Marshal(list[:1])
	}
	z2m.publish(t, "zigbee2mqtt/bridge/devices", string(rest))
	if c := s.next(t); c.kind != "capabilities" || c.name != "lamp" || c.caps != nil {
		t.Errorf("Sink got %+v; want the lamp's capabilities cleared, nothing for the repeat or the unreadable list", c)
	}
}

// A bridge/devices message the bridge's account did not publish changes
// no device's capabilities.
func TestForgedBridgeDevicesIsDropped(t *testing.T) {
	golden, _ := loadGolden(t)
	d := golden[0]
	d.FriendlyName = "plug"
	payload, _ := json.Marshal([]BridgeDevice{d.BridgeDevice})
	addr := startBroker(t)
	a, s, _ := startAdapter(t, addr, Options{Publisher: "zigbee", StampProperty: "hearth-username"})
	p := testbroker.NewStampedPublisher(t, addr)
	p.Publish(t, "zigbee2mqtt/bridge/devices", string(payload), "mallory")
	p.Publish(t, "zigbee2mqtt/plug", `{"state":"ON"}`, "zigbee")
	if c := s.next(t); c.kind != "report" {
		t.Errorf("first call on the sink: %+v; want the bridge's report, no forged capabilities", c)
	}
	if a.Untrusted() != 1 {
		t.Errorf("Untrusted() = %d; want 1", a.Untrusted())
	}
}

func TestParseBridgeDevicesRefusesWhatIsNotAList(t *testing.T) {
	for _, p := range []string{``, `{}`, `"devices"`, `[1]`, `[{"definition":{"exposes":{}}}]`, `[{"friendly_name":3}]`, `[`} {
		if _, err := ParseBridgeDevices([]byte(p)); err == nil || !strings.Contains(err.Error(), "bridge/devices") {
			t.Errorf("ParseBridgeDevices(%q) error %v; want one naming bridge/devices", p, err)
		}
	}
	if _, err := ParseBridgeDevices(make([]byte, MaxBridgeDevicesBytes+1)); err == nil {
		t.Errorf("ParseBridgeDevices(over the limit) = nil error")
	}
}

// FuzzParseBridgeDevices checks that no bridge/devices payload panics the
// parser or the capabilities made from it, that a refusal says what is
// wrong, and that every property has a name and access bits within 0–7.
func FuzzParseBridgeDevices(f *testing.F) {
	_, payload := loadGolden(f)
	f.Add(payload)
	f.Add([]byte(`[{"friendly_name":"a","definition":{"model":"m","exposes":[{"type":"switch","features":[{"type":"binary","property":"state_l1","endpoint":"l1","access":7,"value_on":"ON","value_off":"OFF"}]}]}}]`))
	f.Add([]byte(`[{"definition":{"exposes":[{"type":"numeric","property":"brightness","access":9,"value_min":10,"value_max":1,"value_step":-1}]}}]`))
	f.Add([]byte(`[{"definition":{"exposes":[{"type":"composite","property":"color","access":7,"features":[{"property":"x"},{"type":"light","features":[{"features":[]}]}]}]}}]`))
	f.Add([]byte(`[{"definition":null},{"definition":{"exposes":null}},{}]`))
	f.Fuzz(func(t *testing.T, payload []byte) {
		list, err := ParseBridgeDevices(payload)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "bridge/devices") {
				t.Fatalf("error %q does not say it is about bridge/devices", err)
			}
			return
		}
		for _, d := range list {
			caps := d.Definition.Capabilities()
			for _, n := range caps.Names() {
				p, ok := caps.Property(n)
				if !ok || p.Name == "" || p.Base == "" || p.Access > 7 {
					t.Fatalf("property %q = %+v", n, p)
				}
				if p.HasMin && p.HasMax && p.Min > p.Max {
					t.Fatalf("property %q has an empty range %g–%g", n, p.Min, p.Max)
				}
			}
			for _, c := range devices.Classes {
				_, _ = devices.ParseCommandFor(c, caps, []byte(`{"state":"ON","brightness":255,"state_l1":"OFF","color":{"h":1,"s":2}}`))
				_ = devices.SatisfiedBy(c, caps, devices.Target{"brightness": 3.0, "state_l1": "ON"}, map[string]any{"brightness": 2.0})
			}
		}
	})
}

// FuzzParseCommandForGoldenDevices checks the intake with real devices'
// capabilities: no panic, a rejection is a *devices.Error, and an accepted
// target names only what the device can set, within its range (brightness
// 255 aside, which Zigbee2MQTT clamps), and re-validates to itself.
func FuzzParseCommandForGoldenDevices(f *testing.F) {
	golden, _ := loadGolden(f)
	f.Add(uint8(0), []byte(`{"state":"ON","brightness":255,"color":{"h":10,"s":20},"effect":"candle"}`))
	f.Add(uint8(10), []byte(`{"occupied_heating_setpoint":4.5,"system_mode":"heat"}`))
	f.Add(uint8(24), []byte(`{"state_l1":"on","state_l2":"OFF"}`))
	f.Add(uint8(14), []byte(`{"state":"unlock"}`))
	f.Add(uint8(16), []byte(`{"position":101}`))
	f.Fuzz(func(t *testing.T, which uint8, payload []byte) {
		d := golden[int(which)%len(golden)]
		caps := d.Definition.Capabilities()
		cmd, err := devices.ParseCommandFor(d.Class, caps, payload)
		if err != nil {
			if _, ok := err.(*devices.Error); !ok {
				t.Fatalf("error %v is a %T, want *devices.Error", err, err)
			}
			return
		}
		for k, v := range cmd.Target {
			p, ok := caps.Property(k)
			if !ok {
				if k == "transition" {
					continue
				}
				t.Fatalf("%s: accepted %q, which it does not have", d.Definition.Model, k)
			}
			if !p.Access.Has(devices.AccessSet) {
				t.Fatalf("%s: accepted %q, which it cannot set", d.Definition.Model, k)
			}
			if n, isNum := v.(float64); isNum && p.HasMin && p.HasMax && (n < p.Min || n > p.Max) && !(p.Base == "brightness" && n == 255) {
				t.Fatalf("%s: accepted %s %g outside %g–%g", d.Definition.Model, k, n, p.Min, p.Max)
			}
		}
		again, err := devices.ValidateFor(d.Class, caps, map[string]any(cmd.Target))
		if err != nil {
			t.Fatalf("%s: accepted %v does not re-validate: %v", d.Definition.Model, cmd.Target, err)
		}
		a, _ := json.Marshal(again)
		b, _ := json.Marshal(cmd.Target)
		if string(a) != string(b) {
			t.Fatalf("%s: %s re-validated to %s", d.Definition.Model, b, a)
		}
	})
}
