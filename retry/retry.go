// Package retry is pure policy math for spacing attempts: backoff strategies
// (fixed, linear, exponential, Fibonacci, server-provided), jitter (none,
// full, equal, decorrelated), caps that bound the final delay, retry
// budgets, Retry-After parsing and error classes.
//
// Arithmetic saturates: no attempt number, however large, yields a negative
// or wrapped delay, and every delay lies in [0, Cap].
//
// It owns no goroutines, timers or clocks, and imports nothing of Hearth's:
// callers pass the current time and the random source, and sleep on their
// own clock.
//
// The jitter definitions are those of "Exponential Backoff And Jitter"
// (Marc Brooker, AWS Architecture Blog, 2015), with t = min(cap, base·m^n):
//
//	full:         uniform(0, t)
//	equal:        t/2 + uniform(0, t/2)
//	decorrelated: min(cap, uniform(base, 3·previous))
package retry

import (
	"fmt"
	"math"
	"time"
)

// Rand is the random source a jittered delay draws from. *math/rand/v2.Rand
// satisfies it; tests pass a fixed sequence.
type Rand interface {
	// Int64N returns a uniform value in [0, n); n > 0.
	Int64N(n int64) int64
}

// Strategy is how the delay ceiling grows with the retry number n (n = 1
// is the retry after the first attempt). The zero Strategy is Exponential.
type Strategy uint8

const (
	// Exponential grows as Base·Multiplier^(n-1).
	Exponential Strategy = iota
	// Fixed waits Base before every retry.
	Fixed
	// Linear grows as Base·n.
	Linear
	// Fibonacci grows as Base·F(n+1) with F(1) = F(2) = 1: 1, 2, 3, 5, 8…
	// times Base.
	Fibonacci
	// ServerProvided waits what the service asks for in Retry-After and,
	// when it does not say, Base (with the policy's jitter).
	ServerProvided
)

var strategyNames = [...]string{
	Exponential:    "exponential",
	Fixed:          "fixed",
	Linear:         "linear",
	Fibonacci:      "fibonacci",
	ServerProvided: "retry_after",
}

// String returns the strategy's configuration name, such as "exponential"
// or "retry_after".
func (s Strategy) String() string {
	if int(s) < len(strategyNames) {
		return strategyNames[s]
	}
	return fmt.Sprintf("Strategy(%d)", uint8(s))
}

// ParseStrategy returns the strategy with configuration name s: fixed,
// linear, exponential, fibonacci or retry_after.
func ParseStrategy(s string) (Strategy, error) {
	for i, name := range strategyNames {
		if s == name {
			return Strategy(i), nil
		}
	}
	return 0, fmt.Errorf("unknown backoff %q; want one of fixed, linear, exponential, fibonacci, retry_after", s)
}

// Jitter is how a delay is drawn below its ceiling. The zero Jitter is
// Full, Hearth's default.
type Jitter uint8

const (
	// Full draws uniformly from [0, t].
	Full Jitter = iota
	// None waits exactly t.
	None
	// Equal waits t/2 plus a uniform draw from [0, t/2].
	Equal
	// Decorrelated draws uniformly from [Base, 3·previous delay], capped.
	// It replaces the strategy's growth with its own.
	Decorrelated
)

var jitterNames = [...]string{Full: "full", None: "none", Equal: "equal", Decorrelated: "decorrelated"}

// String returns the jitter's configuration name, such as "full".
func (j Jitter) String() string {
	if int(j) < len(jitterNames) {
		return jitterNames[j]
	}
	return fmt.Sprintf("Jitter(%d)", uint8(j))
}

// ParseJitter returns the jitter with configuration name s: none, full,
// equal or decorrelated.
func ParseJitter(s string) (Jitter, error) {
	for i, name := range jitterNames {
		if s == name {
			return Jitter(i), nil
		}
	}
	return 0, fmt.Errorf("unknown jitter %q; want one of none, full, equal, decorrelated", s)
}

