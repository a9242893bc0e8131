package zwavejs

// Review of issue 4: the Z-Wave JS UI adapter's topic parsing and
// encoding, driven through handle and encode directly.

import (
	"maps"
	"testing"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/mqtt"
)

type r4Sink struct{ reports []call }

func (s *r4Sink) Report(device string, state map[string]any, retained bool) {
	s.reports = append(s.reports, call{kind: "report", name: device, state: maps.Clone(state), retained: retained})
}
func (s *r4Sink) NodeStatus(device string, status devices.NodeStatus, retained bool) {
	s.reports = append(s.reports, call{kind: "node", name: device, status: status, retained: retained})
}
func (s *r4Sink) BridgeState(service string, online, retained bool) {
	s.reports = append(s.reports, call{kind: "bridge", name: service, online: online, retained: retained})
}

func r4Adapter(devs ...devices.Device) (*Adapter, *r4Sink) {
	a := New(nil, Options{Service: "zw", Devices: devs})
	s := &r4Sink{}
	a.sink = s
	return a, s
}

// Hearth writes endpoint 0 (37/0/targetValue) and ZWAVE.md says the
// confirming value is currentValue; but decode ignores the endpoint, so
// the currentValue of another endpoint of a multi-channel node (relay 2 of
// a double switch) reports the device ON and confirms an ON that endpoint
// 0 never took.
func TestReview4OtherEndpointDoesNotReportTheDevice(t *testing.T) {
	a, s := r4Adapter(devices.Device{ID: "porch", Class: devices.Switch})
	a.handle(mqtt.Message{Topic: "zwave/porch/37/2/currentValue", Payload: []byte(`{"time":1,"value":true}`)})
	for _, c := range s.reports {
		if c.kind == "report" && len(c.state) > 0 {
			t.Errorf("endpoint 2's currentValue reported %v for porch, whose writes go to endpoint 0", c.state)
		}
	}
}

// ZWAVE.md: an address is "<location>/<node> or <node>, as in the
// gateway's topics", and config accepts a node "hall" beside a node
// "back_door" in location "hall". handle tries the one-level address
// first and returns on its match: every value of hall/back_door goes to
// the node "hall", where it reads as nothing, and the lock never reports.
func TestReview4NodeNamedLikeALocation(t *testing.T) {
	a, s := r4Adapter(
		devices.Device{ID: "hall", Class: devices.Switch, Address: "hall"},
		devices.Device{ID: "back_door", Class: devices.Lock, Address: "hall/back_door"},
	)
	a.handle(mqtt.Message{Topic: "zwave/hall/back_door/98/0/currentMode", Payload: []byte(`{"time":1,"value":255}`)})
	var got []call
	for _, c := range s.reports {
		if c.name == "back_door" {
			got = append(got, c)
		}
	}
	if len(got) != 1 || got[0].state["lock_state"] != "locked" {
		t.Errorf("zwave/hall/back_door/98/0/currentMode 255: back_door got %+v (all Sink calls %+v); want one report locked", got, s.reports)
	}
	a.handle(mqtt.Message{Topic: "zwave/hall/back_door/status", Payload: []byte(`{"time":1,"value":true,"status":"Alive","nodeId":7}`)})
	if id, ok := a.nodeID(devices.Device{ID: "back_door", Class: devices.Lock, Address: "hall/back_door"}); !ok || id != 7 {
		t.Errorf("back_door's node ID after its status with nodeId 7: %d, %v; want 7 (reads need it)", id, ok)
	}
}

// A climate target naming both setpoints with different values (both are
// valid attributes of the class) is written as current_heating_setpoint
// only; the node then reports both as that value, so occupied 25 is never
// reached: the command cannot succeed, yet it is sent and retried instead
// of failing at once as a target the adapter cannot write.
func TestReview4ConflictingSetpointsAreNotWritable(t *testing.T) {
	ws, _, err := encode(devices.Climate, devices.Target{"current_heating_setpoint": 20.0, "occupied_heating_setpoint": 25.0})
	if err == nil {
		t.Errorf("encode of setpoints 20 and 25 (one Z-Wave setpoint) wrote %+v; want a permanent error", ws)
	}
}
