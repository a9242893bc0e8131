package dispatcher

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/jonboulle/clockwork"

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
//     superseded when a newer one names any of its attributes (for an
//     always-listening device, only when it covers them all), and a
//     superseded command that never reached the device goes to the
//     dead-letter store;
//   - a command whose TTL (by default one wake interval) passes while it
//     waits ends expired, goes to the dead-letter store, and is never sent
//     late; one sent but never confirmed ends failed/unverified, never
//     succeeded.

// wokeLocked takes a wake signal of the device at now: the awake lease
// lasts its awake window from now; a signal that finds the device asleep
// begins a new lease (leaseGen). Called with q.mu held; a no-op for a
// device that is not sleepy, or whose bridge said its node is asleep.
func (q *deviceQueue) wokeLocked(now time.Time) {
	if !q.dev.Sleep.Sleepy || q.nodeAsleep {
		return
	}
	if !now.Before(q.awakeUntil) {
		q.leaseGen++
	}
	if until := now.Add(q.dev.Sleep.AwakeWindow); until.After(q.awakeUntil) {
		q.awakeUntil = until
	}
	close(q.woke)
	q.woke = make(chan struct{})
}

// endLeaseLocked ends the device's awake lease at once. Called with q.mu
// held.
func (q *deviceQueue) endLeaseLocked() {
	q.awakeUntil = time.Time{}
	close(q.slept)
	q.slept = make(chan struct{})
}

// endLease ends the device's awake lease gen at once: a request to it
// went unanswered. A newer lease (a wake signal since) is left alone.
func (q *deviceQueue) endLease(gen uint64) {
	q.mu.Lock()
	if q.leaseGen == gen {
		q.endLeaseLocked()
	}
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
		q.endLeaseLocked()
	case devices.NodeDead:
		q.endLeaseLocked()
	}
}

// lease returns whether the device is awake at now, the current lease's
// number and end, and the channels closed at the next wake signal and
// when the bridge ends the lease.
func (q *deviceQueue) lease(now time.Time) (awake bool, gen uint64, until time.Time, woke, slept <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return now.Before(q.awakeUntil), q.leaseGen, q.awakeUntil, q.woke, q.slept
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
		awake, gen, until, woke, _ := q.lease(now)
		q.mu.Lock()
		keep := q.waiting[:0]
		for _, t := range q.waiting {
			if !t.ended {
				keep = append(keep, t)
			}
		}
		clear(q.waiting[len(keep):])
		q.waiting = keep
		if q.idleLocked() {
			q.mu.Unlock()
			return // the next command starts the worker again
		}
		tasks := slices.Clone(q.waiting)
		q.mu.Unlock()
		if q.endOffline(tasks) {
			continue
		}

		var due, eligible []*task
		var next time.Time // the earliest deadline still ahead
		for _, t := range tasks {
			q.mu.Lock()
			deadline, delivered := t.op.Deadline, t.leaseGen == gen && gen > 0
			q.mu.Unlock()
			switch {
			case !now.Before(deadline):
				due = append(due, t)
			case awake && !delivered:
				eligible = append(eligible, t)
			}
			if now.Before(deadline) && (next.IsZero() || deadline.Before(next)) {
				next = deadline
			}
		}
		for _, t := range due {
			q.endAtDeadline(t)
		}
		eligible = q.deliveryOrder(eligible)
		if len(due) > 0 {
			continue
		}
		if len(eligible) == 0 {
			if !awake {
				for _, t := range tasks {
					q.announceQueued(t, now)
				}
			} else if len(tasks) > 0 && (next.IsZero() || until.Before(next)) {
				// Every command was delivered in this lease: look again
				// when it ends, to say they wait for the next.
				next = until
			}
			var timer <-chan time.Time
			var tm clockwork.Timer
			if !next.IsZero() {
				tm = d.clock.NewTimer(next.Sub(now))
				timer = tm.Chan()
			}
			var away <-chan struct{} // an offline report may end the commands
			if q.dev.OnOffline() == devices.OfflineFail {
				q.mu.Lock()
				away = q.availChanged
				q.mu.Unlock()
			}
			select {
			case <-woke:
			case <-q.wake: // a new command
			case <-timer:
			case <-away:
			case <-ctx.Done():
			}
			if tm != nil {
				tm.Stop()
			}
			continue
		}
		for _, t := range eligible {
			q.mu.Lock()
			if t.ended {
				q.mu.Unlock()
				continue
			}
			if !d.now().Before(q.awakeUntil) || q.leaseGen != gen {
				q.mu.Unlock()
				break // the lease ended: the rest wait for the next
			}
			if i := slices.Index(q.waiting, t); i >= 0 {
				q.waiting = slices.Delete(q.waiting, i, i+1)
			}
			q.current = t
			t.leaseGen = gen
			q.mu.Unlock()
			d.log.Info("device awake: delivering", "op_id", t.op.OpID, "device", q.dev.ID, "lease", gen)
			q.deliverAwake(ctx, t, gen)
			q.mu.Lock()
			q.current = nil
			due := !t.ended && !d.now().Before(t.op.Deadline)
			if !t.ended && !due {
				// Back in its place in acceptance order, queued again
				// for the next lease.
				t.announced = false
				i := slices.IndexFunc(q.waiting, func(w *task) bool { return w.order > t.order })
				if i < 0 {
					i = len(q.waiting)
				}
				q.waiting = slices.Insert(q.waiting, i, t)
			}
			q.mu.Unlock()
			if due {
				q.endAtDeadline(t) // at once, before the next command's delivery
			}
			if ctx.Err() != nil {
				return
			}
			if awake, g, _, _, _ := q.lease(d.now()); !awake || g != gen {
				break // the lease ended: the rest wait for the next
			}
		}
	}
}

