package shelly

import (
	"errors"
	"testing"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/mqtt"
)

func FuzzParseResponse(f *testing.F) {
	for _, s := range []string{`{"id":1,"src":"a","result":{"was_on":true}}`, `{"id":1,"result":null}`, `{"id":2,"error":{"code":-103,"message":"x"}}`, `{"id":"x"}`, `{"id":1.5,"result":1}`, `[]`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		r, err := ParseResponse(p)
		if err != nil {
			if !errors.Is(err, ErrBadFrame) {
				t.Fatalf("error %v does not wrap ErrBadFrame", err)
			}
			return
		}
		if r.Error == nil && r.Result == nil {
			t.Fatalf("%q: a response with neither result nor error", p)
		}
	})
}

func FuzzParseNotification(f *testing.F) {
	for _, s := range []string{`{"method":"NotifyStatus","params":{"ts":1,"switch:0":{"output":true}}}`, `{"method":"NotifyEvent"}`, `{"params":[]}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		n, err := ParseNotification(p)
		if err != nil {
			if !errors.Is(err, ErrBadFrame) {
				t.Fatalf("error %v does not wrap ErrBadFrame", err)
			}
			return
		}
		if n.Method == "" || n.Components == nil {
			t.Fatalf("%q: %+v without method or components", p, n)
		}
	})
}

func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{"shellyplus1-a/switch:0", "x/switch:0/input:100", "x/cover:1", "/", "x/:", "x/switch:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, c := range []devices.Class{devices.Switch, devices.Light, devices.Cover, devices.Lock} {
			a, err := ParseAddress(s, c)
			if err != nil {
				if !errors.Is(err, ErrBadAddress) {
					t.Fatalf("error %v does not wrap ErrBadAddress", err)
				}
				continue
			}
			if b, err := ParseAddress(a.String(), c); err != nil || b != a {
				t.Fatalf("%q → %+v → %q → %+v, %v", s, a, a.String(), b, err)
			}
		}
	})
}

// FuzzHandle feeds any topic and payload to the adapter's message handler:
// no panic, and nothing but trusted frames of configured devices reaches
// the sink (here: any call names a configured device or the service).
func FuzzHandle(f *testing.F) {
	for _, s := range [][2]string{
		{"shelly/plug-1/events/rpc", `{"method":"NotifyStatus","params":{"switch:0":{"output":true}}}`},
		{"shelly/plug-1/online", "false"},
		{"shelly/hearth/wifi/rpc", `{"id":1,"result":null}`},
		{"shelly/plus1-1/status/input:1", `{"state":false}`},
		{"shelly/pro2pm-1/events/rpc", `{"method":"NotifyFullStatus","params":{"cover:0":{"state":"open","current_pos":null}}}`},
	} {
		f.Add(s[0], []byte(s[1]), false)
	}
	a := New(nil, Options{Service: "wifi", Devices: testDevices})
	s := &countSink{}
	a.sink = s
	known := map[string]bool{"wifi": true}
	for _, d := range testDevices {
		known[d.ID] = true
	}
	f.Fuzz(func(t *testing.T, topic string, payload []byte, retained bool) {
		a.handle(mqtt.Message{Topic: topic, Payload: payload, Retained: retained})
		for _, n := range s.take() {
			if !known[n] {
				t.Fatalf("a sink call for %q, which is not configured", n)
			}
		}
	})
}

type countSink struct{ names []string }

func (c *countSink) take() []string { n := c.names; c.names = nil; return n }
func (c *countSink) Report(d string, _ map[string]any, _ bool) {
	c.names = append(c.names, d)
}
func (c *countSink) Availability(d string, _ bool)   { c.names = append(c.names, d) }
func (c *countSink) BridgeState(s string, _, _ bool) { c.names = append(c.names, s) }
func (c *countSink) SendFailed(d, _ string, _ error) { c.names = append(c.names, d) }
