package dispatcher

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/devices"
)

// send sends t's target unless t ended, ctx is done, or still (if not
// nil) says no (sent is false then). The last check and the start of the
// watch for confirming reports happen together under q.mu, just before the
// send, so only reports after it count, a command superseded before that
// moment is never sent again, and a condition still checks (a sleepy
// device's lease) holds at the moment of the send.
func (q *deviceQueue) send(ctx context.Context, t *task, still func() bool) (c *confirmation, sent bool, err error) {
	q.mu.Lock()
	if t.Ended() || ctx.Err() != nil || (still != nil && !still()) {
		q.mu.Unlock()
		return nil, false, nil
	}
	target := t.Op.Target
	c = q.watchLocked(t)
	t.Sending()
	q.mu.Unlock()
	sendCtx, cancel := context.WithTimeout(ctx, q.svc.bound)
	defer cancel()
	return c, true, q.svc.Bridge.Send(sendCtx, q.dev.Device, target)
}

// watchLocked starts collecting, with q.mu held, the reports that arrive
// from now on as t's confirmation.
func (q *deviceQueue) watchLocked(t *task) *confirmation {
	c := &confirmation{target: t.Op.Target, seen: map[string]any{}}
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
// so the attempt's delivery is unknown. A confirmed permit is reported a
// success before the result goes out, so that whoever reads the result
// finds the breaker closed already.
func (q *deviceQueue) confirmWithin(ctx context.Context, t *task, c *confirmation, wait time.Duration, linkUp <-chan struct{}, permit *breaker.Permit) (ok, stop, back bool) {
	timer := q.d.clock.NewTimer(wait)
	defer timer.Stop()
	q.mu.Lock()
	// What came is looked at first, then how the wait ended: a report
	// that confirms counts even if the timer fired as it came.
	for end := waitChanged; ; end = q.waitLocked(ctx, t, timer.Chan(), linkUp) {
		switch {
		case c.ok:
			state := maps.Clone(c.seen)
			opID, attempt := t.Op.OpID, t.Op.Attempts
			q.mu.Unlock()
			q.d.log.Info("attempt confirmed", "op_id", opID, "device", q.dev.ID, "attempt", attempt)
			q.release(permit, breaker.Success)
			q.finish(t, devices.Succeeded, "", "", state)
			return true, false, false
		case c.fault != "":
			// The service delivered and the device answered: a success
			// for the breaker, a failure of the command, never retried.
			state := maps.Clone(c.seen)
			opID, attempt, fault := t.Op.OpID, t.Op.Attempts, c.fault
			q.mu.Unlock()
			q.d.log.Warn("attempt met a device fault", "op_id", opID, "device", q.dev.ID, "attempt", attempt, "fault", fault)
			q.release(permit, breaker.Success)
			q.finish(t, devices.Failed, devices.ReasonJammed,
				fmt.Sprintf("after attempt %d the device reported %s; not retried: a jammed bolt needs a person to look", attempt, fault), state)
			return false, true, false
		case c.failure != nil:
			// The bridge reported the set failed: the attempt ends now,
			// as at its timeout; the caller reads c.failure.
			t.confirm = nil
			q.mu.Unlock()
			return false, false, false
		}
		switch end {
		case waitTimer:
			t.confirm = nil
			q.mu.Unlock()
			return false, false, false
		case waitOther:
			t.confirm = nil
			q.mu.Unlock()
			return false, false, true
		case waitStop:
			q.mu.Unlock()
			return false, true, false
		}
	}
}

// SendFailed takes the bridge's word that the set to device it took could
// not be delivered (Zigbee2MQTT's failed publish on bridge/logging):
// attribute is the one that failed ("" for any). When the device's
// command waits for the confirmation of a set that names attribute, the
// attempt ends at once as a send failure with err: the retry policy
// decides on the next (reason send_failed when it gives up), and the
// breaker counts it as it counts an attempt's silence (a failure unless
// the bridge is seen talking: a dead bulb behind a live bridge must not
// open the breaker of every device). Otherwise (no attempt waiting, a
// sleepy device, an attempt resumed after a restart, another attribute,
// an attempt after the first, a risky action) it changes nothing.
func (d *Dispatcher) SendFailed(device, attribute string, err error) {
	d.failWaiting(device, err, func(q *deviceQueue, t *task, c *confirmation) bool {
		// Zigbee2MQTT's log line names no set: one about an earlier
		// attempt can come late, after the Zigbee timeout, while the
		// next waits. Only a first attempt takes it, and never a risky
		// one, whose attempts are capped: a stale failure must not
		// spend them.
		_, names := c.target[attribute]
		return t.Op.Attempts <= 1 && !devices.Risky(q.dev.Device, t.Op.Target) && (attribute == "" || names)
	})
}

// AnswerFailed takes the device's own error answer to the set of the
// attempt now waiting for its confirmation, matched to that set by its
// request id (Shelly's RPC: the adapter keeps only each device's newest
// request, so an answer to an earlier attempt never arrives here): the
// attempt ends at once with err, and the retry policy decides on the next
// from err's class (a permanent one ends the command permanent_error).
// Unlike SendFailed, whose log lines name no set, it holds for every
// attempt and for a risky action too. A sleepy device's or a resumed
// attempt, or a device with no attempt waiting, is left as it is.
func (d *Dispatcher) AnswerFailed(device string, err error) { d.failWaiting(device, err, nil) }

// failWaiting ends with err, as a failure at the bridge, the attempt of
// device waiting for its confirmation, if there is one, it is not a
// sleepy device's or resumed after a restart, no failure ended it yet,
// and takes (nil: always) accepts it.
func (d *Dispatcher) failWaiting(device string, err error, takes func(*deviceQueue, *task, *confirmation) bool) {
	q, ok := d.devices[device]
	if !ok || err == nil {
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	t := q.cur
	if t == nil || t.confirm == nil || t.Ended() || q.dev.Sleep.Sleepy {
		return
	}
	c := t.confirm
	if c.resumed || c.failure != nil || (takes != nil && !takes(q, t, c)) {
		return
	}
	c.failure = err
	q.changedLocked()
}

// failedWith returns the failure the bridge reported for c's set, or nil.
func (q *deviceQueue) failedWith(c *confirmation) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return c.failure
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
		q.mu.Lock()
		for end := waitChanged; !c.ok && c.fault == ""; end = q.waitLocked(ctx, nil, timer.Chan(), linkUp) {
			switch end {
			case waitTimer:
				q.mu.Unlock()
				q.dropOvertaken(c) // no report counts after the timeout
				q.releaseTimedOut(ctx, permit, q.probeOutcome(permit, q.timeoutOutcome(q.svc.link.ChangedSince(linkGen), heard)))
				return
			case waitOther:
				q.mu.Unlock()
				q.release(permit, breaker.Canceled) // Hearth's own connection, not the service
				return
			case waitStop:
				q.mu.Unlock()
				q.release(permit, breaker.Canceled)
				return
			}
		}
		q.mu.Unlock()
		q.release(permit, breaker.Success) // confirmed, or a device fault: the service delivered
	})
}

// feedLocked adds a report to c: it is confirmed once what it has seen
// shows its target, faulted once it shows a device fault. Called with q.mu
// held.
func (q *deviceQueue) feedLocked(c *confirmation, state map[string]any) {
	maps.Copy(c.seen, state)
	if fault, bad := devices.Fault(q.dev.Class, c.seen); bad && c.fault == "" {
		c.fault = fault
	} else if q.satisfied(c.target, c.seen) {
		c.ok = true
	}
}

// satisfied reports whether the reports seen since a send show target,
// after the device's own clamping and rounding when its capabilities are
// known (a lock by its lock_state only, never by an echo of state: see
// devices.SatisfiedBy).
func (q *deviceQueue) satisfied(target devices.Target, seen map[string]any) bool {
	return devices.SatisfiedBy(q.dev.Class, q.caps.Load(), target, seen)
}
