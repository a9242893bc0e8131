package dispatcher

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/machine"
	"github.com/hearthd/hearth/notify"
)

// Safety-critical commands (DESIGN.md principle 6, issue 5): a risky action
// (devices.Risky: unlock, open a garage door, disarm, open a valve) gets a
// short default TTL and few attempts, every attempt of every command is
// authorized again, and the life of every command to a safety-critical
// device is audited; every one that fails, expires or is refused is
// announced on <prefix>/notifications.

// DefaultRiskyTTL is the TTL of a risky action whose command gives none
// (measured from issued_at when given): 30 s, after which an unlock is no
// longer what anybody asked for. A device's shorter default TTL wins; a
// command's explicit ttl is honoured.
const DefaultRiskyTTL = 30 * time.Second

// MaxRiskyAttempts bounds the attempts at a risky action, whatever the
// service's retry policy allows: 2, each after a full re-validation (see
// machine.MaxRiskyAttempts).
const MaxRiskyAttempts = machine.MaxRiskyAttempts

// authorize asks the Authorizer whether op's principal may (still) send it;
// nil without an Authorizer.
func (d *Dispatcher) authorize(dev devices.Device, principal string, target devices.Target) error {
	if d.authz == nil {
		return nil
	}
	return d.authz.Authorize(principal, dev, target)
}

// audited reports whether commands to dev leave an audit trail.
func (d *Dispatcher) audited(dev devices.Device) bool {
	return d.auditLog != nil && dev.SafetyCritical()
}

// audit stores entries in the audit trail; a failure to store is logged,
// never fatal to the command.
func (d *Dispatcher) audit(entries ...devices.AuditEntry) {
	if d.auditLog == nil || len(entries) == 0 {
		return
	}
	if err := d.auditLog.AppendAudit(entries...); err != nil {
		d.log.Warn("store audit entries", "count", len(entries), "op_id", entries[0].OpID, "err", err)
	}
}

// alertIfSafetyCritical announces op's outcome, a failure, expiry or
// refusal of a command to a safety-critical device, on
// <prefix>/notifications (and so to every notify service) and logs it at
// ERROR: a lock that did not lock must reach a person.
func (d *Dispatcher) alertIfSafetyCritical(dev devices.Device, op devices.Op) {
	if !devices.NotCarriedOut(dev, op) {
		return
	}
	action := devices.Action(dev, op.Target)
	who := ""
	if op.Principal != "" {
		who = " from " + op.Principal
	}
	d.log.Error("safety-critical command not carried out", "op_id", op.OpID, "device", op.Device,
		"principal", op.Principal, "action", action, "status", op.Status, "reason", op.Reason, "detail", op.Detail)
	d.Notify(notify.Notification{
		Title:     fmt.Sprintf("%s: %s %s", op.Device, action, op.Status),
		Message:   fmt.Sprintf("The %s command%s to %s was not carried out (%s): %s", action, who, op.Device, op.Reason, op.Detail),
		Severity:  "critical",
		Source:    "dispatcher",
		Device:    op.Device,
		OpID:      op.OpID,
		Principal: op.Principal,
		Reason:    string(op.Reason),
	})
}

// authorizedNow checks again, at the moment of a send after a fresh read,
// that t's principal may still send it; a refusal is audited and ends t
// failed/unauthorized. It reports whether the send may go.
func (q *deviceQueue) authorizedNow(t *task) bool {
	d, dev := q.d, q.dev.Device
	q.mu.Lock()
	op := t.Op
	q.mu.Unlock()
	err := d.authorize(dev, op.Principal, op.Target)
	if err == nil {
		return true
	}
	q.refuse(t, op, err, d.now(), fmt.Sprintf("not authorized any more after the state read before attempt %d: %v; nothing was sent", op.Attempts+1, err))
	return false
}

// refuse ends t failed/unauthorized, its principal refused by err at now:
// the failed check is audited whatever the device (as refusals at intake
// are), then t ends with detail.
func (q *deviceQueue) refuse(t *task, op devices.Op, err error, now time.Time, detail string) {
	q.d.audit(devices.CheckAudit(q.dev.Device, op, devices.CheckAuthorization, false, err.Error(), now))
	q.finish(t, devices.Failed, devices.ReasonUnauthorized, detail, nil)
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
// attempt 2"); until bounds the wait for the answer (the TTL, or a
// retry's policy deadline, if sooner). stop means t ended (here or
// elsewhere) or ctx is done; neither proceed nor stop means until passed
// while waiting, for the caller's loop to end it.
func (q *deviceQueue) revalidate(ctx context.Context, t *task, strict bool, when string, until time.Time) (proceed, stop bool) {
	d := q.d
	chk := &stateCheck{seen: map[string]any{}}
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
			d.audit(devices.CheckAudit(dev, op, devices.CheckState, !strict, detail, d.now()))
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
	if op.Deadline.Before(until) {
		until = op.Deadline
	}
	timer := d.clock.NewTimer(min(timeout, until.Sub(d.now())))
	defer timer.Stop()
	d.log.Info("reading state", "op_id", op.OpID, "device", op.Device, "when", when, "strict", strict, "timeout", timeout)
	readCtx, cancel := context.WithTimeout(ctx, q.svc.bound)
	err := q.svc.Bridge.Read(readCtx, dev, op.Target)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return false, true
		}
		return unknown(fmt.Sprintf("the state could not be read %s: %v", when, err), nil)
	}
	q.mu.Lock()
	looked := 0 // the reports of chk looked at
	for end := waitChanged; ; end = q.waitLocked(ctx, t, timer.Chan(), nil) {
		if chk.reports > looked {
			looked = chk.reports
			seen := maps.Clone(chk.seen)
			reading := devices.Assess(q.dev.Class, op.Target, seen) // a lock by its lock_state only
			already := reading == devices.ReadingKnown && q.satisfied(op.Target, seen)
			if reading != devices.ReadingNone {
				q.mu.Unlock()
			}
			switch {
			case already:
				d.log.Info("state read: already at the target; nothing sent", "op_id", op.OpID, "device", op.Device, "when", when)
				if d.audited(dev) {
					d.audit(devices.CheckAudit(dev, op, devices.CheckState, true, "already at the target "+showState(seen)+"; nothing sent", d.now()))
				}
				q.finish(t, devices.Succeeded, "", "", seen)
				return false, true
			case reading == devices.ReadingKnown:
				d.log.Info("state read: not at the target; attempting", "op_id", op.OpID, "device", op.Device, "when", when)
				if d.audited(dev) {
					d.audit(devices.CheckAudit(dev, op, devices.CheckState, true, "not at the target yet: "+showState(seen), d.now()))
				}
				return true, false
			case reading == devices.ReadingInvalid:
				return unknown(fmt.Sprintf("the state read %s is not a known state (%s)", when, showState(seen)), seen)
			}
			// A report that does not name the target's attributes
			// (a battery level, or a lock's state without lock_state):
			// wait on.
		}
		switch end {
		case waitTimer:
			q.mu.Unlock()
			if !d.now().Before(until) {
				return false, false // the TTL or the policy's deadline passed: the loop ends it
			}
			return unknown(fmt.Sprintf("no report of the state within %s of the read %s", timeout, when), nil)
		case waitStop:
			q.mu.Unlock()
			return false, true
		}
	}
}

// showState renders a reported state for a result's detail.
func showState(state map[string]any) string {
	b, err := json.Marshal(state)
	if err != nil {
		return fmt.Sprintf("%v", state)
	}
	return string(b)
}
