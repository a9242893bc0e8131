package dispatcher

import (
	"testing"

	"github.com/hearthd/hearth/devices"
)

// Issue 4: "only the newest target per attribute is kept for a sleeping
// device; the older ends superseded". A = {occupied 21, current 21}, then
// B = {current 18}: B names one of A's attributes, so A ends superseded
// (never sent: a dead letter), and at the wake only B goes out. The fourth
// review found A and B both kept (B does not cover A), A refused by the
// device in lease 1 and B confirmed, then A's older current 21 written at
// lease 2 over B's newer, confirmed 18.
func TestReview4DOlderCommandIsNotWrittenAfterANewerOneSucceeded(t *testing.T) {
	r := startR4(t, r4Options{})
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
