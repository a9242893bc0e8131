package devices

import (
	"encoding/json"
	"strings"
	"testing"
)

// What Home Assistant's MQTT JSON light and climate send is taken:
// brightness on its 0–255 scale, effect, system_mode and preset.
func TestValidateTakesWhatHomeAssistantSends(t *testing.T) {
	tests := []struct {
		class   Class
		payload string
		want    Target
	}{
		{Light, `{"state":"ON","brightness":255}`, Target{"state": "ON", "brightness": 255.0}},
		{Light, `{"state":"ON","effect":"Blink"}`, Target{"state": "ON", "effect": "blink"}},
		{Climate, `{"system_mode":"HEAT"}`, Target{"system_mode": "heat"}},
		{Climate, `{"preset":"eco","occupied_heating_setpoint":21.5}`, Target{"preset": "eco", "occupied_heating_setpoint": 21.5}},
	}
	for _, tc := range tests {
		cmd, err := ParseCommand(tc.class, []byte(tc.payload))
		if err != nil {
			t.Errorf("ParseCommand(%s, %s) error %v", tc.class, tc.payload, err)
			continue
		}
		b1, _ := json.Marshal(cmd.Target)
		b2, _ := json.Marshal(tc.want)
		if string(b1) != string(b2) {
			t.Errorf("ParseCommand(%s, %s) = %s, want %s", tc.class, tc.payload, b1, b2)
		}
	}
}

func TestValidateRefusals(t *testing.T) {
	tests := []struct {
		name    string
		class   Class
		payload string
		reason  Reason
		detail  string // a part of the detail
	}{
		{"effect alone is no target state", Light, `{"effect":"blink"}`, ReasonInvalidPayload, "only parameters"},
		{"an effect no Zigbee2MQTT light has", Light, `{"state":"ON","effect":"disco"}`, ReasonInvalidValue, "blink"},
		{"color_mode is reported only", Light, `{"color_mode":"xy"}`, ReasonUnknownAttribute, "reported by the light"},
		{"a system_mode Zigbee2MQTT does not name", Climate, `{"system_mode":"warm"}`, ReasonInvalidValue, "heat"},
	}
	for _, tc := range tests {
		_, err := ParseCommand(tc.class, []byte(tc.payload))
		if err == nil || ReasonOf(err) != tc.reason || !strings.Contains(err.(*Error).Detail, tc.detail) {
			t.Errorf("%s: ParseCommand(%s, %s) = %v, want %s mentioning %q", tc.name, tc.class, tc.payload, err, tc.reason, tc.detail)
		}
	}
}

// A cover's state with a position is refused as contradictory: it could
// never be confirmed. Tilt with a state is not.
func TestCoherentRefusesACoversStateWithAPosition(t *testing.T) {
	for _, p := range []string{`{"state":"OPEN","position":50}`, `{"state":"STOP","position":50}`, `{"state":"CLOSE","position":0}`} {
		cmd, err := ParseCommand(Cover, []byte(p))
		if err != nil {
			t.Fatalf("ParseCommand(%s) error %v", p, err)
		}
		err = Coherent(Cover, cmd.Target)
		if ReasonOf(err) != ReasonInvalidValue || err == nil || !strings.Contains(err.Error(), "contradict") {
			t.Errorf("Coherent(%s) = %v; want invalid_value saying they contradict", p, err)
		}
	}
	for _, tc := range []struct {
		c Class
		t Target
	}{{Cover, Target{"state": "OPEN", "tilt": 50.0}}, {Cover, Target{"position": 50.0}}, {Light, Target{"state": "ON", "brightness": 3.0}}} {
		if err := Coherent(tc.c, tc.t); err != nil {
			t.Errorf("Coherent(%s, %v) = %v; want nil", tc.c, tc.t, err)
		}
	}
}

// Effect is a parameter, like transition: sent, never confirmed nor
// superseded.
func TestEffectIsAParameter(t *testing.T) {
	target := Target{"state": "ON", "effect": "blink"}
	if got := target.Attributes(); len(got) != 1 || got[0] != "state" {
		t.Errorf("Attributes() = %v, want [state]", got)
	}
	if !Satisfied(Light, target, map[string]any{"state": "ON"}) {
		t.Errorf("state ON with an effect not confirmed by a report of state ON")
	}
}

