package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/machine"
	"github.com/hearthd/hearth/publish"
	"github.com/hearthd/hearth/retry"
)

// execute attempts t until it is confirmed, the service's retry policy
// gives up, its TTL passes, it is superseded, or ctx ends (then it stays
// pending in the store and resumes at the next start). What comes next is
// decided by t's machine.Attempts; execute runs the waits, the fresh
// reads, the sends and the waits for confirmation it asks for.
func (q *deviceQueue) execute(ctx context.Context, t *task) {
	d, svc := q.d, q.svc
	q.mu.Lock()
	a := machine.NewAttempts(t.Command, q.dev.Device, svc.Name, q.policy(), svc.Budget, d.now())
	if q.dev.ReadBack {
		a.ReadBackUnconfirmed()
	}
	q.mu.Unlock()
	p := a.Policy()
	for {
		if ctx.Err() != nil {
			return // shutting down: the op stays pending in the store
		}
		now := d.now()
		q.mu.Lock()
		step := a.Next(now, d.rand)
		op := t.Op
		q.mu.Unlock()
		switch step.Kind {
		case machine.StepEnd:
			q.finish(t, step.Status, step.Reason, step.Detail, nil)
			return
		case machine.StepStop:
			return
		case machine.StepResolve:
			if ok, stop := q.awaitOnline(ctx, t, step.Until); stop {
				return
			} else if !ok {
				continue
			}
			ready, stop := q.awaitLink(ctx, t, step.Until)
			if stop {
				return
			}
			if !ready {
				continue // the TTL passed, or the breaker changed: ask again
			}
			proceed, stop := q.revalidate(ctx, t, step.Strict, step.When, step.Until)
			if stop {
				return
			}
			if proceed {
				a.Resolved() // not at the target: the policy decides on the next attempt
			}
			continue // or the TTL passed during the read: the next step ends it
		case machine.StepAwaitResumed:
			if ok, stop := q.awaitResumed(ctx, t, op, step.Timeout, now); ok || stop {
				return
			}
			continue // the window passed unconfirmed: the policy decides
		case machine.StepBackoff:
			if step.RetryAfter {
				d.retryAfter(svc.Name, step.Wait)
			}
			if !q.sleep(ctx, t, step.Wait) {
				return
			}
			continue
		case machine.StepReadBack:
			if q.readBack(ctx, t, step) {
				return
			}
			continue // not at the target, no answer, or its deadline passed: the policy decides
		}
		if !q.attempt(ctx, t, a, step, p) {
			return
		}
	}
}

