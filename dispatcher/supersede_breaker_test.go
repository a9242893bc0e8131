package dispatcher

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/devices"
)

// Issue 16, item 1: an attempt that was sent and then superseded keeps its
// breaker permit until its attempt timeout and counts by the rule of any
// attempt, so that commands superseding each other faster than the attempt
// timeout (a dimmer drag, a frequent automation) cannot hide a hung
// coordinator from the breaker.

// supersedeAfterSend starts an always-listening radiator whose service has
// a breaker that trips on 5 failures, sends "old" (setpoint 22), and 2 s
// later supersedes it with "new" (setpoint 18), which is sent too. It
// returns the rig at +2 s, both attempts unanswered.
func supersedeAfterSend(t *testing.T) *sleepyRig {
	t.Helper()
	r := startSleepy(t, sleepyOptions{awake: true, breaker: &breaker.Options{FailureThreshold: 5}})
	r.submit(`{"current_heating_setpoint":22,"op_id":"old"}`)
	if m := r.next(); m.verb != "set" || m.target["current_heating_setpoint"] != 22.0 {
		t.Fatalf("first message: %s %v; want the set of 22", m.verb, m.target)
	}
	r.advance(1, 2*time.Second) // old waits for its report
	r.submit(`{"current_heating_setpoint":18,"op_id":"new"}`)
	if res := r.await("old's end", func(res devices.Result) bool { return res.OpID == "old" && res.Status.Terminal() }); res.Status != devices.Superseded {
		t.Fatalf("old: %s/%s; want superseded", res.Status, res.Reason)
	}
	if m := r.next(); m.verb != "set" || m.target["current_heating_setpoint"] != 18.0 {
		t.Fatalf("second message: %s %v; want the set of 18", m.verb, m.target)
	}
	return r
}

// counts returns the zw breaker's totals now.
func (r *sleepyRig) counts() breaker.Counts {
	return r.d.services["zw"].breaker.Snapshot(r.clock.Now()).Counts
}

func TestSupersededAttemptUnansweredByItsTimeoutCountsAsAFailure(t *testing.T) {
	r := supersedeAfterSend(t)
	if c := r.counts(); c.Failures != 0 || c.Canceled != 0 {
		t.Fatalf("at the supersede: %d failures, %d canceled; want 0, 0: old's attempt is still in flight", c.Failures, c.Canceled)
	}
	// old's attempt timeout (+5 s) passes with no report from the bridge.
	r.advance(2, 3*time.Second)
	r.eventually("old's attempt to count", func() bool { c := r.counts(); return c.Failures+c.Canceled+c.Ignored > 0 })
	if c := r.counts(); c.Failures != 1 || c.Canceled != 0 || c.Ignored != 0 {
		t.Errorf("after old's attempt timeout: %d failures, %d canceled, %d ignored; want 1 failure", c.Failures, c.Canceled, c.Ignored)
	}
	if s := r.d.services["zw"].breaker.Snapshot(r.clock.Now()); s.ConsecutiveFailures != 1 {
		t.Errorf("%d consecutive failures; want 1", s.ConsecutiveFailures)
	}
}

func TestSupersededAttemptConfirmedAfterwardsCountsAsASuccess(t *testing.T) {
	r := supersedeAfterSend(t)
	r.report(map[string]any{"current_heating_setpoint": 22.0}) // old's set took effect
	r.eventually("old's confirmation to count", func() bool { return r.counts().Successes > 0 })
	r.advance(1, 5*time.Second) // new's attempt timeout: the bridge talked since its send
	r.eventually("new's timeout to count", func() bool { return r.counts().Ignored > 0 })
	if c := r.counts(); c.Successes != 1 || c.Failures != 0 || c.Canceled != 0 || c.Ignored != 1 {
		t.Errorf("%d successes, %d failures, %d canceled, %d ignored; want old a success and new ignored", c.Successes, c.Failures, c.Canceled, c.Ignored)
	}
}

