package dispatcher

// The sleepy rig plays one sleepy thermostat behind a scripted bridge, on
// a fake clock, so that the test decides exactly when the device wakes,
// what it reports and when time moves. Each sleepy_*_test.go pins
// guarantees of docs/SLEEPY.md or docs/DEADLETTERS.md with it; other
// tests of the package reuse its bridge, journal and waits.

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
)

const rigWait = 5 * time.Second // failure deadline of every wait (real time)

// bridgeMsg is a send or a read that reached the bridge.
type bridgeMsg struct {
	verb   string // "set" or "get"
	target devices.Target
	at     time.Time
}

// scriptedBridge hands every send and read to the test on msgs, stamped
// with the fake clock's time; it never fails.
type scriptedBridge struct {
	clock *clockwork.FakeClock
	msgs  chan bridgeMsg
}

func (b *scriptedBridge) Send(_ context.Context, _ devices.Device, target devices.Target) error {
	b.msgs <- bridgeMsg{"set", maps.Clone(target), b.clock.Now()}
	return nil
}

func (b *scriptedBridge) Read(_ context.Context, _ devices.Device, target devices.Target) error {
	b.msgs <- bridgeMsg{"get", maps.Clone(target), b.clock.Now()}
	return nil
}

// memJournal is an in-memory journal; hold, if set, is called (outside the
// lock) before each save and may block it.
type memJournal struct {
	mu   sync.Mutex
	ops  map[string]devices.Op
	hold func(devices.Op)
}

func (j *memJournal) Save(ops ...devices.Op) error {
	j.mu.Lock()
	hold := j.hold
	j.mu.Unlock()
	if hold != nil {
		for _, op := range ops {
			hold(op)
		}
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, op := range ops {
		if old, ok := j.ops[op.OpID]; ok && old.Status.Terminal() {
			continue
		}
		j.ops[op.OpID] = op
	}
	return nil
}

func (j *memJournal) Lookup(id string) (devices.Op, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	op, ok := j.ops[id]
	return op, ok, nil
}

func (j *memJournal) Pending() ([]devices.Op, error) { return nil, nil }

func (j *memJournal) SaveState(string, map[string]any, time.Time) error { return nil }

// memDeadLetters is an in-memory dead-letter store.
type memDeadLetters struct {
	mu  sync.Mutex
	ops []devices.Op
}

func (d *memDeadLetters) AddDeadLetters(ops ...devices.Op) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ops = append(d.ops, ops...)
	return nil
}

func (d *memDeadLetters) list() []devices.Op {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]devices.Op(nil), d.ops...)
}

// sleepyRig is a running dispatcher with the rig's bridge, journal,
// dead-letter store and fake clock, and the results it published.
type sleepyRig struct {
	t       *testing.T
	d       *Dispatcher
	clock   *clockwork.FakeClock
	bridge  *scriptedBridge
	journal *memJournal
	dead    *memDeadLetters
	results chan devices.Result
}

// sleepyOptions tunes the rig; zero fields keep the defaults.
type sleepyOptions struct {
	breaker *breaker.Options
	// bridge and journal, if set, wrap the rig's own.
	bridge  func(*scriptedBridge) Bridge
	journal func(*memJournal) Journal
	// awake makes the radiator always listening instead of sleepy.
	awake bool
	// lostDedup is Options.LostDedup.
	lostDedup LostDedup
	// offline is the radiator's offline setting.
	offline devices.Offline
	// class is the radiator's class; "" means climate.
	class devices.Class
	// deadline is the retry policy's deadline; 0 means none.
	deadline time.Duration
	// attemptTimeout and readBack are the radiator's Device fields.
	attemptTimeout time.Duration
	readBack       bool
	// onEnd and onAttempt are Options.OnEnd and OnAttempt.
	onEnd     func(End)
	onAttempt func(Attempt)
	// authz is Options.Authorizer.
	authz Authorizer
}

// startSleepy starts a dispatcher with one service "zw" (2 attempts, 5 s
// attempt timeout) and one sleepy climate device "radiator" (wake interval
// 1 h, awake window 10 s, TTL 1 h), the bridge online.
func startSleepy(t *testing.T, o sleepyOptions) *sleepyRig {
	t.Helper()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC))
	r := &sleepyRig{
		t: t, clock: clock,
		bridge:  &scriptedBridge{clock: clock, msgs: make(chan bridgeMsg, 64)},
		journal: &memJournal{ops: map[string]devices.Op{}},
		dead:    &memDeadLetters{},
		results: make(chan devices.Result, 256),
	}
	var b Bridge = r.bridge
	if o.bridge != nil {
		b = o.bridge(r.bridge)
	}
	var j Journal = r.journal
	if o.journal != nil {
		j = o.journal(r.journal)
	}
	sleep := devices.Sleep{Sleepy: true, WakeInterval: time.Hour, AwakeWindow: 10 * time.Second}
	if o.awake {
		sleep = devices.Sleep{}
	}
	class := o.class
	if class == "" {
		class = devices.Climate
	}
	d, err := New(Options{
		Services: []Service{{
			Name: "zw", Bridge: b,
			Policy:  retry.Policy{MaxAttempts: 2, AttemptTimeout: 5 * time.Second, Deadline: o.deadline, Backoff: retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 10 * time.Second}},
			Breaker: o.breaker,
		}},
		Devices: []Device{{Device: devices.Device{ID: "radiator", Service: "zw", Class: class, Sleep: sleep, Offline: o.offline}, TTL: time.Hour,
			AttemptTimeout: o.attemptTimeout, ReadBack: o.readBack}},
		Journal:     j,
		Publisher:   nopPublisher{},
		DeadLetters: r.dead,
		Clock:       clock,
		OnResult:    func(res devices.Result) { r.results <- res },
		LostDedup:   o.lostDedup,
		OnEnd:       o.onEnd,
		OnAttempt:   o.onAttempt,
		Authorizer:  o.authz,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.d = d
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	d.BridgeState("zw", true, false)
	return r
}

