package dispatcher

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"time"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
)

// Sleepy devices (issue 4). A battery device that sleeps listens only in
// short awake leases; its bridge or parent already holds messages and
// retries at the radio layer. So Hearth keeps its commands queued while it
// sleeps, sends nothing on a timer, and delivers at the next lease:
//
//   - a lease begins at any wake signal — a report from the device (a
//     check-in included), a node status awake or alive (Z-Wave JS UI), its
//     availability coming back from offline — and lasts the device's
//     awake window from the latest signal; once a bridge has said the
//     node is asleep, only its next awake begins a lease (the values a
//     gateway publishes from its cache are not the device), and a
//     retained node status begins none; the lease ends at once when the
//     bridge says the node is asleep, or when a request to the device goes
//     unanswered;
//   - in one lease a command gets its send and at most one further
//     attempt, and the verifying read of its state, all before the lease
//     ends;
//   - the newest target per attribute wins: an older command ends
//     superseded when a newer one covers it (as for every device), and a
//     superseded command that never reached the device goes to the
//     dead-letter store;
//   - a command whose TTL (by default one wake interval) passes while it
//     waits ends expired, goes to the dead-letter store, and is never sent
//     late; one sent but never confirmed ends failed/unverified, never
//     succeeded.

// wokeLocked takes a wake signal of the device at now: the awake lease
// lasts its awake window from now. Called with q.mu held; a no-op for a
// device that is not sleepy.
func (q *deviceQueue) wokeLocked(now time.Time) {
	if !q.dev.Sleep.Sleepy || q.nodeAsleep {
		return
	}
	if until := now.Add(q.dev.Sleep.AwakeWindow); until.After(q.awakeUntil) {
		q.awakeUntil = until
	}
	close(q.woke)
	q.woke = make(chan struct{})
}

// endLease ends the device's awake lease at once: the bridge says it is
// asleep, or a request to it went unanswered.
func (q *deviceQueue) endLease() {
	q.mu.Lock()
	q.awakeUntil = time.Time{}
	q.mu.Unlock()
}

// nodeStatus takes a node status of the device for its awake lease; see
// Dispatcher.NodeStatus.
func (q *deviceQueue) nodeStatus(status devices.NodeStatus) {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch status {
	case devices.NodeAwake, devices.NodeAlive:
		q.nodeAsleep = false
		q.wokeLocked(q.d.now())
	case devices.NodeAsleep:
		q.nodeAsleep = true
		q.awakeUntil = time.Time{}
	case devices.NodeDead:
		q.awakeUntil = time.Time{}
	}
}

// lease returns whether the device is awake at now, until when, and the
// channel closed at its next wake signal.
func (q *deviceQueue) lease(now time.Time) (awake bool, until time.Time, woke <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return now.Before(q.awakeUntil), q.awakeUntil, q.woke
}

// executeSleepy runs t for a sleepy device: queued while it sleeps,
// delivered and verified within an awake lease, expired or unverified at
// its deadline. See the comment at the top of this file.
func (q *deviceQueue) executeSleepy(ctx context.Context, t *task) {
	d := q.d
	queued := false // the queued result for this sleep was published
	for {
		if ctx.Err() != nil {
			return // shutting down: the op stays pending in the store
		}
		now := d.now()
		q.mu.Lock()
		op := t.op
		q.mu.Unlock()
		if !now.Before(op.Deadline) {
			if op.Attempts > 0 {
				q.finish(t, devices.Failed, devices.ReasonUnverified,
					fmt.Sprintf("sent %d times at the device's wakes, but no report confirmed it before the TTL passed; it may or may not have been applied", op.Attempts), nil)
			} else {
				q.finish(t, devices.Expired, devices.ReasonTTLElapsed,
					fmt.Sprintf("the device did not wake within the TTL (wake interval %s); never sent", q.dev.Sleep.WakeInterval), nil)
			}
			return
		}
		awake, until, woke := q.lease(now)
		if !awake {
			if !queued {
				queued = true
				r := op.Result()
				r.Status, r.Reason, r.At = devices.Queued, devices.ReasonAsleep, now
				r.Detail = fmt.Sprintf("the device sleeps; the command waits for its next wake (wake interval %s) until %s",
					q.dev.Sleep.WakeInterval, op.Deadline.UTC().Format(time.RFC3339))
				d.publishResult(r)
				d.log.Info("command queued for a sleeping device", "op_id", op.OpID, "device", op.Device, "deadline", op.Deadline)
			}
			timer := d.clock.NewTimer(op.Deadline.Sub(now))
			select {
			case <-woke:
			case <-timer.Chan():
			case <-t.cancel:
				timer.Stop()
				return
			case <-ctx.Done():
				timer.Stop()
				return
			}
			timer.Stop()
			continue
		}
		d.log.Info("device awake: delivering", "op_id", op.OpID, "device", op.Device, "awake_until", until)
		if stop := q.deliverAwake(ctx, t, until); stop {
			return
		}
		queued = false // not confirmed in this lease: queued again for the next
	}
}

