package devices

import (
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestValidateAcceptsEveryNumberForm(t *testing.T) {
	tests := []struct {
		name string
		raw  map[string]any
		want Target
	}{
		{"json.Number", map[string]any{"brightness": json.Number("128")}, Target{"brightness": 128.0}},
		{"float64", map[string]any{"brightness": 128.0}, Target{"brightness": 128.0}},
		{"int", map[string]any{"brightness": 128}, Target{"brightness": 128.0}},
		{"enum canonical", map[string]any{"state": " on "}, Target{"state": "ON"}},
		{"canonical target re-validates", map[string]any{"state": "ON", "brightness": 1.0, "transition": 2.5}, Target{"state": "ON", "brightness": 1.0, "transition": 2.5}},
	}
	for _, tc := range tests {
		got, err := Validate(Light, tc.raw)
		if err != nil {
			t.Errorf("%s: Validate(light, %v) error %v", tc.name, tc.raw, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Validate(light, %v) = %#v, want %#v", tc.name, tc.raw, got, tc.want)
		}
	}
}

// A negative zero is sent as +0 (reflect.DeepEqual cannot tell them apart,
// so check the sign bit and the encoding).
func TestValidateNormalizesNegativeZero(t *testing.T) {
	for _, raw := range []any{json.Number("-0"), json.Number("-0.0"), math.Copysign(0, -1)} {
		got, err := Validate(Light, map[string]any{"state": "OFF", "brightness": raw})
		if err != nil {
			t.Fatalf("Validate(brightness %v) error %v", raw, err)
		}
		b, ok := got["brightness"].(float64)
		if !ok || b != 0 || math.Signbit(b) {
			t.Errorf("Validate(brightness %v) brightness = %#v, want +0", raw, got["brightness"])
		}
		if enc, _ := json.Marshal(got); string(enc) != `{"brightness":0,"state":"OFF"}` {
			t.Errorf("Validate(brightness %v) encodes as %s, want {\"brightness\":0,\"state\":\"OFF\"}", raw, enc)
		}
	}
}

func TestValidateRejections(t *testing.T) {
	tests := []struct {
		name  string
		class Class
		raw   map[string]any
		want  Reason
	}{
		{"nil map", Light, nil, ReasonInvalidPayload},
		{"NaN float64", Light, map[string]any{"brightness": math.NaN()}, ReasonInvalidValue},
		{"+Inf float64", Light, map[string]any{"brightness": math.Inf(1)}, ReasonInvalidValue},
		{"int64 is not a known number type", Light, map[string]any{"brightness": int64(3)}, ReasonInvalidValue},
		{"malformed json.Number", Light, map[string]any{"brightness": json.Number("12x")}, ReasonInvalidValue},
		{"reserved key is not an attribute here", Light, map[string]any{"state": "ON", "op_id": "x"}, ReasonUnknownAttribute},
		{"TOGGLE in any attribute", Cover, map[string]any{"position": "toggle"}, ReasonRelativeCommand},
		{"suffix match even for unknown names", Switch, map[string]any{"foo_move": 1}, ReasonRelativeCommand},
		{"unsupported before relative", Valve, map[string]any{"state": "TOGGLE"}, ReasonUnsupported},
	}
	for _, tc := range tests {
		got, err := Validate(tc.class, tc.raw)
		if err == nil {
			t.Errorf("%s: Validate(%s, %v) = %v, want reason %s", tc.name, tc.class, tc.raw, got, tc.want)
			continue
		}
		if r := ReasonOf(err); r != tc.want {
			t.Errorf("%s: Validate(%s, %v) reason = %s (%v), want %s", tc.name, tc.class, tc.raw, r, err, tc.want)
		}
		if got != nil {
			t.Errorf("%s: Validate returned target %v with its error", tc.name, got)
		}
	}
}

// The unknown-attribute detail lists the attributes the class does know, so
// the caller can fix the command.
func TestValidateUnknownAttributeNamesTheKnownOnes(t *testing.T) {
	_, err := Validate(Cover, map[string]any{"speed": json.Number("1")})
	if got, want := ReasonOf(err), ReasonUnknownAttribute; got != want {
		t.Fatalf("reason = %s, want %s", got, want)
	}
	if got, want := err.(*Error).Detail, `cover has no attribute "speed" (known: position, state, tilt)`; got != want {
		t.Errorf("detail = %q, want %q", got, want)
	}
}

func TestTargetAttributesLeaveOutParameters(t *testing.T) {
	tests := []struct {
		target Target
		want   []string
	}{
		{Target{"state": "ON", "brightness": 1.0, "transition": 2.0}, []string{"brightness", "state"}},
		{Target{"transition": 2.0}, []string{}},
		{Target{}, []string{}},
		{nil, []string{}},
		{Target{"tilt": 1.0, "position": 2.0, "state": "OPEN"}, []string{"position", "state", "tilt"}},
	}
	for _, tc := range tests {
		if got := tc.target.Attributes(); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%v.Attributes() = %#v, want %#v", tc.target, got, tc.want)
		}
	}
}

func TestTargetCovers(t *testing.T) {
	tests := []struct {
		name         string
		newer, older Target
		want         bool
	}{
		{"same attribute", Target{"state": "OFF"}, Target{"state": "ON"}, true},
		{"superset", Target{"state": "ON", "brightness": 10.0}, Target{"state": "ON"}, true},
		{"subset", Target{"state": "ON"}, Target{"state": "ON", "brightness": 10.0}, false},
		{"disjoint", Target{"brightness": 10.0}, Target{"state": "ON"}, false},
		{"older only a parameter beyond state", Target{"state": "OFF"}, Target{"state": "ON", "transition": 3.0}, true},
		{"newer lacks older's state, has parameter", Target{"transition": 1.0}, Target{"state": "ON"}, false},
		{"empty older", Target{"state": "ON"}, Target{}, true},
		{"empty newer", Target{}, Target{"state": "ON"}, false},
	}
	for _, tc := range tests {
		if got := tc.newer.Covers(tc.older); got != tc.want {
			t.Errorf("%s: %v.Covers(%v) = %v, want %v", tc.name, tc.newer, tc.older, got, tc.want)
		}
	}
}

// decoded returns a report as encoding/json decodes it (float64 numbers).
func decoded(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// decodedNumbers returns a report decoded with UseNumber (json.Number).
func decodedNumbers(t *testing.T, s string) map[string]any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestSatisfied(t *testing.T) {
	tests := []struct {
		name   string
		class  Class
		target Target
		state  string
		want   bool
	}{
		// Lock: lock_state wins when present.
		{"lock LOCK by lock_state despite state UNLOCK", Lock, Target{"state": "LOCK"}, `{"state":"UNLOCK","lock_state":"locked"}`, true},
		{"lock LOCK not by state when bolt not fully locked", Lock, Target{"state": "LOCK"}, `{"state":"LOCK","lock_state":"not_fully_locked"}`, false},
		{"lock UNLOCK by lock_state", Lock, Target{"state": "UNLOCK"}, `{"state":"LOCK","lock_state":"unlocked"}`, true},
		{"lock UNLOCK not when lock_state locked", Lock, Target{"state": "UNLOCK"}, `{"state":"UNLOCK","lock_state":"locked"}`, false},
		{"lock UNLOCK not when lock_state not_fully_locked", Lock, Target{"state": "UNLOCK"}, `{"state":"UNLOCK","lock_state":"not_fully_locked"}`, false},
		{"lock LOCK: an echo of state without lock_state", Lock, Target{"state": "LOCK"}, `{"state":"LOCK"}`, false},
		{"lock UNLOCK: an echo of state without lock_state", Lock, Target{"state": "UNLOCK"}, `{"state":"UNLOCK"}`, false},
		{"lock LOCK by lock_state case-insensitive", Lock, Target{"state": "LOCK"}, `{"state":"lock","lock_state":"LOCKED"}`, true},
		{"lock LOCK not by UNLOCK state without lock_state", Lock, Target{"state": "LOCK"}, `{"state":"UNLOCK"}`, false},
		{"lock with neither", Lock, Target{"state": "LOCK"}, `{"battery":90}`, false},
		{"lock only lock_state", Lock, Target{"state": "LOCK"}, `{"lock_state":"locked"}`, true},

		// Cover.
		// As documented, state wins when present: Zigbee2MQTT reports
		// OPEN for any position above 0, so this is satisfied mid-travel
		// (see the report's doubts).
		{"lock_state compares without regard to case", Lock, Target{"state": "LOCK"}, `{"state":"LOCK","lock_state":"LOCKED"}`, true},
		{"lock_state null is unknown, never locked", Lock, Target{"state": "LOCK"}, `{"state":"LOCK","lock_state":null}`, false},
		{"lock_state null is unknown, never unlocked", Lock, Target{"state": "UNLOCK"}, `{"state":"UNLOCK","lock_state":null}`, false},
		{"cover OPEN mid-travel at position 40 is not open yet", Cover, Target{"state": "OPEN"}, `{"state":"OPEN","position":40,"moving":"UP"}`, false},
		{"cover OPEN: a reported position wins over state", Cover, Target{"state": "OPEN"}, `{"state":"CLOSE","position":100}`, true},
		{"cover OPEN by position 100 without state", Cover, Target{"state": "OPEN"}, `{"position":100}`, true},
		{"cover OPEN not by position 99", Cover, Target{"state": "OPEN"}, `{"position":99}`, false},
		{"cover CLOSE by position 0 without state", Cover, Target{"state": "CLOSE"}, `{"position":0}`, true},
		{"cover CLOSE not by position 100", Cover, Target{"state": "CLOSE"}, `{"position":100}`, false},
		{"cover CLOSE not by position 1", Cover, Target{"state": "CLOSE"}, `{"position":1}`, false},
		{"cover OPEN by position 100.0 without state", Cover, Target{"state": "OPEN"}, `{"position":100.0}`, true},
		{"cover CLOSE by state lower case", Cover, Target{"state": "CLOSE"}, `{"state":"close"}`, true},
		{"cover OPEN with nothing", Cover, Target{"state": "OPEN"}, `{"linkquality":80}`, false},
		{"cover STOP with moving STOP", Cover, Target{"state": "STOP"}, `{"moving":"STOP","position":40}`, true},
		{"cover STOP with moving stop lower case", Cover, Target{"state": "STOP"}, `{"moving":"stop"}`, true},
		{"cover STOP while moving UP", Cover, Target{"state": "STOP"}, `{"moving":"UP","position":40}`, false},
		{"cover STOP with no moving key", Cover, Target{"state": "STOP"}, `{"position":40}`, true},
		{"cover position by value", Cover, Target{"position": 40.0}, `{"position":40}`, true},
		{"cover position other value", Cover, Target{"position": 40.0}, `{"position":41}`, false},
		{"cover position and state both needed", Cover, Target{"state": "OPEN", "tilt": 50.0}, `{"state":"OPEN","tilt":40}`, false},

		// Light and switch: state and numbers.
		{"light state case-insensitive", Light, Target{"state": "ON"}, `{"state":"on"}`, true},
		{"light state other value", Light, Target{"state": "ON"}, `{"state":"OFF"}`, false},
		{"light state as a number", Light, Target{"state": "ON"}, `{"state":1}`, false},
		{"light brightness float64", Light, Target{"state": "ON", "brightness": 128.0}, `{"state":"ON","brightness":128}`, true},
		{"light brightness other value", Light, Target{"state": "ON", "brightness": 128.0}, `{"state":"ON","brightness":127}`, false},
		{"light brightness as string", Light, Target{"brightness": 128.0}, `{"brightness":"128"}`, false},
		{"light missing attribute", Light, Target{"state": "ON", "brightness": 128.0}, `{"state":"ON"}`, false},
		{"light transition ignored", Light, Target{"state": "ON", "transition": 3.0}, `{"state":"ON"}`, true},
		{"light transition ignored even if different", Light, Target{"state": "ON", "transition": 3.0}, `{"state":"ON","transition":0}`, true},
		{"switch state", Switch, Target{"state": "OFF"}, `{"state":"OFF","power":0}`, true},
		{"empty report", Switch, Target{"state": "OFF"}, `{}`, false},
	}
	for _, tc := range tests {
		for _, form := range []struct {
			name   string
			decode func(*testing.T, string) map[string]any
		}{{"float64", decoded}, {"json.Number", decodedNumbers}} {
			state := form.decode(t, tc.state)
			if got := Satisfied(tc.class, tc.target, state); got != tc.want {
				t.Errorf("%s (%s): Satisfied(%s, %v, %s) = %v, want %v", tc.name, form.name, tc.class, tc.target, tc.state, got, tc.want)
			}
		}
	}
}

// Satisfied takes reports built in code as well as decoded ones: int and
// float64 numbers compare by value.
func TestSatisfiedNumbersFromCode(t *testing.T) {
	tests := []struct {
		name  string
		state map[string]any
		want  bool
	}{
		{"int", map[string]any{"brightness": 128}, true},
		{"float64", map[string]any{"brightness": 128.0}, true},
		{"json.Number fraction", map[string]any{"brightness": json.Number("128.0")}, true},
		{"NaN", map[string]any{"brightness": math.NaN()}, false},
		{"nil value", map[string]any{"brightness": nil}, false},
		{"nil map", nil, false},
	}
	for _, tc := range tests {
		if got := Satisfied(Light, Target{"brightness": 128.0}, tc.state); got != tc.want {
			t.Errorf("%s: Satisfied(brightness 128, %v) = %v, want %v", tc.name, tc.state, got, tc.want)
		}
	}
}

// A target that names only parameters asks for no state, so any report
// satisfies it; Validate never produces such a target.
func TestSatisfiedWithoutStateAttributes(t *testing.T) {
	if !Satisfied(Light, Target{"transition": 1.0}, map[string]any{}) {
		t.Errorf("Satisfied(transition only, {}) = false, want true")
	}
}

// Regression: the refusal of a TOGGLE names the class's own absolute
// values (a lock was told to send ON or OFF).
func TestToggleRefusalNamesTheClassValues(t *testing.T) {
	for _, tc := range []struct {
		class Class
		raw   map[string]any
		want  string
	}{
		{Lock, map[string]any{"state": "TOGGLE"}, "state TOGGLE is a relative change; send LOCK or UNLOCK"},
		{Switch, map[string]any{"state": "toggle"}, "state TOGGLE is a relative change; send ON or OFF"},
		{Cover, map[string]any{"state": "TOGGLE"}, "state TOGGLE is a relative change; send OPEN or CLOSE or STOP"},
		{Cover, map[string]any{"position": "TOGGLE"}, "position TOGGLE is a relative change; send the absolute target"},
	} {
		_, err := Validate(tc.class, tc.raw)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%s, %v) = %v, want %q", tc.class, tc.raw, err, tc.want)
		}
	}
}