// announceQueued publishes t's queued result, once per sleep. It is
// queued for publishing under q.mu (the outbox never blocks), so that a
// supersede, which ends t under q.mu before its result goes out, can never
// be followed by this queued result.
func (q *deviceQueue) announceQueued(t *task, now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if t.ended || t.announced {
		return
	}
	t.announced = true
	op := t.op
	r := op.Result()
	r.Status, r.Reason, r.At = devices.Queued, devices.ReasonAsleep, now
	r.Detail = fmt.Sprintf("the device sleeps; the command waits for its next wake (wake interval %s) until %s",
		q.dev.Sleep.WakeInterval, op.Deadline.UTC().Format(time.RFC3339))
	if offline, since, _ := q.availabilityLocked(); offline {
		// offline: queue (a sleepy device's default): the same wait, for
		// the message from it that brings it back.
		r.Reason = devices.ReasonDeviceOffline
		r.Detail = fmt.Sprintf("the bridge of service %s reports %s offline since %s; the command waits for its next wake or message until %s",
			q.svc.Name, q.dev.ID, since.UTC().Format(time.RFC3339), op.Deadline.UTC().Format(time.RFC3339))
	}
	q.d.publishResult(r)
	q.d.log.Info("command queued for a sleeping device", "op_id", op.OpID, "device", op.Device, "deadline", op.Deadline)
}

