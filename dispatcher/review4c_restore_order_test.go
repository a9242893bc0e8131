package dispatcher

import (
	"testing"

	"github.com/hearthd/hearth/devices"
)

// SLEEPY.md: "at every lease each command not yet delivered in that lease
// goes out, in acceptance order"; the put-back after a delivery inserts by
// task.order (sleepy.go:204-209). But restore (device.go:125-137) gives
// every restored task order 0 ("older than all", device.go:71) and puts it
// at the FRONT of q.waiting. A restored command is older than the command
// that superseded it, not older than every other one. A = {occupied 21,
// current 21}, then B = {current 18} (B does not cover A: both stay).
// C = {current 19} covers B but cannot be stored: C is rejected, B is
// restored, and the queue reads [B(0), A(1)]. At the wake B goes out
// before A, and because its order is 0 every put-back keeps it there:
// A's older current 21 is the last write, over B's newer 18.
func TestReview4CRestoredCommandKeepsItsPlaceInAcceptanceOrder(t *testing.T) {
	r, j := startR4B(t)
	r.submit(`{"occupied_heating_setpoint":21,"current_heating_setpoint":21,"op_id":"A"}`)
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
			"restore gave B order 0 and put it at the front, so A's current 21 would be the last write over B's newer 18", m.target)
	}
}
