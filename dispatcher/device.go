package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/machine"
	"github.com/hearthd/hearth/retry"
)

// deviceQueue runs one device's commands: its rules live in m, the
// device's state machine (package machine); deviceQueue turns bridge
// callbacks, timers and store completions into its inputs, and runs the
// attempts of the command it hands out. All its fields, m included, are
// guarded by mu; the worker goroutine (run) is the only one that
// attempts.
type deviceQueue struct {
	d   *Dispatcher
	dev Device
	svc *Service

	mu sync.Mutex
	m  *machine.Device
	// cur is the runner's side of the command being attempted (m's
	// Current), or nil.
	cur  *task
	wake chan struct{}
	// running: the worker goroutine is running. It starts with the first
	// command and ends when the queue is empty, so that a device costs a
	// goroutine only while it has work (see startWorkerLocked).
	running bool

	// woke is closed at every wake signal of a sleepy device, then
	// replaced; slept is closed when the bridge ends its lease (the node
	// is asleep), then replaced (see sleepy.go).
	woke  chan struct{}
	slept chan struct{}
	// availChanged is closed at every availability report, then replaced
	// (see offline.go).
	availChanged chan struct{}
	// overtaken are the confirmations of sent attempts whose command was
	// superseded while they waited for their report. Each keeps its
	// breaker permit until its attempt timeout, and reports still feed
	// it: its outcome for the breaker is decided as if nothing had
	// superseded it (see resolveOvertaken).
	overtaken []*confirmation
}

// task is the command being attempted, with what its worker waits on.
type task struct {
	*machine.Command
	cancel chan struct{} // closed when the command ends from outside (superseded)
	// confirm is set while an attempt waits for a confirming report.
	confirm *confirmation
	// check is set while a fresh read before a risky attempt waits for
	// the device's report.
	check *stateCheck
}

// stateCheck collects the reports that arrive after a fresh read began.
type stateCheck struct {
	seen map[string]any // attributes reported since the check began, merged
	news chan struct{}  // signalled at every report
}

// confirmation collects the reports that arrive after one send.
type confirmation struct {
	target devices.Target // what the attempt asked for
	seen   map[string]any // attributes reported since the send, merged
	done   chan struct{}  // closed once seen satisfies the target
	// faulted is closed, and fault says what, once seen shows the device
	// unable to reach any target (devices.Fault: a jammed bolt).
	faulted chan struct{}
	fault   string
	// resumed: it waits for the attempt in flight before a restart, so
	// a retained report counts too: it is the device's state as its
	// bridge last published it, which the restart made Hearth miss.
	resumed bool
}

func newDeviceQueue(d *Dispatcher, dev Device, svc *Service) *deviceQueue {
	return &deviceQueue{d: d, dev: dev, svc: svc, m: machine.New(dev.Device), wake: make(chan struct{}, 1), woke: make(chan struct{}), slept: make(chan struct{}), availChanged: make(chan struct{})}
}

// supersede ends every waiting or running command of the device that op
// replaces (machine.Device.Replaces), so that no further attempt of it can
// start (a send already under way completes), and returns them, updated,
// for the caller to store and publish. It never waits for a send.
func (q *deviceQueue) supersede(op devices.Op, now time.Time) []devices.Op {
	q.mu.Lock()
	defer q.mu.Unlock()
	var ended []devices.Op // oldest first: the running one, then the waiting
	for _, c := range q.m.Supersede(op, now) {
		if t := q.cur; t != nil && t.Command == c {
			if t.confirm != nil && !q.dev.Sleep.Sleepy {
				// A sent attempt waits for its report: it still tells
				// of the service (a sleepy device's silence never does).
				q.overtaken = append(q.overtaken, t.confirm)
			}
			t.confirm = nil
			close(t.cancel)
		}
		ended = append(ended, c.Op)
		q.d.log.Info("command superseded", "op_id", c.Op.OpID, "device", c.Op.Device, "by", op.OpID, "attempts", c.Op.Attempts)
	}
	return ended
}

// restore queues again commands that supersede had ended (ops, oldest
// first), when the command that superseded them could not be stored: they
// are still accepted (machine.Device.Restore).
func (q *deviceQueue) restore(ops []devices.Op) {
	q.mu.Lock()
	q.m.Restore(ops)
	q.startWorkerLocked()
	q.mu.Unlock()
	signal(q.wake)
}

