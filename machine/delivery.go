package machine

import (
	"fmt"
	"time"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
)

// MaxAttemptsPerWake bounds the sends of one command within one awake
// lease of a sleepy device: the delivery and one further attempt.
const MaxAttemptsPerWake = 2

// Delivery is the delivery of a sleepy device's command within one awake
// lease, as data: at most MaxAttemptsPerWake attempts, each with its
// checks, all before the lease ends. The caller runs what Next asks for
// (the gates, the fresh read, the send, the verifying wait) and says how
// it went; Delivery decides the rest. When it stops, the command goes
// back to wait for the next lease (Device.Delivered), unless it ended.
type Delivery struct {
	m       *Device
	c       *Command
	gen     uint64
	service string
	n       int // attempts begun in this lease
}

// NewDelivery begins the delivery of c, which Deliver took in the lease
// gen, for the device's service.
func (m *Device) NewDelivery(c *Command, gen uint64, service string) *Delivery {
	return &Delivery{m: m, c: c, gen: gen, service: service}
}

// Next decides, at now, whether another attempt goes out in this lease:
// StepStop (the lease ended, the TTL is up, or the lease's attempts are
// spent) or StepAttempt, whose gates must pass by Until (the lease's end
// or the TTL, whichever is first), with a fresh read first for a risky
// action (strict) and before the first send to a safety-critical device.
func (d *Delivery) Next(now time.Time) Step {
	if d.n >= MaxAttemptsPerWake {
		return Step{Kind: StepStop}
	}
	until, ok := d.until(now)
	if !ok {
		return Step{Kind: StepStop}
	}
	d.n++
	op := d.c.Op
	risky := devices.Risky(d.m.dev, op.Target)
	s := Step{Kind: StepAttempt, Until: until}
	if risky || (d.m.dev.SafetyCritical() && op.Attempts == 0) {
		s.Read, s.Strict, s.When = true, risky, fmt.Sprintf("at the wake, before attempt %d", op.Attempts+1)
	}
	return s
}

// until is when the delivery must be done by, at now: the lease's end or
// the TTL, whichever is first; false when the lease (gen) is over or that
// moment has passed.
func (d *Delivery) until(now time.Time) (time.Time, bool) {
	l := d.m.Lease(now)
	if !l.Awake || l.Gen != d.gen {
		return time.Time{}, false
	}
	end := l.Until
	if d.c.Op.Deadline.Before(end) {
		end = d.c.Op.Deadline
	}
	return end, now.Before(end)
}

// BeforeSend is the last word before the send at now, once the gates and
// the read passed: ok means record the attempt and send it. Otherwise the
// step says why: StepStop when the command ended, the lease ended or was
// replaced (the waits outlasted it, or the bridge said the node is
// asleep), or the TTL passed; StepEnd when a risky action's sends are
// spent (failed), or when the command was resumed after a restart with an
// attempt of unknown delivery and the state heard since the start shows
// its target (succeeded, with that state: the device applied it at an
// earlier wake, and the set is not sent again, which spares its battery
// and airtime).
func (d *Delivery) BeforeSend(now time.Time) (Step, bool) {
	c := d.c
	if c.ended {
		return Step{Kind: StepStop}, false
	}
	if l := d.m.Lease(now); !l.Awake || l.Gen != d.gen || !now.Before(c.Op.Deadline) {
		return Step{Kind: StepStop}, false
	}
	if RiskyCapped(d.m.dev, c) {
		reason, detail := GiveUp(c.Op, retry.Decision{Reason: retry.GiveUpAttempts}, nil, MaxRiskyAttempts, d.service)
		return Step{Kind: StepEnd, Status: devices.Failed, Reason: reason, Detail: detail}, false
	}
	if c.resumedUnsent {
		if state, ok := d.m.HeardAt(c.Op.Target); ok {
			return Step{Kind: StepEnd, Status: devices.Succeeded, State: state}, false
		}
	}
	return Step{}, true
}

// Sending reports, at now, the moment the set leaves, whether the lease
// still runs: the bridge may have said the node is asleep while the
// attempt was stored. If not, nothing is sent; the attempt is taken back.
func (d *Delivery) Sending(now time.Time) bool {
	l := d.m.Lease(now)
	if !l.Awake || l.Gen != d.gen {
		return false
	}
	d.c.turn = d.gen
	return true
}

// SendFailed says the bridge refused the send with err: a permanent
// failure ends the command (the step); another lets Next decide on the
// lease's further attempt.
func (d *Delivery) SendFailed(err error) (Step, bool) {
	if class := retry.Classify(err); class.Permanent() {
		reason, detail := GiveUp(d.c.Op, retry.Decision{Reason: retry.GiveUpPermanent, Class: class}, err, d.c.Op.Attempts, d.service)
		return Step{Kind: StepEnd, Status: devices.Failed, Reason: reason, Detail: detail}, true
	}
	return Step{}, false
}

// Sent says the send went out at now; it returns until when to wait for
// its confirmation (the lease as it stands now, or the TTL), and false if
// the lease ended during the send (the bridge said the node is asleep):
// then nothing more goes to the node, not even a read, and the next lease
// verifies it.
func (d *Delivery) Sent(now time.Time) (time.Time, bool) {
	l := d.m.Lease(now)
	if !l.Awake || l.Gen != d.gen {
		return time.Time{}, false
	}
	end := l.Until
	if d.c.Op.Deadline.Before(end) {
		end = d.c.Op.Deadline
	}
	return end, true
}

// Silent says a request to the device went unanswered at now: it has gone
// back to sleep, and the lease ends (the next wake delivers again),
// unless the wait ended at the command's own deadline, which says nothing
// of the device. It reports whether the lease ended.
func (d *Delivery) Silent(now time.Time) bool {
	d.c.turn = d.gen // it had the device's ear
	return now.Before(d.c.Op.Deadline) && d.m.EndLease(d.gen)
}
