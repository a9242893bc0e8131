package simulator

import (
	"reflect"
	"testing"
)

func shellySim(t *testing.T, broker string, faults Faults) (*Sim, events) {
	t.Helper()
	sim, evs, _ := startSim(t, Options{Broker: broker, Faults: faults, Devices: []Device{
		{Name: "plus1pm-a/switch:0", Class: ClassSwitch, Protocol: ProtocolShelly},
		{Name: "dimmer-a", Class: ClassLight, Protocol: ProtocolShelly},
		{Name: "pro2pm-a/cover:0", Class: ClassCover, Protocol: ProtocolShelly},
		{Name: "plus1-g/switch:0/input:1", Class: ClassCover, Protocol: ProtocolShelly},
	}})
	return sim, evs
}

// A Switch.Set is answered on <src>/rpc with the request's id, and
// notified on <prefix>/events/rpc; the device is online, retained.
func TestShellySwitchSetAnsweredAndNotified(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "shelly/#")
	sim, evs := shellySim(t, broker, Faults{})
	if m := w.next(t, "shelly/plus1pm-a/online"); string(m.payload) != "true" {
		t.Fatalf("online = %q, want true", m.payload)
	}
	w.publish(t, "shelly/plus1pm-a/rpc", `{"id":41,"src":"shelly/me","method":"Switch.Set","params":{"id":0,"on":true}}`)
	r := w.next(t, "shelly/me/rpc").json(t)
	if !reflect.DeepEqual(r, map[string]any{"id": 41.0, "src": "plus1pm-a", "dst": "shelly/me", "result": map[string]any{"was_on": false}}) {
		t.Fatalf("response = %v, want id 41 from plus1pm-a with was_on false", r)
	}
	n := w.next(t, "shelly/plus1pm-a/events/rpc").json(t)
	if n["method"] != "NotifyStatus" || n["params"].(map[string]any)["switch:0"].(map[string]any)["output"] != true {
		t.Fatalf("notification = %v, want NotifyStatus switch:0 output true", n)
	}
	if ev := evs.next(t); ev.Device != "plus1pm-a/switch:0" || ev.Dropped || ev.Attrs["method"] != "Switch.Set" {
		t.Fatalf("SetEvent = %+v", ev)
	}
	if st := sim.State("plus1pm-a/switch:0"); st["state"] != "ON" {
		t.Fatalf("State = %v, want ON", st)
	}
}

// Bad requests are answered with Shelly's documented errors.
func TestShellyErrors(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "me/x/rpc")
	shellySim(t, broker, Faults{})
	for _, tc := range []struct {
		topic, req string
		code       float64
	}{
		{"shelly/plus1pm-a/rpc", `{"id":1,"src":"me/x","method":"Switch.Set","params":{"on":true}}`, -103},
		{"shelly/plus1pm-a/rpc", `{"id":2,"src":"me/x","method":"Switch.Set","params":{"id":7,"on":true}}`, -105},
		{"shelly/dimmer-a/rpc", `{"id":3,"src":"me/x","method":"Light.Set","params":{"id":0,"brightness":101}}`, -103},
		{"shelly/pro2pm-a/rpc", `{"id":4,"src":"me/x","method":"Cover.GoToPosition","params":{"id":0,"pos":"x"}}`, -103},
		{"shelly/plus1pm-a/rpc", `{"id":5,"src":"me/x","method":"Switch.Fly","params":{"id":0}}`, 404},
	} {
		w.publish(t, tc.topic, tc.req)
		r := w.next(t, "me/x/rpc").json(t)
		if e, _ := r["error"].(map[string]any); e == nil || e["code"] != tc.code {
			t.Errorf("%s: response %v, want error %v", tc.req, r, tc.code)
		}
	}
}

// A garage door pulsed opens (its contact opens at once); pulsed again it
// closes; the relay is switched off by toggle_after.
func TestShellyGarageDoorPulse(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "shelly/#")
	sim, _ := shellySim(t, broker, Faults{})
	w.publish(t, "shelly/plus1-g/rpc", `{"id":1,"src":"shelly/me","method":"Input.GetStatus","params":{"id":1}}`)
	wantState(t, w.next(t, "shelly/me/rpc").json(t)["result"].(map[string]any), map[string]any{"id": 1.0, "state": true})
	w.publish(t, "shelly/plus1-g/rpc", `{"id":2,"src":"shelly/me","method":"Switch.Set","params":{"id":0,"on":true,"toggle_after":1}}`)
	w.next(t, "shelly/me/rpc")
	var input map[string]any
	for input == nil {
		p := w.next(t, "shelly/plus1-g/events/rpc").json(t)["params"].(map[string]any)
		input, _ = p["input:1"].(map[string]any)
	}
	if input["state"] != false || sim.Pulses("plus1-g/switch:0/input:1") != 1 || sim.State("plus1-g/switch:0/input:1")["state"] != "OPEN" {
		t.Fatalf("after a pulse: input %v, pulses %d, state %v; want open, 1", input, sim.Pulses("plus1-g/switch:0/input:1"), sim.State("plus1-g/switch:0/input:1"))
	}
}

// DropFirst ignores the first set: no answer, no notification; the second
// is answered.
func TestShellyDropFirst(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "me/x/rpc")
	_, evs := shellySim(t, broker, Faults{DropFirst: 1})
	w.publish(t, "shelly/plus1pm-a/rpc", `{"id":1,"src":"me/x","method":"Switch.Set","params":{"id":0,"on":true}}`)
	if ev := evs.next(t); !ev.Dropped || ev.Reason != ReasonDropFirst {
		t.Fatalf("first set: %+v, want dropped drop_first", ev)
	}
	w.none(t, "me/x/rpc")
	w.publish(t, "shelly/plus1pm-a/rpc", `{"id":2,"src":"me/x","method":"Switch.Set","params":{"id":0,"on":true}}`)
	if r := w.next(t, "me/x/rpc").json(t); r["id"] != 2.0 {
		t.Fatalf("response %v, want id 2", r)
	}
}