// forget drops the places of ended commands whose end is stored: they
// will not be restored.
func (q *deviceQueue) forget(ops []devices.Op) {
	q.mu.Lock()
	for _, op := range ops {
		q.m.Forget(op.OpID)
	}
	q.mu.Unlock()
}

// push queues a stored op behind the device's earlier commands.
func (q *deviceQueue) push(op devices.Op) { q.accept(op, machine.Fresh) }

// pushFirstStored queues an op whose first attempt the intake stored with
// its acceptance (see firstAttemptWithAccept).
func (q *deviceQueue) pushFirstStored(op devices.Op) { q.accept(op, machine.FirstStored) }

// firstAttemptWithAccept reports whether the intake may store op's first
// attempt in the commit that accepts it, so that the send that follows at
// once needs no commit of its own (a stored attempt says only that a send
// may have happened: after a crash its outcome counts as unknown, which is
// true of a send about to go). It may when the send will go at once and
// without a check first: the device listens (not sleepy), neither the
// device nor the action is safety-critical (those are read fresh before
// their first send), nothing of the device is queued or running, the
// bridge is heard from and its breaker is closed. Anything else, or a
// send that does not go after all, costs nothing more than a record
// that says one attempt where none was made, until the op's next save.
func (q *deviceQueue) firstAttemptWithAccept(op devices.Op, now time.Time) bool {
	if q.dev.Sleep.Sleepy || q.dev.SafetyCritical() || devices.Risky(q.dev.Device, op.Target) {
		return false
	}
	q.mu.Lock()
	idle := q.m.Idle()
	offline, _ := q.m.Offline() // nothing will be sent
	q.mu.Unlock()
	if offline {
		return false
	}
	if !idle {
		return false
	}
	if ready, _, _ := q.svc.link.ready(now); !ready {
		return false
	}
	return q.svc.breaker == nil || q.svc.breaker.Snapshot(now).State == breaker.Closed
}

// pushResumed queues an op resumed from the store after a restart
// (machine.Resumed). Its queued result, if the device sleeps, counts as
// announced: a restart with many commands pending for sleeping devices
// would otherwise publish a queued result for each of them, ahead of the
// live traffic. Once delivered at a wake and still pending, it is
// announced again at the next sleep, like any other.
func (q *deviceQueue) pushResumed(op devices.Op) { q.accept(op, machine.Resumed) }

// accept queues op, come in as kind says, behind the device's earlier
// commands.
func (q *deviceQueue) accept(op devices.Op, kind machine.Kind) {
	q.mu.Lock()
	q.m.Accept(op, kind)
	q.startWorkerLocked()
	q.mu.Unlock()
	signal(q.wake)
}

// startWorkerLocked starts the device's worker unless it runs already or
// the dispatcher is stopping (the commands then stay pending in the
// store). Called with q.mu held, from the dispatcher's Run goroutine (the
// intake and resume), the only one that starts workers.
func (q *deviceQueue) startWorkerLocked() {
	ctx := q.d.workCtx
	if q.running || ctx == nil || ctx.Err() != nil {
		return
	}
	q.running = true
	q.d.workers.Go(func() { q.run(ctx) })
}

// workerLinger is how long an always-listening device's worker waits for
// its next command once its queue is empty, before it ends: a device
// commanded often keeps its goroutine (a new one pays for growing its
// stack at each command), one left alone costs none. It runs on the real
// clock: it is housekeeping and decides nothing.
var workerLinger = 30 * time.Second

// linger waits up to workerLinger for a command while the queue is empty
// and reports whether one came; false means the worker has ended (the
// queue was still empty, or ctx ended).
func (q *deviceQueue) linger(ctx context.Context) bool {
	timer := time.NewTimer(workerLinger)
	defer timer.Stop()
	for {
		expired := false
		select {
		case <-q.wake:
		case <-timer.C:
			expired = true
		case <-ctx.Done():
			return false
		}
		q.mu.Lock()
		if !q.m.Idle() {
			q.mu.Unlock()
			return true
		}
		if expired {
			// Decided under q.mu: a push from here on starts a new
			// worker.
			q.idleLocked()
			q.mu.Unlock()
			return false
		}
		q.mu.Unlock() // woken for nothing: wait on
	}
}

// idleLocked reports whether the queue has no command left, and if so
// marks the worker as ended: the next push starts a new one. Called with
// q.mu held by the worker.
func (q *deviceQueue) idleLocked() bool {
	if !q.m.Idle() {
		return false
	}
	q.running = false
	return true
}

