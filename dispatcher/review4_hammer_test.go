package dispatcher

import (
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// SLEEPY.md: "in one lease a command gets its send and at most one
// further attempt" (issue 4: "delivered at the next awake lease, with at
// most one further attempt within that window"). A radiator that wakes
// once and answers every verifying read with its old setpoint (it will
// not take 22) is sent the setpoint again and again within that one
// window: after deliverAwake's two attempts, executeSleepy finds the lease
// still running (each answer is a wake signal that extends it) and calls
// deliverAwake again, with a fresh budget of two.
func TestReview4OneWakeGetsAtMostTwoSends(t *testing.T) {
	r := startR4(t, r4Options{})
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
