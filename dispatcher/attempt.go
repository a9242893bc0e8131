package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
)

// execute attempts t until it is confirmed, the service's retry policy
// gives up, its TTL passes, it is superseded, or ctx ends (then it stays
// pending in the store and resumes at the next start).
//
// After every failed attempt — a send error, or no confirming report
// within the attempt timeout — the policy decides (retry.Policy.Next):
// retry after a wait, or give up with a reason.
func (q *deviceQueue) execute(ctx context.Context, t *task) {
	d, svc := q.d, q.svc
	p := svc.Policy
	q.mu.Lock()
	risky := devices.Risky(q.dev.Device, t.Op.Target)
	q.mu.Unlock()
	if risky {
		p.MaxAttempts = min(p.MaxAttempts, MaxRiskyAttempts)
	}
	var (
		failure  error         // the last attempt's send error; nil: unconfirmed
		delay    time.Duration // the wait before the last attempt
		approved bool          // a retry was decided but not sent yet
		resend   bool          // the next send repeats the last attempt
		resends  int           // resends of the current attempt
	)
	q.mu.Lock()
	resumed := t.Op.Attempts > 0 // after a restart: the outcome is unknown
	sends := t.Op.Attempts       // sends that may have reached the device
	q.mu.Unlock()
	// A safety-critical command resumed after a restart is resolved by a
	// fresh read of the state before anything else: its last send may or
	// may not have acted, and it is never repeated blind.
	resolve := resumed && q.dev.SafetyCritical()
	if resumed {
		// Its first attempt was before the restart; the budget, kept in
		// memory, must count it again, or a later retry of it spends a
		// floor meant for quiet services.
		svc.Budget.FirstAttempt(d.now())
	}
	// free: the next policy decision is the first after a restart, and
	// its retry is not charged to the retry budget: the restart, not the
	// service, left the attempt's outcome unknown, and a dozen commands
	// resumed at once must not spend a budget sized for live failures.
	free := false
	// heardFirst: the next send is the first after a restart; if the
	// state heard since the start shows the target by then (a retained
	// replay that came during the backoff or the wait for the bridge), it
	// is not sent.
	heardFirst := false
	for {
		if ctx.Err() != nil {
			return // shutting down: the op stays pending in the store
		}
		now := d.now()
		q.mu.Lock()
		op := t.Op
		q.mu.Unlock()
		if !now.Before(op.Deadline) {
			q.finish(t, devices.Expired, devices.ReasonTTLElapsed,
				fmt.Sprintf("the TTL passed after %d of %d attempts", op.Attempts, p.MaxAttempts), nil)
			return
		}
		retryBy := p.DeadlineFor(op.AcceptedAt, op.Deadline)
		// The next send is a retry (a new attempt after the first, or a
		// resend of one): it must go by the policy's deadline.
		nextIsRetry := (!resend && op.Attempts > 0) || (resend && op.Attempts > 1)
		if approved && nextIsRetry && !now.Before(retryBy) {
			// A retry decided in time waited for the connection past
			// the policy's deadline.
			q.giveUp(t, op, retry.Decision{Reason: retry.GiveUpDeadline, Class: retry.Classify(failure)}, failure, p.MaxAttempts)
			return
		}
		if resolve {
			if ok, stop := q.awaitOnline(ctx, t, op.Deadline); stop {
				return
			} else if !ok {
				continue
			}
			ready, stop := q.awaitLink(ctx, t, op.Deadline)
			if stop {
				return
			}
			if !ready {
				continue // the TTL passed, or the breaker changed: ask again
			}
			proceed, stop := q.revalidate(ctx, t, risky, "after the restart")
			if stop {
				return
			}
			if !proceed {
				continue // the TTL passed during the read: the loop ends it
			}
			// Not at the target: the last attempt failed; the policy
			// decides on the next, which is read again before its send.
			// That decision is the first after the restart: free of the
			// retry budget, as for any resumed command.
			resolve, resumed, free = false, false, true
		}
		if op.Attempts > 0 && !approved {
			if resumed {
				// After a restart the attempt in flight may have acted:
				// the device's state decides, for the rest of the
				// attempt's window, before any resend.
				resumed, free, heardFirst = false, true, true
				if ok, stop := q.awaitResumed(ctx, t, op, p.AttemptTimeout, now); ok || stop {
					return
				}
				continue // the window passed unconfirmed: the policy decides
			}
			budget := svc.Budget
			if free {
				budget, free = nil, false
			}
			dec := p.Next(retry.Failure{
				Attempt:  op.Attempts,
				Err:      failure,
				Delay:    delay,
				Now:      now,
				Deadline: retryBy,
			}, d.rand, budget)
			if !dec.Retry {
				if dec.Reason == retry.GiveUpCanceled {
					return // not a failure: the op stays pending
				}
				q.giveUp(t, op, dec, failure, p.MaxAttempts)
				return
			}
			approved, delay = true, dec.Wait
			if !q.sleep(ctx, t, delay) {
				return
			}
			if !d.now().Before(op.Deadline) {
				continue // the TTL ran out during the backoff
			}
		}

		waitUntil := op.Deadline
		if nextIsRetry {
			waitUntil = retryBy // a retry must go by the policy's deadline
		}
		// The device first: one its bridge reports offline fails fast
		// (or waits for it), and never takes a breaker's probe.
		if ok, stop := q.awaitOnline(ctx, t, waitUntil); stop {
			return
		} else if !ok {
			continue // the policy's deadline passed: the loop ends it
		}
		// The service's breaker next: while it is open the command
		// fails fast (or, held, waits for it), instead of waiting for a
		// bridge that said it is offline.
		permit, ok, stop := q.admit(ctx, t, waitUntil)
		if stop {
			return
		} else if !ok {
			continue // the TTL or the policy's deadline passed: the loop ends it
		}
		// A probe's deadline runs from now: it must not be spent waiting
		// for the link. Without the link, give the place back, wait,
		// then ask again.
		if ready, _, _ := svc.link.ready(d.now()); permit.Probe() && !ready {
			q.release(permit, breaker.Canceled)
			if _, stop := q.awaitLink(ctx, t, waitUntil); stop {
				return
			}
			continue
		}
		// Commands wait while the bridge is down or, just after a
		// (re)connect, not heard from: a send into the void would cost an
		// attempt the device never saw.
		if ready, stop := q.awaitLink(ctx, t, waitUntil); stop || !ready {
			q.release(permit, breaker.Canceled) // nothing went out
			if stop {
				return
			}
			continue // the TTL or the policy's deadline passed: the loop ends it
		}

		// The checks before every attempt: the principal may still send
		// it, and it is still fresh (its TTL, checked above and again by
		// the read's deadline).
		if !q.recheck(t, op, d.now()) {
			q.release(permit, breaker.Canceled) // nothing went out
			return
		}
		// Before every send of a risky action (unlock, open a garage
		// door), the first and every resend included: a fresh read of
		// the device's state. Already there, or unknown: nothing is sent.
		// Before the first send of a safe one (lock, close) to a
		// safety-critical device: a read too, so that a door already
		// closed is not driven again; unknown state does not stop it.
		if risky || (q.dev.SafetyCritical() && op.Attempts == 0 && !resend) {
			proceed, stop := q.revalidate(ctx, t, risky, "before attempt "+strconv.Itoa(op.Attempts+1))
			if !proceed {
				q.release(permit, breaker.Canceled) // nothing went out
				if stop {
					return
				}
				continue // the TTL passed during the read: the loop ends it
			}
			// The read took time: the permission and the deadline
			// are checked again at the moment of the send.
			if !q.authorizedNow(t) {
				q.release(permit, breaker.Canceled)
				return
			}
			if !d.now().Before(op.Deadline) {
				q.release(permit, breaker.Canceled)
				continue // the loop ends it expired
			}
		}
		// A risky action reaches the device at most MaxRiskyAttempts
		// times, resends after a lost connection included: each may
		// unlock the door.
		if risky && sends >= MaxRiskyAttempts {
			q.release(permit, breaker.Canceled)
			q.giveUp(t, op, retry.Decision{Reason: retry.GiveUpAttempts}, failure, MaxRiskyAttempts)
			return
		}

		// Record the attempt before sending: after a crash, a stored
		// attempt says the outcome of that send is unknown. A resend
		// (delivery unknown) is the same attempt again.
		q.mu.Lock()
		if t.Ended() {
			q.mu.Unlock()
			q.release(permit, breaker.Canceled)
			return
		}
		if heardFirst {
			heardFirst = false
			if state, ok := q.m.HeardAt(op.Target); ok {
				q.mu.Unlock()
				q.release(permit, breaker.Canceled) // nothing went out
				d.log.Info("resumed attempt confirmed by the state heard since the restart", "op_id", op.OpID, "device", op.Device, "attempt", op.Attempts)
				q.finish(t, devices.Succeeded, "", "", state)
				return
			}
		}
		prev, op := q.recordAttemptLocked(t, resend)
		stored := t.TakeFirstStored(resend)
		q.mu.Unlock()
		if !stored {
			q.storeAttempt(op)
		}
		if !permit.Current(d.now()) {
			// The breaker changed since it let this attempt out (another
			// command's failure opened it, or a probe's deadline passed
			// while the attempt was stored): the set must not reach a
			// service just found broken. Nothing went out; ask again.
			q.unsent(t, prev)
			q.release(permit, breaker.Canceled)
			continue
		}

		reconnect := d.nextReconnect()
		linkUp, linkGen := svc.link.watch()
		heard := svc.link.heard.Load()
		c, sent, err := q.send(ctx, t)
		if sent && (err == nil || !notSent(err)) {
			sends++
			q.sentSinceResume(t)
			q.auditSent(op, resend)
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
			return // superseded, or shutting down
		}
		if err != nil && notSent(err) {
			q.unsent(t, prev)
			d.log.Info("attempt not sent; waiting for the connection", "op_id", op.OpID, "device", op.Device, "attempt", op.Attempts, "err", err)
			if !q.awaitReconnect(ctx, t, reconnect, waitUntil) {
				return
			}
			continue
		}
		if err != nil && (deliveryUnknown(err) || (errors.Is(err, context.Canceled) && ctx.Err() == nil)) {
			// The connection went while the send waited for its
			// acknowledgement: it may or may not have arrived. Send the
			// same attempt again once the connection is back.
			q.unwatch(t)
			d.log.Info("attempt delivery unknown; resending after the reconnect", "op_id", op.OpID, "device", op.Device, "attempt", op.Attempts, "err", err)
			if op.Attempts == 1 && !resend {
				svc.Budget.FirstAttempt(op.LastSentAt)
			}
			resend, approved = true, true
			if !q.awaitReconnect(ctx, t, reconnect, waitUntil) {
				return
			}
			continue
		}
		if op.Attempts == 1 && !resend {
			svc.Budget.FirstAttempt(op.LastSentAt)
		}
		outcome := "sent"
		switch {
		case err != nil:
			outcome = "send_error"
		case resend:
			outcome = "resent"
		}
		if !resend {
			resends = 0 // a new attempt
		}
		approved, resumed, resend, failure = false, false, false, err
		d.log.Info("attempt", "op_id", op.OpID, "device", op.Device, "attempt", op.Attempts,
			"max_attempts", p.MaxAttempts, "delay", delay, "outcome", outcome, "err", err)
		if err != nil {
			q.unwatch(t)
			continue
		}
		// The timeout runs from the broker's acknowledgement of the send.
		wait := min(p.AttemptTimeout, op.Deadline.Sub(d.now()))
		if permit.Probe() {
			// A probe has no outcome after its deadline: the breaker
			// counts it failed then, so the attempt ends then too.
			left := permit.Deadline().Sub(d.now())
			wait = min(wait, left-min(probeVerdictLead, left/10))
		}
		expires := d.now().Add(wait)
		confirmed, stop, back := q.confirmWithin(ctx, t, c, wait, linkUp, permit)
		changed := back || svc.link.changedSince(linkGen)
		switch {
		case confirmed:
			// reported a success by confirmWithin, before the result
			q.dropOvertaken(c) // superseded as it was confirmed
		case stop && ctx.Err() == nil && q.isOvertaken(c):
			// Superseded while it waited: the set went out, so its
			// timeout still tells of the service. The permit is kept
			// until then; the worker goes on with the newer command.
			q.resolveOvertaken(ctx, c, permit, expires, linkUp, linkGen, heard)
		case stop:
			q.dropOvertaken(c)
			q.release(permit, breaker.Canceled)
		default:
			q.dropOvertaken(c) // superseded as it timed out: decided here
			q.releaseTimedOut(ctx, permit, q.probeOutcome(permit, q.timeoutOutcome(changed, heard)))
		}
		if confirmed || stop {
			return
		}
		if changed && resends < maxResends {
			// The link went down (or a new session began) while this
			// attempt waited: the set or its report may be lost, and the
			// silence says nothing about the device. Send the same
			// attempt again once the link is up, with the same op_id; an
			// absolute target makes that harmless.
			d.log.Info("link back while waiting for confirmation; resending", "op_id", op.OpID, "device", op.Device, "attempt", op.Attempts)
			resend, approved = true, true // no new attempt: no policy decision
			resends++
			continue
		}
		d.log.Info("attempt unconfirmed", "op_id", op.OpID, "device", op.Device, "attempt", op.Attempts, "waited", wait)
	}
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
			checkEntry(dev, op, devices.CheckAuthorization, true, who+" may "+devices.Action(dev, op.Target)+" "+op.Device, now),
			checkEntry(dev, op, devices.CheckFreshness, true, fmt.Sprintf("%s of its TTL left (deadline %s)",
				op.Deadline.Sub(now).Round(time.Millisecond), op.Deadline.UTC().Format(time.RFC3339Nano)), now),
		)
	}
	return true
}