// run is the device's worker: it attempts one command at a time until the
// queue is empty or ctx is cancelled.
func (q *deviceQueue) run(ctx context.Context) {
	if q.dev.Sleep.Sleepy {
		q.runSleepy(ctx)
		return
	}
	for {
		q.mu.Lock()
		var t *task
		if c := q.m.Next(); c != nil {
			t = q.begin(c)
		}
		q.mu.Unlock()
		if t == nil {
			if q.linger(ctx) {
				continue
			}
			return // the next command starts the worker again
		}
		q.execute(ctx, t)
		q.mu.Lock()
		q.m.Done()
		q.cur = nil
		q.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
	}
}

// begin makes c, m's current command, the one the worker attempts.
// Called with q.mu held.
func (q *deviceQueue) begin(c *machine.Command) *task {
	q.cur = &task{Command: c, cancel: make(chan struct{})}
	return q.cur
}

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

// revalidate reads the device's state fresh before an attempt (DESIGN.md
// principle 6): it starts collecting reports, asks the bridge to read the
// target's attributes, and waits up to the service's read timeout for a
// report that arrived after the check began and shows the state:
//
//   - the target already: t ends succeeded, and nothing is sent;
//   - a known state other than the target: proceed, the attempt follows;
//   - an unknown or invalid state (a jammed bolt, a null lock_state), or
//     no such report in time, or a read that could not be asked: when
//     strict (a risky action), t ends failed/state_unknown and nothing is
//     sent, since unknown is never taken as unlocked or open; otherwise
//     (the safe direction) proceed.
//
// when says when the read happens, for the logs and results ("before
// attempt 2"). stop means t ended (here or elsewhere) or ctx is done;
// neither proceed nor stop means the TTL passed while waiting, for the
// caller's loop to end it.
func (q *deviceQueue) revalidate(ctx context.Context, t *task, strict bool, when string) (proceed, stop bool) {
	d := q.d
	chk := &stateCheck{seen: map[string]any{}, news: make(chan struct{}, 1)}
	q.mu.Lock()
	if t.Ended() {
		q.mu.Unlock()
		return false, true
	}
	op := t.Op
	t.check = chk
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		if t.check == chk {
			t.check = nil
		}
		q.mu.Unlock()
	}()
	dev := q.dev.Device
	// unknown ends the check with the state unknown: strict fails t,
	// otherwise the attempt proceeds.
	unknown := func(detail string, seen map[string]any) (bool, bool) {
		if d.audited(dev) {
			d.audit(checkEntry(dev, op, devices.CheckState, !strict, detail, d.now()))
		}
		if !strict {
			d.log.Info("state read: unknown; the safe direction proceeds", "op_id", op.OpID, "device", op.Device, "detail", detail)
			return true, false
		}
		q.finish(t, devices.Failed, devices.ReasonStateUnknown, detail+"; nothing was sent", seen)
		return false, true
	}
	timeout := q.svc.ReadTimeout
	if timeout <= 0 {
		timeout = DefaultReadTimeout
	}
	timer := d.clock.NewTimer(min(timeout, op.Deadline.Sub(d.now())))
	defer timer.Stop()
	d.log.Info("reading state", "op_id", op.OpID, "device", op.Device, "when", when, "strict", strict, "timeout", timeout)
	readCtx, cancel := context.WithTimeout(ctx, sendTimeout)
	err := q.svc.Bridge.Read(readCtx, dev, op.Target)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return false, true
		}
		return unknown(fmt.Sprintf("the state could not be read %s: %v", when, err), nil)
	}
	for {
		select {
		case <-chk.news:
			q.mu.Lock()
			seen := maps.Clone(chk.seen)
			reading := q.assess(op.Target, seen)
			already := reading == devices.ReadingKnown && q.satisfied(op.Target, seen)
			q.mu.Unlock()
			switch {
			case already:
				d.log.Info("state read: already at the target; nothing sent", "op_id", op.OpID, "device", op.Device, "when", when)
				if d.audited(dev) {
					d.audit(checkEntry(dev, op, devices.CheckState, true, "already at the target "+showState(seen)+"; nothing sent", d.now()))
				}
				q.finish(t, devices.Succeeded, "", "", seen)
				return false, true
			case reading == devices.ReadingKnown:
				d.log.Info("state read: not at the target; attempting", "op_id", op.OpID, "device", op.Device, "when", when)
				if d.audited(dev) {
					d.audit(checkEntry(dev, op, devices.CheckState, true, "not at the target yet: "+showState(seen), d.now()))
				}
				return true, false
			case reading == devices.ReadingInvalid:
				return unknown(fmt.Sprintf("the state read %s is not a known state (%s)", when, showState(seen)), seen)
			}
			// A report that does not name the target's attributes
			// (a battery level, or a lock's state without lock_state):
			// wait on.
		case <-timer.Chan():
			if !d.now().Before(op.Deadline) {
				return false, false // the TTL passed: the loop ends it
			}
			return unknown(fmt.Sprintf("no report of the state within %s of the read %s", timeout, when), nil)
		case <-t.cancel:
			return false, true
		case <-ctx.Done():
			return false, true
		}
	}
}