// Brightness 255 is sent as asked and Zigbee2MQTT sends 254: the report of
// 254 confirms it, without capabilities too.
func TestBrightness255IsConfirmedByTheClampedValue(t *testing.T) {
	target := Target{"state": "ON", "brightness": 255.0}
	if !Satisfied(Light, target, map[string]any{"state": "ON", "brightness": 254.0}) {
		t.Errorf("brightness 255 not confirmed by 254")
	}
	if Satisfied(Light, target, map[string]any{"state": "ON", "brightness": 253.0}) {
		t.Errorf("brightness 255 confirmed by 253 without capabilities (exact match wanted)")
	}
}

// A two-gang switch as Zigbee2MQTT describes it (Tuya TS0002's shape).
func twoGang() *Capabilities {
	return NewCapabilities("TS0002", "Tuya", "2 gang switch", []Property{
		{Name: "state_l1", Base: "state", Endpoint: "l1", Kind: KindBinary, Access: 7, ValueOn: "ON", ValueOff: "OFF"},
		{Name: "state_l2", Base: "state", Endpoint: "l2", Kind: KindBinary, Access: 7, ValueOn: "ON", ValueOff: "OFF"},
		{Name: "linkquality", Kind: KindNumeric, Access: AccessPublished},
	})
}

// A dimmer whose capabilities narrow the class: a narrower color_temp
// range, a brightness read-only property to check access, a stepped
// number.
func dimmer() *Capabilities {
	return NewCapabilities("LED1545G12", "IKEA", "white spectrum", []Property{
		{Name: "state", Kind: KindBinary, Access: 7, ValueOn: "ON", ValueOff: "OFF"},
		{Name: "brightness", Kind: KindNumeric, Access: 7, Min: 0, Max: 254, HasMin: true, HasMax: true},
		{Name: "color_temp", Kind: KindNumeric, Access: 7, Min: 250, Max: 454, HasMin: true, HasMax: true, Unit: "mired"},
		{Name: "effect", Kind: KindEnum, Access: AccessSet, Values: []string{"blink", "breathe"}},
		{Name: "color", Kind: KindComposite, Access: AccessPublished, Features: []string{"x", "y"}},
	})
}

func TestValidateForUsesTheDevicesCapabilities(t *testing.T) {
	tests := []struct {
		name    string
		class   Class
		caps    *Capabilities
		payload string
		reason  Reason // "" for accepted
		detail  string
	}{
		{"an endpoint's state is addressable", Switch, twoGang(), `{"state_l2":"on"}`, "", ""},
		{"state alone is not on a two-gang switch", Switch, twoGang(), `{"state":"ON"}`, ReasonUnknownAttribute, "settable: state_l1, state_l2"},
		{"without capabilities state_l1 is unknown", Switch, nil, `{"state_l1":"ON"}`, ReasonUnknownAttribute, "known: state"},
		{"color_temp inside the device's range", Light, dimmer(), `{"color_temp":300}`, "", ""},
		{"color_temp outside the device's range", Light, dimmer(), `{"color_temp":200}`, ReasonOutOfRange, "250–454"},
		{"the range names the device", Light, dimmer(), `{"color_temp":200}`, ReasonOutOfRange, "IKEA LED1545G12"},
		{"brightness 255 on the 0–254 scale", Light, dimmer(), `{"brightness":255}`, "", ""},
		{"an effect the device lacks", Light, dimmer(), `{"state":"ON","effect":"okay"}`, ReasonInvalidValue, "blink, breathe"},
		{"color it cannot set", Light, dimmer(), `{"color":{"x":0.3,"y":0.3}}`, ReasonUnknownAttribute, "access is published"},
		{"transition needs no capability", Light, dimmer(), `{"state":"ON","transition":1}`, "", ""},
	}
	for _, tc := range tests {
		_, err := ParseCommandFor(tc.class, tc.caps, []byte(tc.payload))
		switch {
		case tc.reason == "" && err != nil:
			t.Errorf("%s: ParseCommandFor(%s) error %v, want accepted", tc.name, tc.payload, err)
		case tc.reason != "" && (err == nil || ReasonOf(err) != tc.reason || !strings.Contains(err.(*Error).Detail, tc.detail)):
			t.Errorf("%s: ParseCommandFor(%s) = %v, want %s mentioning %q", tc.name, tc.payload, err, tc.reason, tc.detail)
		}
	}
}