func TestSupersededAttemptIsIgnoredWhenTheBridgeTalkedSinceItsSend(t *testing.T) {
	r := supersedeAfterSend(t)
	r.report(map[string]any{"current_heating_setpoint": 18.0}) // new's set took effect, old's was overtaken
	if res := r.await("new's end", func(res devices.Result) bool { return res.OpID == "new" && res.Status.Terminal() }); res.Status != devices.Succeeded {
		t.Fatalf("new: %s/%s; want succeeded", res.Status, res.Reason)
	}
	r.advance(1, 3*time.Second) // old's attempt timeout
	r.eventually("old's attempt to count", func() bool { c := r.counts(); return c.Failures+c.Canceled+c.Ignored > 0 })
	if c := r.counts(); c.Successes != 1 || c.Failures != 0 || c.Ignored != 1 {
		t.Errorf("%d successes, %d failures, %d ignored; want new a success, old ignored (the bridge is talking)", c.Successes, c.Failures, c.Ignored)
	}
}

// A chain of commands to one device, each superseding the last 1 s after
// its send, with attempts of 5 s and nothing answering: the breaker opens
// on its fifth timeout, that of the fifth command, 9 s after the first
// send: within two attempt timeouts.
func TestSupersedingTrafficToAHungBridgeOpensTheBreaker(t *testing.T) {
	r := startSleepy(t, sleepyOptions{awake: true, breaker: &breaker.Options{FailureThreshold: 5}})
	start := r.clock.Now()
	for i := range 9 {
		r.submit(fmt.Sprintf(`{"current_heating_setpoint":%d,"op_id":"c%d"}`, 20+i%2, i))
		if m := r.next(); m.verb != "set" {
			t.Fatalf("command %d: a %s; want a set", i, m.verb)
		}
		// The earlier commands' attempts still in flight wait for their
		// timeouts, the last one for its report.
		r.advance(min(i, 4)+1, time.Second)
	}
	r.eventually("the breaker to open", func() bool {
		return r.d.services["zw"].breaker.Snapshot(r.clock.Now()).State == breaker.Open
	})
	s := r.d.services["zw"].breaker.Snapshot(r.clock.Now())
	if want := start.Add(9 * time.Second); !s.Since.Equal(want) {
		t.Errorf("opened at +%v; want +9s, the fifth attempt's timeout", s.Since.Sub(start))
	}
}

// A retry let out by a closed breaker, whose record was still being
// stored when the bridge said offline and the breaker opened, is not sent:
// the permit is checked again at the moment of the send, and the command
// fails fast instead.
func TestAttemptLetOutJustBeforeTheBreakerOpenedIsNotSent(t *testing.T) {
	r := startSleepy(t, sleepyOptions{awake: true, breaker: &breaker.Options{FailureThreshold: 5}})
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	r.journal.mu.Lock()
	r.journal.hold = func(op devices.Op) {
		if op.OpID == "old" && op.Attempts == 2 && !op.Status.Terminal() {
			once.Do(func() { close(held); <-release })
		}
	}
	r.journal.mu.Unlock()
	r.submit(`{"current_heating_setpoint":22,"op_id":"old"}`)
	if m := r.next(); m.verb != "set" {
		t.Fatalf("first message: a %s; want a set", m.verb)
	}
	r.advance(1, 5*time.Second)  // attempt 1 times out: a failure, under the threshold
	r.advance(1, 10*time.Second) // the retry's backoff (at most its cap)
	select {
	case <-held:
	case <-timeAfter():
		t.Fatal("attempt 2 was never stored")
	}
	r.d.BridgeState("zw", false, false) // the breaker opens while attempt 2 is stored
	close(release)
	res := r.await("old's end", func(res devices.Result) bool { return res.OpID == "old" && res.Status.Terminal() })
	if res.Status != devices.Failed || res.Reason != devices.ReasonBreakerOpen || res.Attempts != 1 {
		t.Errorf("old: %s/%s after %d attempts; want failed/breaker_open after 1", res.Status, res.Reason, res.Attempts)
	}
	r.none("after the breaker opened")
}