// assess says what the reports seen since a check began show about
// target (a lock by its lock_state only: see devices.Assess).
func (q *deviceQueue) assess(target devices.Target, seen map[string]any) devices.Reading {
	return devices.Assess(q.dev.Class, target, seen)
}

// showState renders a reported state for a result's detail.
func showState(state map[string]any) string {
	b, err := json.Marshal(state)
	if err != nil {
		return fmt.Sprintf("%v", state)
	}
	return string(b)
}

// awaitLink waits until the service's link is ready (see link.ready).
// ready is false when op's deadline passed first, or when the breaker
// changed (the caller asks it again); stop means t ended or
// ctx is done.
func (q *deviceQueue) awaitLink(ctx context.Context, t *task, deadline time.Time) (ready, stop bool) {
	for {
		now := q.d.now()
		if !now.Before(deadline) {
			return false, false // never send after the deadline, even if the link is up
		}
		var breakerChanged <-chan struct{}
		if q.svc.breaker != nil {
			// Transitions only: a probe's place freed by another command
			// changes nothing here (and would wake waiters in turn).
			breakerChanged = q.svc.breaker.watchMoves()
		}
		ok, changed, retryAt := q.svc.link.ready(now)
		if ok {
			return true, false
		}
		until := deadline
		if !retryAt.IsZero() && retryAt.Before(until) {
			until = retryAt
		}
		q.d.log.Info("waiting for the bridge", "op_id", t.Op.OpID, "device", q.dev.ID, "service", q.svc.Name, "until", until)
		timer := q.d.clock.NewTimer(until.Sub(now))
		select {
		case <-changed:
		case <-timer.Chan():
		case <-breakerChanged:
			// The breaker may have opened (a replayed offline that
			// held): the caller asks it again.
			timer.Stop()
			return false, false
		case <-t.cancel:
			timer.Stop()
			return false, true
		case <-ctx.Done():
			timer.Stop()
			return false, true
		}
		timer.Stop()
	}
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

// send sends t's target unless t ended or ctx is done (sent is false then).
// The last check and the start of the watch for confirming reports happen
// together under q.mu, just before the send, so only reports after it count
// and a command superseded before that moment is never sent again.
func (q *deviceQueue) send(ctx context.Context, t *task) (c *confirmation, sent bool, err error) {
	q.mu.Lock()
	if t.Ended() || ctx.Err() != nil {
		q.mu.Unlock()
		return nil, false, nil
	}
	target := t.Op.Target
	c = q.watchLocked(t)
	t.Sending()
	q.mu.Unlock()
	sendCtx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	return c, true, q.svc.Bridge.Send(sendCtx, q.dev.Device, target)
}

// watch starts collecting the reports that arrive from now on as t's
// confirmation.
func (q *deviceQueue) watch(t *task) *confirmation {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.watchLocked(t)
}

// watchLocked is watch with q.mu held.
func (q *deviceQueue) watchLocked(t *task) *confirmation {
	c := &confirmation{target: t.Op.Target, seen: map[string]any{}, done: make(chan struct{}), faulted: make(chan struct{})}
	t.confirm = c
	return c
}

func (q *deviceQueue) unwatch(t *task) {
	q.mu.Lock()
	t.confirm = nil
	q.mu.Unlock()
}

// confirmWithin waits up to wait for c to be confirmed. ok means t
// succeeded (and is finished); stop means t ended otherwise or ctx is
// done; back means linkUp closed first: the link went down and came back,
// so the attempt's delivery is unknown. A confirmed permit is reported a success before the result goes out,
// so that whoever reads the result finds the breaker closed already.
func (q *deviceQueue) confirmWithin(ctx context.Context, t *task, c *confirmation, wait time.Duration, linkUp <-chan struct{}, permit *breaker.Permit) (ok, stop, back bool) {
	timer := q.d.clock.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-c.done:
		q.mu.Lock()
		state := maps.Clone(c.seen)
		opID, attempt := t.Op.OpID, t.Op.Attempts
		q.mu.Unlock()
		q.d.log.Info("attempt confirmed", "op_id", opID, "device", q.dev.ID, "attempt", attempt)
		q.release(permit, breaker.Success)
		q.finish(t, devices.Succeeded, "", "", state)
		return true, false, false
	case <-c.faulted:
		// The service delivered and the device answered: a success for
		// the breaker, a failure of the command, never retried.
		q.mu.Lock()
		state := maps.Clone(c.seen)
		opID, attempt, fault := t.Op.OpID, t.Op.Attempts, c.fault
		q.mu.Unlock()
		q.d.log.Warn("attempt met a device fault", "op_id", opID, "device", q.dev.ID, "attempt", attempt, "fault", fault)
		q.release(permit, breaker.Success)
		q.finish(t, devices.Failed, devices.ReasonJammed,
			fmt.Sprintf("after attempt %d the device reported %s; not retried: a jammed bolt needs a person to look", attempt, fault), state)
		return false, true, false
	case <-timer.Chan():
		q.unwatch(t)
		return false, false, false
	case <-linkUp:
		q.unwatch(t)
		return false, false, true
	case <-t.cancel:
		return false, true, false
	case <-ctx.Done():
		return false, true, false
	}
}