func TestSatisfiedByRoundsAsTheDeviceDoes(t *testing.T) {
	setpoint := NewCapabilities("TRVZB", "SONOFF", "TRV", []Property{
		{Name: "occupied_heating_setpoint", Kind: KindNumeric, Access: 7, Min: 4, Max: 35, HasMin: true, HasMax: true, Step: 0.5},
	})
	tests := []struct {
		name   string
		class  Class
		caps   *Capabilities
		target Target
		state  map[string]any
		want   bool
	}{
		{"brightness 1 reported as 2, within one step", Light, dimmer(), Target{"brightness": 1.0}, map[string]any{"brightness": 2.0}, true},
		{"brightness 1 reported as 3, two steps off", Light, dimmer(), Target{"brightness": 1.0}, map[string]any{"brightness": 3.0}, false},
		{"brightness 1 reported as 2 without capabilities", Light, nil, Target{"brightness": 1.0}, map[string]any{"brightness": 2.0}, false},
		{"setpoint 21.3 reported as 21.5 (step 0.5)", Climate, setpoint, Target{"occupied_heating_setpoint": 21.3}, map[string]any{"occupied_heating_setpoint": 21.5}, true},
		{"setpoint 21 reported as 22", Climate, setpoint, Target{"occupied_heating_setpoint": 21.0}, map[string]any{"occupied_heating_setpoint": 22.0}, false},
		{"a target above a narrower range clamps to it", Light, dimmer(), Target{"color_temp": 500.0}, map[string]any{"color_temp": 454.0}, true},
		{"an endpoint's state by its own key", Switch, twoGang(), Target{"state_l1": "ON"}, map[string]any{"state_l1": "ON", "state_l2": "OFF"}, true},
		{"an endpoint's state not by another's", Switch, twoGang(), Target{"state_l1": "ON"}, map[string]any{"state_l1": "OFF", "state_l2": "ON"}, false},
	}
	for _, tc := range tests {
		if got := SatisfiedBy(tc.class, tc.caps, tc.target, tc.state); got != tc.want {
			t.Errorf("%s: SatisfiedBy(%v, %v) = %v, want %v", tc.name, tc.target, tc.state, got, tc.want)
		}
	}
}

// A lock is never confirmed by the optimistic echo of state, with
// capabilities known too.
func TestSatisfiedByKeepsTheLockRule(t *testing.T) {
	caps := NewCapabilities("YRD226HA2619", "Yale", "lock", []Property{
		{Name: "state", Kind: KindBinary, Access: 7, ValueOn: "LOCK", ValueOff: "UNLOCK"},
		{Name: "lock_state", Kind: KindEnum, Access: AccessPublished, Values: []string{"not_fully_locked", "locked", "unlocked"}},
	})
	if SatisfiedBy(Lock, caps, Target{"state": "UNLOCK"}, map[string]any{"state": "UNLOCK"}) {
		t.Errorf("UNLOCK confirmed by the echo of state")
	}
	if !SatisfiedBy(Lock, caps, Target{"state": "UNLOCK"}, map[string]any{"state": "UNLOCK", "lock_state": "unlocked"}) {
		t.Errorf("UNLOCK not confirmed by lock_state unlocked")
	}
}

// Two exposes of one property (a light's color_xy and color_hs) become one.
func TestNewCapabilitiesMergesOneProperty(t *testing.T) {
	c := NewCapabilities("m", "v", "", []Property{
		{Name: "color", Kind: KindComposite, Access: AccessPublished, Features: []string{"y", "x"}},
		{Name: "color", Kind: KindComposite, Access: AccessSet | AccessGet, Features: []string{"saturation", "hue"}},
	})
	p, ok := c.Property("color")
	if !ok || p.Access != 7 || strings.Join(p.Features, ",") != "hue,saturation,x,y" {
		t.Errorf("color = %+v, %v; want access 7 and features hue,saturation,x,y", p, ok)
	}
	if got := c.Names(); len(got) != 1 {
		t.Errorf("Names() = %v, want [color]", got)
	}
}
