package machine

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
)

// garage is a safety-critical cover: any opening is a risky action.
var garage = devices.Device{ID: "garage", Class: devices.Cover, Safety: devices.SafetyCritical}

// zeroRand draws no jitter.
type zeroRand struct{}

func (zeroRand) Int64N(int64) int64 { return 0 }

// A risky action's sends are counted in its stored record, resends after
// a lost connection included, so that a restart does not forget them: an
// opening sent once, its delivery unknown, then resent, and the hub
// restarting before a report, gets no third send after the restart.
func TestRiskyActionReachesTheDeviceAtMostTwiceAcrossARestart(t *testing.T) {
	p := retry.Policy{MaxAttempts: 3, AttemptTimeout: 5 * time.Second, Backoff: retry.Backoff{Base: time.Second}}
	open := devices.Op{OpID: "open", Device: "garage", Target: devices.Target{"position": 100.0},
		Status: devices.Accepted, AcceptedAt: t0, Deadline: t0.Add(time.Hour)}
	now := t0
	m := New(garage)
	c := m.Accept(open, Fresh)
	m.Next()
	a := NewAttempts(c, garage, "zigbee", p, nil, now)
	send := func(a *Attempts, c *Command, res SendResult) {
		t.Helper()
		st := a.Next(now, zeroRand{})
		if st.Kind != StepAttempt || !st.Read || !st.Strict {
			t.Fatalf("step %+v; want an attempt after a strict fresh read", st)
		}
		if _, ok, _ := a.BeforeSend(); !ok {
			t.Fatalf("send %d refused; want it allowed", c.Op.Sends+1)
		}
		c.RecordAttempt(st.Resend, now)
		c.Sending()
		a.Sent(res, nil)
	}
	send(a, c, DeliveryUnknown) // the connection went while it waited for its PUBACK
	send(a, c, Sent)            // resent after the reconnect: no report came
	stored := c.Op              // what the store holds when the hub restarts

	m = New(garage)
	c = m.Accept(stored, Resumed)
	m.Next()
	a = NewAttempts(c, garage, "zigbee", p, nil, now)
	if st := a.Next(now, zeroRand{}); st.Kind != StepResolve {
		t.Fatalf("first step after the restart %+v; want the fresh read that resolves the attempt in flight", st)
	}
	a.Resolved() // the door did not move
	for st := a.Next(now, zeroRand{}); st.Kind != StepAttempt; st = a.Next(now, zeroRand{}) {
		if st.Kind != StepBackoff {
			t.Fatalf("step %+v; want the backoff, then the attempt", st)
		}
		now = now.Add(st.Wait)
	}
	end, ok, _ := a.BeforeSend()
	if ok {
		t.Fatalf("a third send of the opening was allowed after the restart (stored attempts %d, sends %d)", stored.Attempts, stored.Sends)
	}
	if end.Kind != StepEnd || end.Status != devices.Failed {
		t.Errorf("end %+v; want failed", end)
	}
}

// A retry whose backoff ends past the policy's deadline (the process
// was held up: a busy hub, a suspended host) is not sent: it ends
// failed/deadline_exceeded.
func TestRetryPastThePolicyDeadlineAfterItsBackoffIsNotSent(t *testing.T) {
	p := retry.Policy{MaxAttempts: 3, AttemptTimeout: 5 * time.Second, Deadline: 10 * time.Second,
		Backoff: retry.Backoff{Base: time.Second, Jitter: retry.None}}
	lamp := devices.Device{ID: "lamp", Class: devices.Light}
	m := New(lamp)
	c := m.Accept(devices.Op{OpID: "on", Device: "lamp", Target: devices.Target{"state": "ON"},
		Status: devices.Accepted, AcceptedAt: t0, Deadline: t0.Add(time.Minute)}, Fresh)
	m.Next()
	a := NewAttempts(c, lamp, "zigbee", p, nil, t0)
	if st := a.Next(t0, zeroRand{}); st.Kind != StepAttempt {
		t.Fatalf("first step %+v; want the attempt", st)
	}
	c.RecordAttempt(false, t0)
	c.Sending()
	a.Sent(Sent, nil)
	a.Unconfirmed(false) // no report within the attempt's 5 s
	now := t0.Add(5 * time.Second)
	if st := a.Next(now, zeroRand{}); st.Kind != StepBackoff {
		t.Fatalf("step after the timeout %+v; want the backoff before the retry", st)
	}
	// The backoff was 1 s; the worker comes back at +11 s, past the
	// policy's deadline (+10 s).
	st := a.Next(t0.Add(11*time.Second), zeroRand{})
	if st.Kind != StepEnd || st.Status != devices.Failed || st.Reason != devices.ReasonDeadlineExceeded {
		t.Fatalf("step past the policy deadline %+v; want the end, failed/deadline_exceeded", st)
	}
}

