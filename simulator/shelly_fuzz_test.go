package simulator

import (
	"testing"
)

// FuzzShellyRequest feeds any payload to a simulated Shelly's request
// handling: no panic, and an answer is either a result or an error code.
func FuzzShellyRequest(f *testing.F) {
	for _, s := range []string{
		`{"id":1,"src":"a","method":"Switch.Set","params":{"id":0,"on":true}}`,
		`{"id":2,"src":"a","method":"Light.Set","params":{"id":0,"brightness":101}}`,
		`{"id":3,"src":"a","method":"Cover.GoToPosition","params":{"id":0,"pos":40}}`,
		`{"id":4,"src":"a","method":"Switch.Set","params":{"id":1,"on":true,"toggle_after":1}}`,
		`{"id":5,"src":"a","method":"Shelly.GetStatus"}`,
		`{"id":"x","src":"a","method":"Input.GetStatus","params":{"id":1}}`,
	} {
		f.Add([]byte(s))
	}
	sim, err := New(Options{Broker: "tcp://127.0.0.1:1", Devices: []Device{
		{Name: "p/switch:0", Class: ClassSwitch, Protocol: ProtocolShelly},
		{Name: "p/light:0", Class: ClassLight, Protocol: ProtocolShelly},
		{Name: "p/cover:0", Class: ClassCover, Protocol: ProtocolShelly},
		{Name: "p/switch:1/input:1", Class: ClassCover, Protocol: ProtocolShelly},
	}})
	if err != nil {
		f.Fatal(err)
	}
	b := sim.shellies[0]
	f.Fuzz(func(t *testing.T, p []byte) {
		req, ok := parseRequest(p)
		if !ok {
			return
		}
		out, fire := sim.shellyCall(b, "shelly/p/rpc", p, false, req)
		fire()
		if !out.silent && out.errCode == 0 && out.errMsg != "" {
			t.Fatalf("%q: a result with an error message %q", p, out.errMsg)
		}
	})
}
