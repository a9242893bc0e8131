package dispatcher

import (
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// Commands delivered in the same lease go out at the next in acceptance
// order: A = {occupied 21}, then B = {current 18} (no attribute in
// common, so both stay). At the first wake both are delivered and the
// radiator answers every verifying read with 16 (no). The fault this
// pins: runSleepy put each undelivered command back at the FRONT of the
// queue, so that the next wake began with B. (Commands that share an
// attribute cannot both wait on a sleepy device any more: the newer
// supersedes the older.)
func TestAcceptanceOrderKeptAcrossWakes(t *testing.T) {
	r := startSleepy(t, sleepyOptions{})
	r.submit(`{"occupied_heating_setpoint":21,"op_id":"A"}`)
	r.status("A", devices.Accepted)
	r.submit(`{"current_heating_setpoint":18,"op_id":"B"}`)
	r.status("B", devices.Accepted)
	r.status("B", devices.Queued)

	r.d.NodeStatus("radiator", devices.NodeAwake, false) // wake 1
	var order []string
	for range 4 { // A: set, no, set, no; then B: set, no, set, no
		m := r.next()
		if m.verb != "set" {
			t.Fatalf("wake 1: a %s %v; want a set", m.verb, m.target)
		}
		if m.target["occupied_heating_setpoint"] != nil {
			order = append(order, "A")
		} else {
			order = append(order, "B")
		}
		r.advance(1, 2500*time.Millisecond) // the verifying read
		if g := r.next(); g.verb != "get" {
			t.Fatalf("wake 1: a %s; want the verifying get", g.verb)
		}
		r.report(map[string]any{"current_heating_setpoint": 16.0}) // "no"
	}
	t.Logf("wake 1 sets: %v", order)
	r.settled()
	r.advance(1, 20*time.Minute)                         // asleep; both wait (TTL 1 h)
	r.d.NodeStatus("radiator", devices.NodeAwake, false) // wake 2
	m := r.next()
	if m.verb != "set" {
		t.Fatalf("wake 2: a %s; want a set", m.verb)
	}
	if m.target["occupied_heating_setpoint"] == nil {
		t.Errorf("wake 2: the first command out is %v (B), before A: acceptance order lost", m.target)
	}
}

// An older command that shares an attribute with a newer one for a
// sleeping device ends superseded and is never written at a later wake
// over the newer, confirmed value.
//
// Issue 4: "only the newest target per attribute is kept for a sleeping
// device; the older ends superseded". A = {occupied 21, current 21}, then
// B = {current 18}: B names one of A's attributes, so A ends superseded
// (never sent: a dead letter), and at the wake only B goes out. The fault
// this pins: A and B were both kept (B does not cover A), A refused by the
// device in lease 1 and B confirmed, then A's older current 21 written at
// lease 2 over B's newer, confirmed 18.
func TestOlderCommandNeverOverwritesNewerAtLaterWake(t *testing.T) {
	r := startSleepy(t, sleepyOptions{})
	r.submit(`{"occupied_heating_setpoint":21,"current_heating_setpoint":21,"op_id":"A"}`)
	r.status("A", devices.Accepted)
	r.status("A", devices.Queued)
	r.submit(`{"current_heating_setpoint":18,"op_id":"B"}`)
	r.status("B", devices.Accepted) // published before the end of what B superseded
	if res := r.await("A's end", func(res devices.Result) bool { return res.OpID == "A" && res.Status.Terminal() }); res.Status != devices.Superseded {
		t.Fatalf("A: %s/%s; want superseded by B, which names one of its attributes", res.Status, res.Reason)
	}

	r.d.NodeStatus("radiator", devices.NodeAwake, false) // the wake
	if m := r.next(); m.verb != "set" || m.target["current_heating_setpoint"] != 18.0 || m.target["occupied_heating_setpoint"] != nil {
		t.Fatalf("at the wake: a %s %v; want B's set, alone", m.verb, m.target)
	}
	r.report(map[string]any{"current_heating_setpoint": 18.0})
	r.status("B", devices.Succeeded)
	if got := r.dead.list(); len(got) != 1 || got[0].OpID != "A" || got[0].Status != devices.Superseded || got[0].Attempts != 0 {
		t.Errorf("dead letters %+v; want A, superseded after 0 attempts", got)
	}
}
