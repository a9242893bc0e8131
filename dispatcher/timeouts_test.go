package dispatcher

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

var warm = map[string]any{"current_heating_setpoint": 21.0}

// firstSet submits op_id "warm" to the rig's always-listening radiator,
// answers every read before its first set with another setpoint, and
// returns the set.
func firstSet(r *sleepyRig) bridgeMsg {
	r.t.Helper()
	r.submit(`{"op_id":"warm","current_heating_setpoint":21}`)
	for {
		m := r.next()
		if m.verb == "set" {
			return m
		}
		r.report(map[string]any{"current_heating_setpoint": 18.0})
	}
}

// unwatched reports whether the radiator's command waits for no
// confirmation.
func (r *sleepyRig) unwatched() bool {
	q := r.d.devices["radiator"]
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.cur == nil || q.cur.confirm == nil
}

// A device's own attempt timeout (a motor that takes 20 s) replaces its
// service's 5 s: its report 15 s after the send confirms the first
// attempt, and nothing is resent meanwhile.
func TestDeviceAttemptTimeoutOutlastsTheServices(t *testing.T) {
	r := startSleepy(t, sleepyOptions{awake: true, attemptTimeout: 20 * time.Second})
	sent := firstSet(r)
	r.advance(1, 5*time.Second)  // the service's timeout: the device's still runs
	r.advance(1, 10*time.Second) // a retry's backoff (at most 1 s) would have passed
	r.report(warm)
	res := r.await("warm's end", func(res devices.Result) bool { return res.OpID == "warm" && res.Status.Terminal() })
	if res.Status != devices.Succeeded || res.Attempts != 1 {
		t.Fatalf("warm: %s/%s after %d attempts; want succeeded after 1", res.Status, res.Reason, res.Attempts)
	}
	r.none("after the confirmation")
	if got := r.clock.Now().Sub(sent.at); got != 15*time.Second {
		t.Errorf("confirmed %s after the send; want 15s", got)
	}
}

// With read-back, an attempt no report confirmed reads the state; a
// device at the target (it applied the set and never said so) ends the
// command succeeded, with nothing resent and one attempt.
func TestReadBackAtTheTargetSucceedsWithoutAResend(t *testing.T) {
	r := startSleepy(t, sleepyOptions{awake: true, readBack: true})
	sent := firstSet(r)
	r.advance(1, 5*time.Second) // the attempt's timeout, unconfirmed
	m := r.next()
	if m.verb != "get" || m.target["current_heating_setpoint"] == nil {
		t.Fatalf("after the timeout: a %s %v; want the read-back of the setpoint", m.verb, m.target)
	}
	if got := m.at.Sub(sent.at); got != 5*time.Second {
		t.Errorf("read back %s after the send; want at the 5s timeout", got)
	}
	r.report(warm)
	res := r.await("warm's end", func(res devices.Result) bool { return res.OpID == "warm" && res.Status.Terminal() })
	if res.Status != devices.Succeeded || res.Attempts != 1 {
		t.Fatalf("warm: %s/%s after %d attempts; want succeeded after 1", res.Status, res.Reason, res.Attempts)
	}
	r.none("after the read-back")
}

// A read-back that shows another known state leaves it to the policy:
// the retry goes after its backoff, and its confirmation ends the command
// after 2 attempts.
func TestReadBackOfAnotherStateResendsAsThePolicyAllows(t *testing.T) {
	r := startSleepy(t, sleepyOptions{awake: true, readBack: true})
	firstSet(r)
	r.advance(1, 5*time.Second)
	if m := r.next(); m.verb != "get" {
		t.Fatalf("after the timeout: a %s; want the read-back", m.verb)
	}
	r.report(map[string]any{"current_heating_setpoint": 18.0}) // not applied
	r.settled()                                                // the answer taken: the backoff waits
	r.advance(1, time.Second)                                  // the backoff, at most 1 s
	if m := r.next(); m.verb != "set" {
		t.Fatalf("after the read-back: a %s; want attempt 2's set", m.verb)
	}
	r.report(warm)
	res := r.await("warm's end", func(res devices.Result) bool { return res.OpID == "warm" && res.Status.Terminal() })
	if res.Status != devices.Succeeded || res.Attempts != 2 {
		t.Fatalf("warm: %s/%s after %d attempts; want succeeded after 2", res.Status, res.Reason, res.Attempts)
	}
}

