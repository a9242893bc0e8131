package machine

import (
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
