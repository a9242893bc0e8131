package esphome

import (
	"strings"
	"testing"

	"github.com/hearthd/hearth/devices"
)

// DecodeState never panics: a payload is a state or an error.
func FuzzDecodeState(f *testing.F) {
	for _, s := range []string{"ON", "off", `{"state":"ON","brightness":128}`, `{"state":"BLINK"}`, `{"brightness":300}`, "open", "LOCKED", "JAMMED", "", "{", `{"state":null}`} {
		for _, c := range []string{"switch", "light", "cover", "lock", "fan"} {
			f.Add(c, []byte(s))
		}
	}
	f.Fuzz(func(t *testing.T, component string, p []byte) {
		st, err := DecodeState(component, p)
		if (err == nil) == (st == nil) {
			t.Fatalf("DecodeState(%q, %q) = %v, %v; want a state or an error", component, p, st, err)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "esphome: ") {
			t.Fatalf("error %q does not say where it comes from", err)
		}
		if b, ok := st["brightness"].(float64); ok && (b < 0 || b > 254) {
			t.Fatalf("brightness %v outside Hearth's 0–254", b)
		}
	})
}

// DecodePosition never panics and reports only 0–100.
func FuzzDecodePosition(f *testing.F) {
	for _, s := range []string{"0", "42", "100", "101", "-1", "NaN", "1e3", "", "4 2"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		st, err := DecodePosition(p)
		if err != nil {
			return
		}
		if v := st["position"].(float64); v < 0 || v > 100 {
			t.Fatalf("position %v from %q", v, p)
		}
	})
}

// ParseAddress never panics; an address it takes reads back the same,
// and its topics are topics of one entity.
func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{"kitchen/switch/relay", "a/lock/front_door", "a/cover/x", "a/light/x", "a//x", "a/switch/X", "+/switch/x", "a/switch/x/y", ""} {
		for _, c := range []string{"switch", "light", "cover", "lock", "valve"} {
			f.Add(s, c)
		}
	}
	f.Fuzz(func(t *testing.T, s, class string) {
		c, err := devices.ParseClass(class)
		if err != nil {
			return
		}
		a, err := ParseAddress(s, c)
		if err != nil {
			if !strings.Contains(err.Error(), ErrBadAddress.Error()) {
				t.Fatalf("error %q does not wrap ErrBadAddress", err)
			}
			return
		}
		if a.String() != s {
			t.Fatalf("%q reads back as %q", s, a.String())
		}
		node, ent, sub, ok := Split(s + "/state")
		if !ok || node != a.Node || ent != a || sub != SubState {
			t.Fatalf("Split(%q/state) = %q %v %q %v", s, node, ent, sub, ok)
		}
	})
}

// The adapter's handler takes any topic and payload under its base topic
// without panicking.
func FuzzHandle(f *testing.F) {
	f.Add("esphome/kitchen/switch/relay/state", []byte("ON"), false)
	f.Add("esphome/garage/cover/door/position/state", []byte("40"), true)
	f.Add("esphome/kitchen/status", []byte("online"), false)
	f.Add("esphome/livingroom/light/ceiling/state", []byte(`{"state":"ON","brightness":-3}`), false)
	f.Add("esphome/frontdoor/lock/front_door/state", []byte("JAMMED"), false)
	f.Fuzz(func(t *testing.T, topic string, p []byte, retained bool) {
		_, c, _ := newAdapter(t)
		c.deliver(topic, string(p), retained)
	})
}
