package retry

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
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

func TestCeilingTable(t *testing.T) {
	tests := []struct {
		name string
		b    Backoff
		n    int
		want time.Duration
	}{
		{"n below 1 counts as 1", Backoff{Base: time.Second, Multiplier: 2, Cap: time.Minute}, 0, time.Second},
		{"negative n counts as 1", Backoff{Base: time.Second, Multiplier: 2, Cap: time.Minute}, -5, time.Second},
		{"multiplier 0 means 2", Backoff{Base: time.Second, Cap: time.Minute}, 3, 4 * time.Second},
		{"multiplier 1.5", Backoff{Base: time.Second, Multiplier: 1.5, Cap: time.Minute}, 3, 2250 * time.Millisecond},
		{"multiplier 10", Backoff{Base: time.Millisecond, Multiplier: 10, Cap: time.Minute}, 4, time.Second},
		{"multiplier 1 never grows", Backoff{Base: time.Second, Multiplier: 1, Cap: time.Minute}, 1000, time.Second},
		{"multiplier below 1 never shrinks", Backoff{Base: time.Second, Multiplier: 0.5, Cap: time.Minute}, 5, time.Second},
		{"negative multiplier never grows", Backoff{Base: time.Second, Multiplier: -2, Cap: time.Minute}, 5, time.Second},
		{"base above cap is capped at once", Backoff{Base: time.Minute, Multiplier: 2, Cap: time.Second}, 1, time.Second},
		{"cap exactly reached", Backoff{Base: time.Second, Multiplier: 2, Cap: 4 * time.Second}, 3, 4 * time.Second},
		{"base 0 is always 0", Backoff{Base: 0, Multiplier: 2, Cap: time.Minute}, 10, 0},
		{"negative base is 0", Backoff{Base: -time.Second, Multiplier: 2, Cap: time.Minute}, 10, 0},
		{"base 0 without cap is 0", Backoff{}, math.MaxInt, 0},
		{"cap 0 means no cap: 2^30 s", Backoff{Base: time.Second, Multiplier: 2}, 31, time.Duration(1<<30) * time.Second},
		{"cap 0 saturates at MaxInt64", Backoff{Base: time.Second, Multiplier: 2}, 64, math.MaxInt64},
		{"negative cap is no cap", Backoff{Base: time.Second, Multiplier: 2, Cap: -1}, 64, math.MaxInt64},
		{"cap 1ns", Backoff{Base: time.Second, Multiplier: 2, Cap: 1}, 1, 1},
		{"base 1ns doubles exactly", Backoff{Base: 1, Multiplier: 2, Cap: 0}, 63, 1 << 62},
		{"base 1ns saturates at 2^63", Backoff{Base: 1, Multiplier: 2, Cap: 0}, 64, math.MaxInt64},
		{"infinite multiplier saturates", Backoff{Base: time.Second, Multiplier: math.Inf(1), Cap: time.Minute}, 2, time.Minute},
		{"huge n with cap", Backoff{Base: time.Second, Multiplier: 2, Cap: time.Minute}, math.MaxInt, time.Minute},
	}
	for _, tc := range tests {
		if got := tc.b.Ceiling(tc.n); got != tc.want {
			t.Errorf("%s: %+v.Ceiling(%d) = %v, want %v", tc.name, tc.b, tc.n, got, tc.want)
		}
	}
}

// Ceiling saturates: whatever the attempt number and multiplier, it is
// never negative, never above the cap, and never shrinks as n grows.
func TestCeilingNeverExceedsCapNorGoesNegative(t *testing.T) {
	ns := []int{1, 2, 62, 63, 64, 1000, math.MaxInt}
	multipliers := []float64{1, 1.5, 2, 10}
	caps := []time.Duration{0, 1, time.Second, math.MaxInt64}
	bases := []time.Duration{1, time.Millisecond, time.Second, time.Hour, math.MaxInt64}
	for _, base := range bases {
		for _, m := range multipliers {
			for _, cp := range caps {
				b := Backoff{Base: base, Multiplier: m, Cap: cp}
				limit := cp
				if limit <= 0 {
					limit = math.MaxInt64
				}
				prev := time.Duration(0)
				for _, n := range ns {
					got := b.Ceiling(n)
					if got < 0 || got > limit {
						t.Errorf("%+v.Ceiling(%d) = %d, want within [0, %d]", b, n, got, limit)
					}
					if got < prev {
						t.Errorf("%+v.Ceiling(%d) = %d, below the ceiling %d of a smaller n", b, n, got, prev)
					}
					prev = got
				}
			}
		}
	}
}