// A read-back nobody answers ends at the read timeout, then the policy
// decides as without it: the second attempt, then failed/timeout after 2.
func TestUnansweredReadBackLeavesItToThePolicy(t *testing.T) {
	r := startSleepy(t, sleepyOptions{awake: true, readBack: true})
	firstSet(r)
	r.advance(1, 5*time.Second)
	if m := r.next(); m.verb != "get" {
		t.Fatalf("after the timeout: a %s; want the read-back", m.verb)
	}
	r.advance(1, DefaultReadTimeout) // no answer
	r.advance(1, time.Second)        // the backoff
	if m := r.next(); m.verb != "set" {
		t.Fatalf("after the unanswered read: a %s; want attempt 2's set", m.verb)
	}
	r.advance(1, 5*time.Second) // attempt 2 unconfirmed
	if m := r.next(); m.verb != "get" {
		t.Fatalf("after attempt 2: a %s; want its read-back", m.verb)
	}
	r.advance(1, DefaultReadTimeout)
	res := r.await("warm's end", func(res devices.Result) bool { return res.OpID == "warm" && res.Status.Terminal() })
	if res.Status != devices.Failed || res.Reason != devices.ReasonTimeout || res.Attempts != 2 {
		t.Fatalf("warm: %s/%s after %d attempts; want failed/timeout after 2", res.Status, res.Reason, res.Attempts)
	}
}

// The read-back waits for its answer no longer than the policy's
// deadline: with the deadline 3 s after the attempt's timeout, the command
// ends failed/deadline_exceeded then, before the 5 s read timeout, and
// nothing is resent.
func TestReadBackEndsAtThePolicyDeadline(t *testing.T) {
	r := startSleepy(t, sleepyOptions{awake: true, readBack: true, deadline: 8 * time.Second})
	sent := firstSet(r)
	r.advance(1, 5*time.Second)
	if m := r.next(); m.verb != "get" {
		t.Fatalf("after the timeout: a %s; want the read-back", m.verb)
	}
	r.advance(1, 3*time.Second)
	res := r.await("warm's end", func(res devices.Result) bool { return res.OpID == "warm" && res.Status.Terminal() })
	if res.Status != devices.Failed || res.Reason != devices.ReasonDeadlineExceeded || res.Attempts != 1 {
		t.Fatalf("warm: %s/%s after %d attempts; want failed/deadline_exceeded after 1", res.Status, res.Reason, res.Attempts)
	}
	if got := r.clock.Now().Sub(sent.at); got != 8*time.Second {
		t.Errorf("ended %s after the send; want 8s", got)
	}
	r.none("after the end")
}

// A set the bridge reports failed (SendFailed) ends its attempt at once,
// not at its timeout: the retry goes after its backoff alone, and the
// second failure ends the command failed/send_failed with the bridge's
// error, all before the first attempt's 5 s timeout would have passed.
// A failure of an attribute the set did not name changes nothing.
func TestBridgeReportedSendFailureEndsTheAttemptAtOnce(t *testing.T) {
	r := startSleepy(t, sleepyOptions{awake: true, readBack: true})
	sent := firstSet(r)
	r.d.SendFailed("radiator", "state", errors.New("not this set's"))
	q := r.d.devices["radiator"]
	q.mu.Lock()
	taken := q.cur == nil || q.cur.confirm == nil || q.cur.confirm.failure != nil
	q.mu.Unlock()
	if taken {
		t.Fatal("a failure of an attribute the set did not name ended its attempt")
	}
	r.d.SendFailed("radiator", "current_heating_setpoint", errors.New("Delivery failed (MAC_NO_ACK)"))
	r.eventually("the attempt to stop waiting for its confirmation", r.unwatched)
	// The backoff only (at most 1 s); the second move covers a first one
	// that came as the confirmation's timer was being stopped, and
	// otherwise moves attempt 2's timer by 1 s.
	r.advance(1, time.Second)
	r.advance(1, time.Second)
	m := r.next()
	if m.verb != "set" {
		t.Fatalf("after the failure: a %s; want attempt 2's set, no read-back", m.verb)
	}
	if got := m.at.Sub(sent.at); got >= 5*time.Second {
		t.Errorf("attempt 2 %s after attempt 1; want before its 5s timeout", got)
	}
	// During attempt 2 a failure may be attempt 1's, logged late (the
	// log line names no set): it is not taken, and attempt 2 waits for
	// its report or its timeout.
	r.d.SendFailed("radiator", "current_heating_setpoint", errors.New("Delivery failed (MAC_NO_ACK)"))
	q.mu.Lock()
	taken = q.cur == nil || q.cur.confirm == nil || q.cur.confirm.failure != nil
	q.mu.Unlock()
	if taken {
		t.Fatal("a failure during attempt 2 ended it; it may be attempt 1's, late")
	}
}

