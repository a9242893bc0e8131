package zwavejs

// How the Z-Wave JS UI adapter maps topics to devices and targets to
// writes, driven through handle and encode directly.

import (
	"maps"
	"testing"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/mqtt"
)

// recordingSink records every Sink call of the adapter, in order.
type recordingSink struct{ reports []call }

func (s *recordingSink) Report(device string, state map[string]any, retained bool) {
	s.reports = append(s.reports, call{kind: "report", name: device, state: maps.Clone(state), retained: retained})
}
func (s *recordingSink) NodeStatus(device string, status devices.NodeStatus, retained bool) {
	s.reports = append(s.reports, call{kind: "node", name: device, status: status, retained: retained})
}
func (s *recordingSink) BridgeState(service string, online, retained bool) {
	s.reports = append(s.reports, call{kind: "bridge", name: service, online: online, retained: retained})
}

// newRecordingAdapter is an adapter of service "zw" for devs whose Sink
// calls are recorded.
func newRecordingAdapter(devs ...devices.Device) (*Adapter, *recordingSink) {
	a := New(nil, Options{Service: "zw", Devices: devs})
	s := &recordingSink{}
	a.sink = s
	return a, s
}

// The currentValue of another endpoint of a multi-channel node reports
// nothing for a device whose writes go to endpoint 0.
//
// Hearth writes endpoint 0 (37/0/targetValue) and ZWAVE.md says the
// confirming value is currentValue. The fault this pins: decode ignored
// the endpoint, so the currentValue of another endpoint of a
// multi-channel node (relay 2 of a double switch) reported the device ON
// and confirmed an ON that endpoint 0 never took.
func TestOtherEndpointDoesNotReportTheDevice(t *testing.T) {
	a, s := newRecordingAdapter(devices.Device{ID: "porch", Class: devices.Switch})
	a.handle(mqtt.Message{Topic: "zwave/porch/37/2/currentValue", Payload: []byte(`{"time":1,"value":true}`)})
	for _, c := range s.reports {
		if c.kind == "report" && len(c.state) > 0 {
			t.Errorf("endpoint 2's currentValue reported %v for porch, whose writes go to endpoint 0", c.state)
		}
	}
}

// A node's location/node address gets its values even when another node
// is named like the location.
//
// ZWAVE.md: an address is "<location>/<node> or <node>, as in the
// gateway's topics", and config accepts a node "hall" beside a node
// "back_door" in location "hall": the values and status of hall/back_door
// reach back_door. The fault this pins: handle tried the one-level
// address first and returned on its match: every value of hall/back_door
// went to the node "hall", where it read as nothing, and the lock never
// reported.
func TestTwoLevelAddressWinsOverANodeNamedLikeItsLocation(t *testing.T) {
	a, s := newRecordingAdapter(
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

// A climate target naming both setpoints with different values is a
// permanent encode error, not a write.
//
// Both are valid attributes of the class, but Z-Wave has one setpoint.
// The fault this pins: such a target was written as
// current_heating_setpoint only; the node then reported both as that
// value, so occupied 25 was never reached: the command could not succeed,
// yet it was sent and retried instead of failing at once as a target the
// adapter cannot write.
func TestConflictingSetpointsAreNotWritable(t *testing.T) {
	ws, _, err := encode(devices.Climate, devices.Target{"current_heating_setpoint": 20.0, "occupied_heating_setpoint": 25.0})
	if err == nil {
		t.Errorf("encode of setpoints 20 and 25 (one Z-Wave setpoint) wrote %+v; want a permanent error", ws)
	}
}