// fixedRand always draws the same value, computed from n.
type fixedRand func(n int64) int64

func (f fixedRand) Int64N(n int64) int64 { return f(n) }

func TestFullJitterEnds(t *testing.T) {
	b := Backoff{Base: time.Second, Multiplier: 2, Cap: 5 * time.Second}
	lowest := fixedRand(func(int64) int64 { return 0 })
	highest := fixedRand(func(n int64) int64 { return n - 1 })
	for n := 1; n <= 6; n++ {
		if got := b.FullJitter(n, lowest); got != 0 {
			t.Errorf("FullJitter(%d, draw 0) = %v, want 0", n, got)
		}
		if got, want := b.FullJitter(n, highest), b.Ceiling(n); got != want {
			t.Errorf("FullJitter(%d, draw n-1) = %v, want the ceiling %v", n, got, want)
		}
	}
}

// The stub records the bound FullJitter asks the source for: the ceiling
// plus one, so that the ceiling itself can be drawn.
func TestFullJitterAsksForTheClosedInterval(t *testing.T) {
	tests := []struct {
		b    Backoff
		n    int
		want int64 // the n passed to Int64N
	}{
		{Backoff{Base: time.Second, Multiplier: 2, Cap: 5 * time.Second}, 3, int64(4*time.Second) + 1},
		{Backoff{Base: 1, Multiplier: 2, Cap: 1}, 9, 2},
		{Backoff{Base: time.Second, Multiplier: 2}, 64, math.MaxInt64}, // cannot add one: [0, MaxInt64)
	}
	for _, tc := range tests {
		var asked int64
		r := fixedRand(func(n int64) int64 { asked = n; return 0 })
		tc.b.FullJitter(tc.n, r)
		if asked != tc.want {
			t.Errorf("%+v.FullJitter(%d) asked Int64N(%d), want Int64N(%d)", tc.b, tc.n, asked, tc.want)
		}
	}
}

func TestFullJitterZeroCeilingDrawsNothing(t *testing.T) {
	r := fixedRand(func(int64) int64 { t.Fatal("FullJitter drew a random number for a zero ceiling"); return 0 })
	for _, b := range []Backoff{{}, {Base: 0, Multiplier: 2, Cap: time.Second}, {Base: -1}} {
		if got := b.FullJitter(3, r); got != 0 {
			t.Errorf("%+v.FullJitter(3) = %v, want 0", b, got)
		}
	}
}

func TestFullJitterStaysWithinCeiling(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	backoffs := []Backoff{
		{Base: time.Second, Multiplier: 2, Cap: 5 * time.Second},
		{Base: time.Millisecond, Multiplier: 1.5, Cap: time.Minute},
		{Base: 1, Multiplier: 2, Cap: 3},
		{Base: time.Hour, Multiplier: 10}, // no cap
	}
	for _, b := range backoffs {
		for _, n := range []int{1, 2, 3, 10, 64, 1000} {
			ceiling := b.Ceiling(n)
			var sawLow, sawHigh bool
			for range 2000 {
				got := b.FullJitter(n, r)
				if got < 0 || got > ceiling {
					t.Fatalf("%+v.FullJitter(%d) = %v, outside [0, %v]", b, n, got, ceiling)
				}
				// The draws spread over the interval rather than sticking
				// to one end.
				if got <= ceiling/4 {
					sawLow = true
				}
				if got >= ceiling/4*3 {
					sawHigh = true
				}
			}
			if !sawLow || !sawHigh {
				t.Errorf("%+v.FullJitter(%d) over 2000 draws: saw low quarter %v, high quarter %v; want both", b, n, sawLow, sawHigh)
			}
		}
	}
}