// isOvertaken reports whether c is the confirmation of an attempt whose
// command was superseded while it waited (see deviceQueue.overtaken).
func (q *deviceQueue) isOvertaken(c *confirmation) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Contains(q.overtaken, c)
}

// dropOvertaken stops feeding c reports, if it was overtaken.
func (q *deviceQueue) dropOvertaken(c *confirmation) {
	if c == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if i := slices.Index(q.overtaken, c); i >= 0 {
		q.overtaken = slices.Delete(q.overtaken, i, i+1)
	}
}

// resolveOvertaken decides, on a goroutine of its own, the breaker outcome
// of an attempt whose command was superseded after its send, by the rule
// of any attempt: a success if a report shows its target (or a device
// fault: the service delivered) by expires, its attempt timeout;
// otherwise, at expires, as timeoutOutcome says (a failure unless the
// bridge passed on a live report of any device since the send, heard, or
// says the device is offline). A change of Hearth's own link since the
// send (linkUp closed, or a new link generation than linkGen) or the end
// of ctx counts as nothing. Without it, a stream of commands each
// superseding the last before its attempt timeout (a dimmer drag, a
// frequent automation) would keep a hung coordinator's breaker closed for
// ever.
func (q *deviceQueue) resolveOvertaken(ctx context.Context, c *confirmation, permit *breaker.Permit, expires time.Time, linkUp <-chan struct{}, linkGen, heard uint64) {
	if permit == nil {
		q.dropOvertaken(c)
		return
	}
	q.d.workers.Go(func() {
		defer q.dropOvertaken(c)
		timer := q.d.clock.NewTimer(expires.Sub(q.d.now()))
		defer timer.Stop()
		select {
		case <-c.done:
			q.release(permit, breaker.Success)
		case <-c.faulted:
			q.release(permit, breaker.Success)
		case <-timer.Chan():
			q.dropOvertaken(c) // no report counts after the timeout
			q.releaseTimedOut(ctx, permit, q.probeOutcome(permit, q.timeoutOutcome(q.svc.link.changedSince(linkGen), heard)))
		case <-linkUp:
			q.release(permit, breaker.Canceled) // Hearth's own connection, not the service
		case <-ctx.Done():
			q.release(permit, breaker.Canceled)
		}
	})
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

// finish ends t with a terminal status, stores and publishes it, unless
// something else (a newer command) ended it first.
func (q *deviceQueue) finish(t *task, status devices.Status, reason devices.Reason, detail string, state map[string]any) {
	now := q.d.now()
	q.mu.Lock()
	op, ok := q.m.End(t.Command, status, reason, detail, state, now)
	if !ok {
		q.mu.Unlock()
		return
	}
	t.confirm = nil
	q.mu.Unlock()
	dead := status == devices.Failed || status == devices.Expired
	if s, ok := q.d.dead.(DeadLetterSaver); ok && dead {
		// The end and its dead letter in one commit.
		if err := s.SaveDeadLetters(op); err != nil {
			q.d.log.Warn("store result and dead letter", "op_id", op.OpID, "err", err)
			if err := q.d.journal.Save(op); err != nil {
				q.d.log.Warn("store result", "op_id", op.OpID, "err", err)
			}
		}
		dead = false // filed
	} else if err := q.d.journal.Save(op); err != nil {
		q.d.log.Warn("store result", "op_id", op.OpID, "err", err)
	}
	q.d.log.Info("command ended", "op_id", op.OpID, "device", op.Device, "status", status, "reason", reason, "attempts", op.Attempts)
	if q.d.audited(q.dev.Device) || reason == devices.ReasonUnauthorized {
		q.d.audit(endEntry(q.dev.Device, op, now)) // stored before anyone hears of it
	}
	if dead {
		q.d.deadLetter(op)
	}
	q.d.publishResult(op.Result())
	q.d.alertIfSafetyCritical(q.dev.Device, op)
}

// report takes a state report of the device: it confirms the running
// attempt when the reports since its send show the target, and mirrors the
// state. A retained report (one the broker kept from before, replayed on
// subscribe) updates the mirror but never confirms: it is not news.
func (q *deviceQueue) report(state map[string]any, retained bool) {
	now := q.d.now()
	q.mu.Lock()
	r := q.m.Report(state, retained, now)
	if r.Woke {
		q.wokeLocked()
	}
	if t := q.cur; t != nil && t.check != nil && !t.Ended() && r.News {
		maps.Copy(t.check.seen, state)
		signal(t.check.news)
	}
	if t := q.cur; t != nil && t.confirm != nil && !t.Ended() && (r.News || (retained && t.confirm.resumed)) {
		q.feedLocked(t.confirm, state)
	}
	if r.News {
		for _, c := range q.overtaken {
			q.feedLocked(c, state)
		}
	}
	// Pushed under q.mu, as a republish sweep pushes: whichever comes
	// last carries the newest state.
	q.d.out.push(q.d.topic(q.dev.ID, ""), r.Mirror, true)
	q.mu.Unlock()
	q.d.saver.mark(q.dev.ID, r.Mirror, now)
	if r.Answered && q.d.onFreshState != nil {
		q.d.onFreshState(q.dev.Device)
	}
}

// feedLocked adds a report to c: it is confirmed once what it has seen
// shows its target, faulted once it shows a device fault. Called with q.mu
// held.
func (q *deviceQueue) feedLocked(c *confirmation, state map[string]any) {
	maps.Copy(c.seen, state)
	if fault, bad := devices.Fault(q.dev.Class, c.seen); bad && c.fault == "" {
		c.fault = fault
		close(c.faulted)
	} else if q.satisfied(c.target, c.seen) {
		select {
		case <-c.done:
		default:
			close(c.done)
		}
	}
}

// satisfied reports whether the reports seen since a send show target (a
// lock by its lock_state only, never by an echo of state: see
// devices.Satisfied).
func (q *deviceQueue) satisfied(target devices.Target, seen map[string]any) bool {
	return devices.Satisfied(q.dev.Class, target, seen)
}

// availability mirrors the device's availability as the bridge reports it.
func (q *deviceQueue) availability(online bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.m.Availability(online, q.d.now()) {
		q.wokeLocked() // back from offline: a wake signal
	}
	close(q.availChanged)
	q.availChanged = make(chan struct{})
	q.d.out.pushRaw(q.d.topic(q.dev.ID, "availability"), []byte(onlineWord(online)), true)
}

// republishMirror pushes the device's current state (availability false)
// or availability (true) again, if known, reading it at the moment of the
// push and under q.mu, as live updates push: a sweep never publishes a
// value older than one already out. It reports whether it pushed.
func (q *deviceQueue) republishMirror(availability bool) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if availability {
		online, known := q.m.Available()
		if !known {
			return false
		}
		q.d.out.pushRaw(q.d.topic(q.dev.ID, "availability"), []byte(onlineWord(online)), true)
		return true
	}
	state := q.m.State()
	if state == nil {
		return false
	}
	q.d.out.push(q.d.topic(q.dev.ID, ""), state, true)
	return true
}

func onlineWord(online bool) string {
	if online {
		return "online"
	}
	return "offline"
}
