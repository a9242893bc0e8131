package dispatcher

import (
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// SLEEPY.md: "never ahead of an older command that names one of its
// attributes, so that the newest value of an attribute is the last one
// written" (deliveryOrder, sleepy.go:553-588). deliveryOrder orders only
// the commands eligible in one lease. A = {occupied 21, current 21} (the
// radiator never reports occupied, so it answers A's reads "without the
// target"), then B = {current 18} (B does not cover A). Lease 1: A goes
// first, the device says "no" twice, A goes back to the queue; B goes
// next and is confirmed: current is 18, B succeeded. Lease 2: A, the only
// command left, is delivered again and writes current 21 — the older
// value is the last one written, over B's newer, confirmed 18.
func TestReview4DOlderCommandIsNotWrittenAfterANewerOneSucceeded(t *testing.T) {
	r := startR4(t, r4Options{})
	r.submit(`{"occupied_heating_setpoint":21,"current_heating_setpoint":21,"op_id":"A"}`)
	r.status("A", devices.Accepted)
	r.status("A", devices.Queued)
	r.submit(`{"current_heating_setpoint":18,"op_id":"B"}`)
	r.status("B", devices.Accepted)
	r.status("B", devices.Queued)

	r.d.NodeStatus("radiator", devices.NodeAwake, false) // lease 1
	for i := range 2 {                                   // A's delivery and its one further attempt
		if m := r.next(); m.verb != "set" || m.target["occupied_heating_setpoint"] == nil {
			t.Fatalf("lease 1, attempt %d: a %s %v; want A's set", i+1, m.verb, m.target)
		}
		r.advance(1, 2500*time.Millisecond)
		if m := r.next(); m.verb != "get" {
			t.Fatalf("lease 1: a %s; want A's verifying get", m.verb)
		}
		r.report(map[string]any{"current_heating_setpoint": 16.0}) // no occupied: "no"
	}
	if m := r.next(); m.verb != "set" || m.target["current_heating_setpoint"] != 18.0 {
		t.Fatalf("lease 1: a %s %v; want B's set", m.verb, m.target)
	}
	r.report(map[string]any{"current_heating_setpoint": 18.0})
	r.status("B", devices.Succeeded)

	// The lease runs out; later the radiator wakes again.
	r.settled()
	r.clock.Advance(time.Minute)
	r.status("A", devices.Queued)
	r.waiting()
	r.d.NodeStatus("radiator", devices.NodeAwake, false) // lease 2
	select {
	case m := <-r.bridge.msgs:
		if m.verb == "set" && m.target["current_heating_setpoint"] == 21.0 {
			t.Errorf("lease 2: A's %v went out after the newer B {current 18} succeeded: the older value of current_heating_setpoint is the last one written", m.target)
		}
	case <-time.After(500 * time.Millisecond):
	}
}
