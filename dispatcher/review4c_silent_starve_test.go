package dispatcher

import (
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// SLEEPY.md: "Every command gets its turn ... A command the device never
// confirms cannot hold back another." runSleepy delivers in acceptance
// order from the head at every lease (sleepy.go:182-218), and a verifying
// read that goes unanswered ends the lease (sleepy.go:378-386). So a
// command whose read the device never answers — A {occupied 21, TTL 3 h},
// an attribute this radiator neither reports nor answers a /get for —
// goes first at every wake, ends every lease by its silence, and B
// {current 22, TTL 1 h}, queued behind it, is never sent at any of the
// three wakes within its TTL: it ends expired, never delivered, held back
// by A exactly as before the first review's fix (only now by silence
// instead of by a running task).
func TestReview4CSilentCommandStarvesTheNextEveryWake(t *testing.T) {
	r := startR4(t, r4Options{})
	r.submit(`{"occupied_heating_setpoint":21,"op_id":"A","ttl":"3h"}`)
	r.status("A", devices.Accepted)
	r.status("A", devices.Queued)
	r.submit(`{"current_heating_setpoint":22,"op_id":"B","ttl":"1h"}`)
	r.status("B", devices.Accepted)
	r.status("B", devices.Queued)
	start := r.clock.Now()

	var sentA, sentB int
	handle := func(m r4Msg) {
		if m.verb != "set" {
			return // the verifying read: the radiator does not answer for occupied_heating_setpoint
		}
		if m.target["current_heating_setpoint"] != nil {
			sentB++
		} else {
			sentA++
		}
	}
	for range 3 {
		r.advance(1, 15*time.Minute) // asleep
		woke := r.clock.Now()
		r.report(map[string]any{"current_heating_setpoint": 16.0}) // check-in: the lease begins
		handle(r.next())                                           // the wake's first send, before the clock moves
		for r.clock.Now().Before(woke.Add(10 * time.Second)) {
			select {
			case m := <-r.bridge.msgs:
				handle(m)
				continue
			default:
			}
			r.waiting()
			if len(r.bridge.msgs) > 0 {
				continue
			}
			r.clock.Advance(2500 * time.Millisecond)
		}
		r.waiting()
		for len(r.bridge.msgs) > 0 {
			handle(<-r.bridge.msgs)
		}
	}
	if sentB == 0 {
		t.Errorf("B (TTL 1 h) was never sent at any of 3 wakes by +%s (A was sent %d times): A, whose read the radiator never answers, went first and ended every lease",
			r.clock.Now().Sub(start), sentA)
	}
}