// attempt runs one StepAttempt of t: the gates, the fresh read, the send
// and the wait for its confirmation. It reports whether to go on to t's
// next step (false: t ended, or ctx is done).
func (q *deviceQueue) attempt(ctx context.Context, t *task, a *machine.Attempts, step machine.Step, p retry.Policy) bool {
	d, svc := q.d, q.svc
	waitUntil, resend := step.Until, step.Resend
	q.mu.Lock()
	op := t.Op
	q.mu.Unlock()
	// The device first: one its bridge reports offline fails fast (or
	// waits for it), and never takes a breaker's probe.
	if ok, stop := q.awaitOnline(ctx, t, waitUntil); stop {
		return false
	} else if !ok {
		return true // the policy's deadline passed: the next step ends it
	}
	// The service's breaker next: while it is open the command fails fast
	// (or, held, waits for it), instead of waiting for a bridge that said
	// it is offline.
	permit, ok, stop := q.admit(ctx, t, waitUntil)
	if stop {
		return false
	} else if !ok {
		return true // the TTL or the policy's deadline passed
	}
	// A probe's deadline runs from now: it must not be spent waiting for
	// the link. Without the link, give the place back, wait, then ask
	// again.
	if ready, _, _ := svc.link.Ready(d.now()); permit.Probe() && !ready {
		q.release(permit, breaker.Canceled)
		_, stop := q.awaitLink(ctx, t, waitUntil)
		return !stop
	}
	// Commands wait while the bridge is down or, just after a (re)connect,
	// not heard from: a send into the void would cost an attempt the
	// device never saw.
	if ready, stop := q.awaitLink(ctx, t, waitUntil); stop || !ready {
		q.release(permit, breaker.Canceled) // nothing went out
		return !stop
	}
	if proceed, stop := q.checks(ctx, t, op, step.Read, step.Strict, step.When, waitUntil); !proceed {
		q.release(permit, breaker.Canceled) // nothing went out
		return !stop
	}
	if step.Read && !d.now().Before(waitUntil) {
		// The read took time: the deadline (the TTL, or a retry's
		// policy deadline) is checked again at the moment of the send.
		q.release(permit, breaker.Canceled)
		return true // the next step ends it
	}
	q.mu.Lock()
	end, ok, heardFirst := a.BeforeSend()
	q.mu.Unlock()
	if !ok {
		q.release(permit, breaker.Canceled)
		q.finish(t, end.Status, end.Reason, end.Detail, nil)
		return false
	}

	// Record the attempt before sending: after a crash, a stored attempt
	// says the outcome of that send is unknown. A resend (delivery
	// unknown) is the same attempt again.
	q.mu.Lock()
	if t.Ended() {
		q.mu.Unlock()
		q.release(permit, breaker.Canceled)
		return false
	}
	if heardFirst {
		if state, ok := q.m.HeardAt(op.Target); ok {
			q.mu.Unlock()
			q.release(permit, breaker.Canceled) // nothing went out
			d.log.Info("resumed attempt confirmed by the state heard since the restart", "op_id", op.OpID, "device", op.Device, "attempt", op.Attempts)
			q.finish(t, devices.Succeeded, "", "", state)
			return false
		}
	}
	prev, op := t.RecordAttempt(resend, d.now())
	stored := t.TakeFirstStored(resend)
	q.mu.Unlock()
	if !stored {
		q.storeAttempt(op)
	}
	if !permit.Current(d.now()) {
		// The breaker changed since it let this attempt out (another
		// command's failure opened it, or a probe's deadline passed while
		// the attempt was stored): the set must not reach a service just
		// found broken. Nothing went out; ask again.
		q.unsent(t, prev)
		q.release(permit, breaker.Canceled)
		return true
	}

	reconnect := d.nextReconnect()
	linkUp, linkGen := svc.link.Watch()
	heard := svc.link.Heard.Load()
	c, sent, err := q.send(ctx, t, nil)
	if sent && (err == nil || !publish.NotSent(err)) {
		q.sentSinceResume(t)
		q.auditSent(op, resend)
		q.sentAttempt(op, resend, err)
	}
	switch {
	case !sent:
		q.release(permit, breaker.Canceled) // t ended first, or shutting down
	case err != nil:
		q.dropOvertaken(c) // superseded during a send that failed: nothing to wait for
		q.release(permit, q.outcome(err, false, false))
	}
	if !sent {
		if ctx.Err() != nil {
			q.unsent(t, prev) // shutting down: nothing left Hearth
		}
		return false // superseded, or shutting down
	}
	if err != nil && publish.NotSent(err) {
		q.unsent(t, prev)
		d.log.Info("attempt not sent; waiting for the connection", "op_id", op.OpID, "device", op.Device, "attempt", op.Attempts, "err", err)
		return q.awaitReconnect(ctx, t, reconnect, waitUntil)
	}
	if err != nil && (publish.DeliveryUnknown(err) || (errors.Is(err, context.Canceled) && ctx.Err() == nil)) {
		// The connection went while the send waited for its
		// acknowledgement: it may or may not have arrived. Send the same
		// attempt again once the connection is back.
		q.unwatch(t)
		d.log.Info("attempt delivery unknown; resending after the reconnect", "op_id", op.OpID, "device", op.Device, "attempt", op.Attempts, "err", err)
		q.mu.Lock()
		a.Sent(machine.DeliveryUnknown, err)
		q.mu.Unlock()
		return q.awaitReconnect(ctx, t, reconnect, waitUntil)
	}
	res := machine.Sent
	if err != nil {
		res = machine.SendFailed
	}
	q.mu.Lock()
	outcome := a.Sent(res, err)
	q.mu.Unlock()
	d.log.Info("attempt", "op_id", op.OpID, "device", op.Device, "attempt", op.Attempts,
		"max_attempts", p.MaxAttempts, "delay", a.Delay(), "outcome", outcome, "err", err)
	if err != nil {
		q.unwatch(t)
		return true
	}
	// The timeout runs from the broker's acknowledgement of the send.
	wait := min(p.AttemptTimeout, op.Deadline.Sub(d.now()))
	if permit.Probe() {
		// A probe has no outcome after its deadline: the breaker counts
		// it failed then, so the attempt ends then too.
		left := permit.Deadline().Sub(d.now())
		wait = min(wait, left-min(probeVerdictLead, left/10))
	}
	expires := d.now().Add(wait)
	confirmed, stop, back := q.confirmWithin(ctx, t, c, wait, linkUp, permit)
	changed := back || svc.link.ChangedSince(linkGen)
	switch {
	case confirmed:
		// reported a success by confirmWithin, before the result
		q.dropOvertaken(c) // superseded as it was confirmed
	case stop && ctx.Err() == nil && q.isOvertaken(c):
		// Superseded while it waited: the set went out, so its timeout
		// still tells of the service. The permit is kept until then; the
		// worker goes on with the newer command.
		q.resolveOvertaken(ctx, c, permit, expires, linkUp, linkGen, heard)
	case stop:
		q.dropOvertaken(c)
		q.release(permit, breaker.Canceled)
	default:
		q.dropOvertaken(c) // superseded as it timed out: decided here
		q.releaseTimedOut(ctx, permit, q.probeOutcome(permit, q.timeoutOutcome(changed, heard)))
	}
	if confirmed || stop {
		return false
	}
	if failure := q.failedWith(c); failure != nil && !back {
		q.mu.Lock()
		a.Failed(failure)
		q.mu.Unlock()
		d.log.Info("attempt failed at the bridge", "op_id", op.OpID, "device", op.Device, "attempt", op.Attempts, "err", failure)
		return true
	}
	if a.Unconfirmed(changed) {
		d.log.Info("link back while waiting for confirmation; resending", "op_id", op.OpID, "device", op.Device, "attempt", op.Attempts)
		return true
	}
	d.log.Info("attempt unconfirmed", "op_id", op.OpID, "device", op.Device, "attempt", op.Attempts, "waited", wait)
	return true
}

