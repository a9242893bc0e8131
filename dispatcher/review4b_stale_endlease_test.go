package dispatcher

import (
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// SLEEPY.md: "A lease begins at every wake signal". When verify's wait
// for the read's answer runs out, deliverAwake calls q.endLease()
// (sleepy.go:351), which ends whatever lease is current — not the lease
// gen it delivered in. A wake signal that lands after the old lease's
// timer fired but before the worker acted on it begins a new lease (a new
// gen), and the worker's late endLease wipes it: the device's check-in is
// lost and the queued command is not delivered at that wake. The test
// holds q.mu to order the two deterministically (the timer fires; a
// check-in a minute later begins lease gen+1; then the worker runs). This
// is also why TestReview4AStuckCommandStarvesAnotherAttribute flakes under
// -race (its advance to the next wake fires the previous verify's timer,
// racing the check-in).
func TestReview4BLateEndOfAnOldLeaseKeepsANewOne(t *testing.T) {
	r := startR4(t, r4Options{})
	r.submit(`{"current_heating_setpoint":22,"op_id":"s"}`)
	r.status("s", devices.Accepted)
	r.status("s", devices.Queued)

	r.d.NodeStatus("radiator", devices.NodeAwake, false) // wake 1
	if m := r.next(); m.verb != "set" {
		t.Fatalf("wake 1: a %s; want the set", m.verb)
	}
	r.advance(1, 2500*time.Millisecond)
	if m := r.next(); m.verb != "get" {
		t.Fatalf("wake 1: a %s; want the verifying get", m.verb)
	}
	r.waiting() // verify waits for the answer; the radiator went back to sleep

	q := r.d.devices["radiator"]
	q.mu.Lock()
	r.clock.Advance(time.Minute) // verify's timer fires (its wait ended at +5 s)
	if q.m.Wake(r.clock.Now()) { // a check-in a minute later: lease 2 begins
		q.wokeLocked()
	}
	gen := q.m.Lease(r.clock.Now()).Gen
	q.mu.Unlock()

	select {
	case m := <-r.bridge.msgs:
		if m.verb != "set" {
			t.Fatalf("wake 2: a %s; want the set", m.verb)
		}
	case <-time.After(r4Wait):
		q.mu.Lock()
		until, now := q.m.Lease(r.clock.Now()).Until, r.clock.Now()
		q.mu.Unlock()
		t.Errorf("nothing was sent at the check-in that began lease %d: the worker's endLease for the old lease ended it (awake now: %v)", gen, now.Before(until))
	}
}
