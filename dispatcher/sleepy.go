package dispatcher

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/machine"
	"github.com/hearthd/hearth/publish"
)

// Sleepy devices (issue 4): the rules of the awake lease, and which
// command is delivered when, are the machine's (package machine, lease.go);
// this file runs the deliveries. In one lease a command gets its send and
// at most one further attempt, and the verifying read of its state, all
// before the lease ends. A command whose TTL passes while it waits ends
// expired, goes to the dead-letter store, and is never sent late; one sent
// but never confirmed ends failed/unverified, never succeeded; a
// superseded command that never reached the device goes to the
// dead-letter store.

// sleptLocked tells the worker's waits that the awake lease ended (the
// bridge said the node sleeps, or a request went unanswered). Called with
// q.mu held.
func (q *deviceQueue) sleptLocked() {
	q.sleeps++
	q.changedLocked()
}

// nodeStatus takes a node status of the device for its awake lease; see
// Dispatcher.NodeStatus.
func (q *deviceQueue) nodeStatus(status devices.NodeStatus) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, slept := q.m.NodeStatus(status, q.d.now()); slept {
		q.sleptLocked()
	} else {
		q.changedLocked() // a wake signal, or nothing new
	}
}

// lease returns whether the device is awake at now, and the current
// lease's number.
func (q *deviceQueue) lease(now time.Time) (awake bool, gen uint64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	l := q.m.Lease(now)
	return l.Awake, l.Gen
}

// runSleepy is a sleepy device's worker. Unlike an always-listening
// device's, it keeps every pending command of the device in play: each
// command's deadline is watched while it waits, whatever is ahead of it,
// and at each awake lease every command not yet delivered in that lease
// goes out, in acceptance order, so that one command the device never
// confirms cannot hold back another. A command gets one delivery (its send
// and at most one further attempt) per lease.
func (q *deviceQueue) runSleepy(ctx context.Context) {
	d := q.d
	for {
		if ctx.Err() != nil {
			return // shutting down: the ops stay pending in the store
		}
		now := d.now()
		q.mu.Lock()
		p := q.m.Plan(now)
		changed := q.changed // the next input: a wake signal, a command, an offline report
		if q.idleLocked() {
			q.mu.Unlock()
			return // the next command starts the worker again
		}
		q.mu.Unlock()
		if q.endOffline(p.Pending) {
			continue
		}
		for _, c := range p.Due {
			q.endAtDeadline(c)
		}
		if len(p.Due) > 0 {
			continue
		}
		if len(p.Eligible) == 0 {
			if !p.Awake {
				for _, c := range p.Pending {
					q.announceQueued(c, now)
				}
			}
			var timer <-chan time.Time
			var tm clockwork.Timer
			if !p.Wake.IsZero() {
				tm = d.clock.NewTimer(p.Wake.Sub(now))
				timer = tm.Chan()
			}
			select {
			case <-changed:
			case <-timer:
			case <-ctx.Done():
			}
			if tm != nil {
				tm.Stop()
			}
			continue
		}
		for _, c := range p.Eligible {
			q.mu.Lock()
			delivery := q.m.Deliver(c, p.Gen, d.now())
			var t *task
			if delivery == machine.Deliver {
				t = q.begin(c)
			}
			q.mu.Unlock()
			if delivery == machine.Skip {
				continue
			}
			if delivery == machine.LeaseOver {
				break // the lease ended: the rest wait for the next
			}
			d.log.Info("device awake: delivering", "op_id", t.opID, "device", q.dev.ID, "lease", p.Gen)
			q.deliverAwake(ctx, t, p.Gen)
			q.mu.Lock()
			// Back in its place in acceptance order, queued again for
			// the next lease, unless its TTL passed.
			due := q.m.Delivered(c, d.now())
			q.cur = nil
			q.mu.Unlock()
			if due {
				q.endAtDeadline(c) // at once, before the next command's delivery
			}
			if ctx.Err() != nil {
				return
			}
			if awake, g := q.lease(d.now()); !awake || g != p.Gen {
				break // the lease ended: the rest wait for the next
			}
		}
	}
}

