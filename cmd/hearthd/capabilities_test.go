package main

import (
	"strings"
	"testing"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/simulator"
)

// With the devices' capabilities from the bridge's retained bridge/devices,
// a light whose dimmer reports brightness 1 as 2 confirms the command on
// its first attempt (its own rounding, within one step), and a color_temp
// outside the bulb's 150–500 mired is rejected with that range, though the
// class would take it.
func TestBridgeDevicesRangesAndRoundingHonouredEndToEnd(t *testing.T) {
	h := newHarness(t, harnessOptions{simDevice: func(d *simulator.Device) {
		if d.Name == "hall_light" {
			d.MinLevel = 2
		}
	}})
	h.eventually("hall_light's capabilities from bridge/devices", func() bool {
		return h.d.disp.DeviceCapabilities("hall_light") != nil
	})

	h.publish("hall_light", `{"state":"ON","brightness":1,"op_id":"dim1"}`)
	if e := h.nextSet(); e.Dropped || string(e.Payload) != `{"brightness":1,"state":"ON"}` {
		t.Fatalf("set %s (dropped %v); want brightness 1 sent as asked", e.Payload, e.Dropped)
	}
	r := h.final("dim1")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["brightness"] != 2.0 {
		t.Fatalf("result %s/%s after %d attempts, state %v; want succeeded after 1 with brightness 2 reported", r.Status, r.Reason, r.Attempts, r.State)
	}

	h.publish("hall_light", `{"color_temp":600,"op_id":"warm1"}`)
	r = h.result("warm1")
	if r.Status != devices.Rejected || r.Reason != devices.ReasonOutOfRange || !strings.Contains(r.Detail, "150–500") {
		t.Fatalf("result %s/%s %q; want rejected out_of_range naming the bulb's 150–500", r.Status, r.Reason, r.Detail)
	}
	h.noSetsYet()
}

// A cover's state with a position is rejected as contradictory, nothing
// sent: accepted, it would always time out (state OPEN is confirmed only
// at position 100).
func TestCoverStateWithPositionIsRejectedAsContradictory(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.publish("blinds", `{"state":"OPEN","position":50,"op_id":"both1"}`)
	r := h.result("both1")
	if r.Status != devices.Rejected || r.Reason != devices.ReasonInvalidValue || !strings.Contains(r.Detail, "contradict") {
		t.Fatalf("result %s/%s %q; want rejected invalid_value saying they contradict", r.Status, r.Reason, r.Detail)
	}
	h.publish("blinds", `{"position":50,"op_id":"pos1"}`)
	if e := h.nextSet(); string(e.Payload) != `{"position":50}` {
		t.Errorf("first set to reach a device %s; want only the position alone", e.Payload)
	}
}