// recordAttemptLocked records on t, with q.mu held, the attempt about to
// be sent (machine.Command.RecordAttempt).
func (q *deviceQueue) recordAttemptLocked(t *task, resend bool) (prev, op devices.Op) {
	return t.RecordAttempt(resend, q.d.now())
}

// storeAttempt stores the op of an attempt recorded before its send; a
// failure is logged, and the send goes on.
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
	e := auditEntry(q.dev.Device, op, devices.AuditSent, op.LastSentAt)
	e.Attempt = op.Attempts
	if resend {
		e.Detail = "the same attempt again: its delivery was unknown"
	}
	q.d.audit(e)
}

// giveUp ends t as the retry policy decided: failed, with a reason that
// says why no further attempt is made.
func (q *deviceQueue) giveUp(t *task, op devices.Op, dec retry.Decision, failure error, maxAttempts int) {
	last := fmt.Sprintf("no report showed the target after attempt %d", op.Attempts)
	lastReason := devices.ReasonTimeout
	if failure != nil {
		last = fmt.Sprintf("attempt %d could not be sent: %v", op.Attempts, failure)
		lastReason = devices.ReasonSendFailed
	}
	var reason devices.Reason
	var detail string
	switch dec.Reason {
	case retry.GiveUpPermanent:
		reason, detail = devices.ReasonPermanentError, fmt.Sprintf("%s; a %s failure is permanent", last, dec.Class)
	case retry.GiveUpNotRetryable:
		reason, detail = devices.ReasonNotRetryable, fmt.Sprintf("%s; the service's retry policy does not retry %s", last, dec.Class)
	case retry.GiveUpAttempts:
		reason, detail = lastReason, fmt.Sprintf("%s of %d", last, maxAttempts)
	case retry.GiveUpDeadline:
		reason, detail = devices.ReasonDeadlineExceeded, fmt.Sprintf("%s; the next attempt would start after the deadline", last)
	case retry.GiveUpRetryAfter:
		reason, detail = devices.ReasonRetryAfterExceedsDeadline, fmt.Sprintf("%s; the service asked to wait past the deadline", last)
	case retry.GiveUpBudget:
		reason, detail = devices.ReasonRetryBudgetExhausted, fmt.Sprintf("%s; the retry budget of service %s is spent", last, q.svc.Name)
	default:
		reason, detail = lastReason, fmt.Sprintf("%s; %s", last, dec.Reason)
	}
	q.finish(t, devices.Failed, reason, detail, nil)
}