// announceQueued publishes t's queued result, once per sleep. It is
// queued for publishing under q.mu (the outbox never blocks), so that a
// supersede, which ends t under q.mu before its result goes out, can never
// be followed by this queued result.
func (q *deviceQueue) announceQueued(c *machine.Command, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	op, ok := q.m.Announce(c)
	if !ok {
		return
	}
	r := op.Result()
	r.Status, r.Reason, r.At = devices.Queued, devices.ReasonAsleep, now
	r.Detail = fmt.Sprintf("the device sleeps; the command waits for its next wake (wake interval %s) until %s",
		q.dev.Sleep.WakeInterval, op.Deadline.UTC().Format(time.RFC3339))
	if offline, since := q.m.Offline(); offline {
		// offline: queue (a sleepy device's default): the same wait, for
		// the message from it that brings it back.
		r.Reason = devices.ReasonDeviceOffline
		r.Detail = fmt.Sprintf("the bridge of service %s reports %s offline since %s; the command waits for its next wake or message until %s",
			q.svc.Name, q.dev.ID, since.UTC().Format(time.RFC3339), op.Deadline.UTC().Format(time.RFC3339))
	}
	q.d.publishResult(r)
	q.d.log.Info("command queued for a sleeping device", "op_id", op.OpID, "device", op.Device, "deadline", op.Deadline)
}

// endAtDeadline ends c, whose TTL passed: expired when it was never sent
// (never sent late), failed/unverified when it was sent at a wake but no
// report confirmed it.
func (q *deviceQueue) endAtDeadline(c *machine.Command) {
	t := q.taskOf(c)
	q.mu.Lock()
	op := t.Op
	q.mu.Unlock()
	if op.Attempts > 0 {
		q.finish(t, devices.Failed, devices.ReasonUnverified,
			fmt.Sprintf("sent %d times at the device's wakes, but no report confirmed it before the TTL passed; it may or may not have been applied", op.Attempts), nil)
		return
	}
	q.finish(t, devices.Expired, devices.ReasonTTLElapsed,
		fmt.Sprintf("the TTL ran out at %s before the device woke to take it (its wake interval is %s); never sent",
			op.Deadline.UTC().Format(time.RFC3339), q.dev.Sleep.WakeInterval), nil)
}

// taskOf returns the worker's task of c if c is being attempted, else a
// task of its own, for ending c where it waits.
func (q *deviceQueue) taskOf(c *machine.Command) *task {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.cur != nil && q.cur.Command == c {
		return q.cur
	}
	return &task{Command: c, opID: c.Op.OpID}
}