// FuzzBackoff checks the properties of Ceiling and FullJitter for any
// policy within config's limits (base and cap positive, multiplier at least
// 1, see config/checks.go) and any attempt number: the ceiling is within
// [0, Cap] (or [0, MaxInt64] without a cap), equals the exact formula when
// it is small enough to compute exactly, and does not shrink as n grows;
// the jittered delay lies in [0, ceiling].
func FuzzBackoff(f *testing.F) {
	f.Add(int64(time.Second), 2.0, int64(5*time.Second), 4, uint64(1))
	f.Add(int64(1), 1.5, int64(0), 1000, uint64(2))
	f.Add(int64(time.Hour), 10.0, int64(1), math.MaxInt, uint64(3))
	f.Add(int64(math.MaxInt64), 1.0, int64(math.MaxInt64), 63, uint64(4))
	f.Add(int64(0), 0.0, int64(0), 0, uint64(5))
	f.Fuzz(func(t *testing.T, base int64, m float64, cp int64, n int, seed uint64) {
		if math.IsNaN(m) || math.IsInf(m, 0) || (m != 0 && m < 1) || m > 1000 {
			t.Skip("outside config's multiplier range")
		}
		if m > 1 && m < 1.01 && n > 1<<20 {
			// See BenchmarkCeilingLargeN: the loop runs once per attempt
			// below the cap, so a multiplier just above 1 and a huge n
			// run for minutes.
			t.Skip("slow: multiplier close to 1 with a huge n")
		}
		b := Backoff{Base: time.Duration(base), Multiplier: m, Cap: time.Duration(cp)}
		limit := b.Cap
		if limit <= 0 {
			limit = math.MaxInt64
		}
		got := b.Ceiling(n)
		if got < 0 || got > limit {
			t.Fatalf("%+v.Ceiling(%d) = %d, outside [0, %d]", b, n, got, limit)
		}
		if base <= 0 && got != 0 {
			t.Fatalf("%+v.Ceiling(%d) = %d with base %d, want 0", b, n, got, base)
		}
		if n < math.MaxInt {
			if next := b.Ceiling(n + 1); next < got {
				t.Fatalf("%+v: Ceiling(%d) = %d > Ceiling(%d) = %d", b, n, got, n+1, next)
			}
		}
		if base > 0 && m == 2 && n >= 1 && n <= 30 && base <= 1<<20 {
			exact := time.Duration(base) << (n - 1)
			if exact > limit {
				exact = limit
			}
			if got != exact {
				t.Fatalf("%+v.Ceiling(%d) = %d, want %d", b, n, got, exact)
			}
		}
		r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		for range 16 {
			if d := b.FullJitter(n, r); d < 0 || d > got {
				t.Fatalf("%+v.FullJitter(%d) = %d, outside [0, %d]", b, n, d, got)
			}
		}
	})
}

// Ceiling with a multiplier just above 1 (config accepts any multiplier ≥ 1)
// loops once per attempt until the cap: make that cost visible.
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

// Ceiling must be cheap for any policy config accepts, because Conn.Run
// calls it with an attempt number that grows for as long as the broker is
// down. With a multiplier just above 1 and no cap, the loop in
// retry.go:56 runs once per attempt: Ceiling(math.MaxInt) does not return.
func TestCeilingIsBoundedForMultiplierNearOne(t *testing.T) {
	done := make(chan time.Duration, 1)
	b := Backoff{Base: time.Second, Multiplier: math.Nextafter(1, 2), Cap: time.Minute}
	go func() { done <- b.Ceiling(math.MaxInt) }()
	select {
	case got := <-done:
		if got < time.Second || got > time.Minute {
			t.Errorf("Ceiling(MaxInt) = %v, want within [1s, 1m]", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Ceiling(math.MaxInt) with multiplier 1+2^-52 did not return within 5s")
	}
}