// submit hands a command to the intake and waits for its accepted result.
func (r *sleepyRig) submit(payload string) {
	r.t.Helper()
	if err := r.d.Submit(context.Background(), Request{Device: "radiator", Payload: []byte(payload)}); err != nil {
		r.t.Fatal(err)
	}
}

// await waits for a result matching match; others are dropped.
func (r *sleepyRig) await(what string, match func(devices.Result) bool) devices.Result {
	r.t.Helper()
	deadline := time.After(rigWait)
	for {
		select {
		case res := <-r.results:
			if match(res) {
				return res
			}
		case <-deadline:
			r.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (r *sleepyRig) status(opID string, s devices.Status) devices.Result {
	r.t.Helper()
	return r.await(opID+" "+string(s), func(res devices.Result) bool { return res.OpID == opID && res.Status == s })
}

// next waits for the next send or read to reach the bridge.
func (r *sleepyRig) next() bridgeMsg {
	r.t.Helper()
	select {
	case m := <-r.bridge.msgs:
		return m
	case <-time.After(rigWait):
		r.t.Fatal("timed out waiting for a send or read")
		panic("unreachable")
	}
}

// none fails if a send or read reached the bridge.
func (r *sleepyRig) none(when string) {
	r.t.Helper()
	select {
	case m := <-r.bridge.msgs:
		r.t.Fatalf("%s: a %s %v reached the bridge at %s", when, m.verb, m.target, m.at.Format("15:04:05.000"))
	default:
	}
}

// advance waits until n goroutines of the dispatcher wait on the clock,
// then moves it by d.
func (r *sleepyRig) advance(n int, d time.Duration) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rigWait)
	defer cancel()
	if err := r.clock.BlockUntilContext(ctx, n); err != nil {
		r.t.Fatalf("the dispatcher never had %d waiters on the clock", n)
	}
	r.clock.Advance(d)
}

// report is a live report of the radiator.
func (r *sleepyRig) report(state map[string]any) { r.d.Report("radiator", state, false) }

// eventually polls cond every millisecond until it holds, failing after
// rigWait.
func (r *sleepyRig) eventually(what string, cond func() bool) {
	r.t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(rigWait)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			r.t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// verifyDone reports whether the radiator's running command has no
// verifying read waiting for an answer.
func (r *sleepyRig) verifyDone() bool {
	q := r.d.devices["radiator"]
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.cur == nil || q.cur.check == nil
}

// settled waits until the dispatcher has nothing left to do but wait on
// the clock: a verifying read's answer was taken, and a goroutine waits.
func (r *sleepyRig) settled() {
	r.t.Helper()
	r.eventually("the verifying read's answer to be taken", r.verifyDone)
	ctx, cancel := context.WithTimeout(context.Background(), rigWait)
	defer cancel()
	if err := r.clock.BlockUntilContext(ctx, 1); err != nil {
		r.t.Fatal("the dispatcher never waited on the clock")
	}
}

// holdFirstAttempt makes the store of opID's first attempt (recorded
// before its send, still accepted) wait: entered is closed when it
// begins, and it goes on once the test closes release.
func (r *sleepyRig) holdFirstAttempt(opID string) (entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	r.journal.mu.Lock()
	r.journal.hold = func(op devices.Op) {
		if op.OpID == opID && op.Attempts == 1 && op.Status == devices.Accepted {
			close(entered)
			<-release
		}
	}
	r.journal.mu.Unlock()
	return entered, release
}

// timeAfter is the rig's failure deadline: rigWait from now.
func timeAfter() <-chan time.Time { return time.After(rigWait) }

// waitClosed waits for ch to be closed, failing after rigWait.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-timeAfter():
		t.Fatalf("timed out waiting for %s", what)
	}
}

// waiting waits until a goroutine of the dispatcher waits on the clock.
func (r *sleepyRig) waiting() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), rigWait)
	defer cancel()
	if err := r.clock.BlockUntilContext(ctx, 1); err != nil {
		r.t.Fatal("the dispatcher never waited on the clock")
	}
}
