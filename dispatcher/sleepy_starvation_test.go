package dispatcher

import (
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// Issue 4, "Done when": "every still-fresh command exactly once at a
// wake"; SLEEPY.md: "on wake, all queued work for that device ... goes out
// before the device is released" (its known limit is only that many
// commands may not fit one short window). Two commands for different
// attributes: A (occupied_heating_setpoint, TTL 3 h), which this radiator
// never reports (it has only current_heating_setpoint), then B
// (current_heating_setpoint, TTL 1 h). The worker runs one command at a
// time across wakes: A stays the running command from wake to wake, each
// time silent, and B, queued behind it, is never sent at any of the three
// wakes within its TTL. Nor does B end expired when its TTL passes: its
// deadline is only looked at once it reaches the head of the queue.
func TestReview4AStuckCommandStarvesAnotherAttribute(t *testing.T) {
	r := startR4(t, r4Options{})
	r.submit(`{"occupied_heating_setpoint":21,"op_id":"A","ttl":"3h"}`)
	r.status("A", devices.Accepted)
	r.status("A", devices.Queued)
	r.submit(`{"current_heating_setpoint":22,"op_id":"B","ttl":"1h"}`)
	r.status("B", devices.Accepted)
	start := r.clock.Now()

	var sentB bool
	for wake := range 3 {
		r.advance(1, 10*time.Minute) // asleep: the queued command's TTL timer
		woke := r.clock.Now()
		r.report(map[string]any{"current_heating_setpoint": 16.0}) // check-in
		handle := func(m r4Msg) {
			switch {
			case m.verb == "get":
				r.report(map[string]any{"current_heating_setpoint": 16.0})
			case m.target["current_heating_setpoint"] != nil:
				sentB = true
				t.Logf("wake %d: B sent at +%s", wake+1, m.at.Sub(start))
			}
		}
		// The wake's first send, before the clock moves: until the
		// worker has taken the wake, its wait for the TTL still counts
		// as a waiter on the clock.
		handle(r.next())
		// This wake's traffic: sends and reads until the lease ends.
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
		// Back to sleep: drain what is left of this wake.
		r.waiting()
		for len(r.bridge.msgs) > 0 {
			if m := <-r.bridge.msgs; m.verb == "set" && m.target["current_heating_setpoint"] != nil {
				sentB = true
			}
		}
	}
	if !sentB {
		t.Errorf("B (TTL 1 h) was never sent at any of the radiator's 3 wakes within its TTL: A, which the radiator never confirms, held the queue")
	}
	// B's TTL passes: it should end expired (a dead letter) by then.
	r.advance(1, time.Hour)
	r.waiting()
	op, _, _ := r.journal.Lookup("B")
	if !op.Status.Terminal() {
		t.Errorf("at +%s, past B's deadline (+1h), B is still %s: nothing ends it while A runs", r.clock.Now().Sub(start), op.Status)
	}
}
