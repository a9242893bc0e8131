package dispatcher

import (
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// A command the radiator never confirms does not hold back a command for
// another attribute queued behind it: that one is sent within its TTL, or
// ends when its TTL passes.
//
// Issue 4, "Done when": "every still-fresh command exactly once at a
// wake"; SLEEPY.md: "on wake, all queued work for that device ... goes out
// before the device is released" (its known limit is only that many
// commands may not fit one short window). Two commands for different
// attributes: A (occupied_heating_setpoint, TTL 3 h), which this radiator
// never reports (it has only current_heating_setpoint), then B
// (current_heating_setpoint, TTL 1 h). The fault this pins: the worker ran
// one command at a time across wakes: A stayed the running command from
// wake to wake, each time silent, and B, queued behind it, was never sent
// at any of the three wakes within its TTL. Nor did B end expired when its
// TTL passed: its deadline was only looked at once it reached the head of
// the queue.
func TestStuckCommandDoesNotStarveAnotherAttribute(t *testing.T) {
	r := startSleepy(t, sleepyOptions{})
	r.submit(`{"occupied_heating_setpoint":21,"op_id":"A","ttl":"3h"}`)
	r.status("A", devices.Accepted)
	r.status("A", devices.Queued)
	r.submit(`{"current_heating_setpoint":22,"op_id":"B","ttl":"1h"}`)
	r.status("B", devices.Accepted)
	// Queued: the worker holds B (its accepted result goes out before
	// the intake hands it over).
	r.status("B", devices.Queued)
	start := r.clock.Now()

	deadline := start.Add(time.Hour)
	var sentB bool
	take := func(m bridgeMsg) {
		if m.verb == "set" && m.target["current_heating_setpoint"] != nil && m.at.Before(deadline) {
			sentB = true
		}
	}
	for wake := range 3 {
		r.advance(1, 10*time.Minute) // asleep: the queued command's TTL timer
		woke := r.clock.Now()
		r.report(map[string]any{"current_heating_setpoint": 16.0}) // check-in
		handle := func(m bridgeMsg) {
			take(m)
			if m.verb == "get" {
				r.report(map[string]any{"current_heating_setpoint": 16.0})
			}
			t.Logf("wake %d: %s %v at +%s", wake+1, m.verb, m.target, m.at.Sub(start))
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
	}
	// B's TTL passes: it should end (expired, or failed once sent) by
	// then. Its end is written after every send of it, so once it is
	// seen ended, every send of B is among the bridge's messages.
	r.advance(1, time.Hour)
	r.eventually("B to end past its deadline", func() bool {
		op, _, _ := r.journal.Lookup("B")
		return op.Status.Terminal()
	})
	for len(r.bridge.msgs) > 0 {
		take(<-r.bridge.msgs)
	}
	if !sentB {
		t.Errorf("B (TTL 1 h) was never sent at any of the radiator's 3 wakes within its TTL: A, which the radiator never confirms, held the queue")
	}
}

// A command whose verifying read the device never answers does not go
// first and end every lease: the command queued behind it is sent at one
// of three wakes within its TTL.
//
// SLEEPY.md: "Every command gets its turn ... A command the device never
// confirms cannot hold back another." runSleepy delivers in acceptance
// order from the head at every lease, and a verifying read that goes
// unanswered ends the lease. The fault this pins: a command whose read
// the device never answers — A {occupied 21, TTL 3 h}, an attribute this
// radiator neither reports nor answers a /get for — went first at every
// wake and ended every lease by its silence, and B {current 22, TTL 1 h},
// queued behind it, was never sent at any of the three wakes within its
// TTL: it ended expired, never delivered, held back by A as in
// TestStuckCommandDoesNotStarveAnotherAttribute (only by silence instead
// of by a running task).
func TestSilentCommandDoesNotStarveTheNextAtEveryWake(t *testing.T) {
	r := startSleepy(t, sleepyOptions{})
	r.submit(`{"occupied_heating_setpoint":21,"op_id":"A","ttl":"3h"}`)
	r.status("A", devices.Accepted)
	r.status("A", devices.Queued)
	r.submit(`{"current_heating_setpoint":22,"op_id":"B","ttl":"1h"}`)
	r.status("B", devices.Accepted)
	r.status("B", devices.Queued)
	start := r.clock.Now()

	var sentA, sentB int
	handle := func(m bridgeMsg) {
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
	}
	// Past B's deadline B has ended, and its end is written after every
	// send of it: every send of B is now among the bridge's messages.
	r.advance(1, time.Hour)
	r.eventually("B to end past its deadline", func() bool {
		op, _, _ := r.journal.Lookup("B")
		return op.Status.Terminal()
	})
	for len(r.bridge.msgs) > 0 {
		handle(<-r.bridge.msgs)
	}
	if sentB == 0 {
		t.Errorf("B (TTL 1 h) was never sent at any of 3 wakes by +%s (A was sent %d times): A, whose read the radiator never answers, went first and ended every lease",
			r.clock.Now().Sub(start), sentA)
	}
}