// endAtDeadline ends t, whose TTL passed: expired when it was never sent
// (never sent late), failed/unverified when it was sent at a wake but no
// report confirmed it.
func (q *deviceQueue) endAtDeadline(t *task) {
	q.mu.Lock()
	op := t.op
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

// maxAttemptsPerWake bounds the sends of one command within one awake
// lease: the delivery and one further attempt.
const maxAttemptsPerWake = 2

// deliverAwake attempts t within the awake lease gen: the checks, the
// send, a wait for the confirming report, and the verifying read of the
// state, all before the lease ends; a further attempt when the device
// answers the read with another state. Before each attempt the lease is
// read again: once it has ended (the bridge says the node is asleep, or it
// ran out) nothing more is sent. It returns when t ended, ctx is done, or
// the lease or its attempts ended without a confirmation: the caller looks
// at which.
func (q *deviceQueue) deliverAwake(ctx context.Context, t *task, gen uint64) {
	d, svc := q.d, q.svc
	p := svc.Policy
	for n := 0; n < maxAttemptsPerWake; n++ {
		now := d.now()
		awake, g, until, _, slept := q.lease(now)
		if !awake || g != gen {
			return
		}
		q.mu.Lock()
		op := t.op
		q.mu.Unlock()
		end := until
		if op.Deadline.Before(end) {
			end = op.Deadline
		}
		if !now.Before(end) {
			return
		}
		permit, ok, stop := q.admit(ctx, t, end)
		if stop || !ok {
			return
		}
		if ready, _ := q.awaitLink(ctx, t, end); !ready {
			q.release(permit, breaker.Canceled)
			return
		}
		now = d.now()
		if !q.recheck(t, op, now) {
			q.release(permit, breaker.Canceled)
			return
		}
		risky := devices.Risky(q.dev.Device, op.Target)
		if risky || (q.dev.SafetyCritical() && op.Attempts == 0) {
			if proceed, _ := q.revalidate(ctx, t, risky, "at the wake, before attempt "+strconv.Itoa(op.Attempts+1)); !proceed {
				q.release(permit, breaker.Canceled)
				return
			}
		}

		// Record the attempt before sending (see execute), if the lease
		// still runs: the waits above (the breaker, the link, the read)
		// may have outlasted it, or the bridge may have said the node is
		// asleep meanwhile; then nothing is sent.
		q.mu.Lock()
		if t.ended {
			q.mu.Unlock()
			q.release(permit, breaker.Canceled)
			return
		}
		if !d.now().Before(q.awakeUntil) || q.leaseGen != gen || !d.now().Before(t.op.Deadline) {
			q.mu.Unlock()
			q.release(permit, breaker.Canceled)
			return
		}
		if t.resumedUnsent {
			// Resumed after a restart with an attempt of unknown
			// delivery, and nothing sent since: the device may have
			// applied it at an earlier wake. A state heard since the
			// start (the bridge's retained replay, or the report it woke
			// with) at the target confirms it; the set is not sent
			// again, which spares the device's battery and airtime.
			if state, ok := q.heardAtLocked(op.Target); ok {
				q.mu.Unlock()
				q.release(permit, breaker.Canceled) // nothing went out
				d.log.Info("resumed attempt confirmed by the state heard since the restart", "op_id", op.OpID, "device", op.Device, "attempt", op.Attempts)
				q.finish(t, devices.Succeeded, "", "", state)
				return
			}
		}
		prev, op := q.recordAttemptLocked(t, false)
		q.mu.Unlock()
		q.storeAttempt(op)
		c, sent, err := q.send(ctx, t)
		if sent && (err == nil || !notSent(err)) {
			q.sentSinceResume(t)
			q.auditSent(op, false)
		}
		if !sent {
			q.release(permit, breaker.Canceled)
			if ctx.Err() != nil {
				q.unsent(t, prev)
			}
			return
		}
		if err != nil {
			q.unwatch(t)
			if notSent(err) || deliveryUnknown(err) {
				// Nothing left Hearth, or the connection went: no attempt
				// spent on it; the next lease tries again.
				q.unsent(t, prev)
				q.release(permit, breaker.Canceled)
				d.log.Info("attempt not sent to an awake device", "op_id", op.OpID, "device", op.Device, "err", err)
				return
			}
			q.release(permit, q.outcome(err, false, false))
			d.log.Info("attempt", "op_id", op.OpID, "device", op.Device, "attempt", op.Attempts, "outcome", "send_error", "err", err)
			if retry.Classify(err).Permanent() {
				q.giveUp(t, op, retry.Decision{Reason: retry.GiveUpPermanent, Class: retry.Classify(err)}, err, op.Attempts)
				return
			}
			continue
		}
		// The lease as it stands now (reports during the waits above
		// may have extended it) bounds the wait for the confirmation.
		// If it ended during the send (the bridge said the node is
		// asleep), nothing more goes to the node, not even the read:
		// the command waits for the next lease.
		awake, g, until, _, _ = q.lease(d.now())
		if !awake || g != gen {
			q.unwatch(t)
			q.release(permit, breaker.Ignored)
			d.log.Info("attempt sent as the lease ended; the next lease verifies it", "op_id", op.OpID, "device", op.Device, "attempt", op.Attempts)
			return
		}
		end = until
		if op.Deadline.Before(end) {
			end = op.Deadline
		}
		d.log.Info("attempt", "op_id", op.OpID, "device", op.Device, "attempt", op.Attempts, "outcome", "sent", "awake_until", until)
		switch q.verify(ctx, t, c, permit, end, p.AttemptTimeout, slept) {
		case verifyConfirmed, verifyStop:
			return
		case verifyOtherState:
			continue // the device answered with another state: one further attempt
		case verifySilent:
			// A request to the device went unanswered: it has gone back
			// to sleep. The lease ends; the next wake delivers again.
			// (Unless the wait ended at this command's own deadline:
			// that says nothing of the device, whose lease goes on for
			// its other commands.)
			if d.now().Before(op.Deadline) {
				q.endLease(gen)
			}
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
// saying no.
func (q *deviceQueue) verify(ctx context.Context, t *task, c *confirmation, permit *breaker.Permit, end time.Time, timeout time.Duration, slept <-chan struct{}) verifyOutcome {
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
			// The device answered the read (a report after it) but
			// did not confirm: another value, or not the attribute at
			// all. It is awake: no reason to end its lease.
			if !q.satisfied(t.op.Target, seen) {
				q.unwatch(t)
				q.release(permit, breaker.Success) // the bridge and the device answered
				d.log.Info("verifying read: the device answered without the target", "op_id", t.op.OpID, "device", q.dev.ID, "state", showState(seen))
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
				q.release(permit, breaker.Canceled)
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
		case <-slept:
			// The bridge says the node went back to sleep: nothing more
			// will come in this lease.
			q.unwatch(t)
			q.release(permit, breaker.Ignored)
			d.log.Info("attempt unconfirmed: the node went to sleep", "op_id", t.op.OpID, "device", q.dev.ID)
			return verifySilent
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

// deliveryOrder orders the commands to deliver in one lease: those
// delivered longest ago first (never delivered before all), then in
// acceptance order, so that a command whose silence ends every lease does
// not go first at every wake and starve the others. (Two commands of a
// sleepy device never share an attribute: the newer supersedes the older,
// see replaces; so no order among them can write an older value last.)
func (q *deviceQueue) deliveryOrder(tasks []*task) []*task {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := slices.Clone(tasks)
	slices.SortStableFunc(out, func(a, b *task) int {
		return cmp.Or(cmp.Compare(a.leaseGen, b.leaseGen), cmp.Compare(a.order, b.order))
	})
	return out
}

// sharesAttribute reports whether a and b name a state attribute in
// common.
func sharesAttribute(a, b devices.Target) bool {
	for _, k := range a.Attributes() {
		if _, ok := b[k]; ok {
			return true
		}
	}
	return false
}
