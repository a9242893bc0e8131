package homie

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/mqtt"
)

func FuzzParseState(f *testing.F) {
	for _, s := range []string{"ready", "lost", "sleeping", "", "Ready", "ready\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		s, err := ParseState(p)
		if err != nil {
			if !errors.Is(err, ErrBadState) {
				t.Fatalf("error %v does not wrap ErrBadState", err)
			}
			return
		}
		if string(s) != string(p) {
			t.Fatalf("%q read as %q", p, s)
		}
	})
}

func FuzzParseValue(f *testing.F) {
	for _, s := range []string{"true", "false", "21.5", "-20", "1e3", "-", "", "NaN", "Infinity", "0x10", " 1", "9223372036854775808"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		if b, err := ParseBool(p); err == nil && (string(p) == "true") != b {
			t.Fatalf("%q read as %v", p, b)
		} else if err != nil && (string(p) == "true" || string(p) == "false") {
			t.Fatalf("%q refused: %v", p, err)
		}
		for _, dt := range []string{Integer, Float} {
			v, err := ParseNumber(p, dt)
			if err != nil {
				if !strings.HasPrefix(err.Error(), "homie: ") {
					t.Fatalf("unclear error %v", err)
				}
				continue
			}
			if math.IsNaN(v) || math.IsInf(v, 0) || (dt == Integer && v != math.Trunc(v)) {
				t.Fatalf("%q as %s = %v", p, dt, v)
			}
		}
	})
}

func FuzzParseRange(f *testing.F) {
	for _, s := range []string{"0:100", "-20:120", ":10", "0:", "2:6:2", ":", "10:1", "a:b", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRange(s, Range{Min: 0, Max: 100})
		if err == nil && !(r.Min < r.Max) {
			t.Fatalf("%q read as %+v", s, r)
		}
	})
}

func FuzzParseDescription(f *testing.F) {
	for _, s := range []string{`{"homie":"5.0","version":1,"nodes":{"n":{"properties":{"p":{"datatype":"boolean","settable":true}}}}}`, `{"homie":"4.0"}`, `{"homie":"5.0","version":1,"nodes":{"N":{}}}`, `[]`, `null`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		d, err := ParseDescription(p)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "homie: ") {
				t.Fatalf("unclear error %v", err)
			}
			return
		}
		for k, m := range d.Props {
			node, prop, _ := strings.Cut(k, "/")
			if ValidID(node) != nil || ValidID(prop) != nil || m.Datatype == "" {
				t.Fatalf("%q: property %q %+v accepted", p, k, m)
			}
		}
	})
}

func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{"plug-1/relay/on", "kitchen-light/light/power,brightness", "a/b/c,c", "/", "a//b", "a/b/c,", "-a/b/c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range []devices.Class{devices.Switch, devices.Light, devices.Lock} {
			a, err := ParseAddress(s, c)
			if err != nil {
				if c != devices.Lock && !errors.Is(err, ErrBadAddress) {
					t.Fatalf("error %v does not wrap ErrBadAddress", err)
				}
				continue
			}
			if b, err := ParseAddress(a.String(), c); err != nil || b != a {
				t.Fatalf("%q → %+v does not read back: %+v, %v", s, a, b, err)
			}
		}
	})
}

func FuzzParseBase(f *testing.F) {
	for _, s := range []string{"homie", "homie/5", "homie/4", "a/b/c", "", "Homie"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseBase(s)
		if err == nil && (r.Version != 4 && r.Version != 5 || strings.ContainsAny(r.Topic, "+#$")) {
			t.Fatalf("%q read as %+v", s, r)
		}
	})
}

// Any message under the root, whatever its topic and payload, is handled
// without a panic.
func FuzzHandle(f *testing.F) {
	for _, s := range [][2]string{{"homie/plug-1/$state", "lost"}, {"homie/plug-1/relay/on", "true"}, {"homie/kitchen-light/light/brightness", "1e400"}, {"homie/kitchen-light/light/brightness/$format", "5:5"}, {"homie/5/plug-1/$description", "{}"}} {
		f.Add(s[0], []byte(s[1]), false)
	}
	f.Fuzz(func(t *testing.T, topic string, p []byte, retained bool) {
		for _, base := range []string{"homie", "homie/5"} {
			a := New(nil, Options{Service: "s", BaseTopic: base, Devices: testDevices})
			a.sink = &recorder{}
			a.handle(mqtt.Message{Topic: topic, Payload: p, Retained: retained})
			a.handle(mqtt.Message{Topic: base + "/" + strings.TrimPrefix(topic, "homie/"), Payload: p, Retained: retained})
		}
	})
}