// readBack reads the state of t's device after an attempt that went
// unconfirmed (machine.StepReadBack), before the policy decides on a
// resend: a device that does not report after a set (Zigbee2MQTT with
// optimistic: false, a device that sends no report) or whose report was
// lost shows its state, and at the target t ends succeeded with nothing
// resent. The read is not strict: another known state, an unknown one or
// no answer within the read timeout leave it to the policy, as before.
// It waits no later than step.Until (the policy's deadline or the TTL),
// takes no breaker permit and records no attempt; a device its bridge
// reports offline is not read. stop means t ended (succeeded here, or
// elsewhere) or ctx is done.
func (q *deviceQueue) readBack(ctx context.Context, t *task, step machine.Step) (stop bool) {
	if q.knownOffline() {
		return false
	}
	_, stop = q.revalidate(ctx, t, false, step.When, step.Until)
	return stop
}

// awaitResumed waits for the attempt op had in flight when Hearth
// stopped (op.Attempts > 0, a device that is not safety-critical: those
// are resolved by a fresh read) to be confirmed: at once if the state
// heard since the start (a retained replay included) is at the target,
// else by a report, retained or live, until op.LastSentAt+timeout (or the
// TTL, if sooner). ok means t succeeded; stop means t ended otherwise or
// ctx is done; neither means the window passed unconfirmed (or had passed
// already while Hearth was down).
func (q *deviceQueue) awaitResumed(ctx context.Context, t *task, op devices.Op, timeout time.Duration, now time.Time) (ok, stop bool) {
	q.mu.Lock()
	if t.Ended() {
		q.mu.Unlock()
		return false, true
	}
	if state, ok := q.m.HeardAt(op.Target); ok {
		q.mu.Unlock()
		q.d.log.Info("resumed attempt confirmed by the state heard since the restart", "op_id", op.OpID, "device", q.dev.ID, "attempt", op.Attempts)
		q.finish(t, devices.Succeeded, "", "", state)
		return true, false
	}
	c := q.watchLocked(t)
	c.resumed = true
	q.mu.Unlock()
	left := min(op.LastSentAt.Add(timeout).Sub(now), op.Deadline.Sub(now))
	if left <= 0 {
		q.unwatch(t)
		return false, false
	}
	ok, stop, _ = q.confirmWithin(ctx, t, c, left, nil, nil)
	q.dropOvertaken(c) // no permit: nothing to resolve
	return ok, stop
}

// checks runs the checks before a send of t (op as it stands), the same
// for every device, in order: the principal may still send it and it is
// fresh (recheck); with read, the fresh read of its state (revalidate,
// strict and when as the step says, no later than until), then the
// permission once more, at the moment of the send, since the read took
// time (authorizedNow). proceed means send; otherwise stop means t ended
// or ctx is done.
func (q *deviceQueue) checks(ctx context.Context, t *task, op devices.Op, read, strict bool, when string, until time.Time) (proceed, stop bool) {
	if !q.recheck(t, op, q.d.now()) {
		return false, true
	}
	if !read {
		return true, false
	}
	if proceed, stop = q.revalidate(ctx, t, strict, when, until); !proceed {
		return false, stop
	}
	if !q.authorizedNow(t) {
		return false, true
	}
	return true, false
}

