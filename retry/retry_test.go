package retry

import (
	"math"
	"slices"
	"testing"
	"time"
)

// top stands, in a stubRand's draws, for the largest value Int64N(n) may
// return: n-1.
const top = -1

// stubRand returns the draws it was given, in order (top meaning n-1), and
// records the n of every Int64N(n) it was asked for, so that a test sees
// both the value drawn and the interval drawn from.
type stubRand struct {
	t     *testing.T
	draws []int64
	asked []int64
}

func newStub(t *testing.T, draws ...int64) *stubRand {
	return &stubRand{t: t, draws: draws}
}

func (r *stubRand) Int64N(n int64) int64 {
	r.t.Helper()
	r.asked = append(r.asked, n)
	if n <= 0 {
		r.t.Fatalf("Int64N(%d): n must be positive", n)
	}
	if len(r.draws) == 0 {
		r.t.Fatalf("unexpected draw Int64N(%d): no draws left", n)
	}
	v := r.draws[0]
	r.draws = r.draws[1:]
	if v == top {
		return n - 1
	}
	if v < 0 || v >= n {
		r.t.Fatalf("stub draw %d is outside [0, %d) of Int64N(%d)", v, n, n)
	}
	return v
}

const (
	ms = time.Millisecond
	s  = time.Second
)