// maxResends bounds the resends of one attempt whose delivery the link's
// flapping left unknown; past it, the silence counts as the attempt's
// failure and the retry policy decides.
const maxResends = 2

// sendTimeout bounds one send: the wait for the bridge's broker to take it.
const sendTimeout = 10 * time.Second

// sentSinceResume records that a send of t went out since Hearth started:
// its attempts are no longer of unknown delivery.
func (q *deviceQueue) sentSinceResume(t *task) {
	q.mu.Lock()
	t.SentSinceResume()
	q.mu.Unlock()
}

// unsent takes back an attempt that never left Hearth: its record goes
// back to prev, so that no attempt is spent on a connection that was down.
func (q *deviceQueue) unsent(t *task, prev devices.Op) {
	q.mu.Lock()
	if !t.Unsent(prev) {
		q.mu.Unlock()
		return
	}
	t.confirm = nil
	op := t.Op
	q.mu.Unlock()
	if err := q.d.journal.Save(op); err != nil {
		q.d.log.Warn("store attempt", "op_id", op.OpID, "err", err)
	}
}

// awaitReconnect waits until the MQTT connection is back, the deadline
// passes, t ends or ctx is done; false means stop.
func (q *deviceQueue) awaitReconnect(ctx context.Context, t *task, reconnect <-chan struct{}, deadline time.Time) bool {
	timer := q.d.clock.NewTimer(deadline.Sub(q.d.now()))
	defer timer.Stop()
	select {
	case <-reconnect:
		return true
	case <-timer.Chan():
		return true // the loop ends it: TTL elapsed
	case <-t.cancel:
		return false
	case <-ctx.Done():
		return false
	}
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
	timer := q.d.clock.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-timer.Chan():
		return true
	case <-t.cancel:
		return false
	case <-ctx.Done():
		return false
	}
}
