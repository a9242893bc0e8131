package dispatcher

import (
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// SLEEPY.md: "at every lease each command not yet delivered in that lease
// goes out". The second review's fix makes restore (device.go:131-134)
// stamp every restored task with the current lease (leaseGen: q.leaseGen),
// to stop the command being delivered from going out twice. But it stamps
// waiting commands too, which were NOT delivered in this lease. The
// radiator wakes with A {occupied 21} and B {current 18} queued; A goes
// out first; while A is being verified, C {current 19} supersedes the
// still-waiting B but cannot be stored, so B is restored — marked as
// delivered in this lease. A is confirmed at once and the lease runs on
// (the device just reported), yet B is not sent: it waits a whole wake
// interval (or expires) though the device is listening.
func TestReview4CRestoredWaitingCommandIsStillDeliveredInThisLease(t *testing.T) {
	r, j := startR4B(t)
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