// Backoff spaces retries: a strategy that sets the ceiling of each delay,
// a cap on every delay, and a jitter that draws the delay below the
// ceiling.
//
// Zero values: Strategy Exponential; Jitter Full; Multiplier 0 means 2
// (a multiplier of 1 or less never grows); Cap 0 or less means no cap other
// than the largest time.Duration. A Base of 0 or less makes every delay 0.
type Backoff struct {
	Strategy   Strategy
	Base       time.Duration
	Multiplier float64
	Cap        time.Duration
	Jitter     Jitter
}

// limit is the largest delay b allows.
func (b Backoff) limit() time.Duration {
	if b.Cap <= 0 {
		return math.MaxInt64
	}
	return b.Cap
}

// Ceiling returns the largest delay before retry n (n ≥ 1; the first retry
// follows the first attempt), before jitter: the strategy's value, never
// more than Cap. It saturates at Cap instead of overflowing, for any n;
// n < 1 counts as 1. With Base 1s, Multiplier 2 and Cap 5s the exponential
// ceilings are 1s, 2s, 4s, 5s, 5s.
func (b Backoff) Ceiling(n int) time.Duration {
	limit := b.limit()
	if b.Base <= 0 {
		return 0
	}
	if n < 1 {
		n = 1
	}
	switch b.Strategy {
	case Linear:
		if int64(n) > int64(limit)/int64(b.Base) {
			return limit
		}
		return min(b.Base*time.Duration(n), limit)
	case Fibonacci:
		// a is the factor F(n+1) of retry n, next the one after. The
		// factors pass limit/Base, or overflow int64, within 92 steps, so
		// the loop is short for any n.
		most := int64(limit) / int64(b.Base)
		a, next := int64(1), int64(2)
		for i := 1; i < n; i++ {
			if next > most || next < 0 { // next < 0: a+next overflowed
				return limit
			}
			a, next = next, a+next
		}
		return min(time.Duration(a)*b.Base, limit)
	case Exponential:
		return b.exponential(n, limit)
	default: // Fixed, ServerProvided
		return min(b.Base, limit)
	}
}

// exponential is min(limit, Base·m^(n-1)) in constant time for any n.
func (b Backoff) exponential(n int, limit time.Duration) time.Duration {
	m := b.Multiplier
	if m == 0 {
		m = 2
	}
	if m <= 1 || n == 1 || math.IsNaN(m) {
		return min(b.Base, limit)
	}
	// math.Pow is constant-time for any n and saturates to +Inf, which
	// the comparison below turns into the limit.
	d := float64(b.Base) * math.Pow(m, float64(n-1))
	if d >= float64(limit) || math.IsInf(d, 0) || math.IsNaN(d) {
		return limit
	}
	return time.Duration(d)
}

// Delay returns the delay before retry n (n ≥ 1), drawn by b's jitter.
// prev is the delay before the previous retry (0 before the first); only
// Decorrelated uses it. r may be nil when Jitter is None. The result always
// lies in [0, Cap] (or [0, math.MaxInt64] without a cap).
func (b Backoff) Delay(n int, prev time.Duration, r Rand) time.Duration {
	if b.Base <= 0 {
		return 0
	}
	switch b.Jitter {
	case None:
		return b.Ceiling(n)
	case Equal:
		t := b.Ceiling(n)
		return between(t-t/2, t, r) // t/2 rounded up, so the sum is ≤ t
	case Decorrelated:
		lo := b.Base
		if prev < lo {
			prev = lo
		}
		hi := time.Duration(math.MaxInt64)
		if prev <= math.MaxInt64/3 {
			hi = 3 * prev
		}
		return min(between(lo, hi, r), b.limit())
	default: // Full
		return between(0, b.Ceiling(n), r)
	}
}

// between draws uniformly from [lo, hi]; 0 ≤ lo ≤ hi. When the closed
// interval has more values than an int64 can count, it draws from
// [lo, hi).
func between(lo, hi time.Duration, r Rand) time.Duration {
	if hi <= lo {
		return lo
	}
	span := int64(hi - lo)
	if span < math.MaxInt64 {
		span++
	}
	return lo + time.Duration(r.Int64N(span))
}