// deliverAwake attempts t within the awake lease gen, as t's
// machine.Delivery decides: the checks, the send, a wait for the
// confirming report, and the verifying read of the state, all before the
// lease ends; a further attempt when the device answers the read with
// another state. It returns when t ended, ctx is done, or the lease or its
// attempts ended without a confirmation: the caller looks at which.
func (q *deviceQueue) deliverAwake(ctx context.Context, t *task, gen uint64) {
	d, svc := q.d, q.svc
	p := q.policy()
	q.mu.Lock()
	dl := q.m.NewDelivery(t.Command, gen, svc.Name)
	q.mu.Unlock()
	for {
		q.mu.Lock()
		st := dl.Next(d.now())
		op, sleeps := t.Op, q.sleeps
		q.mu.Unlock()
		if st.Kind != machine.StepAttempt {
			return
		}
		permit, ok, stop := q.admit(ctx, t, st.Until)
		if stop || !ok {
			return
		}
		if ready, _, _ := svc.link.Ready(d.now()); permit.Probe() && !ready {
			// A probe's deadline runs from now: it must not be spent
			// waiting for the link (see attempt). Give the place back,
			// wait, then ask again.
			q.release(permit, breaker.Canceled)
			if ready, _ := q.awaitLink(ctx, t, st.Until); !ready {
				return
			}
			if permit, ok, stop = q.admit(ctx, t, st.Until); stop || !ok {
				return
			}
		}
		if ready, _ := q.awaitLink(ctx, t, st.Until); !ready {
			q.release(permit, breaker.Canceled)
			return
		}
		// The TTL and the lease are checked again at the send, by
		// BeforeSend.
		if proceed, _ := q.checks(ctx, t, op, st.Read, st.Strict, st.When, op.Deadline); !proceed {
			q.release(permit, breaker.Canceled)
			return
		}

		// Record the attempt before sending (see execute), if the
		// delivery may still send (see machine.Delivery.BeforeSend).
		q.mu.Lock()
		end, ok := dl.BeforeSend(d.now())
		if !ok {
			q.mu.Unlock()
			q.release(permit, breaker.Canceled) // nothing went out
			if end.Kind == machine.StepEnd {
				if end.Status == devices.Succeeded {
					d.log.Info("resumed attempt confirmed by the state heard since the restart", "op_id", op.OpID, "device", op.Device, "attempt", op.Attempts)
				}
				q.finish(t, end.Status, end.Reason, end.Detail, end.State)
			}
			return
		}
		prev, op := t.RecordAttempt(false, d.now())
		q.mu.Unlock()
		q.storeAttempt(op)
		if !permit.Current(d.now()) {
			// The breaker changed while the attempt was stored (see
			// attempt): nothing goes out; ask again.
			q.unsent(t, prev)
			q.release(permit, breaker.Canceled)
			continue
		}
		// The lease must still run as the set leaves: the bridge may
		// have said the node is asleep while the attempt was stored.
		awake := func() bool { return dl.Sending(d.now()) }
		c, sent, err := q.send(ctx, t, awake)
		if sent && (err == nil || !publish.NotSent(err)) {
			q.sentSinceResume(t)
			q.auditSent(op, false)
			if err == nil || !publish.DeliveryUnknown(err) {
				// One whose delivery is unknown is given back, and sent
				// again as this attempt at the next lease.
				q.sentAttempt(op, false, err)
			}
		}
		if !sent {
			q.release(permit, breaker.Canceled)
			q.mu.Lock()
			ended := t.Ended()
			q.mu.Unlock()
			if !ended { // shutting down, or the lease ended: nothing left Hearth
				q.unsent(t, prev)
				if ctx.Err() == nil {
					d.log.Info("the lease ended as the attempt was stored; not sent", "op_id", op.OpID, "device", op.Device, "attempt", op.Attempts)
				}
			}
			return
		}
		if err != nil {
			q.unwatch(t)
			if publish.NotSent(err) || publish.DeliveryUnknown(err) {
				// Nothing left Hearth, or the connection went: no attempt
				// spent on it; the next lease tries again. A send whose
				// delivery is unknown may have acted: it stays counted.
				if publish.NotSent(err) {
					q.unsent(t, prev)
				} else {
					q.lost(t, prev)
				}
				q.release(permit, breaker.Canceled)
				d.log.Info("attempt not sent to an awake device", "op_id", op.OpID, "device", op.Device, "err", err)
				return
			}
			q.release(permit, q.outcome(err, false, false))
			d.log.Info("attempt", "op_id", op.OpID, "device", op.Device, "attempt", op.Attempts, "outcome", "send_error", "err", err)
			q.mu.Lock()
			end, stop := dl.SendFailed(err)
			q.mu.Unlock()
			if stop {
				q.finish(t, end.Status, end.Reason, end.Detail, nil)
				return
			}
			continue
		}
		q.mu.Lock()
		until, ok := dl.Sent(d.now())
		q.mu.Unlock()
		if !ok {
			q.unwatch(t)
			q.release(permit, breaker.Ignored)
			d.log.Info("attempt sent as the lease ended; the next lease verifies it", "op_id", op.OpID, "device", op.Device, "attempt", op.Attempts)
			return
		}
		d.log.Info("attempt", "op_id", op.OpID, "device", op.Device, "attempt", op.Attempts, "outcome", "sent", "awake_until", until)
		if permit.Probe() {
			// A probe has no outcome after its deadline: the wait ends
			// before it, so that its verdict reaches the breaker first
			// (see attempt).
			left := permit.Deadline().Sub(d.now())
			if by := d.now().Add(left - min(probeVerdictLead, left/10)); by.Before(until) {
				until = by
			}
		}
		switch q.verify(ctx, t, c, permit, until, p.AttemptTimeout, sleeps) {
		case verifyConfirmed, verifyStop:
			return
		case verifyOtherState:
			continue // the device answered with another state: one further attempt
		case verifySilent:
			q.mu.Lock()
			if dl.Silent(d.now()) {
				q.sleptLocked()
			}
			q.mu.Unlock()
			return
		}
	}
}

// verify outcomes.
type verifyOutcome int

const (
	verifyConfirmed  verifyOutcome = iota // t succeeded (or failed jammed): ended
	verifyStop                            // t ended otherwise, or ctx is done
	verifyOtherState                      // the device answered the read without the target
	verifySilent                          // no answer before the lease or the attempt timeout ended
)

