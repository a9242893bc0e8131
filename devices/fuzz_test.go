package devices

import (
	"reflect"
	"testing"
	"unicode/utf8"
)

// FuzzParseCommand checks that ParseCommand never panics, that every
// rejection is an *Error with a known reason, and that every accepted
// command is canonical: its Target re-validates for the same class to an
// equal Target, its values are strings or float64, and its reserved fields
// are within the contract's limits.
func FuzzParseCommand(f *testing.F) {
	seeds := []struct {
		class   Class
		payload string
	}{
		{Light, "on"},
		{Light, `"off"`},
		{Light, `{"state":"ON","brightness":128,"transition":0.5}`},
		{Light, `{"state":"ON","op_id":"op-1","ttl":"30s","issued_at":"2026-11-29T20:00:00+01:00"}`},
		{Light, `{"brightness_step":10}`},
		{Light, `{"brightness":254.0}`},
		{Light, `{"brightness":-0}`},
		{Light, `{"color_temp":1e2}`},
		{Light, `{"state":"ON","ttl":0.5}`},
		{Light, `{"state":"ON"}}`},
		{Light, `[1]`},
		{Switch, "TOGGLE"},
		{Lock, "LOCK"},
		{Lock, `{"state":"unlock","ttl":2592000}`},
		{Cover, `{"position":100,"tilt":0,"state":"stop"}`},
		{Cover, `{"position":50,"tilt":0}`},
		{Light, `{"color":{"x":0.3,"y":0.3},"effect":"blink"}`},
		{Light, `{"color":{"h":120,"s":100}}`},
		{Light, `{"color":{"hue":120,"saturation":100},"brightness":255}`},
		{Light, `{"color":{"r":255,"g":0,"b":0}}`},
		{Light, `{"color":{"hex":"#FF8800"},"state":"ON"}`},
		{Climate, `{"system_mode":"HEAT","preset":"eco","occupied_heating_setpoint":21.5}`},
		{Sensor, "ON"},
	}
	for _, s := range seeds {
		f.Add(string(s.class), []byte(s.payload))
	}
	f.Fuzz(func(t *testing.T, class string, payload []byte) {
		c := Class(class)
		cmd, err := ParseCommand(c, payload)
		if err != nil {
			e, ok := err.(*Error)
			if !ok {
				t.Fatalf("ParseCommand(%q, %q) error %v is a %T, want *Error", c, payload, err, err)
			}
			if !knownRejection[e.Reason] {
				t.Fatalf("ParseCommand(%q, %q) reason %q is not a rejection reason", c, payload, e.Reason)
			}
			return
		}
		if len(payload) > MaxPayloadBytes {
			t.Fatalf("ParseCommand accepted %d bytes, over MaxPayloadBytes", len(payload))
		}
		if cmd.OpID != "" && (len(cmd.OpID) > MaxOpIDBytes || !utf8.ValidString(cmd.OpID)) {
			t.Fatalf("ParseCommand(%q, %q) accepted op_id %q", c, payload, cmd.OpID)
		}
		if cmd.TTL < 0 || cmd.TTL > MaxTTL {
			t.Fatalf("ParseCommand(%q, %q) accepted TTL %v", c, payload, cmd.TTL)
		}
		if len(cmd.Target.Attributes()) == 0 {
			t.Fatalf("ParseCommand(%q, %q) accepted a target without state attributes: %v", c, payload, cmd.Target)
		}
		for k, v := range cmd.Target {
			switch v := v.(type) {
			case string, float64:
			case map[string]any:
				// Only a light's color is an object, of numbers or its hex string.
				if c != Light || k != "color" {
					t.Fatalf("ParseCommand(%q, %q) target %s is an object; only a light's color is", c, payload, k)
				}
				if _, _, ok := ColorXY(v); !ok {
					t.Fatalf("ParseCommand(%q, %q) color %v has no xy", c, payload, v)
				}
				for ck, cv := range v {
					switch cv.(type) {
					case float64:
					case string:
						if ck != "hex" {
							t.Fatalf("ParseCommand(%q, %q) color %s is a string", c, payload, ck)
						}
					default:
						t.Fatalf("ParseCommand(%q, %q) color %s is a %T, want float64", c, payload, ck, cv)
					}
				}
			default:
				t.Fatalf("ParseCommand(%q, %q) target %s is a %T, want string, float64 or a light's color object", c, payload, k, v)
			}
		}
		again, err := Validate(c, map[string]any(cmd.Target))
		if err != nil {
			t.Fatalf("ParseCommand(%q, %q) = %v, which does not re-validate: %v", c, payload, cmd.Target, err)
		}
		if !reflect.DeepEqual(again, cmd.Target) {
			t.Fatalf("ParseCommand(%q, %q) = %#v, re-validated to %#v", c, payload, cmd.Target, again)
		}
	})
}

// knownRejection lists the reasons ParseCommand may reject a payload with.
var knownRejection = map[Reason]bool{
	ReasonInvalidPayload:   true,
	ReasonPayloadTooLarge:  true,
	ReasonUnknownAttribute: true,
	ReasonInvalidValue:     true,
	ReasonOutOfRange:       true,
	ReasonRelativeCommand:  true,
	ReasonInvalidOpID:      true,
	ReasonInvalidTTL:       true,
	ReasonInvalidIssuedAt:  true,
	ReasonUnsupported:      true,
}

// FuzzPeekOpID checks that PeekOpID never panics and returns "" or a
// valid op_id.
func FuzzPeekOpID(f *testing.F) {
	for _, s := range []string{`{"op_id":"unlock-1"}`, `{"OP_ID":"unlock-1"}`, `{"op_id":1}`, `{"op_id":"has space"}`, `[{"op_id":"x"}]`, `not json`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		if id := PeekOpID(payload); id != "" && ValidOpID(id) != nil {
			t.Fatalf("PeekOpID(%q) = %q, not a valid op_id: %v", payload, id, ValidOpID(id))
		}
	})
}
