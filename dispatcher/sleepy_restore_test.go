package dispatcher

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// failingJournal is the rig's journal whose saves fail while fail is set.
type failingJournal struct {
	*memJournal
	fail atomic.Bool
}

func (j *failingJournal) Save(ops ...devices.Op) error {
	if j.fail.Load() {
		return errors.New("disk full")
	}
	return j.memJournal.Save(ops...)
}

// startSleepyFailingJournal is startSleepy with the rig's journal behind a
// failing wrapper.
func startSleepyFailingJournal(t *testing.T) (*sleepyRig, *failingJournal) {
	t.Helper()
	var fj *failingJournal
	r := startSleepy(t, sleepyOptions{journal: func(j *memJournal) Journal {
		fj = &failingJournal{memJournal: j}
		return fj
	}})
	return r, fj
}

// A command being delivered, restored because the newer command that
// superseded it could not be stored, is not delivered a second time in
// the same lease.
//
// Issue 4: "delivered at the next awake lease, with at most one further
// attempt within that window"; SLEEPY.md: "each command not yet delivered
// in that lease goes out ... once". A newer command supersedes the one
// being delivered (q.cur) but cannot be stored, so intake restores
// the old one. The fault this pins: restore() made it a NEW task with
// leaseGen 0 at the front of q.waiting; the worker dropped the old task
// (ended) and found the restored one "not yet delivered in this lease":
// it was sent a third and fourth time in the same awake window.
func TestRestoredCommandIsNotDeliveredAgainInTheSameLease(t *testing.T) {
	r, j := startSleepyFailingJournal(t)
	r.submit(`{"current_heating_setpoint":22,"op_id":"z"}`)
	r.status("z", devices.Accepted)
	r.status("z", devices.Queued)

	woke := r.clock.Now()
	r.d.NodeStatus("radiator", devices.NodeAwake, false)
	sets := 0
	for i := range 2 { // the delivery and its one further attempt
		if m := r.next(); m.verb != "set" {
			t.Fatalf("a %s; want a set", m.verb)
		}
		sets++
		r.advance(1, 2500*time.Millisecond)
		if m := r.next(); m.verb != "get" {
			t.Fatalf("a %s; want the verifying get", m.verb)
		}
		if i == 0 {
			r.report(map[string]any{"current_heating_setpoint": 16.0}) // "no": one further attempt
		}
	}
	// Attempt 2 waits for the read's answer; a newer setpoint arrives and
	// cannot be stored: rejected, and z is queued again.
	j.fail.Store(true)
	r.submit(`{"current_heating_setpoint":18,"op_id":"n"}`)
	if res := r.await("n's rejection", func(res devices.Result) bool { return res.OpID == "n" }); res.Status != devices.Rejected {
		t.Fatalf("n: %s/%s; want rejected (store error)", res.Status, res.Reason)
	}
	j.fail.Store(false)
	// The worker leaves the superseded delivery, then waits on the clock:
	// idle (for the next lease), or, had it delivered the restored z
	// again, in that delivery's verify, after its set.
	q := r.d.devices["radiator"]
	r.eventually("the worker out of the superseded delivery", func() bool {
		q.mu.Lock()
		defer q.mu.Unlock()
		return q.cur == nil
	})
	r.waiting()
	select {
	case m := <-r.bridge.msgs:
		t.Errorf("after %d sets of z in the lease that began at %s, a %s %v went out at +%s: the restored z got a second delivery in the same lease",
			sets, woke.Format("15:04:05"), m.verb, m.target, m.at.Sub(woke))
	default:
	}
}