// recheck runs the checks before attempt op.Attempts+1 that need no
// device: the principal may still send op (a permission revoked since
// acceptance ends it failed/unauthorized, nothing sent) and it is fresh
// (now is before its deadline, which the caller checked). It audits both
// and reports whether the attempt may go on.
func (q *deviceQueue) recheck(t *task, op devices.Op, now time.Time) bool {
	d, dev := q.d, q.dev.Device
	if err := d.authorize(dev, op.Principal, op.Target); err != nil {
		q.refuse(t, op, err, now, fmt.Sprintf("not authorized at attempt %d: %v; nothing was sent", op.Attempts+1, err))
		return false
	}
	if d.audited(dev) {
		who := op.Principal
		if who == "" {
			who = "anyone (no principals configured)"
		}
		d.audit(
			devices.CheckAudit(dev, op, devices.CheckAuthorization, true, who+" may "+devices.Action(dev, op.Target)+" "+op.Device, now),
			devices.CheckAudit(dev, op, devices.CheckFreshness, true, fmt.Sprintf("%s of its TTL left (deadline %s)",
				op.Deadline.Sub(now).Round(time.Millisecond), op.Deadline.UTC().Format(time.RFC3339Nano)), now),
		)
	}
	return true
}

// storeAttempt stores op's attempt record (before a send, or taken back
// after one); a failure is logged, and the command goes on.
func (q *deviceQueue) storeAttempt(op devices.Op) {
	if err := q.d.journal.Save(op); err != nil {
		q.d.log.Warn("store attempt", "op_id", op.OpID, "err", err)
	}
}

// auditSent audits the send of op's attempt, for a safety-critical device.
func (q *deviceQueue) auditSent(op devices.Op, resend bool) {
	if !q.d.audited(q.dev.Device) {
		return
	}
	e := devices.NewAuditEntry(q.dev.Device, op, devices.AuditSent, op.LastSentAt)
	e.Attempt = op.Attempts
	if resend {
		e.Detail = "the same attempt again: its delivery was unknown"
	}
	q.d.audit(e)
}

// sendTimeout bounds one send or read: the wait for the bridge's broker
// to take it. A bridge whose own calls may take as long or longer gets
// more (see requestBound).
const sendTimeout = 10 * time.Second

// requestGrace is how long past a bridge's own bound on a call the
// dispatcher lets a send or read run, so that the bridge's timeout, which
// says the service did not answer, comes first.
const requestGrace = time.Second

// requestBound is how long one Send or Read through b may run:
// sendTimeout, or the bridge's own bound on a call (a method
// CallTimeout() time.Duration: protocols/httpdev) plus requestGrace
// when that is longer.
func requestBound(b Bridge) time.Duration {
	if r, ok := b.(interface{ CallTimeout() time.Duration }); ok {
		return max(sendTimeout, r.CallTimeout()+requestGrace)
	}
	return sendTimeout
}

// sentSinceResume records that a send of t went out since Hearth started:
// its attempts are no longer of unknown delivery.
func (q *deviceQueue) sentSinceResume(t *task) {
	q.mu.Lock()
	t.SentSinceResume()
	q.mu.Unlock()
}

// unsent takes back an attempt that never left Hearth: its record goes
// back to prev, so that no attempt is spent on a connection that was down.
func (q *deviceQueue) unsent(t *task, prev devices.Op) { q.takeBack(t, prev, t.Unsent) }

// lost takes back an attempt of t whose delivery is unknown, the send
// kept counted (machine.Command.Lost).
func (q *deviceQueue) lost(t *task, prev devices.Op) { q.takeBack(t, prev, t.Lost) }

// takeBack takes back t's last attempt as back says, unless t ended, and
// stores the record.
func (q *deviceQueue) takeBack(t *task, prev devices.Op, back func(devices.Op) bool) {
	q.mu.Lock()
	if !back(prev) {
		q.mu.Unlock()
		return
	}
	t.confirm = nil
	op := t.Op
	q.mu.Unlock()
	q.storeAttempt(op)
}

// awaitReconnect waits until the MQTT connection is back, the deadline
// passes, t ends or ctx is done; false means stop.
func (q *deviceQueue) awaitReconnect(ctx context.Context, t *task, reconnect <-chan struct{}, deadline time.Time) bool {
	return q.pause(ctx, t, deadline, reconnect, nil) != waitStop // at the deadline the loop ends it
}

// sleep waits delay on the dispatcher's clock; false means stop: t ended or
// ctx is done.
func (q *deviceQueue) sleep(ctx context.Context, t *task, delay time.Duration) bool {
	if delay <= 0 {
		select {
		case <-t.cancel:
			return false
		case <-ctx.Done():
			return false
		default:
			return true
		}
	}
	return q.pause(ctx, t, q.d.now().Add(delay), nil, nil) != waitStop
}
