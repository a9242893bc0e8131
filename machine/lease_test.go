package machine

import (
	"slices"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// The sleepy rules of the dispatcher's rig tests (dispatcher/sleepy_*_test.go)
// as state-machine tests: no broker, no clock, no goroutine.

// target is a radiator command for one attribute.
func target(id, attr string, v float64) devices.Op {
	return devices.Op{OpID: id, Device: "radiator", Target: devices.Target{attr: v},
		Status: devices.Accepted, AcceptedAt: t0, Deadline: t0.Add(time.Hour)}
}

// eligible returns the op_ids of a plan's eligible commands, in order.
func eligible(p Plan) []string {
	var ids []string
	for _, c := range p.Eligible {
		ids = append(ids, c.Op.OpID)
	}
	return ids
}

// deliverAll delivers every eligible command of the plan at now, each
// with one attempt begun and unconfirmed: back in the queue for the next
// lease.
func deliverAll(t *testing.T, m *Device, now time.Time) {
	t.Helper()
	p := m.Plan(now)
	for _, c := range p.Eligible {
		if m.Deliver(c, p.Gen, now) != Deliver {
			t.Fatalf("%s not delivered in lease %d", c.Op.OpID, p.Gen)
		}
		dl := m.NewDelivery(c, p.Gen, "zwave")
		if s := dl.Next(now); s.Kind != StepAttempt || !dl.Sending(now) {
			t.Fatalf("%s: no set sent in lease %d at its delivery", c.Op.OpID, p.Gen)
		}
		if m.Delivered(c, now) {
			t.Fatalf("%s due at %s", c.Op.OpID, now)
		}
	}
}

// Commands unconfirmed at one wake go out in acceptance order at the next
// (the delivery order ranks by the lease of the last delivery, then by
// acceptance).
func TestDeliveryOrderKeepsAcceptanceOrderAcrossLeases(t *testing.T) {
	m := New(radiator)
	m.Accept(target("A", "occupied_heating_setpoint", 21), Fresh)
	m.Accept(target("B", "current_heating_setpoint", 18), Fresh)
	m.Wake(t0)
	deliverAll(t, m, t0)
	wake2 := t0.Add(20 * time.Minute)
	m.Wake(wake2)
	if got := eligible(m.Plan(wake2)); !slices.Equal(got, []string{"A", "B"}) {
		t.Errorf("lease 2 delivers %v; want [A B], acceptance order", got)
	}
}

// A command whose delivery never confirms does not hold back one for
// another attribute accepted after it: within the same lease, the newer
// is eligible while the older, delivered already, waits for the next.
func TestStuckCommandLeavesTheLeaseToAnother(t *testing.T) {
	m := New(radiator)
	m.Accept(target("A", "occupied_heating_setpoint", 21), Fresh)
	m.Wake(t0)
	deliverAll(t, m, t0) // A: unconfirmed
	m.Accept(target("B", "current_heating_setpoint", 18), Fresh)
	if got := eligible(m.Plan(t0.Add(time.Second))); !slices.Equal(got, []string{"B"}) {
		t.Errorf("later in lease 1: %v eligible; want [B]: A had its delivery", got)
	}
}

// A command whose silence ends every lease does not go first at every
// wake: one never delivered goes before it.
func TestSilentCommandGoesAfterOneNeverDelivered(t *testing.T) {
	m := New(radiator)
	m.Accept(target("A", "occupied_heating_setpoint", 21), Fresh)
	m.Wake(t0)
	p := m.Plan(t0)
	a := p.Eligible[0]
	m.Deliver(a, p.Gen, t0)
	dl := m.NewDelivery(a, p.Gen, "zwave")
	dl.Next(t0)
	if !dl.Silent(t0) { // A's request went unanswered: the device is asleep
		t.Fatal("A's unanswered request did not end the lease")
	}
	m.Delivered(a, t0)
	m.Accept(target("B", "current_heating_setpoint", 18), Fresh)
	wake2 := t0.Add(20 * time.Minute)
	m.Wake(wake2)
	if got := eligible(m.Plan(wake2)); !slices.Equal(got, []string{"B", "A"}) {
		t.Errorf("lease 2 delivers %v; want [B A]: B was never delivered", got)
	}
}

// Commands that a supersede ended, and that come back because the newer
// command could not be stored, keep their places: their order, and the
// lease they were delivered in. One delivered in this lease is not
// delivered again in it; one still waiting is.
func TestRestoredCommandsKeepTheirPlaceAndLease(t *testing.T) {
	m := New(radiator)
	m.Accept(target("A", "occupied_heating_setpoint", 21), Fresh)
	m.Accept(target("B", "current_heating_setpoint", 18), Fresh)
	m.Accept(target("C", "local_temperature_calibration", 1), Fresh)
	m.Wake(t0)
	p := m.Plan(t0)
	b := p.Eligible[1]
	if m.Deliver(b, p.Gen, t0) != Deliver {
		t.Fatal("B not delivered")
	}
	// B is being delivered when D, for its attribute, arrives; D's store
	// fails: B is restored.
	ended := m.Supersede(target("D", "current_heating_setpoint", 17), t0)
	if len(ended) != 1 || ended[0] != b {
		t.Fatalf("D superseded %d commands; want B", len(ended))
	}
	m.Delivered(b, t0) // the worker leaves the ended B
	m.Restore([]devices.Op{b.Op})
	var order []string
	for _, c := range m.Waiting() {
		order = append(order, c.Op.OpID)
	}
	if !slices.Equal(order, []string{"A", "B", "C"}) {
		t.Errorf("waiting %v after the restore; want [A B C], acceptance order", order)
	}
	if got := eligible(m.Plan(t0)); !slices.Equal(got, []string{"A", "C"}) {
		t.Errorf("lease 1 still delivers %v; want [A C]: B was delivered in it", got)
	}

	// Superseded and restored while still waiting: still delivered in
	// this lease.
	c := m.Waiting()[2]
	m.Supersede(target("E", "local_temperature_calibration", 2), t0)
	m.Restore([]devices.Op{c.Op})
	if got := eligible(m.Plan(t0)); !slices.Equal(got, []string{"A", "C"}) {
		t.Errorf("after C's restore lease 1 delivers %v; want [A C]", got)
	}
}

// A command taken for delivery at the very end of a lease, too late for
// its set to leave (the lease ends while its attempt is prepared), keeps
// its turn: at the next wake it goes before the one that had the lease.
// The fault this pins: the delivery order ranked by the lease a command
// was last taken in, so B, taken at the edge of every lease that A's
// unconfirmed attempts had filled, counted as delivered and went after A
// again at every wake, never sent.
func TestDeliveryCutShortByTheLeasesEndKeepsItsTurn(t *testing.T) {
	m := New(radiator)
	m.Accept(target("A", "occupied_heating_setpoint", 21), Fresh)
	m.Accept(target("B", "current_heating_setpoint", 18), Fresh)
	m.Wake(t0)
	p := m.Plan(t0)
	a, b := p.Eligible[0], p.Eligible[1]
	if m.Deliver(a, p.Gen, t0) != Deliver {
		t.Fatal("A not delivered")
	}
	if dl := m.NewDelivery(a, p.Gen, "zwave"); dl.Next(t0).Kind != StepAttempt || !dl.Sending(t0) {
		t.Fatal("A's set not sent")
	}
	// A's unconfirmed attempts fill the lease; B is taken, and its
	// attempt begun, a moment before its end, and the lease is over when
	// its set would leave.
	edge := m.Lease(t0).Until
	late := edge.Add(-time.Millisecond)
	m.Delivered(a, late)
	if m.Deliver(b, p.Gen, late) != Deliver {
		t.Fatal("B not taken before the lease's end")
	}
	dl := m.NewDelivery(b, p.Gen, "zwave")
	if s := dl.Next(late); s.Kind != StepAttempt {
		t.Fatalf("B before the lease's end: step %v; want an attempt", s.Kind)
	}
	if dl.Sending(edge) {
		t.Fatal("B's set leaves after the lease's end")
	}
	m.Delivered(b, edge)

	wake2 := t0.Add(20 * time.Minute)
	m.Wake(wake2)
	if got := eligible(m.Plan(wake2)); !slices.Equal(got, []string{"B", "A"}) {
		t.Errorf("lease 2 delivers %v; want [B A]: nothing of B reached the device in lease 1", got)
	}
}
