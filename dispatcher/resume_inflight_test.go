package dispatcher

// Issue 15, item 6: a crash costs no command its outcome. Commands resumed
// with an attempt in flight wait for the device's state for the rest of
// their attempt window before anything is resent, and a resend after the
// restart is not charged to the retry budget.

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
)

// resumeJournal is an memJournal whose Pending returns the ops stored
// before the "restart".
type resumeJournal struct {
	*memJournal
	pending []devices.Op
}

func (j *resumeJournal) Pending() ([]devices.Op, error) { return j.pending, nil }

type resumeRig struct {
	*sleepyRig
	n int
}

const (
	resumeAttemptTimeout = 5 * time.Second
	resumeSentAgo        = 2 * time.Second // the attempt in flight went out this long before the restart
)

// startResumed starts a dispatcher, as after a kill -9, with n switches
// sw00… on one service "zb" (3 attempts, 5 s attempt timeout, a retry
// budget that allows no retry at all), each with one command (op_id
// r00…, target ON) whose first attempt went out sentAgo before the
// start and was never confirmed. before runs after New and before Run:
// what the bridge reports (retained) as Hearth subscribes.
func startResumed(t *testing.T, n int, sentAgo time.Duration, before func(d *Dispatcher)) *resumeRig {
	t.Helper()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC))
	now := clock.Now()
	r := &sleepyRig{
		t: t, clock: clock,
		bridge:  &scriptedBridge{clock: clock, msgs: make(chan bridgeMsg, 4*n)},
		journal: &memJournal{ops: map[string]devices.Op{}},
		dead:    &memDeadLetters{},
		results: make(chan devices.Result, 16*n),
	}
	j := &resumeJournal{memJournal: r.journal}
	var devs []Device
	for i := range n {
		id := fmt.Sprintf("sw%02d", i)
		devs = append(devs, Device{Device: devices.Device{ID: id, Service: "zb", Class: devices.Switch}, TTL: time.Hour})
		sent := now.Add(-sentAgo)
		op := devices.Op{
			OpID: fmt.Sprintf("r%02d", i), Device: id, Target: devices.Target{"state": "ON"},
			Seq: uint64(i + 1), AcceptedAt: sent, Deadline: sent.Add(time.Hour),
			Status: devices.Accepted, Attempts: 1, LastSentAt: sent, UpdatedAt: sent,
		}
		j.pending = append(j.pending, op)
		r.journal.ops[op.OpID] = op
	}
	d, err := New(Options{
		Services: []Service{{
			Name: "zb", Bridge: r.bridge,
			Policy: retry.Policy{MaxAttempts: 3, AttemptTimeout: resumeAttemptTimeout, Backoff: retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 10 * time.Second}},
			Budget: retry.NewBudget(-1, -1, 10*time.Second), // no retry fits
		}},
		Devices:     devs,
		Journal:     j,
		Publisher:   nopPublisher{},
		DeadLetters: r.dead,
		Clock:       clock,
		OnResult:    func(res devices.Result) { r.results <- res },
	})
	if err != nil {
		t.Fatal(err)
	}
	r.d = d
	d.BridgeState("zb", true, false)
	if before != nil {
		before(d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &resumeRig{r, n}
}

// terminal waits for the terminal result of every resumed command.
func (r *resumeRig) terminal() map[string]devices.Result {
	r.t.Helper()
	got := map[string]devices.Result{}
	for len(got) < r.n {
		res := r.await("a terminal result", func(res devices.Result) bool { return res.Status.Terminal() })
		got[res.OpID] = res
	}
	return got
}

// Regression (issue 15): after a kill -9 with 12 commands sent and not yet
// confirmed, 9 of 12 ended failed/retry_budget_exhausted within 2 ms,
// nothing read and nothing resent, although every device had applied its
// set. Devices whose state, reported after the restart (retained, as the
// broker replays it on subscribe, or live), is at the target end
// succeeded, with nothing resent and nothing charged to the budget.
func TestResumedAttemptsConfirmedByStateAfterRestartSucceedWithoutResend(t *testing.T) {
	const n = 12
	// Half the devices' states are replayed (retained) before the
	// resumed commands run, half arrive live, within the window.
	r := startResumed(t, n, resumeSentAgo, func(d *Dispatcher) {
		for i := 0; i < n; i += 2 {
			d.Report(fmt.Sprintf("sw%02d", i), map[string]any{"state": "ON"}, true)
		}
	})
	// Every odd one waits on its window, on the clock.
	ctx, cancel := context.WithTimeout(context.Background(), rigWait)
	defer cancel()
	if err := r.clock.BlockUntilContext(ctx, n/2); err != nil {
		t.Fatalf("the %d resumed commands without a known state do not wait for their window: %v", n/2, err)
	}
	for i := 1; i < n; i += 2 {
		retained := i%4 == 1 // a retained replay within the window counts too
		r.d.Report(fmt.Sprintf("sw%02d", i), map[string]any{"state": "ON"}, retained)
	}
	for id, res := range r.terminal() {
		if res.Status != devices.Succeeded || res.Attempts != 1 {
			t.Errorf("%s: %s/%s after %d attempts; want succeeded after 1", id, res.Status, res.Reason, res.Attempts)
		}
	}
	r.none("after every resumed command ended")
	if dl := r.dead.list(); len(dl) != 0 {
		t.Errorf("%d dead letters; want none", len(dl))
	}
}

// A resumed command whose device does not reach the target within the
// rest of its attempt window is resent once when the window ends (not
// before), even with a retry budget that allows no retry: the restart,
// not the service, left its outcome unknown.
func TestResumedAttemptUnconfirmedIsResentOnceAfterItsWindow(t *testing.T) {
	r := startResumed(t, 1, resumeSentAgo, func(d *Dispatcher) {
		d.Report("sw00", map[string]any{"state": "OFF"}, true) // not at the target
	})
	start := r.clock.Now()
	r.advance(1, resumeAttemptTimeout-resumeSentAgo-time.Millisecond)
	r.none("within the attempt's window")
	r.clock.Advance(time.Millisecond) // the window ends; the backoff follows
	// The resend waits on its full-jitter backoff (up to 2 s for attempt 2).
	r.advance(1, 2*time.Second)
	m := r.next()
	if m.verb != "set" || m.target["state"] != "ON" {
		t.Fatalf("got a %s %v; want the set resent", m.verb, m.target)
	}
	if at := m.at.Sub(start); at < resumeAttemptTimeout-resumeSentAgo {
		t.Errorf("resent %v after the start; want not before the window ends, %v", at, resumeAttemptTimeout-resumeSentAgo)
	}
	r.none("after the resend")
	r.d.Report("sw00", map[string]any{"state": "ON"}, false)
	res := r.status("r00", devices.Succeeded)
	if res.Attempts != 2 {
		t.Errorf("r00 succeeded after %d attempts; want 2 (the one in flight, then one resend)", res.Attempts)
	}
	r.none("after the success")
}

// A resumed command whose window passed while Hearth was down, on a
// device that never answers, is resent once free of the budget, and then
// its next retry is charged as any other: with a budget that allows no
// retry, it ends retry_budget_exhausted after 2 attempts, not 1.
func TestResumedAttemptPastItsWindowIsResentOnceFreeOfTheBudget(t *testing.T) {
	r := startResumed(t, 1, time.Minute, nil) // the window ended while Hearth was down
	r.advance(1, 2*time.Second)               // the backoff before the resend
	if m := r.next(); m.verb != "set" {
		t.Fatalf("got a %s; want the set resent", m.verb)
	}
	r.advance(1, resumeAttemptTimeout) // the resend unconfirmed
	res := r.await("r00 terminal", func(res devices.Result) bool { return res.OpID == "r00" && res.Status.Terminal() })
	if res.Status != devices.Failed || res.Reason != devices.ReasonRetryBudgetExhausted || res.Attempts != 2 {
		t.Errorf("r00: %s/%s after %d attempts; want failed/retry_budget_exhausted after 2", res.Status, res.Reason, res.Attempts)
	}
	r.none("after the end")
}

// A resumed command whose window passed while Hearth was down is not
// resent if the device's state, replayed (retained) during the backoff
// before the resend, shows the target: it ends succeeded after 1 attempt.
func TestResumedAttemptPastItsWindowSucceedsOnStateHeardBeforeTheResend(t *testing.T) {
	r := startResumed(t, 1, time.Minute, nil)
	ctx, cancel := context.WithTimeout(context.Background(), rigWait)
	defer cancel()
	if err := r.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal("the resumed command does not wait on its backoff")
	}
	r.d.Report("sw00", map[string]any{"state": "ON"}, true)
	r.clock.Advance(2 * time.Second) // the backoff ends
	res := r.await("r00 terminal", func(res devices.Result) bool { return res.OpID == "r00" && res.Status.Terminal() })
	if res.Status != devices.Succeeded || res.Attempts != 1 {
		t.Errorf("r00: %s/%s after %d attempts; want succeeded after 1", res.Status, res.Reason, res.Attempts)
	}
	r.none("after the end")
}

