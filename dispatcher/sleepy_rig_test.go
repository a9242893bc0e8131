package dispatcher

// Review of issue 4 (sleepy devices): a rig that plays one sleepy
// thermostat behind a scripted bridge, on a fake clock, so that the test
// decides exactly when the device wakes, what it reports and when time
// moves. Each review4_*_test.go pins one guarantee of docs/SLEEPY.md or
// docs/DEADLETTERS.md.

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

const r4Wait = 5 * time.Second // failure deadline of every wait (real time)

// r4Msg is a send or a read that reached the bridge.
type r4Msg struct {
	verb   string // "set" or "get"
	target devices.Target
	at     time.Time
}

type r4Bridge struct {
	clock *clockwork.FakeClock
	msgs  chan r4Msg
}

func (b *r4Bridge) Send(_ context.Context, _ devices.Device, target devices.Target) error {
	b.msgs <- r4Msg{"set", maps.Clone(target), b.clock.Now()}
	return nil
}

func (b *r4Bridge) Read(_ context.Context, _ devices.Device, target devices.Target) error {
	b.msgs <- r4Msg{"get", maps.Clone(target), b.clock.Now()}
	return nil
}

// r4Journal is an in-memory journal; hold, if set, is called (outside the
// lock) before each save and may block it.
type r4Journal struct {
	mu   sync.Mutex
	ops  map[string]devices.Op
	hold func(devices.Op)
}

func (j *r4Journal) Save(ops ...devices.Op) error {
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

func (j *r4Journal) Lookup(id string) (devices.Op, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	op, ok := j.ops[id]
	return op, ok, nil
}

func (j *r4Journal) Pending() ([]devices.Op, error) { return nil, nil }

func (j *r4Journal) SaveState(string, map[string]any, time.Time) error { return nil }

type r4Dead struct {
	mu  sync.Mutex
	ops []devices.Op
}

func (d *r4Dead) AddDeadLetters(ops ...devices.Op) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.ops = append(d.ops, ops...)
	return nil
}

func (d *r4Dead) list() []devices.Op {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]devices.Op(nil), d.ops...)
}

type r4Rig struct {
	t       *testing.T
	d       *Dispatcher
	clock   *clockwork.FakeClock
	bridge  *r4Bridge
	journal *r4Journal
	dead    *r4Dead
	results chan devices.Result
}

// r4Options tunes the rig; zero fields keep the defaults.
type r4Options struct {
	breaker *breaker.Options
	// bridge and journal, if set, wrap the rig's own.
	bridge  func(*r4Bridge) Bridge
	journal func(*r4Journal) Journal
	// awake makes the radiator always listening instead of sleepy.
	awake bool
	// lostDedup is Options.LostDedup.
	lostDedup LostDedup
	// offline is the radiator's offline setting.
	offline devices.Offline
}

// startR4 starts a dispatcher with one service "zw" (2 attempts, 5 s
// attempt timeout) and one sleepy climate device "radiator" (wake interval
// 1 h, awake window 10 s, TTL 1 h), the bridge online.
func startR4(t *testing.T, o r4Options) *r4Rig {
	t.Helper()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC))
	r := &r4Rig{
		t: t, clock: clock,
		bridge:  &r4Bridge{clock: clock, msgs: make(chan r4Msg, 64)},
		journal: &r4Journal{ops: map[string]devices.Op{}},
		dead:    &r4Dead{},
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
	d, err := New(Options{
		Services: []Service{{
			Name: "zw", Bridge: b,
			Policy:  retry.Policy{MaxAttempts: 2, AttemptTimeout: 5 * time.Second, Backoff: retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 10 * time.Second}},
			Breaker: o.breaker,
		}},
		Devices:     []Device{{Device: devices.Device{ID: "radiator", Service: "zw", Class: devices.Climate, Sleep: sleep, Offline: o.offline}, TTL: time.Hour}},
		Journal:     j,
		Publisher:   nopPublisher{},
		DeadLetters: r.dead,
		Clock:       clock,
		OnResult:    func(res devices.Result) { r.results <- res },
		LostDedup:   o.lostDedup,
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
func (r *r4Rig) submit(payload string) {
	r.t.Helper()
	if err := r.d.Submit(context.Background(), Request{Device: "radiator", Payload: []byte(payload)}); err != nil {
		r.t.Fatal(err)
	}
}

// await waits for a result matching match; others are dropped.
func (r *r4Rig) await(what string, match func(devices.Result) bool) devices.Result {
	r.t.Helper()
	deadline := time.After(r4Wait)
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

func (r *r4Rig) status(opID string, s devices.Status) devices.Result {
	r.t.Helper()
	return r.await(opID+" "+string(s), func(res devices.Result) bool { return res.OpID == opID && res.Status == s })
}

// next waits for the next send or read to reach the bridge.
func (r *r4Rig) next() r4Msg {
	r.t.Helper()
	select {
	case m := <-r.bridge.msgs:
		return m
	case <-time.After(r4Wait):
		r.t.Fatal("timed out waiting for a send or read")
		panic("unreachable")
	}
}

// none fails if a send or read reached the bridge.
func (r *r4Rig) none(when string) {
	r.t.Helper()
	select {
	case m := <-r.bridge.msgs:
		r.t.Fatalf("%s: a %s %v reached the bridge at %s", when, m.verb, m.target, m.at.Format("15:04:05.000"))
	default:
	}
}

// advance waits until n goroutines of the dispatcher wait on the clock,
// then moves it by d.
func (r *r4Rig) advance(n int, d time.Duration) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), r4Wait)
	defer cancel()
	if err := r.clock.BlockUntilContext(ctx, n); err != nil {
		r.t.Fatalf("the dispatcher never had %d waiters on the clock", n)
	}
	r.clock.Advance(d)
}

// report is a live report of the radiator.
func (r *r4Rig) report(state map[string]any) { r.d.Report("radiator", state, false) }

// eventually polls cond every millisecond until it holds, failing after
// r4Wait.
func (r *r4Rig) eventually(what string, cond func() bool) {
	r.t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(r4Wait)
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
func (r *r4Rig) verifyDone() bool {
	q := r.d.devices["radiator"]
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.current == nil || q.current.check == nil
}

// settled waits until the dispatcher has nothing left to do but wait on
// the clock: a verifying read's answer was taken, and a goroutine waits.
func (r *r4Rig) settled() {
	r.t.Helper()
	r.eventually("the verifying read's answer to be taken", r.verifyDone)
	ctx, cancel := context.WithTimeout(context.Background(), r4Wait)
	defer cancel()
	if err := r.clock.BlockUntilContext(ctx, 1); err != nil {
		r.t.Fatal("the dispatcher never waited on the clock")
	}
}

func timeAfter() <-chan time.Time { return time.After(r4Wait) }

// waiting waits until a goroutine of the dispatcher waits on the clock.
func (r *r4Rig) waiting() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), r4Wait)
	defer cancel()
	if err := r.clock.BlockUntilContext(ctx, 1); err != nil {
		r.t.Fatal("the dispatcher never waited on the clock")
	}
}