// verify waits for c, the confirmation of a send to an awake sleepy
// device: first for the report the device sends by itself, up to half of
// what is left of the lease (at most timeout), then it asks the bridge to
// read the state (the verifying read) and waits for the answer until end
// or timeout after the send. A report of the target confirms; a report of
// other values for the target's attributes after the read is the device
// saying no; the end of the lease (q.sleeps past sleeps) ends the wait.
func (q *deviceQueue) verify(ctx context.Context, t *task, c *confirmation, permit *breaker.Permit, end time.Time, timeout time.Duration, sleeps uint64) verifyOutcome {
	d := q.d
	start := d.now()
	if e := start.Add(timeout); e.Before(end) {
		end = e
	}
	first := end.Sub(start) / 2
	chk := &stateCheck{seen: map[string]any{}}
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
	q.mu.Lock()
	for w := waitChanged; ; {
		switch {
		case c.ok:
			state := maps.Clone(c.seen)
			attempt := t.Op.Attempts
			q.mu.Unlock()
			d.log.Info("attempt confirmed", "op_id", t.opID, "device", q.dev.ID, "attempt", attempt, "verified_by_read", read)
			q.release(permit, breaker.Success)
			q.finish(t, devices.Succeeded, "", "", state)
			return verifyConfirmed
		case c.fault != "":
			state := maps.Clone(c.seen)
			attempt, fault := t.Op.Attempts, c.fault
			q.mu.Unlock()
			q.release(permit, breaker.Success)
			q.finish(t, devices.Failed, devices.ReasonJammed,
				fmt.Sprintf("after attempt %d the device reported %s; not retried: a jammed bolt needs a person to look", attempt, fault), state)
			return verifyConfirmed
		case read && chk.reports > 0 && !q.satisfied(t.Op.Target, chk.seen):
			// The device answered the read (a report after it) but did
			// not confirm: another value, or not the attribute at all.
			// It is awake: no reason to end its lease.
			t.confirm = nil
			seen := maps.Clone(chk.seen)
			q.mu.Unlock()
			q.release(permit, breaker.Success) // the bridge and the device answered
			d.log.Info("verifying read: the device answered without the target", "op_id", t.opID, "device", q.dev.ID, "state", showState(seen))
			return verifyOtherState
		case q.sleeps != sleeps:
			// The bridge says the node went back to sleep: nothing more
			// will come in this lease.
			t.confirm = nil
			q.mu.Unlock()
			q.release(permit, breaker.Ignored)
			d.log.Info("attempt unconfirmed: the node went to sleep", "op_id", t.opID, "device", q.dev.ID)
			return verifySilent
		}
		switch w {
		case waitStop:
			q.mu.Unlock()
			q.release(permit, breaker.Canceled)
			return verifyStop
		case waitTimer:
			if read {
				t.confirm = nil
				q.mu.Unlock()
				// A sleeping device's silence says nothing about its
				// service.
				q.release(permit, breaker.Ignored)
				d.log.Info("attempt unconfirmed: the device did not answer before its lease ended", "op_id", t.opID, "device", q.dev.ID)
				return verifySilent
			}
			read = true
			if t.Ended() {
				q.mu.Unlock()
				q.release(permit, breaker.Canceled)
				return verifyStop
			}
			t.check = chk
			target := t.Op.Target
			q.mu.Unlock()
			readCtx, cancel := context.WithTimeout(ctx, q.svc.bound)
			err := q.svc.Bridge.Read(readCtx, q.dev.Device, target)
			cancel()
			d.log.Info("verifying read", "op_id", t.opID, "device", q.dev.ID, "err", err)
			timer.Reset(end.Sub(d.now()))
			q.mu.Lock()
			w = waitChanged // the answer may have come during the read: look first
			continue
		}
		w = q.waitLocked(ctx, t, timer.Chan(), nil)
	}
}

// deadLetter files op, terminal, in the dead-letter store; a failure to
// store is logged.
func (d *Dispatcher) deadLetter(ops ...devices.Op) {
	if d.dead == nil || len(ops) == 0 {
		return
	}
	if err := d.dead.AddDeadLetters(ops...); err != nil {
		d.log.Warn("store dead letters", "count", len(ops), "op_id", ops[0].OpID, "err", err)
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
			dead = append(dead, machine.SupersededBy(it.op, it.supersededBy, now))
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