// A command restored after a store failure goes back to its own place in
// acceptance order: A = {occupied 21}, then B = {current 18} (no
// attribute in common: both stay). C = {current 19} supersedes B but
// cannot be stored: C is rejected, B is restored, and must go back behind
// A, where it was. The fault this pins: restore gave every restored
// command order 0, at the front.
func TestRestoredCommandKeepsItsPlaceInAcceptanceOrder(t *testing.T) {
	r, j := startSleepyFailingJournal(t)
	r.submit(`{"occupied_heating_setpoint":21,"op_id":"A"}`)
	r.status("A", devices.Accepted)
	r.submit(`{"current_heating_setpoint":18,"op_id":"B"}`)
	r.status("B", devices.Accepted)
	r.status("B", devices.Queued)

	j.fail.Store(true)
	r.submit(`{"current_heating_setpoint":19,"op_id":"C"}`)
	if res := r.await("C's rejection", func(res devices.Result) bool { return res.OpID == "C" }); res.Status != devices.Rejected {
		t.Fatalf("C: %s/%s; want rejected (store error)", res.Status, res.Reason)
	}
	j.fail.Store(false)

	r.d.NodeStatus("radiator", devices.NodeAwake, false) // the wake
	m := r.next()
	if m.verb != "set" {
		t.Fatalf("at the wake: a %s %v; want a set", m.verb, m.target)
	}
	if m.target["occupied_heating_setpoint"] == nil {
		t.Errorf("at the wake the first command out is %v (B, restored after C's store failure), before the older A: "+
			"restore did not give B its place back", m.target)
	}
}

// A waiting command restored after a store failure is still delivered in
// the current lease, which it has not been delivered in.
//
// SLEEPY.md: "at every lease each command not yet delivered in that lease
// goes out". Restore stamps the command being delivered with the current
// lease, so that it does not go out twice (see
// TestRestoredCommandIsNotDeliveredAgainInTheSameLease). The fault this
// pins: restore stamped every restored task with the current lease
// (leaseGen: q.leaseGen), waiting commands too, which were NOT delivered
// in this lease. The radiator wakes with A {occupied 21} and B {current 18} queued; A goes
// out first; while A is being verified, C {current 19} supersedes the
// still-waiting B but cannot be stored, so B is restored — marked as
// delivered in this lease. A is confirmed at once and the lease runs on
// (the device just reported), yet B was not sent: it waited a whole wake
// interval (or expired) though the device was listening.
func TestRestoredWaitingCommandIsStillDeliveredInThisLease(t *testing.T) {
	r, j := startSleepyFailingJournal(t)
	r.submit(`{"occupied_heating_setpoint":21,"op_id":"A"}`)
	r.status("A", devices.Accepted)
	r.submit(`{"current_heating_setpoint":18,"op_id":"B"}`)
	r.status("B", devices.Accepted)
	r.status("B", devices.Queued)

	woke := r.clock.Now()
	r.d.NodeStatus("radiator", devices.NodeAwake, false) // the wake
	if m := r.next(); m.verb != "set" || m.target["occupied_heating_setpoint"] == nil {
		t.Fatalf("at the wake: a %s %v; want A's set", m.verb, m.target)
	}
	// A is being verified; B waits its turn in this lease. C supersedes B
	// and cannot be stored: B is restored.
	j.fail.Store(true)
	r.submit(`{"current_heating_setpoint":19,"op_id":"C"}`)
	if res := r.await("C's rejection", func(res devices.Result) bool { return res.OpID == "C" }); res.Status != devices.Rejected {
		t.Fatalf("C: %s/%s; want rejected (store error)", res.Status, res.Reason)
	}
	j.fail.Store(false)

	r.report(map[string]any{"occupied_heating_setpoint": 21.0}) // confirms A; the lease runs to +10 s
	r.status("A", devices.Succeeded)
	select {
	case m := <-r.bridge.msgs:
		if m.verb != "set" || m.target["current_heating_setpoint"] == nil {
			t.Fatalf("after A: a %s %v; want B's set", m.verb, m.target)
		}
	case <-time.After(time.Second):
		t.Errorf("the radiator listens (woke at %s, lease to +10 s, clock at +%s) and B was never sent in this lease: "+
			"restore marked the waiting B as delivered in it", woke.Format("15:04:05"), r.clock.Now().Sub(woke))
	}
}
