package dispatcher

import (
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// A command whose TTL passes while its verifying read is unanswered ends
// alone: the lease runs on and the next command goes out in it.
//
// SLEEPY.md: the lease lasts awake_window from the latest wake signal and
// "ends at once when the bridge says the node is Asleep, or when a request
// to the device goes unanswered"; "at every lease each command not yet
// delivered in that lease goes out". verify bounds its wait by the
// command's own deadline (end = min(lease end, deadline, attempt
// timeout)). A, whose TTL falls 4 s into a 10 s awake window, is
// delivered; the radiator has not answered the read when A's TTL passes.
// The fault this pins: when A's TTL cut that wait short, verify said
// verifySilent and deliverAwake ended the device's lease at once, and B,
// next in line and fresh for an hour, was not sent although the radiator
// listened for 6 s more.
func TestOneCommandsTTLDoesNotEndTheLease(t *testing.T) {
	r := startSleepy(t, sleepyOptions{})
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
	case <-time.After(rigWait):
		q := r.d.devices["radiator"]
		q.mu.Lock()
		until := q.m.Lease(r.clock.Now()).Until
		q.mu.Unlock()
		t.Errorf("B was not sent at %s, within the awake window (until %s): A's TTL ended the lease (awakeUntil now %v)",
			r.clock.Now().Sub(woke), 10*time.Second, until)
	}
}

// A radiator that wakes once and keeps answering "no" is sent a command at
// most twice in that one wake: its send and one further attempt.
//
// SLEEPY.md: "in one lease a command gets its send and at most one
// further attempt" (issue 4: "delivered at the next awake lease, with at
// most one further attempt within that window"). The fault this pins: a
// radiator that wakes once and answers every verifying read with its old
// setpoint (it will not take 22) was sent the setpoint again and again
// within that one window: after deliverAwake's two attempts,
// executeSleepy found the lease still running (each answer is a wake
// signal that extends it) and called deliverAwake again, with a fresh
// budget of two.
func TestOneWakeGetsAtMostTwoSends(t *testing.T) {
	r := startSleepy(t, sleepyOptions{})
	r.submit(`{"current_heating_setpoint":22,"op_id":"h"}`)
	r.status("h", devices.Accepted)
	r.status("h", devices.Queued)

	woke := r.clock.Now()
	r.report(map[string]any{"current_heating_setpoint": 16.0}) // the check-in: one wake
	window := woke.Add(10 * time.Second)
	sets := 0
	for range 2 { // the delivery and the one further attempt
		if m := r.next(); m.verb != "set" {
			t.Fatalf("got a %s; want a set", m.verb)
		}
		sets++
		r.advance(1, 2500*time.Millisecond) // half the attempt timeout: the verifying read
		if m := r.next(); m.verb != "get" {
			t.Fatalf("got a %s; want the verifying get", m.verb)
		}
		r.report(map[string]any{"current_heating_setpoint": 16.0}) // "no"
	}
	r.settled()
	select {
	case m := <-r.bridge.msgs:
		t.Errorf("after %d sets and two answers of 16 at %s (the one wake's window ends %s), a %s %v went out at %s: a third attempt in one wake",
			sets, r.clock.Now().Sub(woke), window.Sub(woke), m.verb, m.target, m.at.Sub(woke))
	default:
	}
}

// A worker that ends an old lease late (after its verify timed out) leaves
// a newer lease, begun by a check-in in between, running: the queued
// command goes out at that check-in.
//
// SLEEPY.md: "A lease begins at every wake signal". When verify's wait
// for the read's answer runs out, deliverAwake ends its lease. A wake
// signal that lands after the old lease's timer fired but before the
// worker acted on it begins a new lease (a new gen). The fault this pins:
// deliverAwake called q.endLease(), which ended whatever lease was current
// — not the lease gen it delivered in — so the worker's late endLease
// wiped the new one: the device's check-in was lost and the queued command
// was not delivered at that wake. The test holds q.mu to order the two
// deterministically (the timer fires; a check-in a minute later begins
// lease gen+1; then the worker runs). The same race made
// TestStuckCommandDoesNotStarveAnotherAttribute flaky under -race (its
// advance to the next wake fires the previous verify's timer, racing the
// check-in).
func TestLateEndOfAnOldLeaseKeepsANewOne(t *testing.T) {
	r := startSleepy(t, sleepyOptions{})
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
	q.m.Wake(r.clock.Now())      // a check-in a minute later: lease 2 begins
	q.changedLocked()
	gen := q.m.Lease(r.clock.Now()).Gen
	q.mu.Unlock()

	select {
	case m := <-r.bridge.msgs:
		if m.verb != "set" {
			t.Fatalf("wake 2: a %s; want the set", m.verb)
		}
	case <-time.After(rigWait):
		q.mu.Lock()
		until, now := q.m.Lease(r.clock.Now()).Until, r.clock.Now()
		q.mu.Unlock()
		t.Errorf("nothing was sent at the check-in that began lease %d: the worker's endLease for the old lease ended it (awake now: %v)", gen, now.Before(until))
	}
}