func TestCeilingDoublesUpToTheCap(t *testing.T) {
	b := Backoff{Base: time.Second, Multiplier: 2, Cap: 5 * time.Second}
	want := []time.Duration{1 * time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i, w := range want {
		n := i + 1
		if got := b.Ceiling(n); got != w {
			t.Errorf("Ceiling(%d) = %v, want %v", n, got, w)
		}
	}
}

// Every strategy's ceilings for retries 1, 2, 3…, written out by hand.
func TestCeilingSequences(t *testing.T) {
	tests := []struct {
		name string
		b    Backoff
		want []time.Duration // Ceiling(1), Ceiling(2), …
	}{
		{"fixed", Backoff{Strategy: Fixed, Base: 2 * s, Cap: 5 * s}, []time.Duration{2 * s, 2 * s, 2 * s, 2 * s}},
		{"fixed above the cap", Backoff{Strategy: Fixed, Base: 7 * s, Cap: 5 * s}, []time.Duration{5 * s, 5 * s}},
		{"fixed ignores the multiplier", Backoff{Strategy: Fixed, Base: s, Multiplier: 3}, []time.Duration{s, s, s}},
		{"linear", Backoff{Strategy: Linear, Base: s, Cap: 5 * s}, []time.Duration{s, 2 * s, 3 * s, 4 * s, 5 * s, 5 * s, 5 * s}},
		{"linear 300ms, cap 1s", Backoff{Strategy: Linear, Base: 300 * ms, Cap: s}, []time.Duration{300 * ms, 600 * ms, 900 * ms, s, s}},
		{"exponential ×2, cap 5s", Backoff{Strategy: Exponential, Base: s, Multiplier: 2, Cap: 5 * s}, []time.Duration{s, 2 * s, 4 * s, 5 * s, 5 * s}},
		{"exponential ×3, cap 10s", Backoff{Base: 100 * ms, Multiplier: 3, Cap: 10 * s}, []time.Duration{100 * ms, 300 * ms, 900 * ms, 2700 * ms, 8100 * ms, 10 * s}},
		{"exponential ×1.5", Backoff{Base: s, Multiplier: 1.5, Cap: time.Minute}, []time.Duration{s, 1500 * ms, 2250 * ms, 3375 * ms, 5062500 * time.Microsecond}},
		{"exponential multiplier 0 means 2", Backoff{Base: s}, []time.Duration{s, 2 * s, 4 * s, 8 * s}},
		{"fibonacci", Backoff{Strategy: Fibonacci, Base: s}, []time.Duration{s, 2 * s, 3 * s, 5 * s, 8 * s, 13 * s, 21 * s, 34 * s, 55 * s}},
		{"fibonacci, cap 10s", Backoff{Strategy: Fibonacci, Base: s, Cap: 10 * s}, []time.Duration{s, 2 * s, 3 * s, 5 * s, 8 * s, 10 * s, 10 * s}},
		{"fibonacci ignores the multiplier", Backoff{Strategy: Fibonacci, Base: 10 * ms, Multiplier: 10}, []time.Duration{10 * ms, 20 * ms, 30 * ms, 50 * ms}},
		{"server-provided without Retry-After is Base", Backoff{Strategy: ServerProvided, Base: 3 * s, Multiplier: 2, Cap: 10 * s}, []time.Duration{3 * s, 3 * s, 3 * s}},
		{"server-provided Base above the cap", Backoff{Strategy: ServerProvided, Base: 3 * s, Cap: s}, []time.Duration{s, s}},
	}
	for _, tc := range tests {
		got := make([]time.Duration, len(tc.want))
		for i := range got {
			got[i] = tc.b.Ceiling(i + 1)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %+v ceilings = %v, want %v", tc.name, tc.b, got, tc.want)
		}
	}
}

func TestCeilingTable(t *testing.T) {
	const maxD = time.Duration(math.MaxInt64)
	tests := []struct {
		name string
		b    Backoff
		n    int
		want time.Duration
	}{
		{"n below 1 counts as 1", Backoff{Base: s, Multiplier: 2, Cap: time.Minute}, 0, s},
		{"negative n counts as 1", Backoff{Base: s, Multiplier: 2, Cap: time.Minute}, -5, s},
		{"multiplier 0 means 2", Backoff{Base: s, Cap: time.Minute}, 3, 4 * s},
		{"multiplier 10", Backoff{Base: ms, Multiplier: 10, Cap: time.Minute}, 4, s},
		{"multiplier 1 never grows", Backoff{Base: s, Multiplier: 1, Cap: time.Minute}, 1000, s},
		{"multiplier below 1 never shrinks", Backoff{Base: s, Multiplier: 0.5, Cap: time.Minute}, 5, s},
		{"negative multiplier never grows", Backoff{Base: s, Multiplier: -2, Cap: time.Minute}, 5, s},
		{"NaN multiplier never grows", Backoff{Base: s, Multiplier: math.NaN(), Cap: time.Minute}, 5, s},
		{"infinite multiplier saturates", Backoff{Base: s, Multiplier: math.Inf(1), Cap: time.Minute}, 2, time.Minute},
		{"base above cap is capped at once", Backoff{Base: time.Minute, Multiplier: 2, Cap: s}, 1, s},
		{"cap exactly reached", Backoff{Base: s, Multiplier: 2, Cap: 4 * s}, 3, 4 * s},
		{"base 0 is always 0", Backoff{Base: 0, Multiplier: 2, Cap: time.Minute}, 10, 0},
		{"negative base is 0", Backoff{Base: -s, Multiplier: 2, Cap: time.Minute}, 10, 0},
		{"base 0 without cap is 0", Backoff{}, math.MaxInt, 0},
		{"base 0 linear is 0", Backoff{Strategy: Linear}, math.MaxInt, 0},
		{"cap 0 means no cap: 2^30 s", Backoff{Base: s, Multiplier: 2}, 31, (1 << 30) * s},
		{"cap 0 saturates at MaxInt64", Backoff{Base: s, Multiplier: 2}, 64, maxD},
		{"negative cap is no cap", Backoff{Base: s, Multiplier: 2, Cap: -1}, 64, maxD},
		{"cap 1ns", Backoff{Base: s, Multiplier: 2, Cap: 1}, 1, 1},
		{"base 1ns doubles exactly", Backoff{Base: 1, Multiplier: 2}, 63, 1 << 62},
		{"base 1ns saturates at 2^63", Backoff{Base: 1, Multiplier: 2}, 64, maxD},
		{"huge n with cap", Backoff{Base: s, Multiplier: 2, Cap: time.Minute}, math.MaxInt, time.Minute},
		{"huge n without cap", Backoff{Base: s, Multiplier: 1.5}, math.MaxInt, maxD},
		{"linear huge n with cap", Backoff{Strategy: Linear, Base: s, Cap: time.Hour}, math.MaxInt, time.Hour},
		{"linear base 1ns reaches MaxInt64 exactly", Backoff{Strategy: Linear, Base: 1}, math.MaxInt64, maxD},
		{"linear base 2ns saturates", Backoff{Strategy: Linear, Base: 2}, math.MaxInt64/2 + 1, maxD},
		{"linear one below the saturation", Backoff{Strategy: Linear, Base: 2}, math.MaxInt64 / 2, maxD - 1},
		{"fibonacci F(92) is the largest in int64", Backoff{Strategy: Fibonacci, Base: 1}, 91, 7540113804746346429},
		{"fibonacci F(93) saturates", Backoff{Strategy: Fibonacci, Base: 1}, 92, maxD},
		// Base 1ns with a huge n: TestCeilingFibonacciIsBoundedForAnyN.
		{"fibonacci huge n with cap", Backoff{Strategy: Fibonacci, Base: s, Cap: time.Hour}, math.MaxInt, time.Hour},
		{"fixed huge n", Backoff{Strategy: Fixed, Base: s}, math.MaxInt, s},
		{"unknown strategy waits Base", Backoff{Strategy: Strategy(200), Base: s, Cap: time.Hour}, 9, s},
	}
	for _, tc := range tests {
		if got := tc.b.Ceiling(tc.n); got != tc.want {
			t.Errorf("%s: %+v.Ceiling(%d) = %v, want %v", tc.name, tc.b, tc.n, got, tc.want)
		}
	}
}

// Regression: with Base 1ns and no cap the Fibonacci factor saturated at
// MaxInt64 = limit/Base instead of passing it, so Ceiling(n) looped n
// times; Ceiling(math.MaxInt) did not return.
func TestCeilingFibonacciIsBoundedForAnyN(t *testing.T) {
	for _, b := range []Backoff{
		{Strategy: Fibonacci, Base: 1},
		{Strategy: Fibonacci, Base: 1, Cap: math.MaxInt64},
	} {
		done := make(chan time.Duration, 1)
		go func() { done <- b.Ceiling(math.MaxInt) }()
		select {
		case got := <-done:
			if got != math.MaxInt64 {
				t.Errorf("%+v.Ceiling(MaxInt) = %v, want %v", b, got, time.Duration(math.MaxInt64))
			}
		case <-time.After(5 * time.Second): // a deadline on an event, not a sleep
			t.Fatalf("%+v.Ceiling(math.MaxInt) did not return within 5s", b)
		}
	}
}

// Ceiling must be cheap for any policy config accepts, because Conn.Run
// calls it with an attempt number that grows for as long as the broker is
// down: a multiplier just above 1 must not loop once per attempt.
func TestCeilingIsBoundedForMultiplierNearOne(t *testing.T) {
	done := make(chan time.Duration, 1)
	b := Backoff{Base: time.Second, Multiplier: math.Nextafter(1, 2), Cap: time.Minute}
	go func() { done <- b.Ceiling(math.MaxInt) }()
	select {
	case got := <-done:
		// 1.0000000000000002^(2^63) = e^(2^63·2^-52) = e^2048: past the cap.
		if got != time.Minute {
			t.Errorf("Ceiling(MaxInt) = %v, want the cap 1m", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Ceiling(math.MaxInt) with multiplier 1+2^-52 did not return within 5s")
	}
}

// Each jitter, fed chosen draws: the delays it returns and the n of each
// Int64N(n) it asked for, which proves the closed interval [lo, hi] is
// drawn as Int64N(hi-lo+1).
func TestDelaySequences(t *testing.T) {
	type step struct {
		n    int
		prev time.Duration
		draw int64         // the stub's answer (top: n-1); ignored by None
		want time.Duration // the delay
		ask  int64         // the n of Int64N(n); 0: no draw
	}
	exp := Backoff{Base: s, Multiplier: 2, Cap: 5 * s} // ceilings 1, 2, 4, 5, 5 s
	tests := []struct {
		name  string
		b     Backoff
		steps []step
	}{
		{"none waits the ceiling", with(exp, None), []step{
			{1, 0, 0, s, 0}, {2, 0, 0, 2 * s, 0}, {3, 0, 0, 4 * s, 0}, {4, 0, 0, 5 * s, 0}, {5, 0, 0, 5 * s, 0},
		}},
		{"full draws from [0, t]", with(exp, Full), []step{
			{1, 0, top, s, int64(s) + 1},
			{2, 0, 0, 0, int64(2*s) + 1},
			{3, 0, 123, 123, int64(4*s) + 1},
			{4, 0, top, 5 * s, int64(5*s) + 1},
			{5, 0, int64(2500 * ms), 2500 * ms, int64(5*s) + 1},
		}},
		{"equal draws t/2 + [0, t/2]", with(exp, Equal), []step{
			{1, 0, 0, 500 * ms, int64(500*ms) + 1},
			{1, 0, top, s, int64(500*ms) + 1},
			{2, 0, 0, s, int64(s) + 1},
			{3, 0, int64(s), 3 * s, int64(2*s) + 1},
			{4, 0, 0, 2500 * ms, int64(2500*ms) + 1},
			{5, 0, top, 5 * s, int64(2500*ms) + 1},
		}},
		// An odd ceiling: t = 3ns draws from [2, 3], so t/2 rounds up and
		// the sum stays ≤ t.
		{"equal with an odd ceiling", Backoff{Strategy: Fixed, Base: 3, Jitter: Equal}, []step{
			{1, 0, 0, 2, 2}, {1, 0, top, 3, 2},
		}},
		// min(cap, uniform[base, 3·prev]); prev 0 counts as base. The
		// retry number plays no part.
		{"decorrelated", with(exp, Decorrelated), []step{
			{1, 0, top, 3 * s, int64(2*s) + 1},
			{1, 0, 0, s, int64(2*s) + 1},
			{2, 3 * s, int64(2 * s), 3 * s, int64(8*s) + 1},
			{3, 3 * s, top, 5 * s, int64(8*s) + 1}, // 9s, capped
			{4, 5 * s, 0, s, int64(14*s) + 1},
			{99, 5 * s, int64(3 * s), 4 * s, int64(14*s) + 1},
			{1, 500 * ms, top, 3 * s, int64(2*s) + 1}, // prev below base counts as base
		}},
		{"decorrelated without a cap saturates 3·prev", Backoff{Base: s, Jitter: Decorrelated}, []step{
			{1, math.MaxInt64, top, math.MaxInt64, int64(math.MaxInt64 - s + 1)},
			{1, math.MaxInt64/3 + 1, 0, s, int64(math.MaxInt64 - s + 1)},
			{1, math.MaxInt64 / 3, top, math.MaxInt64 / 3 * 3, int64(math.MaxInt64/3*3-s) + 1},
		}},
		{"decorrelated base above the cap", Backoff{Base: 10 * s, Cap: s, Jitter: Decorrelated}, []step{
			{1, 0, 0, s, int64(20*s) + 1},
		}},
		// [0, MaxInt64] has one value more than an int64 counts: the draw
		// is from [0, MaxInt64).
		{"full without a cap at MaxInt64", Backoff{Base: s}, []step{
			{64, 0, top, math.MaxInt64 - 1, math.MaxInt64},
		}},
		{"full with a 1ns ceiling", Backoff{Base: 1, Cap: 1}, []step{
			{9, 0, top, 1, 2}, {9, 0, 0, 0, 2},
		}},
		{"server-provided full jitter below Base", Backoff{Strategy: ServerProvided, Base: 2 * s}, []step{
			{7, 0, top, 2 * s, int64(2*s) + 1},
		}},
		{"fibonacci full jitter", Backoff{Strategy: Fibonacci, Base: s}, []step{
			{5, 0, top, 8 * s, int64(8*s) + 1},
		}},
		{"linear equal jitter", Backoff{Strategy: Linear, Base: s, Jitter: Equal}, []step{
			{3, 0, 0, 1500 * ms, int64(1500*ms) + 1},
		}},
	}
	for _, tc := range tests {
		for _, st := range tc.steps {
			r := newStub(t, st.draw)
			got := tc.b.Delay(st.n, st.prev, r)
			if got != st.want {
				t.Errorf("%s: %+v.Delay(%d, %v, draw %d) = %v, want %v", tc.name, tc.b, st.n, st.prev, st.draw, got, st.want)
			}
			var wantAsked []int64
			if st.ask != 0 {
				wantAsked = []int64{st.ask}
			}
			if !slices.Equal(r.asked, wantAsked) {
				t.Errorf("%s: %+v.Delay(%d, %v) asked Int64N%v, want Int64N%v", tc.name, tc.b, st.n, st.prev, r.asked, wantAsked)
			}
		}
	}
}

func with(b Backoff, j Jitter) Backoff {
	b.Jitter = j
	return b
}

// With no base, or a ceiling of 0, no jitter draws: a nil Rand is fine.
func TestDelayWithoutBaseIsZeroAndDrawsNothing(t *testing.T) {
	for _, j := range []Jitter{None, Full, Equal, Decorrelated} {
		for _, b := range []Backoff{{Jitter: j}, {Base: -s, Cap: s, Jitter: j}} {
			if got := b.Delay(3, 2*s, nil); got != 0 {
				t.Errorf("%+v.Delay(3, 2s, nil) = %v, want 0", b, got)
			}
		}
	}
	if got := (Backoff{Base: s, Cap: 4 * s, Jitter: None}).Delay(3, 0, nil); got != 4*s {
		t.Errorf("None.Delay(3, 0, nil) = %v, want 4s", got)
	}
}

func TestStrategyAndJitterNames(t *testing.T) {
	strategies := []struct {
		s    Strategy
		name string
	}{
		{Exponential, "exponential"}, {Fixed, "fixed"}, {Linear, "linear"},
		{Fibonacci, "fibonacci"}, {ServerProvided, "retry_after"},
	}
	for _, tc := range strategies {
		if got := tc.s.String(); got != tc.name {
			t.Errorf("Strategy(%d).String() = %q, want %q", uint8(tc.s), got, tc.name)
		}
		if got, err := ParseStrategy(tc.name); err != nil || got != tc.s {
			t.Errorf("ParseStrategy(%q) = %v, %v; want %v, nil", tc.name, got, err, tc.s)
		}
	}
	jitters := []struct {
		j    Jitter
		name string
	}{{Full, "full"}, {None, "none"}, {Equal, "equal"}, {Decorrelated, "decorrelated"}}
	for _, tc := range jitters {
		if got := tc.j.String(); got != tc.name {
			t.Errorf("Jitter(%d).String() = %q, want %q", uint8(tc.j), got, tc.name)
		}
		if got, err := ParseJitter(tc.name); err != nil || got != tc.j {
			t.Errorf("ParseJitter(%q) = %v, %v; want %v, nil", tc.name, got, err, tc.j)
		}
	}
	var zero Backoff
	if zero.Strategy != Exponential || zero.Jitter != Full {
		t.Errorf("zero Backoff has strategy %v, jitter %v; want exponential, full", zero.Strategy, zero.Jitter)
	}
	if got, want := Strategy(9).String(), "Strategy(9)"; got != want {
		t.Errorf("Strategy(9).String() = %q, want %q", got, want)
	}
	if got, want := Jitter(9).String(), "Jitter(9)"; got != want {
		t.Errorf("Jitter(9).String() = %q, want %q", got, want)
	}
	for _, bad := range []string{"", "Exponential", "exp", "server", "Strategy(9)"} {
		if _, err := ParseStrategy(bad); err == nil {
			t.Errorf("ParseStrategy(%q) succeeded, want an error", bad)
		}
	}
	for _, bad := range []string{"", "Full", "decorrelate", "Jitter(9)"} {
		if _, err := ParseJitter(bad); err == nil {
			t.Errorf("ParseJitter(%q) succeeded, want an error", bad)
		}
	}
}

// Ceiling with a multiplier just above 1 (config accepts any multiplier ≥ 1)
// must cost the same for any n.
func BenchmarkCeilingLargeN(b *testing.B) {
	cases := []struct {
		name string
		b    Backoff
		n    int
	}{
		{"m2_cap60s_n1e6", Backoff{Base: time.Second, Multiplier: 2, Cap: time.Minute}, 1_000_000},
		{"m2_nocap_nMaxInt", Backoff{Base: 1, Multiplier: 2}, math.MaxInt},
		{"m1.001_cap60s_nMaxInt", Backoff{Base: time.Second, Multiplier: 1.001, Cap: time.Minute}, math.MaxInt},
		{"m1.000001_nocap_n1e6", Backoff{Base: 1, Multiplier: 1.000001}, 1_000_000},
		{"fibonacci_base1ns_nocap_nMaxInt", Backoff{Strategy: Fibonacci, Base: 1}, math.MaxInt},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var sink time.Duration
			for b.Loop() {
				sink += c.b.Ceiling(c.n)
			}
			_ = sink
		})
	}
}

// Regression: a cap just above Base·m^(n-1) must not round the ceiling up
// to the cap: 1 ns · 2^49 with a cap of 2^49 + 1 ns is exactly 2^49 ns.
func TestCeilingJustBelowTheCapIsExact(t *testing.T) {
	b := Backoff{Base: 1, Multiplier: 2, Cap: 1<<49 + 1}
	if got := b.Ceiling(50); got != 1<<49 {
		t.Errorf("Ceiling(50) = %d ns, want 2^49 = %d ns", got, int64(1)<<49)
	}
}