// An attempt that went unconfirmed with the link steady is followed by a
// read-back of the state before the policy decides, bounded by the TTL
// when it comes before the policy's deadline; it records no attempt.
// After a link change the same attempt is resent instead, with no read.
func TestUnconfirmedAttemptIsReadBackBeforeThePolicyDecides(t *testing.T) {
	p := retry.Policy{MaxAttempts: 2, AttemptTimeout: 5 * time.Second, Backoff: retry.Backoff{Base: time.Second, Jitter: retry.None}}
	lamp := devices.Device{ID: "lamp", Class: devices.Light}
	m := New(lamp)
	c := m.Accept(devices.Op{OpID: "on", Device: "lamp", Target: devices.Target{"state": "ON"},
		Status: devices.Accepted, AcceptedAt: t0, Deadline: t0.Add(time.Minute)}, Fresh)
	m.Next()
	a := NewAttempts(c, lamp, "zigbee", p, nil, t0)
	a.ReadBackUnconfirmed()
	send := func(at time.Time) {
		if st := a.Next(at, zeroRand{}); st.Kind != StepAttempt {
			t.Fatalf("step %+v; want an attempt", st)
		}
		c.RecordAttempt(false, at)
		c.Sending()
		a.Sent(Sent, nil)
	}
	send(t0)
	if !a.Unconfirmed(true) {
		t.Fatal("after a link change: no resend")
	}
	if st := a.Next(t0.Add(5*time.Second), zeroRand{}); st.Kind != StepAttempt || !st.Resend || st.Read {
		t.Fatalf("after a link change: %+v; want the resend, no read", st)
	}
	c.RecordAttempt(true, t0.Add(5*time.Second))
	a.Sent(Sent, nil)
	a.Unconfirmed(false)
	now := t0.Add(10 * time.Second)
	st := a.Next(now, zeroRand{})
	if st.Kind != StepReadBack || !st.Read || st.Strict || !st.Until.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after the timeout: %+v; want a non-strict read-back until the TTL", st)
	}
	if c.Op.Attempts != 1 {
		t.Errorf("attempts after the read-back step: %d; want 1", c.Op.Attempts)
	}
	if st := a.Next(now, zeroRand{}); st.Kind != StepBackoff {
		t.Fatalf("after the read-back: %+v; want the policy's backoff", st)
	}
}

// A send the bridge reported failed after taking it (Failed) is a send
// failure for the policy: no read-back, and the last attempt's end says
// send_failed with the bridge's error.
func TestBridgeReportedFailureIsASendFailure(t *testing.T) {
	p := retry.Policy{MaxAttempts: 1, AttemptTimeout: 5 * time.Second, RetryOn: []retry.Class{retry.GroupTransient}}
	lamp := devices.Device{ID: "lamp", Class: devices.Light}
	m := New(lamp)
	c := m.Accept(devices.Op{OpID: "on", Device: "lamp", Target: devices.Target{"state": "ON"},
		Status: devices.Accepted, AcceptedAt: t0, Deadline: t0.Add(time.Minute)}, Fresh)
	m.Next()
	a := NewAttempts(c, lamp, "zigbee", p, nil, t0)
	a.Next(t0, zeroRand{})
	c.RecordAttempt(false, t0)
	c.Sending()
	a.Sent(Sent, nil)
	a.Failed(fmt.Errorf("zigbee2mqtt: Publish 'set' 'state' to 'lamp' failed: 'Delivery failed'"))
	st := a.Next(t0.Add(time.Second), zeroRand{})
	if st.Kind != StepEnd || st.Status != devices.Failed || st.Reason != devices.ReasonSendFailed || !strings.Contains(st.Detail, "Delivery failed") {
		t.Fatalf("after the bridge's failure: %+v; want the end failed/send_failed naming the error", st)
	}
}
