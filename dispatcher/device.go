package dispatcher

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/machine"
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

	// caps are the device's capabilities from its bridge, nil while
	// unknown: read without q.mu at intake (see Dispatcher.Capabilities).
	caps atomic.Pointer[devices.Capabilities]

	mu sync.Mutex
	m  *machine.Device
	// cur is the runner's side of the command being attempted (m's
	// Current), or nil.
	cur *task
	// changed is closed, then replaced, at every input the device takes
	// (changedLocked): a report, an availability, a node status, the end
	// of an awake lease, a bridge's word on a set, a command accepted or
	// restored. The worker's waits look again at what they wait for then
	// (see waitLocked): one signal, whatever the input.
	changed chan struct{}
	// sleeps counts the awake leases the bridge (or a silence) ended.
	sleeps uint64
	// running: the worker goroutine is running. It starts with the first
	// command and ends when the queue is empty, so that a device costs a
	// goroutine only while it has work (see startWorkerLocked).
	running bool

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
	// opID is the command's op_id, which never changes: the logs read it
	// without q.mu (Op changes under it, at a supersede).
	opID   string
	cancel chan struct{} // closed when the command ends from outside (superseded)
	// confirm is set while an attempt waits for a confirming report.
	confirm *confirmation
	// check is set while a fresh read before a risky attempt waits for
	// the device's report.
	check *stateCheck
}

// stateCheck collects the reports that arrive after a fresh read began.
type stateCheck struct {
	seen    map[string]any // attributes reported since the check began, merged
	reports int            // the reports merged into seen
}

// confirmation collects the reports that arrive after one send. Its
// fields are guarded by the device's q.mu; every change to them is an
// input of the device (changedLocked).
type confirmation struct {
	target devices.Target // what the attempt asked for
	seen   map[string]any // attributes reported since the send, merged
	// ok: seen satisfies the target.
	ok bool
	// fault says, once seen shows the device unable to reach any target
	// (devices.Fault: a jammed bolt), what.
	fault string
	// failure says why, once the bridge reported that it could not
	// deliver the set after taking it (SendFailed, AnswerFailed).
	failure error
	// resumed: it waits for the attempt in flight before a restart, so
	// a retained report counts too: it is the device's state as its
	// bridge last published it, which the restart made Hearth miss.
	resumed bool
}

func newDeviceQueue(d *Dispatcher, dev Device, svc *Service) *deviceQueue {
	return &deviceQueue{d: d, dev: dev, svc: svc, m: machine.New(dev.Device), changed: make(chan struct{})}
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
	q.changedLocked()
	q.mu.Unlock()
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
	if ready, _, _ := q.svc.link.Ready(now); !ready {
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
	q.changedLocked()
	q.mu.Unlock()
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
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.m.Idle() {
		switch q.waitLocked(ctx, nil, timer.C, nil) {
		case waitTimer:
			// Decided under q.mu: a push from here on starts a new
			// worker.
			q.idleLocked()
			return false
		case waitStop:
			return false
		}
	}
	return true
}

// changedLocked tells the worker's waits that the device took an input.
// Called with q.mu held.
func (q *deviceQueue) changedLocked() {
	close(q.changed)
	q.changed = make(chan struct{})
}

// waitEnd says what ended a wait of the worker (waitLocked).
type waitEnd int

const (
	waitChanged waitEnd = iota // the device took an input: look again
	waitTimer                  // the timer fired
	waitOther                  // the caller's other channel was closed
	waitStop                   // t ended from outside, or ctx is done
)

// waitLocked waits, with q.mu held on entry and on return, for the
// device's next input (changedLocked), timer (nil: none), other (nil:
// none), the end of t from outside (t.cancel; t nil: none) or the end of
// ctx, and says which came first. The caller looks again, under q.mu, at
// what it waits for: an input changes nothing it waits for as often as
// not.
func (q *deviceQueue) waitLocked(ctx context.Context, t *task, timer <-chan time.Time, other <-chan struct{}) waitEnd {
	changed := q.changed
	var cancel chan struct{}
	if t != nil {
		cancel = t.cancel
	}
	q.mu.Unlock()
	defer q.mu.Lock()
	select {
	case <-changed:
		return waitChanged
	case <-timer:
		return waitTimer
	case <-other:
		return waitOther
	case <-cancel:
		return waitStop
	case <-ctx.Done():
		return waitStop
	}
}

// pause waits until until (on the dispatcher's clock), for a or b (nil:
// none), or for the end of t from outside or of ctx, and says which came
// first (waitOther for a, waitChanged for b). It is for the waits that no
// input of the device ends: the bridge, the breaker, a backoff.
func (q *deviceQueue) pause(ctx context.Context, t *task, until time.Time, a, b <-chan struct{}) waitEnd {
	timer := q.d.clock.NewTimer(until.Sub(q.d.now()))
	defer timer.Stop()
	select {
	case <-timer.Chan():
		return waitTimer
	case <-a:
		return waitOther
	case <-b:
		return waitChanged
	case <-t.cancel:
		return waitStop
	case <-ctx.Done():
		return waitStop
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
	q.cur = &task{Command: c, opID: c.Op.OpID, cancel: make(chan struct{})}
	return q.cur
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
		q.d.audit(devices.EndAudit(q.dev.Device, op, now)) // stored before anyone hears of it
	}
	if dead {
		q.d.deadLetter(op)
	}
	q.d.ended(q.dev.Device, op)
	q.d.publishResult(op.Result())
	q.d.alertIfSafetyCritical(q.dev.Device, op)
}
