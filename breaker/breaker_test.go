package breaker

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	s  = time.Second
	ms = time.Millisecond
)

// epoch is the fake clock's start, on a whole multiple of every window
// below (Unix time 1767225600 s), so that the windows' tenths begin on
// whole tenths after it.
var epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return epoch.Add(d) }

// tenSecondsPerTrip opens for 10 s per trip since the last close: 10 s,
// 20 s, 30 s…
func tenSecondsPerTrip(trips int) time.Duration { return time.Duration(trips) * 10 * s }

// transition is one OnStateChange call.
type transition struct {
	from, to State
	at       time.Time
}

// recorder collects OnStateChange calls.
type recorder struct {
	mu  sync.Mutex
	got []transition
}

func (r *recorder) on(from, to State, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, transition{from, to, at})
}

func (r *recorder) list() []transition {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

func (t transition) String() string {
	return fmt.Sprintf("%v→%v at +%v", t.from, t.to, t.at.Sub(epoch))
}

func sameTransitions(a, b []transition) bool {
	return slices.EqualFunc(a, b, func(x, y transition) bool {
		return x.from == y.from && x.to == y.to && x.at.Equal(y.at)
	})
}

// call makes one call at now that ends at once with o, failing the test
// if the breaker refuses it.
func call(t *testing.T, b *Breaker, now time.Time, o Outcome) {
	t.Helper()
	p, err := b.Allow(now)
	if err != nil {
		t.Fatalf("Allow(+%v) = %v, want a permit", now.Sub(epoch), err)
	}
	p.Done(o, now)
}

func allow(t *testing.T, b *Breaker, now time.Time) *Permit {
	t.Helper()
	p, err := b.Allow(now)
	if err != nil {
		t.Fatalf("Allow(+%v) = %v, want a permit", now.Sub(epoch), err)
	}
	return p
}

// refused asserts that Allow at now fails fast with an *OpenError of
// state and until.
func refused(t *testing.T, b *Breaker, now time.Time, state State, until time.Time) {
	t.Helper()
	p, err := b.Allow(now)
	var oe *OpenError
	if !errors.As(err, &oe) || p != nil {
		t.Fatalf("Allow(+%v) = %v, %v; want an *OpenError", now.Sub(epoch), p, err)
	}
	if oe.State != state || !oe.Until.Equal(until) {
		t.Fatalf("Allow(+%v) refused with state %v until %v, want %v until %v", now.Sub(epoch), oe.State, oe.Until, state, until)
	}
}

func TestNames(t *testing.T) {
	states := map[State]string{Closed: "closed", Open: "open", HalfOpen: "half_open", State(7): "State(7)"}
	for st, want := range states {
		if got := st.String(); got != want {
			t.Errorf("State(%d).String() = %q, want %q", uint8(st), got, want)
		}
	}
	outcomes := map[Outcome]string{Success: "success", Failure: "failure", Ignored: "ignored", Canceled: "canceled", 0: "Outcome(0)", 9: "Outcome(9)"}
	for o, want := range outcomes {
		if got := o.String(); got != want {
			t.Errorf("Outcome(%d).String() = %q, want %q", uint8(o), got, want)
		}
	}
	var zero State
	if zero != Closed {
		t.Errorf("the zero State is %v, want closed", zero)
	}
}

// Every edge of the state machine, with what causes it. The options,
// unless a row says otherwise: trip on 3 consecutive failures (no ratio),
// open 10 s per trip, one probe with a 5 s deadline, one success closes.
func TestTransitions(t *testing.T) {
	base := Options{FailureThreshold: 3, FailureRatio: -1, OpenFor: tenSecondsPerTrip, ProbeTimeout: 5 * s}
	// tripAt0 trips the breaker at +0: open until +10s.
	tripAt0 := func(t *testing.T, b *Breaker) {
		for range 3 {
			call(t, b, at(0), Failure)
		}
	}
	tests := []struct {
		name      string
		opts      func(*Options)
		run       func(t *testing.T, b *Breaker)
		wantState State // at +1h, after run
		want      []transition
	}{
		{"closed stays closed below the threshold", nil, func(t *testing.T, b *Breaker) {
			call(t, b, at(0), Failure)
			call(t, b, at(s), Failure)
		}, Closed, nil},
		{"closed → open on the threshold's consecutive failures", nil, func(t *testing.T, b *Breaker) {
			call(t, b, at(0), Failure)
			call(t, b, at(s), Failure)
			call(t, b, at(2*s), Failure)
			refused(t, b, at(2*s), Open, at(12*s))
		}, HalfOpen, []transition{{Closed, Open, at(2 * s)}, {Open, HalfOpen, at(12 * s)}}},
		{"a success ends the run", nil, func(t *testing.T, b *Breaker) {
			for _, o := range []Outcome{Failure, Failure, Success, Failure, Failure} {
				call(t, b, at(0), o)
			}
			if st := b.State(at(0)); st != Closed {
				t.Fatalf("after F F S F F: %v, want closed", st)
			}
			call(t, b, at(s), Failure)
		}, HalfOpen, []transition{{Closed, Open, at(s)}, {Open, HalfOpen, at(11 * s)}}},
		{"ignored and canceled outcomes neither end nor extend a run", nil, func(t *testing.T, b *Breaker) {
			for _, o := range []Outcome{Failure, Ignored, Canceled, Failure, Ignored, Ignored, Canceled, 0} {
				call(t, b, at(0), o)
			}
			if st := b.State(at(0)); st != Closed {
				t.Fatalf("after two failures among neutral outcomes: %v, want closed", st)
			}
			call(t, b, at(s), Failure)
		}, HalfOpen, []transition{{Closed, Open, at(s)}, {Open, HalfOpen, at(11 * s)}}},
		{"closed → open on the failure ratio", func(o *Options) {
			o.FailureThreshold, o.FailureRatio, o.MinCalls, o.Window = -1, 0.5, 4, 10*s
		}, func(t *testing.T, b *Breaker) {
			for i, o := range []Outcome{Success, Failure, Success, Failure} {
				call(t, b, at(time.Duration(i)*s), o)
			}
		}, HalfOpen, []transition{{Closed, Open, at(3 * s)}, {Open, HalfOpen, at(13 * s)}}},
		{"open → half-open exactly when the open period ends", nil, func(t *testing.T, b *Breaker) {
			tripAt0(t, b)
			refused(t, b, at(10*s-1), Open, at(10*s))
			if st := b.State(at(10*s - 1)); st != Open {
				t.Fatalf("1ns before the end of the open period: %v, want open", st)
			}
			if st := b.State(at(10 * s)); st != HalfOpen {
				t.Fatalf("at the end of the open period: %v, want half_open", st)
			}
		}, HalfOpen, []transition{{Closed, Open, at(0)}, {Open, HalfOpen, at(10 * s)}}},
		{"half-open → closed on a probe's success", nil, func(t *testing.T, b *Breaker) {
			tripAt0(t, b)
			p := allow(t, b, at(12*s))
			if !p.Probe() || !p.Deadline().Equal(at(17*s)) {
				t.Fatalf("half-open permit: probe %v, deadline %v; want a probe with deadline +17s", p.Probe(), p.Deadline())
			}
			p.Done(Success, at(13*s))
			if p := allow(t, b, at(13*s)); p.Probe() || !p.Deadline().IsZero() {
				t.Fatalf("closed permit: probe %v, deadline %v; want no probe, no deadline", p.Probe(), p.Deadline())
			}
		}, Closed, []transition{{Closed, Open, at(0)}, {Open, HalfOpen, at(10 * s)}, {HalfOpen, Closed, at(13 * s)}}},
		{"half-open → open on a probe's failure, for the second trip's period", nil, func(t *testing.T, b *Breaker) {
			tripAt0(t, b)
			allow(t, b, at(12*s)).Done(Failure, at(13*s))
			refused(t, b, at(13*s), Open, at(33*s))
		}, HalfOpen, []transition{{Closed, Open, at(0)}, {Open, HalfOpen, at(10 * s)}, {HalfOpen, Open, at(13 * s)}, {Open, HalfOpen, at(33 * s)}}},
		{"half-open → open when a probe misses its deadline", nil, func(t *testing.T, b *Breaker) {
			tripAt0(t, b)
			allow(t, b, at(12*s))
			refused(t, b, at(17*s-1), HalfOpen, at(17*s))
			refused(t, b, at(17*s), Open, at(37*s))
		}, HalfOpen, []transition{{Closed, Open, at(0)}, {Open, HalfOpen, at(10 * s)}, {HalfOpen, Open, at(17 * s)}, {Open, HalfOpen, at(37 * s)}}},
		{"half-open needs SuccessesToClose successes", func(o *Options) { o.SuccessesToClose = 3 }, func(t *testing.T, b *Breaker) {
			tripAt0(t, b)
			for i := range 2 {
				allow(t, b, at(10*s)).Done(Success, at(10*s+time.Duration(i)))
				if st := b.State(at(11 * s)); st != HalfOpen {
					t.Fatalf("after %d probe successes of 3: %v, want half_open", i+1, st)
				}
			}
			allow(t, b, at(12*s)).Done(Success, at(12*s))
		}, Closed, []transition{{Closed, Open, at(0)}, {Open, HalfOpen, at(10 * s)}, {HalfOpen, Closed, at(12 * s)}}},
		{"a failure after some probe successes reopens", func(o *Options) { o.SuccessesToClose = 2 }, func(t *testing.T, b *Breaker) {
			tripAt0(t, b)
			allow(t, b, at(10*s)).Done(Success, at(10*s))
			allow(t, b, at(11*s)).Done(Failure, at(11*s))
			refused(t, b, at(11*s), Open, at(31*s))
		}, HalfOpen, []transition{{Closed, Open, at(0)}, {Open, HalfOpen, at(10 * s)}, {HalfOpen, Open, at(11 * s)}, {Open, HalfOpen, at(31 * s)}}},
		{"closed → open when the service goes offline", nil, func(t *testing.T, b *Breaker) {
			b.ReportHealth(false, at(5*s))
			refused(t, b, at(time.Hour), Open, time.Time{})
		}, Open, []transition{{Closed, Open, at(5 * s)}}},
		{"half-open → open when the service goes offline", nil, func(t *testing.T, b *Breaker) {
			tripAt0(t, b)
			allow(t, b, at(10*s))
			b.ReportHealth(false, at(11*s))
		}, Open, []transition{{Closed, Open, at(0)}, {Open, HalfOpen, at(10 * s)}, {HalfOpen, Open, at(11 * s)}}},
		{"open → half-open when the service is back online", nil, func(t *testing.T, b *Breaker) {
			b.ReportHealth(false, at(s))
			b.ReportHealth(true, at(2*s))
			allow(t, b, at(2*s)).Done(Success, at(3*s))
		}, Closed, []transition{{Closed, Open, at(s)}, {Open, HalfOpen, at(2 * s)}, {HalfOpen, Closed, at(3 * s)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r recorder
			opts := base
			if tc.opts != nil {
				tc.opts(&opts)
			}
			opts.OnStateChange = r.on
			b := New(opts)
			tc.run(t, b)
			if st := b.State(at(time.Hour)); st != tc.wantState {
				t.Errorf("state at +1h: %v, want %v", st, tc.wantState)
			}
			if got := r.list(); !sameTransitions(got, tc.want) {
				t.Errorf("transitions:\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

// The zero Options take the documented defaults: 5 consecutive failures,
// ratio 0.5 over 30 s once 10 calls, 30 s open doubling to 5 min, one
// probe with a 10 s deadline, one success closes.
func TestDefaults(t *testing.T) {
	b := New(Options{})
	for i := range DefaultFailureThreshold - 1 {
		call(t, b, at(time.Duration(i)*s), Failure)
	}
	if st := b.State(at(4 * s)); st != Closed {
		t.Fatalf("after 4 failures: %v, want closed", st)
	}
	call(t, b, at(4*s), Failure)
	refused(t, b, at(4*s), Open, at(34*s))

	// Each probe fails: the open periods are 30 s·2^(trips-1) up to 5 min.
	wantOpen := []time.Duration{30 * s, time.Minute, 2 * time.Minute, 4 * time.Minute, 5 * time.Minute, 5 * time.Minute, 5 * time.Minute}
	until := at(34 * s)
	for trip := 2; trip <= len(wantOpen); trip++ {
		p := allow(t, b, until)
		if !p.Deadline().Equal(until.Add(10 * s)) {
			t.Fatalf("probe at %v has deadline %v, want 10 s later", until, p.Deadline())
		}
		refused(t, b, until, HalfOpen, until.Add(10*s)) // one probe at a time
		p.Done(Failure, until.Add(s))
		next := until.Add(s).Add(wantOpen[trip-1])
		refused(t, b, until.Add(s), Open, next)
		until = next
	}
	allow(t, b, until).Done(Success, until)
	if snap := b.Snapshot(until); snap.State != Closed || snap.Trips != 0 {
		t.Fatalf("after a probe success: %v with %d trips, want closed with 0", snap.State, snap.Trips)
	}

	// The ratio: S F S F … F is 5 failures in 10 calls, never 5 in a row.
	b = New(Options{})
	for i := range 10 {
		o := Success
		if i%2 == 1 {
			o = Failure
		}
		if st := b.State(at(time.Duration(i) * s)); st != Closed {
			t.Fatalf("before call %d of S F S F…: %v, want closed", i+1, st)
		}
		call(t, b, at(time.Duration(i)*s), o)
	}
	refused(t, b, at(9*s), Open, at(39*s))

	// The same calls 4 s apart span 36 s: the window of 30 s holds 7 of
	// them at the last (those at +12 s and later), fewer than 10.
	b = New(Options{})
	for i := range 10 {
		o := Success
		if i%2 == 1 {
			o = Failure
		}
		call(t, b, at(time.Duration(i)*4*s), o)
	}
	if snap := b.Snapshot(at(36 * s)); snap.State != Closed || snap.WindowCalls != 7 || snap.WindowFailures != 4 {
		t.Fatalf("S F S F… 4 s apart: %v with %d calls, %d failures in the window; want closed with 7, 4", snap.State, snap.WindowCalls, snap.WindowFailures)
	}
}

// The scenario: a half-open breaker meets 50 commands within a
// second. Exactly one goes out as the probe; the other 49 fail fast, each
// told when the probe's deadline falls.
func TestHalfOpenAdmitsOneProbeOfFiftyCommands(t *testing.T) {
	b := New(Options{FailureThreshold: 1, OpenFor: tenSecondsPerTrip})
	call(t, b, at(0), Failure)
	start := at(10 * s)
	if st := b.State(start); st != HalfOpen {
		t.Fatalf("state at +10s: %v, want half_open", st)
	}
	var probes []*Permit
	failedFast := 0
	for i := range 50 {
		now := start.Add(time.Duration(i) * 20 * ms) // 50 in 980 ms
		p, err := b.Allow(now)
		switch {
		case err == nil:
			probes = append(probes, p)
		case errors.Is(err, ErrOpen):
			failedFast++
			var oe *OpenError
			if !errors.As(err, &oe) || oe.State != HalfOpen || !oe.Until.Equal(start.Add(DefaultProbeTimeout)) {
				t.Fatalf("command %d refused with %v, want half-open until the probe's deadline", i+1, err)
			}
		default:
			t.Fatalf("command %d: unexpected error %v", i+1, err)
		}
	}
	if len(probes) != 1 || failedFast != 49 {
		t.Fatalf("%d probes admitted, %d failed fast; want 1 and 49", len(probes), failedFast)
	}
	if !probes[0].Probe() {
		t.Fatal("the admitted permit is not a probe")
	}
	snap := b.Snapshot(start.Add(s))
	if snap.Probes != 1 || snap.Counts.Allowed != 2 || snap.Counts.Rejected != 49 {
		t.Errorf("snapshot: %d probes out, %d allowed, %d rejected; want 1, 2 (the tripping call and the probe), 49", snap.Probes, snap.Counts.Allowed, snap.Counts.Rejected)
	}
}

// A service that fails until it recovers, with commands arriving every
// second and each call taking 2 s: once it has recovered, the breaker
// closes with one cooldown and one probe — no further trip, except for a
// probe that was already out when the service recovered.
//
// Hand-computed trace with the defaults (threshold 5, 30 s doubling): the
// calls of +0…+4 s fail at +2…+6 s, tripping at +6 s (open until +36 s);
// the call of +5 s ends after the trip and is discarded; probes at +36 s
// (fails at +38 s, open 60 s until +98 s) and at +98 s (fails at +100 s,
// open 120 s until +220 s); then a probe at +220 s.
func TestClosesWithinOneCooldownPlusOneProbe(t *testing.T) {
	const (
		interval = time.Second
		latency  = 2 * time.Second
	)
	tests := []struct {
		recoverAt time.Duration
		wantClose time.Duration // 0: never opened
		wantTrips uint64
	}{
		{0, 0, 0},
		{10 * s, 38 * s, 1},   // during the first open period: the probe at +36 s succeeds
		{36 * s, 38 * s, 1},   // as the first probe starts
		{37 * s, 100 * s, 2},  // the probe of +36 s started before: it fails, one more cooldown
		{98 * s, 100 * s, 2},  // as the second probe starts
		{150 * s, 222 * s, 3}, // during the third open period
		{219 * s, 222 * s, 3}, // just before it ends
		{221 * s, 464 * s, 4}, // the probe of +220 s started before: it fails at +222 s, open 240 s
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("recovers at +%v", tc.recoverAt), func(t *testing.T) {
			var r recorder
			b := New(Options{OnStateChange: r.on})
			type inflight struct {
				p   *Permit
				end time.Time
				ok  bool // started after the recovery
			}
			var out []inflight
			var closedAt time.Time
			for now := at(0); now.Before(at(10 * time.Minute)); now = now.Add(interval) {
				// Calls that end now report first, then a new command.
				out = slices.DeleteFunc(out, func(c inflight) bool {
					if c.end.After(now) {
						return false
					}
					o := Failure
					if c.ok {
						o = Success
					}
					c.p.Done(o, c.end)
					return true
				})
				if p, err := b.Allow(now); err == nil {
					out = append(out, inflight{p, now.Add(latency), !now.Before(at(tc.recoverAt))})
				}
			}
			for _, tr := range r.list() {
				if tr.to == Closed {
					closedAt = tr.at
				}
			}
			snap := b.Snapshot(at(10 * time.Minute))
			if snap.State != Closed || snap.Counts.Trips != tc.wantTrips {
				t.Fatalf("after 10 min: %v after %d trips, want closed after %d", snap.State, snap.Counts.Trips, tc.wantTrips)
			}
			if tc.wantTrips == 0 {
				if len(r.list()) != 0 {
					t.Fatalf("a healthy service changed the breaker: %v", r.list())
				}
				return
			}
			if !closedAt.Equal(at(tc.wantClose)) {
				t.Fatalf("closed at +%v, want +%v", closedAt.Sub(epoch), tc.wantClose)
			}
			// The bound: at most a probe already out (ProbeTimeout), one
			// cooldown (the last open period), a command's arrival and
			// one probe's call.
			last := defaultOpenFor(int(tc.wantTrips))
			if bound := at(tc.recoverAt).Add(DefaultProbeTimeout + last + interval + latency); closedAt.After(bound) {
				t.Errorf("closed at +%v, after the bound +%v", closedAt.Sub(epoch), bound.Sub(epoch))
			}
		})
	}
}

// A probe that misses its deadline counts as a failure: the breaker
// reopens at the deadline — even when no call notices until later — for
// the next, longer, open period, and the probe's late success is
// discarded.
func TestProbeMissingItsDeadlineReopensForLonger(t *testing.T) {
	var r recorder
	b := New(Options{FailureThreshold: 1, OpenFor: tenSecondsPerTrip, ProbeTimeout: 5 * s, OnStateChange: r.on})
	call(t, b, at(0), Failure)
	p := allow(t, b, at(10*s))
	if !p.Deadline().Equal(at(15 * s)) {
		t.Fatalf("probe deadline %v, want +15s", p.Deadline())
	}
	if st := b.State(at(15*s - 1)); st != HalfOpen {
		t.Fatalf("1ns before the deadline: %v, want half_open", st)
	}
	// Nothing calls until +20 s; the probe then reports a success.
	p.Done(Success, at(20*s))
	snap := b.Snapshot(at(20 * s))
	if snap.State != Open || !snap.Until.Equal(at(35*s)) || snap.Trips != 2 || snap.Counts.Expired != 1 {
		t.Fatalf("after the missed deadline: %v until +%v, %d trips, %d expired; want open until +35s (+15s and 2·10s), 2 trips, 1 expired",
			snap.State, snap.Until.Sub(epoch), snap.Trips, snap.Counts.Expired)
	}
	want := []transition{{Closed, Open, at(0)}, {Open, HalfOpen, at(10 * s)}, {HalfOpen, Open, at(15 * s)}}
	if got := r.list(); !sameTransitions(got, want) {
		t.Errorf("transitions:\n got %v\nwant %v", got, want)
	}
	// A probe reporting exactly at its deadline is too late as well.
	p = allow(t, b, at(35*s))
	p.Done(Success, p.Deadline())
	if snap := b.Snapshot(p.Deadline()); snap.State != Open || !snap.Until.Equal(at(70*s)) {
		t.Fatalf("probe reporting at its deadline: %v until +%v, want open until +70s (+40s and 3·10s)", snap.State, snap.Until.Sub(epoch))
	}
}

// Ignored and Canceled outcomes (and one of no known kind) count neither
// way: in a closed breaker they add nothing to the window or the run of
// failures; a probe ending so frees its place for the next probe, and the
// breaker stays half-open.
func TestNeutralOutcomes(t *testing.T) {
	for _, o := range []Outcome{Ignored, Canceled, 0, Outcome(42)} {
		t.Run(o.String(), func(t *testing.T) {
			var r recorder
			b := New(Options{FailureThreshold: 2, FailureRatio: 0.5, MinCalls: 3, OpenFor: tenSecondsPerTrip, OnStateChange: r.on})
			call(t, b, at(0), Failure)
			for range 100 {
				call(t, b, at(s), o)
			}
			snap := b.Snapshot(at(s))
			if snap.State != Closed || snap.ConsecutiveFailures != 1 || snap.WindowCalls != 1 || snap.WindowFailures != 1 {
				t.Fatalf("after 1 failure and 100 %v: %+v; want closed, 1 consecutive failure, 1 call, 1 failure", o, snap)
			}
			call(t, b, at(2*s), Failure) // the second in a row
			for i := range 20 {
				now := at(12*s + time.Duration(i)*s)
				p := allow(t, b, now)
				if !p.Probe() {
					t.Fatalf("permit %d in half-open is no probe", i)
				}
				p.Done(o, now)
			}
			if snap := b.Snapshot(at(40 * s)); snap.State != HalfOpen || snap.Probes != 0 || snap.ProbeSuccesses != 0 || snap.Trips != 1 {
				t.Fatalf("after 20 probes ending %v: %+v; want half-open with no probe out, 0 successes, 1 trip", o, snap)
			}
			want := []transition{{Closed, Open, at(2 * s)}, {Open, HalfOpen, at(12 * s)}}
			if got := r.list(); !sameTransitions(got, want) {
				t.Errorf("transitions:\n got %v\nwant %v", got, want)
			}
		})
	}
}

// The ratio rule trips only once the window holds MinCalls outcomes: even
// all failures below it never trip, and the MinCalls-th does.
func TestRatioTripNeedsMinCalls(t *testing.T) {
	tests := []struct {
		name     string
		ratio    float64
		minCalls int
		outcomes string // S and F, one a millisecond
		tripAt   int    // the 1-based outcome that trips; 0: none
	}{
		{"all failures below min calls", 0.5, 10, "FFFFFFFFF", 0},
		{"the tenth failure", 0.5, 10, "FFFFFFFFFF", 10},
		{"min calls 20: 19 failures do not trip", 0.5, 20, "FFFFFFFFFFFFFFFFFFF", 0},
		{"min calls 1: the first failure", 0.5, 1, "F", 1},
		{"min calls reached by successes, ratio below", 0.5, 4, "SSSFF", 0},
		{"ratio reached at exactly half", 0.5, 4, "SSSFFF", 6},
		{"a success never trips", 0.5, 4, "FFFS", 0},
		{"ratio 0.28: 7 of 25 (0.28·25 = 7.000000000000001)", 0.28, 25, strings.Repeat("S", 18) + strings.Repeat("F", 7), 25},
		{"ratio 0.28: 6 of 25", 0.28, 25, strings.Repeat("S", 19) + strings.Repeat("F", 6), 0},
		{"ratio 1: all must fail", 1, 3, "FSFFF", 0},
		{"ratio 1: all failures", 1, 3, "FFF", 3},
		{"ratio above 1 never trips", 1.5, 1, "FFFFFFFFFFFF", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := New(Options{FailureThreshold: -1, FailureRatio: tc.ratio, MinCalls: tc.minCalls, Window: time.Minute})
			tripped := 0
			for i, c := range tc.outcomes {
				o := Success
				if c == 'F' {
					o = Failure
				}
				call(t, b, at(time.Duration(i)*ms), o)
				if tripped == 0 && b.State(at(time.Duration(i)*ms)) == Open {
					tripped = i + 1
				}
			}
			if tripped != tc.tripAt {
				t.Errorf("%s with ratio %v, min calls %d: tripped at outcome %d, want %d", tc.outcomes, tc.ratio, tc.minCalls, tripped, tc.tripAt)
			}
		})
	}
}

// The window slides: an outcome at t counts at now while now's tenth of
// the window is within nine tenths after t's (tenths counted from the
// Unix epoch), so old failures age out after 0.9 to 1 window.
func TestWindowSlides(t *testing.T) {
	const window = 10 * s
	tenth := window / 10
	counted := func(t0, now time.Time) bool { // the documented rule, computed apart
		return now.Sub(epoch)/tenth-t0.Sub(epoch)/tenth < 10
	}
	for _, offset := range []time.Duration{0, 999 * ms, 5*s + 1} {
		t0 := at(offset)
		for _, later := range []time.Duration{5 * s, 9 * s, 9*s + 1, 9*s + 2*ms, 10*s - 1, 10 * s, 11 * s} {
			t.Run(fmt.Sprintf("failures at +%v, one more %v later", offset, later), func(t *testing.T) {
				b := New(Options{FailureThreshold: -1, FailureRatio: 0.5, MinCalls: 10, Window: window})
				for range 9 {
					call(t, b, t0, Failure)
				}
				now := t0.Add(later)
				wantCalls := 1
				if counted(t0, now) {
					wantCalls = 10
				}
				if snap := b.Snapshot(now); snap.WindowCalls != wantCalls-1 {
					t.Fatalf("window at +%v holds %d calls, want %d", now.Sub(epoch), snap.WindowCalls, wantCalls-1)
				}
				call(t, b, now, Failure)
				wantState := Closed
				if wantCalls >= 10 {
					wantState = Open
				}
				if st := b.State(now); st != wantState {
					t.Errorf("after the tenth failure: %v, want %v (%d calls in the window)", st, wantState, wantCalls)
				}
			})
		}
	}
	// The window slides whatever the alignment: never less than 0.9
	// window, never more than 1.
	for _, offset := range []time.Duration{0, 1, 999 * ms, 5*s + 1} {
		t0 := at(offset)
		if !counted(t0, t0.Add(window*9/10-1)) || counted(t0, t0.Add(window)) {
			t.Errorf("offset %v: the rule itself does not keep an outcome 0.9 to 1 window", offset)
		}
	}
}

// Each trip without a successful close opens for OpenFor(trips), trips
// counting from 1; a close resets the count. A failure during the closed
// period after it starts again from OpenFor(1).
func TestOpenDurationGrowsPerTripAndResetsOnClose(t *testing.T) {
	var asked []int
	b := New(Options{FailureThreshold: 1, ProbeTimeout: 5 * s, OpenFor: func(trips int) time.Duration {
		asked = append(asked, trips)
		return tenSecondsPerTrip(trips)
	}})
	call(t, b, at(0), Failure)                    // trip 1: open +0…+10s
	allow(t, b, at(10*s)).Done(Failure, at(11*s)) // trip 2: open +11…+31s
	allow(t, b, at(31*s))                         // misses its deadline at +36s
	refused(t, b, at(36*s), Open, at(66*s))       // trip 3: open +36…+66s
	b.ReportHealth(false, at(40*s))               // no trip
	b.ReportHealth(true, at(50*s))                // half-open at +50s
	allow(t, b, at(50*s)).Done(Failure, at(51*s)) // trip 4: open +51…+91s
	refused(t, b, at(51*s), Open, at(91*s))
	allow(t, b, at(91*s)).Done(Success, at(92*s)) // closed
	call(t, b, at(100*s), Failure)                // trip 1 again
	refused(t, b, at(100*s), Open, at(110*s))
	if want := []int{1, 2, 3, 4, 1}; !slices.Equal(asked, want) {
		t.Errorf("OpenFor asked for trips %v, want %v", asked, want)
	}
	// A negative duration counts as 0: half-open at once.
	b = New(Options{FailureThreshold: 1, OpenFor: func(int) time.Duration { return -time.Hour }})
	call(t, b, at(0), Failure)
	if snap := b.Snapshot(at(0)); snap.State != HalfOpen || !snap.Since.Equal(at(0)) || snap.Counts.Trips != 1 {
		t.Errorf("with a negative open duration: %v since +%v after %d trips, want half_open since +0s after 1", snap.State, snap.Since.Sub(epoch), snap.Counts.Trips)
	}
}

func TestDefaultOpenFor(t *testing.T) {
	want := map[int]time.Duration{
		0: 30 * s, 1: 30 * s, 2: time.Minute, 3: 2 * time.Minute, 4: 4 * time.Minute,
		5: 5 * time.Minute, 6: 5 * time.Minute, 100: 5 * time.Minute, 1 << 40: 5 * time.Minute,
	}
	for trips, d := range want {
		if got := defaultOpenFor(trips); got != d {
			t.Errorf("defaultOpenFor(%d) = %v, want %v", trips, got, d)
		}
	}
}

// OnStateChange sees every transition once, in order, each from the state
// the previous one went to, with the time it took effect; it may call the
// breaker without deadlock.
func TestOnStateChangeOrder(t *testing.T) {
	var b *Breaker
	var got []string
	b = New(Options{FailureThreshold: 1, OpenFor: tenSecondsPerTrip, ProbeTimeout: 5 * s,
		OnStateChange: func(from, to State, when time.Time) {
			// Calling back in: the breaker's lock is not held, and the
			// state already is the new one (or a later one).
			snap := b.Snapshot(when)
			got = append(got, fmt.Sprintf("%v→%v at +%v (now %v)", from, to, when.Sub(epoch), snap.State))
		}})
	call(t, b, at(0), Failure)
	allow(t, b, at(10*s))
	// Nothing calls until +30 s, when the service goes offline: the
	// breaker went half-open at +10 s, the probe missed its deadline at
	// +15 s (open until +35 s), then the offline report opens it.
	b.ReportHealth(false, at(30*s))
	b.ReportHealth(true, at(40*s))
	allow(t, b, at(41*s)).Done(Success, at(42*s))
	want := []string{
		"closed→open at +0s (now open)",
		"open→half_open at +10s (now half_open)",
		"half_open→open at +15s (now open)",
		"open→half_open at +40s (now half_open)",
		"half_open→closed at +42s (now closed)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("OnStateChange calls:\n got %q\nwant %q", got, want)
	}

	// Lazily noticed transitions come before those of the call that
	// noticed them.
	var r recorder
	b = New(Options{FailureThreshold: 1, OpenFor: tenSecondsPerTrip, OnStateChange: r.on})
	call(t, b, at(0), Failure)
	b.ReportHealth(false, at(20*s))
	wantT := []transition{{Closed, Open, at(0)}, {Open, HalfOpen, at(10 * s)}, {HalfOpen, Open, at(20 * s)}}
	if got := r.list(); !sameTransitions(got, wantT) {
		t.Errorf("transitions:\n got %v\nwant %v", got, wantT)
	}
}

// A panicking OnStateChange does not stop later transitions from being
// delivered.
func TestOnStateChangePanicDoesNotWedgeDelivery(t *testing.T) {
	var got []transition
	b := New(Options{FailureThreshold: 1, OpenFor: tenSecondsPerTrip, OnStateChange: func(from, to State, when time.Time) {
		got = append(got, transition{from, to, when})
		if len(got) == 1 {
			panic("hook failed")
		}
	}})
	func() {
		defer func() { _ = recover() }()
		call(t, b, at(0), Failure)
	}()
	b.State(at(10 * s))
	want := []transition{{Closed, Open, at(0)}, {Open, HalfOpen, at(10 * s)}}
	if !sameTransitions(got, want) {
		t.Errorf("transitions:\n got %v\nwant %v", got, want)
	}
}

// ReportHealth: offline opens at once and holds the breaker open past its
// open period; online after offline makes it half-open; online otherwise,
// or offline twice, does nothing.
func TestReportHealth(t *testing.T) {
	var r recorder
	b := New(Options{FailureThreshold: 1, OpenFor: tenSecondsPerTrip, OnStateChange: r.on})
	b.ReportHealth(true, at(0)) // online while closed: nothing
	call(t, b, at(s), Failure)  // open until +11s
	b.ReportHealth(true, at(2*s))
	refused(t, b, at(2*s), Open, at(11*s)) // online does not cut an open period short
	b.ReportHealth(false, at(3*s))
	b.ReportHealth(false, at(4*s))
	refused(t, b, at(time.Hour), Open, time.Time{}) // held open, long past +11s
	snap := b.Snapshot(at(time.Hour))
	if !snap.Offline || !snap.Until.IsZero() || snap.Trips != 1 {
		t.Errorf("while offline: %+v; want offline, no Until, 1 trip", snap)
	}
	if next := b.Expire(at(time.Hour)); !next.IsZero() {
		t.Errorf("Expire while offline = %v, want the zero time", next)
	}
	b.ReportHealth(true, at(time.Hour+s))
	p := allow(t, b, at(time.Hour+s))
	p.Done(Failure, at(time.Hour+2*s))
	refused(t, b, at(time.Hour+2*s), Open, at(time.Hour+22*s)) // the second trip's 20 s
	want := []transition{
		{Closed, Open, at(s)},
		{Open, HalfOpen, at(time.Hour + s)},
		{HalfOpen, Open, at(time.Hour + 2*s)},
	}
	if got := r.list(); !sameTransitions(got, want) {
		t.Errorf("transitions:\n got %v\nwant %v", got, want)
	}
}

func TestOpenError(t *testing.T) {
	tests := []struct {
		err  *OpenError
		want string
	}{
		{&OpenError{State: Open, Until: at(30 * s)}, "circuit breaker open until 2026-01-01T00:00:30Z"},
		{&OpenError{State: Open}, "circuit breaker open: service offline"},
		{&OpenError{State: HalfOpen, Until: at(10*s + 500*ms)}, "circuit breaker half-open: probes in flight until 2026-01-01T00:00:10.5Z"},
	}
	for _, tc := range tests {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
		wrapped := fmt.Errorf("dispatch lamp: %w", tc.err)
		var oe *OpenError
		if !errors.Is(wrapped, ErrOpen) || !errors.As(wrapped, &oe) || oe != tc.err {
			t.Errorf("%v: errors.Is(_, ErrOpen) or errors.As failed through a wrap", tc.err)
		}
	}
	if errors.Is(errors.New("circuit breaker open"), ErrOpen) {
		t.Error("an unrelated error with the same text is ErrOpen")
	}
}

// Expire applies due transitions and says when the next falls due.
func TestExpire(t *testing.T) {
	var r recorder
	b := New(Options{FailureThreshold: 1, OpenFor: tenSecondsPerTrip, ProbeTimeout: 5 * s, MaxProbes: 2, OnStateChange: r.on})
	if next := b.Expire(at(0)); !next.IsZero() {
		t.Errorf("closed: Expire = %v, want the zero time", next)
	}
	call(t, b, at(0), Failure)
	steps := []struct {
		now  time.Time
		do   func()
		want time.Time
	}{
		{at(s), nil, at(10 * s)},       // open until +10s
		{at(10 * s), nil, time.Time{}}, // half-open, no probe out
		{at(11 * s), func() { allow(t, b, at(11*s)) }, at(16 * s)},
		{at(12 * s), func() { allow(t, b, at(12*s)) }, at(16 * s)}, // the earlier of two
		{at(16 * s), nil, at(36 * s)},                              // the first missed: open for 20 s
	}
	for i, st := range steps {
		if st.do != nil {
			st.do()
		}
		if got := b.Expire(st.now); !got.Equal(st.want) {
			t.Errorf("step %d: Expire(+%v) = %v, want %v", i, st.now.Sub(epoch), got, st.want)
		}
	}
	want := []transition{{Closed, Open, at(0)}, {Open, HalfOpen, at(10 * s)}, {HalfOpen, Open, at(16 * s)}}
	if got := r.list(); !sameTransitions(got, want) {
		t.Errorf("transitions:\n got %v\nwant %v", got, want)
	}
}

// Outcomes of permits granted before a state change are discarded: a
// success begun before a trip does not close the breaker, a failure begun
// before a close does not count against the new closed period, and a
// closed-period permit does not end a half-open period.
func TestStaleOutcomesAreDiscarded(t *testing.T) {
	b := New(Options{FailureThreshold: 2, OpenFor: tenSecondsPerTrip})
	early := allow(t, b, at(0))
	old := allow(t, b, at(0))
	older := allow(t, b, at(0))
	call(t, b, at(s), Failure)
	call(t, b, at(s), Failure) // trip: open until +11s
	early.Done(Success, at(2*s))
	refused(t, b, at(2*s), Open, at(11*s))

	probe := allow(t, b, at(11*s))
	old.Done(Failure, at(12*s)) // granted while closed: not the probe
	if snap := b.Snapshot(at(12 * s)); snap.State != HalfOpen || snap.Probes != 1 {
		t.Fatalf("after a stale failure in half-open: %v with %d probes out, want half_open with 1", snap.State, snap.Probes)
	}
	refused(t, b, at(12*s), HalfOpen, probe.Deadline())

	probe.Done(Success, at(13*s))
	older.Done(Failure, at(14*s))
	if snap := b.Snapshot(at(14 * s)); snap.State != Closed || snap.ConsecutiveFailures != 0 || snap.WindowCalls != 0 {
		t.Fatalf("after a failure begun before the trip, reported after the close: %+v; want closed with nothing counted", snap)
	}
	if snap := b.Snapshot(at(14 * s)); snap.Counts.Successes != 2 || snap.Counts.Failures != 4 {
		t.Errorf("totals: %d successes, %d failures; want every report counted, stale ones too: 2, 4", snap.Counts.Successes, snap.Counts.Failures)
	}
}

// Done counts once: a second Done on the same permit does nothing, and a
// nil permit's Done is safe.
func TestDoneTwiceCountsOnce(t *testing.T) {
	b := New(Options{FailureThreshold: 2})
	p := allow(t, b, at(0))
	p.Done(Failure, at(0))
	p.Done(Failure, at(0))
	if snap := b.Snapshot(at(0)); snap.State != Closed || snap.ConsecutiveFailures != 1 || snap.Counts.Failures != 1 {
		t.Errorf("after one permit's Done twice: %v, %d consecutive, %d failures counted; want closed, 1, 1", snap.State, snap.ConsecutiveFailures, snap.Counts.Failures)
	}
	var nilPermit *Permit
	nilPermit.Done(Failure, at(0)) // must not panic
}

// Times earlier than one already seen count as that one: a reading that
// reaches the breaker late neither reopens nor shortens anything.
func TestTimeGoingBackCountsAsLatest(t *testing.T) {
	b := New(Options{FailureThreshold: 1, OpenFor: tenSecondsPerTrip, ProbeTimeout: 5 * s})
	call(t, b, at(0), Failure)
	if st := b.State(at(10 * s)); st != HalfOpen {
		t.Fatalf("at +10s: %v, want half_open", st)
	}
	if st := b.State(at(5 * s)); st != HalfOpen {
		t.Errorf("asked at +5s after +10s: %v, want half_open (the latest time)", st)
	}
	p := allow(t, b, at(9*s)) // counts as +10s: deadline +15s
	if !p.Deadline().Equal(at(15 * s)) {
		t.Errorf("probe asked at +9s after +10s has deadline %v, want +15s", p.Deadline())
	}
}

// One service's failures never affect another's breaker.
func TestBreakersAreIndependent(t *testing.T) {
	camera, locks := New(Options{FailureThreshold: 1}), New(Options{FailureThreshold: 1})
	call(t, camera, at(0), Failure)
	camera.ReportHealth(false, at(s))
	if st := camera.State(at(s)); st != Open {
		t.Fatalf("camera: %v, want open", st)
	}
	if st := locks.State(at(s)); st != Closed {
		t.Errorf("locks: %v after the camera's failures, want closed", st)
	}
	call(t, locks, at(s), Success)
}

// Many goroutines share one breaker and one fake clock, allowing and
// reporting calls whose outcomes alternate between healthy and failing
// spells. Under -race: no data race; never more than MaxProbes probes of
// one half-open period out at once; every transition along an allowed
// edge, from the state the previous one went to, at non-decreasing times.
func TestConcurrentUse(t *testing.T) {
	const (
		workers   = 16
		each      = 2000
		maxProbes = 3
	)
	var clockMu sync.Mutex
	clockNow := epoch
	tick := func() time.Time { // every reading advances the clock by 1 ms
		clockMu.Lock()
		defer clockMu.Unlock()
		clockNow = clockNow.Add(ms)
		return clockNow
	}
	var r recorder
	b := New(Options{FailureThreshold: 3, FailureRatio: 0.5, MinCalls: 10, Window: s, MaxProbes: maxProbes,
		ProbeTimeout: 50 * ms, SuccessesToClose: 2, OpenFor: func(trips int) time.Duration { return time.Duration(trips) * 20 * ms },
		OnStateChange: r.on})

	var mu sync.Mutex
	out := map[uint64]int{} // probes out, per generation
	most := 0
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				p, err := b.Allow(tick())
				if err != nil {
					if !errors.Is(err, ErrOpen) {
						t.Errorf("Allow: %v, want nil or ErrOpen", err)
					}
					continue
				}
				if p.Probe() {
					mu.Lock()
					out[p.gen]++
					most = max(most, out[p.gen])
					mu.Unlock()
				}
				// Healthy for 300 ms, then failing for 300 ms, by the
				// clock; some calls are canceled or ignored, some slow
				// enough to miss a probe's deadline.
				now := tick()
				if (i+w)%11 == 0 {
					for range 60 {
						now = tick()
					}
				}
				o := Success
				switch {
				case (i+w)%17 == 0:
					o = Canceled
				case (i+w)%13 == 0:
					o = Ignored
				case now.Sub(epoch)/(300*ms)%2 == 1:
					o = Failure
				}
				if p.Probe() {
					mu.Lock()
					out[p.gen]--
					mu.Unlock()
				}
				p.Done(o, now)
			}
		})
	}
	wg.Wait()
	if most > maxProbes {
		t.Errorf("%d probes of one half-open period were out at once, want at most %d", most, maxProbes)
	}
	got := r.list()
	edges := map[[2]State]bool{{Closed, Open}: true, {Open, HalfOpen}: true, {HalfOpen, Open}: true, {HalfOpen, Closed}: true}
	prev := transition{to: Closed, at: epoch}
	for _, tr := range got {
		if !edges[[2]State{tr.from, tr.to}] || tr.from != prev.to || tr.at.Before(prev.at) {
			t.Fatalf("transition %v after %v", tr, prev)
		}
		prev = tr
	}
	snap := b.Snapshot(tick())
	if snap.Counts.Allowed+snap.Counts.Rejected != workers*each {
		t.Errorf("%d allowed + %d rejected, want %d", snap.Counts.Allowed, snap.Counts.Rejected, workers*each)
	}
	if done := snap.Counts.Successes + snap.Counts.Failures + snap.Counts.Ignored + snap.Counts.Canceled; done != snap.Counts.Allowed {
		t.Errorf("%d outcomes reported, want one per permit (%d)", done, snap.Counts.Allowed)
	}
	t.Logf("%d transitions, %d trips, %d probes expired, at most %d probes out; %+v", len(got), snap.Counts.Trips, snap.Counts.Expired, most, snap.Counts)
	if snap.Counts.Trips == 0 || snap.Counts.Expired == 0 || !slices.ContainsFunc(got, func(tr transition) bool { return tr.to == Closed }) {
		t.Errorf("the run never tripped, never missed a probe deadline or never closed again: it tested little")
	}
}

// Regression: a nil *Permit (a service without a breaker) answers Probe
// and Done without panicking.
func TestNilPermit(t *testing.T) {
	var p *Permit
	if p.Probe() {
		t.Error("a nil permit is a probe")
	}
	p.Done(Success, time.Now()) // must not panic
}

// Transitions inside Replay reach OnTransition marked Replay; the others
// do not; OnStateChange sees them all.
func TestReplayMarksItsTransitions(t *testing.T) {
	var got []Transition
	var rec recorder
	b := New(Options{OnStateChange: rec.on, OnTransition: func(tr Transition) { got = append(got, tr) }})
	b.Replay(func() { b.ReportHealth(false, at(0)) })
	b.ReportHealth(true, at(time.Second))
	want := []Transition{
		{From: Closed, To: Open, At: at(0), Replay: true},
		{From: Open, To: HalfOpen, At: at(time.Second), Replay: false},
	}
	if !slices.Equal(got, want) {
		t.Errorf("OnTransition got %+v, want %+v", got, want)
	}
	if n := len(rec.list()); n != 2 {
		t.Errorf("OnStateChange called %d times, want 2", n)
	}
}

// ForgetOffline undoes an offline hold: closed again when the offline
// alone opened the breaker, half-open when it had tripped before.
func TestForgetOffline(t *testing.T) {
	b := New(Options{FailureThreshold: 1, OpenFor: func(int) time.Duration { return time.Minute }})
	b.ReportHealth(false, at(0))
	b.ForgetOffline(at(time.Second))
	if s := b.Snapshot(at(time.Second)); s.State != Closed || s.Offline {
		t.Errorf("after an offline alone: %v (offline %t), want closed", s.State, s.Offline)
	}
	p, err := b.Allow(at(2 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	p.Done(Failure, at(2*time.Second)) // a trip
	b.ReportHealth(false, at(3*time.Second))
	b.ForgetOffline(at(4 * time.Second))
	if s := b.State(at(4 * time.Second)); s != HalfOpen {
		t.Errorf("after a trip and an offline: %v, want half_open", s)
	}
	b.ForgetOffline(at(5 * time.Second)) // no hold: nothing
	if s := b.State(at(5 * time.Second)); s != HalfOpen {
		t.Errorf("without a hold: %v, want half_open unchanged", s)
	}
}

// A permit is current until its outcome is reported or the breaker
// changes state: a closed breaker's permit granted before another call's
// failure tripped it is no longer current, nor a probe past its deadline.
func TestPermitIsCurrentUntilTheBreakerChangesState(t *testing.T) {
	b := New(Options{FailureThreshold: 1, OpenFor: tenSecondsPerTrip, ProbeTimeout: 2 * s})
	early := allow(t, b, at(0))
	failing := allow(t, b, at(0))
	if !early.Current(at(0)) {
		t.Fatal("a fresh permit of a closed breaker is not current")
	}
	failing.Done(Failure, at(1*s)) // trips the breaker
	if failing.Current(at(1 * s)) {
		t.Error("a permit whose outcome was reported is still current")
	}
	if early.Current(at(1 * s)) {
		t.Error("a permit granted while closed is still current after the breaker opened")
	}
	probe := allow(t, b, at(11*s)) // half-open since +11s
	if !probe.Current(at(12 * s)) {
		t.Error("a probe within its deadline is not current")
	}
	if probe.Current(at(13 * s)) {
		t.Error("a probe at its deadline is still current")
	}
	var none *Permit
	if !none.Current(at(0)) {
		t.Error("a nil permit is not current")
	}
}
