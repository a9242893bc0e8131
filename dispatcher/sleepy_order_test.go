package dispatcher

import (
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// Commands delivered in the same lease go out at the next in acceptance
// order: A = {occupied 21}, then B = {current 18} (no attribute in
// common, so both stay). At the first wake both are delivered and the
// radiator answers every verifying read with 16 (no). The first review
// found runSleepy put each undelivered command back at the FRONT of the
// queue, so that the next wake began with B. (Commands that share an
// attribute cannot both wait on a sleepy device any more: the newer
// supersedes the older.)
func TestReview4BAcceptanceOrderKeptAcrossWakes(t *testing.T) {
	r := startR4(t, r4Options{})
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
