// Package retry is pure policy math for spacing attempts: exponential
// backoff with a cap and full jitter, with saturating arithmetic so that no
// attempt number, however large, yields a negative or wrapped delay.
//
// It owns no goroutines, timers or clocks, and imports nothing of Hearth's:
// callers draw the random number and sleep on their own clock.
//
// Full jitter is as defined in "Exponential Backoff And Jitter" (AWS
// Architecture Blog, 2015): sleep = uniform(0, min(cap, base·multiplier^n)).
package retry

import (
	"math"
	"time"
)

// Rand is the random source a jittered delay draws from. *math/rand/v2.Rand
// satisfies it; tests pass a fixed sequence.
type Rand interface {
	// Int64N returns a uniform value in [0, n); n > 0.
	Int64N(n int64) int64
}

// Backoff is exponential backoff with a cap: the n-th retry waits up to
// Base·Multiplier^(n-1), never more than Cap.
//
// Zero values: Multiplier 0 means 2; Cap 0 means no cap other than the
// largest time.Duration. A zero Base makes every delay zero.
type Backoff struct {
	Base       time.Duration
	Multiplier float64
	Cap        time.Duration
}

// Ceiling returns the largest delay before retry n (n ≥ 1; the first retry
// follows the first attempt): min(Cap, Base·Multiplier^(n-1)), computed so
// that it saturates at Cap instead of overflowing. n < 1 counts as 1.
func (b Backoff) Ceiling(n int) time.Duration {
	limit := b.Cap
	if limit <= 0 {
		limit = math.MaxInt64
	}
	if b.Base <= 0 {
		return 0
	}
	m := b.Multiplier
	if m == 0 {
		m = 2
	}
	if n < 1 {
		n = 1
	}
	if m <= 1 || n == 1 {
		return min(b.Base, limit) // a multiplier of 1 or less never grows
	}
	// Closed form, in constant time for any n: the exponent at which
	// Base·m^k first reaches the limit is log(limit/Base)/log(m); from there
	// on the ceiling is the limit. Below it, m^(n-1) is finite.
	if float64(n-1) >= math.Log(float64(limit)/float64(b.Base))/math.Log(m) {
		return limit
	}
	d := float64(b.Base) * math.Pow(m, float64(n-1))
	if d >= float64(limit) || math.IsInf(d, 0) || math.IsNaN(d) {
		return limit
	}
	return time.Duration(d)
}

// FullJitter returns the delay before retry n with full jitter: a uniform
// draw from [0, Ceiling(n)]. The result always lies in [0, Cap].
func (b Backoff) FullJitter(n int, r Rand) time.Duration {
	c := b.Ceiling(n)
	if c <= 0 {
		return 0
	}
	if c == math.MaxInt64 {
		return time.Duration(r.Int64N(math.MaxInt64))
	}
	return time.Duration(r.Int64N(int64(c) + 1))
}
