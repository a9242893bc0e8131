package dispatcher

import (
	"testing"

	"github.com/hearthd/hearth/devices"
)

// A command restored after a store failure goes back to its own place in
// acceptance order: A = {occupied 21}, then B = {current 18} (no
// attribute in common: both stay). C = {current 19} supersedes B but
// cannot be stored: C is rejected, B is restored, and must go back behind
// A, where it was. The third review found restore gave every restored
// command order 0, at the front.
func TestReview4CRestoredCommandKeepsItsPlaceInAcceptanceOrder(t *testing.T) {
	r, j := startR4B(t)
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
