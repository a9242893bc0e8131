package dispatcher

import (
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// SLEEPY.md: the lease lasts awake_window from the latest wake signal and
// "ends at once when the bridge says the node is Asleep, or when a request
// to the device goes unanswered"; "at every lease each command not yet
// delivered in that lease goes out". verify bounds its wait by the
// command's own deadline (end = min(lease end, deadline, attempt
// timeout)); when A's TTL cuts that wait short, verify says verifySilent
// and deliverAwake ends the device's lease (sleepy.go:351). A, whose TTL
// falls 4 s into a 10 s awake window, is delivered; the radiator has not
// answered the read when A's TTL passes: the lease is ended at once, and
// B, next in line and fresh for an hour, is not sent although the radiator
// listens for 6 s more.
func TestReview4BOneCommandsTTLDoesNotEndTheLease(t *testing.T) {
	r := startR4(t, r4Options{})
	r.submit(`{"current_heating_setpoint":22,"op_id":"A","ttl":"10m"}`)
	r.status("A", devices.Accepted)
	r.status("A", devices.Queued)
	r.submit(`{"occupied_heating_setpoint":20,"op_id":"B","ttl":"1h"}`)
	r.status("B", devices.Accepted)
	r.status("B", devices.Queued)

	r.advance(1, 10*time.Minute-4*time.Second) // asleep
	woke := r.clock.Now()
	r.d.NodeStatus("radiator", devices.NodeAwake, false) // awake until woke+10s; A's TTL ends at woke+4s
	if m := r.next(); m.verb != "set" || m.target["current_heating_setpoint"] == nil {
		t.Fatalf("at the wake: %s %v; want A's set", m.verb, m.target)
	}
	r.advance(1, 2*time.Second) // half of the wait, bounded by A's TTL: the read
	if m := r.next(); m.verb != "get" {
		t.Fatalf("then a %s; want the verifying get", m.verb)
	}
	r.advance(1, 2*time.Second) // A's TTL passes, unanswered; the lease runs 6 s more
	r.status("A", devices.Failed)
	select {
	case m := <-r.bridge.msgs:
		if m.verb != "set" || m.target["occupied_heating_setpoint"] == nil {
			t.Fatalf("after A: %s %v; want B's set", m.verb, m.target)
		}
	case <-time.After(r4Wait):
		q := r.d.devices["radiator"]
		q.mu.Lock()
		until := q.awakeUntil
		q.mu.Unlock()
		t.Errorf("B was not sent at %s, within the awake window (until %s): A's TTL ended the lease (awakeUntil now %v)",
			r.clock.Now().Sub(woke), 10*time.Second, until)
	}
}