// A failure the bridge reports during a risky action's attempt (an
// unlock) is not taken: the log line names no set, and one about an
// earlier command could spend the unlock's capped attempts. The attempt
// waits for its report or its timeout.
func TestBridgeReportedFailureNeverEndsARiskyAttempt(t *testing.T) {
	r := startSleepy(t, sleepyOptions{awake: true, class: devices.Lock})
	r.submit(`{"op_id":"open","state":"UNLOCK"}`)
	for {
		m := r.next()
		if m.verb == "set" {
			break
		}
		r.report(map[string]any{"state": "LOCK", "lock_state": "locked"}) // the fresh read's answer
	}
	r.d.SendFailed("radiator", "state", errors.New("Delivery failed (MAC_NO_ACK)"))
	q := r.d.devices["radiator"]
	q.mu.Lock()
	taken := q.cur == nil || q.cur.confirm == nil || q.cur.confirm.failure != nil
	q.mu.Unlock()
	if taken {
		t.Fatal("a bridge-reported failure ended an unlock's attempt")
	}
}

// slowBridge is a bridge whose own calls may take timeout (an HTTP
// service's two requests); it tells each send's time left before its
// context's deadline.
type slowBridge struct {
	*scriptedBridge
	timeout time.Duration
	left    chan time.Duration
}

func (b slowBridge) CallTimeout() time.Duration { return b.timeout }

func (b slowBridge) Send(ctx context.Context, d devices.Device, target devices.Target) error {
	deadline, _ := ctx.Deadline()
	b.left <- time.Until(deadline)
	return b.scriptedBridge.Send(ctx, d, target)
}

// A bridge whose own calls may take longer (an HTTP service's command and
// status read, 30 s) than the dispatcher's 10 s bound on a send gets that
// long and a second more, so that a service that does not answer ends with the
// bridge's own timeout (which counts against its breaker), never cut short
// by the dispatcher's deadline (which counts as nothing).
func TestSendOutlastsTheBridgesOwnCallTimeout(t *testing.T) {
	left := make(chan time.Duration, 8)
	r := startSleepy(t, sleepyOptions{awake: true, bridge: func(b *scriptedBridge) Bridge {
		return slowBridge{scriptedBridge: b, timeout: 30 * time.Second, left: left}
	}})
	firstSet(r)
	if got := <-left; got <= 30*time.Second {
		t.Errorf("the send had %s before its deadline; want more than the bridge's own 30s", got.Round(time.Second))
	}
}

// A bridge whose own timeout is shorter than the bound keeps the bound:
// its own timeout ends the request first.
func TestRequestBoundKeepsTenSecondsForQuickBridges(t *testing.T) {
	quick := slowBridge{timeout: 5 * time.Second}
	if got := requestBound(quick); got != sendTimeout {
		t.Errorf("requestBound(5s bridge) = %s, want %s", got, sendTimeout)
	}
	if got := requestBound(&scriptedBridge{}); got != sendTimeout {
		t.Errorf("requestBound(MQTT bridge) = %s, want %s", got, sendTimeout)
	}
	if got := requestBound(slowBridge{timeout: 10 * time.Second}); got != 11*time.Second {
		t.Errorf("requestBound(10s bridge) = %s, want 11s: the bridge's own timeout must come first", got)
	}
}