// maxAttemptsPerWake bounds the sends of one command within one awake
// lease: the delivery and one further attempt.
const maxAttemptsPerWake = 2

// deliverAwake attempts t within the awake lease that ends at until: the
// checks, the send, a wait for the confirming report, and the verifying
// read of the state, all before the lease ends; a further attempt when
// the device answers the read with another state. stop means t ended (or
// ctx is done); otherwise the lease ended without a confirmation.
func (q *deviceQueue) deliverAwake(ctx context.Context, t *task, until time.Time) (stop bool) {
	d, svc := q.d, q.svc
	p := svc.Policy
	for n := 0; n < maxAttemptsPerWake; n++ {
		now := d.now()
		q.mu.Lock()
		op := t.op
		q.mu.Unlock()
		end := until
		if op.Deadline.Before(end) {
			end = op.Deadline
		}
		if !now.Before(end) {
			return false
		}
		permit, ok, stop := q.admit(ctx, t, end)
		if stop {
			return true
		} else if !ok {
			return false
		}
		if ready, stop := q.awaitLink(ctx, t, end); stop || !ready {
			q.release(permit, breaker.Canceled)
			return stop
		}
		now = d.now()
		if !q.recheck(t, op, now) {
			q.release(permit, breaker.Canceled)
			return true
		}
		risky := devices.Risky(q.dev.Device, op.Target)
		if risky || (q.dev.SafetyCritical() && op.Attempts == 0) {
			proceed, stop := q.revalidate(ctx, t, risky, "at the wake, before attempt "+strconv.Itoa(op.Attempts+1))
			if !proceed {
				q.release(permit, breaker.Canceled)
				return stop || !d.now().Before(op.Deadline)
			}
		}

		// Record the attempt before sending (see execute).
		q.mu.Lock()
		if t.ended {
			q.mu.Unlock()
			q.release(permit, breaker.Canceled)
			return true
		}
		prev := t.op
		t.op.Attempts++
		t.op.LastSentAt = d.now()
		t.op.UpdatedAt = t.op.LastSentAt
		op = t.op
		q.mu.Unlock()
		if err := d.journal.Save(op); err != nil {
			d.log.Error("store attempt", "op_id", op.OpID, "err", err)
		}
		c, sent, err := q.send(ctx, t)
		if sent && d.audited(q.dev.Device) && (err == nil || !notSent(err)) {
			e := auditEntry(q.dev.Device, op, devices.AuditSent, op.LastSentAt)
			e.Attempt = op.Attempts
			d.audit(e)
		}
		if !sent {
			q.release(permit, breaker.Canceled)
			if ctx.Err() != nil {
				q.unsent(t, prev)
			}
			return true
		}
		if err != nil {
			q.unwatch(t)
			if notSent(err) || deliveryUnknown(err) {
				// Nothing left Hearth, or the connection went: no attempt
				// spent on it; the next lease (or this one, once the link
				// is back) tries again.
				q.unsent(t, prev)
				q.release(permit, breaker.Canceled)
				d.log.Info("attempt not sent to an awake device", "op_id", op.OpID, "device", op.Device, "err", err)
				return false
			}
			q.release(permit, q.outcome(err, false, false))
			d.log.Info("attempt", "op_id", op.OpID, "device", op.Device, "attempt", op.Attempts, "outcome", "send_error", "err", err)
			if retry.Classify(err).Permanent() {
				q.giveUp(t, op, retry.Decision{Reason: retry.GiveUpPermanent, Class: retry.Classify(err)}, err, op.Attempts)
				return true
			}
			continue
		}
		d.log.Info("attempt", "op_id", op.OpID, "device", op.Device, "attempt", op.Attempts, "outcome", "sent", "awake_until", until)
		switch q.verify(ctx, t, c, permit, end, p.AttemptTimeout) {
		case verifyConfirmed, verifyStop:
			return true
		case verifyOtherState:
			continue // the device answered with another state: one further attempt
		case verifySilent:
			// A request to the device went unanswered: it has gone back
			// to sleep. The lease ends; the next wake delivers again.
			q.endLease()
			return false
		}
	}
	return false
}

// verify outcomes.
type verifyOutcome int

const (
	verifyConfirmed  verifyOutcome = iota // t succeeded (or failed jammed): ended
	verifyStop                            // t ended otherwise, or ctx is done
	verifyOtherState                      // the device reports a state other than the target
	verifySilent                          // no answer before the lease or the attempt timeout ended
)