// A safety-critical command resumed with an attempt in flight, whose
// fresh read after the restart shows it is not at the target, is resent
// free of the retry budget like any resumed command: with a budget that
// allows no retry, the lock still gets its second attempt instead of
// failing retry_budget_exhausted because of the restart.
func TestResumedLockNotAtTheTargetIsResentWithoutSpendingTheRetryBudget(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 2, 2, 0, 0, 0, time.UTC))
	sent := clock.Now().Add(-2 * time.Second)
	r := &sleepyRig{
		t: t, clock: clock,
		bridge:  &scriptedBridge{clock: clock, msgs: make(chan bridgeMsg, 16)},
		journal: &memJournal{ops: map[string]devices.Op{}},
		dead:    &memDeadLetters{},
		results: make(chan devices.Result, 64),
	}
	op := devices.Op{OpID: "L1", Device: "door", Target: devices.Target{"state": "LOCK"}, Seq: 1, AcceptedAt: sent,
		Deadline: sent.Add(time.Minute), Status: devices.Accepted, Attempts: 1, LastSentAt: sent, UpdatedAt: sent}
	r.journal.ops[op.OpID] = op
	d, err := New(Options{
		Services: []Service{{Name: "zw", Bridge: r.bridge,
			Policy: retry.Policy{MaxAttempts: 3, AttemptTimeout: 5 * time.Second, Backoff: retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 10 * time.Second}},
			Budget: retry.NewBudget(-1, -1, 10*time.Second)}}, // no retry fits
		Devices:     []Device{{Device: devices.Device{ID: "door", Service: "zw", Class: devices.Lock}, TTL: time.Minute}},
		Journal:     &resumeJournal{memJournal: r.journal, pending: []devices.Op{op}},
		Publisher:   nopPublisher{},
		DeadLetters: r.dead,
		Clock:       clock,
		Rand:        zeroRand{}, // full jitter draws 0: the resend follows at once
		OnResult:    func(res devices.Result) { r.results <- res },
	})
	if err != nil {
		t.Fatal(err)
	}
	r.d = d
	d.BridgeState("zw", true, false)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	// Every read answers: still unlocked. The resumed command's read
	// comes first (the fresh read after the start may come before or
	// after it), then the resend of the LOCK.
	for reads := 0; ; {
		m := r.next()
		if m.verb == "set" {
			if reads < 1 || m.target["state"] != "LOCK" {
				t.Fatalf("a set %v after %d reads; want LOCK resent after the read", m.target, reads)
			}
			break
		}
		reads++
		d.Report("door", map[string]any{"state": "UNLOCK", "lock_state": "unlocked"}, false)
	}
	d.Report("door", map[string]any{"state": "LOCK", "lock_state": "locked"}, false)
	res := r.await("L1 terminal", func(res devices.Result) bool { return res.OpID == "L1" && res.Status.Terminal() })
	if res.Status != devices.Succeeded || res.Attempts != 2 {
		t.Errorf("L1: %s/%s after %d attempts; want succeeded after 2 (the one in flight, then the free resend)", res.Status, res.Reason, res.Attempts)
	}
}

// zeroRand makes every full-jitter draw 0: no backoff.
type zeroRand struct{}

func (zeroRand) Int64N(int64) int64 { return 0 }