// verify waits for c, the confirmation of a send to an awake sleepy
// device: first for the report the device sends by itself, up to half of
// what is left of the lease (at most timeout), then it asks the bridge to
// read the state (the verifying read) and waits for the answer until end
// or timeout after the send. A report of the target confirms; a report of
// other values for the target's attributes after the read is the device
// saying no.
func (q *deviceQueue) verify(ctx context.Context, t *task, c *confirmation, permit *breaker.Permit, end time.Time, timeout time.Duration) verifyOutcome {
	d := q.d
	start := d.now()
	if e := start.Add(timeout); e.Before(end) {
		end = e
	}
	first := end.Sub(start) / 2
	chk := &stateCheck{seen: map[string]any{}, news: make(chan struct{}, 1)}
	read := false
	timer := d.clock.NewTimer(first)
	defer timer.Stop()
	defer func() {
		q.mu.Lock()
		if t.check == chk {
			t.check = nil
		}
		q.mu.Unlock()
	}()
	for {
		var news <-chan struct{}
		if read {
			news = chk.news
		}
		select {
		case <-c.done:
			q.mu.Lock()
			state := maps.Clone(c.seen)
			attempt := t.op.Attempts
			q.mu.Unlock()
			d.log.Info("attempt confirmed", "op_id", t.op.OpID, "device", q.dev.ID, "attempt", attempt, "verified_by_read", read)
			q.release(permit, breaker.Success)
			q.finish(t, devices.Succeeded, "", "", state)
			return verifyConfirmed
		case <-c.faulted:
			q.mu.Lock()
			state := maps.Clone(c.seen)
			attempt, fault := t.op.Attempts, c.fault
			q.mu.Unlock()
			q.release(permit, breaker.Success)
			q.finish(t, devices.Failed, devices.ReasonJammed,
				fmt.Sprintf("after attempt %d the device reported %s; not retried: a jammed bolt needs a person to look", attempt, fault), state)
			return verifyConfirmed
		case <-news:
			q.mu.Lock()
			seen := maps.Clone(chk.seen)
			q.mu.Unlock()
			if q.assess(t.op.Target, seen) == devices.ReadingKnown && !q.satisfied(t.op.Target, seen) {
				q.unwatch(t)
				q.release(permit, breaker.Success) // the bridge and the device answered
				d.log.Info("verifying read: the device is not at the target", "op_id", t.op.OpID, "device", q.dev.ID, "state", showState(seen))
				return verifyOtherState
			}
		case <-timer.Chan():
			if read {
				q.unwatch(t)
				// A sleeping device's silence says nothing about its
				// service.
				q.release(permit, breaker.Ignored)
				d.log.Info("attempt unconfirmed: the device did not answer before its lease ended", "op_id", t.op.OpID, "device", q.dev.ID)
				return verifySilent
			}
			read = true
			q.mu.Lock()
			if t.ended {
				q.mu.Unlock()
				return verifyStop
			}
			t.check = chk
			target := t.op.Target
			q.mu.Unlock()
			readCtx, cancel := context.WithTimeout(ctx, sendTimeout)
			err := q.svc.Bridge.Read(readCtx, q.dev.Device, target)
			cancel()
			d.log.Info("verifying read", "op_id", t.op.OpID, "device", q.dev.ID, "err", err)
			timer.Reset(end.Sub(d.now()))
		case <-t.cancel:
			q.release(permit, breaker.Canceled)
			return verifyStop
		case <-ctx.Done():
			q.release(permit, breaker.Canceled)
			return verifyStop
		}
	}
}

// deadLetter files op, terminal, in the dead-letter store; a failure to
// store is logged.
func (d *Dispatcher) deadLetter(ops ...devices.Op) {
	if d.dead == nil || len(ops) == 0 {
		return
	}
	if err := d.dead.AddDeadLetters(ops...); err != nil {
		d.log.Error("store dead letters", "count", len(ops), "op_id", ops[0].OpID, "err", err)
	}
}

// deadLetterIntake files the dead letters of an intake batch: commands
// expired on arrival, and commands to sleepy devices superseded before
// they were ever sent (by a command of this batch or an earlier one).
func (d *Dispatcher) deadLetterIntake(items []admitted, superseded []devices.Op, now time.Time) {
	if d.dead == nil {
		return
	}
	var dead []devices.Op
	for i := range items {
		it := &items[i]
		switch {
		case it.queue == nil:
		case it.supersededBy != "" && it.queue.dev.Sleep.Sleepy:
			dead = append(dead, supersededBy(it.op, it.supersededBy, now))
		case it.op.Status == devices.Expired:
			dead = append(dead, it.op)
		}
	}
	for _, op := range superseded {
		if q := d.devices[op.Device]; q.dev.Sleep.Sleepy && op.Attempts == 0 {
			dead = append(dead, op)
		}
	}
	d.deadLetter(dead...)
}
