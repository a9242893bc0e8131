package retry

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"net/http"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// propertyCases is how many random cases each property below checks,
// whatever -rapid.checks says.
//
// rapid v1.3.0 takes its number of checks only from the -rapid.checks flag
// or the RAPID_CHECKS variable (default 100, a fifth of it under -short),
// read when Check starts; it has no API for it. So each rapid check runs
// a batch of cases, and checkCases repeats rapid.Check until
// propertyCases have run: 10^5 with the defaults, more with
// -rapid.checks above 100. On a failure rapid shrinks the batch and
// reports the smallest failing draws.
const (
	propertyCases = 100_000
	propertyBatch = 1000
)

func checkCases(t *testing.T, prop func(*rapid.T)) {
	t.Helper()
	ran := 0
	for ran < propertyCases {
		rapid.Check(t, func(rt *rapid.T) {
			for range propertyBatch {
				prop(rt)
			}
			ran += propertyBatch
		})
	}
	t.Logf("checked %d cases", ran)
}

var (
	// durations mixes small values, the whole int64 range and its edges.
	durations = rapid.OneOf(
		rapid.Map(rapid.Int64Range(-1, 1<<40), func(v int64) time.Duration { return time.Duration(v) }),
		rapid.Map(rapid.Int64Range(math.MinInt64, math.MaxInt64), func(v int64) time.Duration { return time.Duration(v) }),
		rapid.SampledFrom([]time.Duration{
			0, 1, 2, 3, ms, s, 5 * s, time.Minute, time.Hour,
			math.MaxInt64 / 3, math.MaxInt64/3 + 1, math.MaxInt64/2 + 1, math.MaxInt64 - 1, math.MaxInt64, -1,
		}),
	)
	// bases are mostly positive: a base ≤ 0 makes every delay 0.
	bases = rapid.OneOf(
		rapid.Map(rapid.Int64Range(1, 1<<40), func(v int64) time.Duration { return time.Duration(v) }),
		rapid.Map(rapid.Int64Range(1, math.MaxInt64), func(v int64) time.Duration { return time.Duration(v) }),
		durations,
	)
	// attempts runs from 1 up to math.MaxInt, with the edges of int64
	// overflow for 2^n and Fibonacci.
	attempts = rapid.OneOf(
		rapid.IntRange(1, 100),
		rapid.IntRange(1, math.MaxInt),
		rapid.SampledFrom([]int{1, 2, 3, 31, 62, 63, 64, 65, 91, 92, 93, 1 << 31, math.MaxInt - 1, math.MaxInt}),
	)
	multipliers = rapid.OneOf(
		rapid.SampledFrom([]float64{0, 1, 1.5, 2, 3, 10, 1000, math.Nextafter(1, 2), 0.5, -2, math.NaN(), math.Inf(1), math.Inf(-1)}),
		rapid.Float64Range(1, 1.01),
		rapid.Float64Range(0, 1000),
		rapid.Float64(),
	)
	strategies = rapid.SampledFrom([]Strategy{Exponential, Fixed, Linear, Fibonacci, ServerProvided, Strategy(7)})
	jitters    = rapid.SampledFrom([]Jitter{Full, None, Equal, Decorrelated, Jitter(9)})
	backoffs   = rapid.Custom(func(t *rapid.T) Backoff {
		return Backoff{
			Strategy:   strategies.Draw(t, "strategy"),
			Base:       bases.Draw(t, "base"),
			Multiplier: multipliers.Draw(t, "multiplier"),
			Cap:        durations.Draw(t, "cap"),
			Jitter:     jitters.Draw(t, "jitter"),
		}
	})
)

// The modes of a checkedRand.
const (
	drawLowest  = iota // always 0
	drawHighest        // always n-1
	drawPCG            // a seeded PCG
)

// checkedRand draws by its mode and fails the property if asked for
// Int64N(n) with n ≤ 0, which *rand.Rand answers with a panic.
type checkedRand struct {
	t     *rapid.T
	mode  int
	pcg   *rand.Rand
	draws int
}

func newCheckedRand(t *rapid.T) *checkedRand {
	r := &checkedRand{t: t, mode: rapid.IntRange(drawLowest, drawPCG).Draw(t, "rand mode")}
	if r.mode == drawPCG {
		r.pcg = rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 1))
	}
	return r
}

func (r *checkedRand) Int64N(n int64) int64 {
	r.draws++
	if n <= 0 {
		r.t.Fatalf("Int64N(%d): n must be positive", n)
	}
	switch r.mode {
	case drawLowest:
		return 0
	case drawHighest:
		return n - 1
	}
	return r.pcg.Int64N(n)
}

func limitOf(b Backoff) time.Duration {
	if b.Cap <= 0 {
		return math.MaxInt64
	}
	return b.Cap
}

// exactCeiling computes min(limit, the strategy's value) with math/big,
// independently of Ceiling: Base, Base·n, Base·F(n+1) or Base·m^(n-1). It
// returns the value truncated to whole nanoseconds, and whether Ceiling
// must match it exactly: Base·m^(n-1) is computed with 256-bit mantissas,
// but Ceiling computes it in float64, so only a product of at most 53 bits
// must match exactly.
func exactCeiling(b Backoff, n int) (time.Duration, bool) {
	limit := limitOf(b)
	if b.Base <= 0 {
		return 0, true
	}
	bigLimit := big.NewInt(int64(limit))
	capped := func(v *big.Int) time.Duration {
		if v.Cmp(bigLimit) > 0 {
			return limit
		}
		return time.Duration(v.Int64())
	}
	base := big.NewInt(int64(b.Base))
	switch b.Strategy {
	case Linear:
		return capped(new(big.Int).Mul(base, big.NewInt(int64(n)))), true
	case Fibonacci:
		// F(n+1) with F(1) = F(2) = 1, until Base·F passes the limit.
		f, next := big.NewInt(1), big.NewInt(2)
		for i := 1; i < n && new(big.Int).Mul(base, f).Cmp(bigLimit) <= 0; i++ {
			f, next = next, new(big.Int).Add(f, next)
		}
		return capped(new(big.Int).Mul(base, f)), true
	case Exponential:
		m := b.Multiplier
		if m == 0 {
			m = 2
		}
		if math.IsNaN(m) || m <= 1 || n == 1 {
			return min(b.Base, limit), true
		}
		if math.IsInf(m, 1) {
			return limit, true
		}
		// Base·m^(n-1) by squaring, stopping once past the limit: every
		// factor left is at least 1.
		const prec = 256
		two64 := new(big.Float).SetPrec(prec).SetMantExp(big.NewFloat(1), 64)
		fLimit := new(big.Float).SetPrec(prec).SetInt(bigLimit)
		v := new(big.Float).SetPrec(prec).SetInt(base)
		sq := new(big.Float).SetPrec(prec).SetFloat64(m)
		for k := uint64(n - 1); k > 0; k >>= 1 {
			if k&1 == 1 {
				v.Mul(v, sq)
				if v.Cmp(fLimit) > 0 {
					return limit, true
				}
			}
			if k > 1 {
				sq.Mul(sq, sq)
				if sq.Cmp(two64) > 0 { // a later factor passes any limit
					return limit, true
				}
			}
		}
		// Ceiling multiplies in float64: exact only for an integer
		// multiplier and a product within float64's 53-bit mantissa.
		i, acc := v.Int(nil)
		return capped(i), acc == big.Exact && m == math.Trunc(m) && i.BitLen() <= 53
	}
	return min(b.Base, limit), true // Fixed, ServerProvided and unknown strategies
}

// For every strategy, jitter and attempt number: the ceiling is the
// strategy's value (computed apart with math/big), within [0, cap] (or
// [0, MaxInt64] without a cap) and non-decreasing in n; the delay is in
// [0, cap], never negative, and where each jitter says below the ceiling.
func TestPropertyCeilingAndDelay(t *testing.T) {
	checkCases(t, func(rt *rapid.T) {
		b := backoffs.Draw(rt, "backoff")
		n := attempts.Draw(rt, "n")
		prev := durations.Draw(rt, "prev")
		limit := limitOf(b)

		c := b.Ceiling(n)
		if c < 0 || c > limit {
			rt.Fatalf("%+v.Ceiling(%d) = %d, want within [0, %d]", b, n, c, limit)
		}
		if b.Base <= 0 && c != 0 {
			rt.Fatalf("%+v.Ceiling(%d) = %d, want 0 for a base ≤ 0", b, n, c)
		}
		want, exact := exactCeiling(b, n)
		if exact && c != want {
			rt.Fatalf("%+v.Ceiling(%d) = %d, want %d", b, n, c, want)
		}
		// Ceiling computes in float64 (53-bit mantissa): the conversions
		// and math.Log lose a few ulps, 2^-40 relative is ample. math.Pow
		// raises to the integer power n-1 by repeated squaring: each
		// squaring rounds (2^-53 relative) and every later squaring
		// doubles that error, about (n-1)·2^-52 at worst (3e-12 measured
		// for m = 1.0011, n = 24583). Allow 4 times that, and 1 ns.
		if tol := max(1, float64(want)*(0x1p-40+float64(n-1)*0x1p-50)); !exact && math.Abs(float64(c)-float64(want)) > tol {
			rt.Fatalf("%+v.Ceiling(%d) = %d, want %d within %.0f", b, n, c, want, tol)
		}
		if n < math.MaxInt {
			if next := b.Ceiling(n + 1); next < c {
				rt.Fatalf("%+v: Ceiling(%d) = %d > Ceiling(%d) = %d", b, n, c, n+1, next)
			}
		}
		if m := rapid.IntRange(n, math.MaxInt).Draw(rt, "m"); b.Ceiling(m) < c {
			rt.Fatalf("%+v: Ceiling(%d) = %d > Ceiling(%d) = %d", b, n, c, m, b.Ceiling(m))
		}

		r := newCheckedRand(rt)
		d := b.Delay(n, prev, r)
		if d < 0 || d > limit {
			rt.Fatalf("%+v.Delay(%d, %d) = %d, want within [0, %d]", b, n, prev, d, limit)
		}
		if b.Base <= 0 {
			if d != 0 || r.draws != 0 {
				rt.Fatalf("%+v.Delay(%d, %d) = %d after %d draws, want 0 with no draw", b, n, prev, d, r.draws)
			}
			return
		}
		// lo and hi bound the delay; with the lowest draw it is lo,
		// with the highest hi (hi-1 when [lo, hi] cannot be counted).
		var lo, hi time.Duration
		switch b.Jitter {
		case None:
			if d != c || r.draws != 0 {
				rt.Fatalf("%+v.Delay(%d) = %d after %d draws, want the ceiling %d with no draw", b, n, d, r.draws, c)
			}
			return
		case Equal:
			lo, hi = c-c/2, c // t/2, rounded up, + uniform[0, t/2]
		case Decorrelated:
			p := max(prev, b.Base)
			top := time.Duration(math.MaxInt64)
			if p <= math.MaxInt64/3 {
				top = 3 * p
			}
			lo, hi = min(b.Base, limit), min(top, limit)
		case Full:
			lo, hi = 0, c
		default: // an unknown jitter: only the bounds above hold
			return
		}
		if d < lo || d > hi {
			rt.Fatalf("%+v.Delay(%d, %d) = %d, want within [%d, %d]", b, n, prev, d, lo, hi)
		}
		switch {
		case r.mode == drawLowest && d != lo:
			rt.Fatalf("%+v.Delay(%d, %d) with draw 0 = %d, want %d", b, n, prev, d, lo)
		case r.mode == drawHighest && d != hi && !(lo == 0 && hi == math.MaxInt64 && d == hi-1):
			rt.Fatalf("%+v.Delay(%d, %d) with draw n-1 = %d, want %d", b, n, prev, d, hi)
		}
	})
}

var (
	propertyNow = time.Date(2026, time.March, 29, 1, 30, 0, 0, time.UTC)
	classNames  = []Class{
		Timeout, Unavailable, ConnectionRefused, ConnectionReset, DNSFailure, RateLimited, InvalidPayload,
		Unauthorized, Unsupported, Refused, Unknown, GroupTransient, GroupPermanent,
		"http_409", "http_429", "http_503", "http_501", "http_404",
	}
	classLists = rapid.OneOf(
		rapid.Just([]Class(nil)),
		rapid.SliceOfN(rapid.SampledFrom(classNames), 0, 3),
	)
	// retryAfters are Retry-After values of every form, valid or not.
	retryAfters = rapid.Custom(func(t *rapid.T) string {
		date := propertyNow.Add(time.Duration(rapid.Int64Range(-1e6, 1e11).Draw(t, "date offset")) * time.Second).UTC()
		switch rapid.IntRange(0, 6).Draw(t, "retry-after form") {
		case 0:
			return ""
		case 1:
			return strconv.FormatUint(rapid.Uint64().Draw(t, "seconds"), 10)
		case 2:
			return strconv.FormatInt(rapid.Int64Range(0, 7200).Draw(t, "seconds"), 10)
		case 3:
			return date.Format(http.TimeFormat)
		case 4:
			return date.Format(time.RFC850)
		case 5:
			return date.Format(time.ANSIC)
		}
		return rapid.SampledFrom([]string{"soon", "-5", "+5", "1.5", " 7 ", "\t30", "99999999999999999999999", "9223372037", "1e3"}).Draw(t, "junk")
	})
	failureErrs = rapid.Custom(func(t *rapid.T) error {
		switch rapid.IntRange(0, 7).Draw(t, "error kind") {
		case 0:
			return nil
		case 1:
			return fmt.Errorf("send: %w", context.Canceled)
		case 2:
			return &StatusError{Code: rapid.IntRange(100, 599).Draw(t, "code"), RetryAfter: retryAfters.Draw(t, "retry-after")}
		case 3:
			return fmt.Errorf("hue: %w", &StatusError{Code: rapid.SampledFrom([]int{429, 503, 409}).Draw(t, "code"), RetryAfter: retryAfters.Draw(t, "retry-after")})
		case 4:
			return fmt.Errorf("z2m: %w", rapid.SampledFrom([]error{ErrUnavailable, ErrRateLimited, ErrInvalidPayload, ErrUnauthorized, ErrUnsupported}).Draw(t, "sentinel"))
		case 5:
			return context.DeadlineExceeded
		case 6:
			return permanentErr(true)
		}
		return errors.New("something else")
	})
)

// For every policy and failure, Next gives up with Wait 0 and a known,
// non-empty reason, or retries with no reason and a wait within [0, cap]
// (within [0, MaxRetryAfter] for a Retry-After) that starts the next
// attempt before the deadline.
func TestPropertyNext(t *testing.T) {
	reasons := map[GiveUp]bool{
		GiveUpCanceled: true, GiveUpPermanent: true, GiveUpNotRetryable: true, GiveUpAttempts: true,
		GiveUpDeadline: true, GiveUpRetryAfter: true, GiveUpBudget: true,
	}
	checkCases(t, func(rt *rapid.T) {
		p := Policy{
			Backoff:       backoffs.Draw(rt, "backoff"),
			MaxAttempts:   rapid.IntRange(-1, 12).Draw(rt, "max attempts"),
			RetryOn:       classLists.Draw(rt, "retry on"),
			NeverRetry:    classLists.Draw(rt, "never retry"),
			MaxRetryAfter: durations.Draw(rt, "max retry-after"),
		}
		now := propertyNow.Add(time.Duration(rapid.Int64Range(-1e18, 1e18).Draw(rt, "now offset")))
		f := Failure{
			Attempt: attempts.Draw(rt, "attempt"),
			Err:     failureErrs.Draw(rt, "err"),
			Delay:   durations.Draw(rt, "delay"),
			Now:     now,
		}
		if rapid.Bool().Draw(rt, "has deadline") {
			f.Deadline = now.Add(durations.Draw(rt, "deadline offset"))
		}
		var budget *Budget
		if rapid.Bool().Draw(rt, "has budget") {
			budget = NewBudget(
				rapid.SampledFrom([]float64{-1, 0, 0.2, 1}).Draw(rt, "ratio"),
				rapid.IntRange(-1, 3).Draw(rt, "min retries"),
				rapid.SampledFrom([]time.Duration{0, s, 10 * s}).Draw(rt, "window"))
			for range rapid.IntRange(0, 20).Draw(rt, "firsts") {
				budget.FirstAttempt(now)
			}
			for range rapid.IntRange(0, 5).Draw(rt, "retries") {
				budget.TryRetry(now)
			}
		}

		d := p.Next(f, newCheckedRand(rt), budget)
		if !d.Retry {
			if d.Wait != 0 || d.Reason == "" || !reasons[d.Reason] {
				rt.Fatalf("Next(%+v) under %+v = %+v: a give-up wants Wait 0 and a known reason", f, p, d)
			}
			return
		}
		maxWait := limitOf(p.Backoff)
		if d.RetryAfter {
			maxWait = p.MaxRetryAfter
			if maxWait <= 0 {
				maxWait = time.Hour // DefaultMaxRetryAfter
			}
		}
		switch {
		case d.Reason != "":
			rt.Fatalf("Next = %+v: a retry wants no reason", d)
		case d.Wait < 0 || d.Wait > maxWait:
			rt.Fatalf("Next(%+v) under %+v = %+v: wait outside [0, %v]", f, p, d, maxWait)
		case !f.Deadline.IsZero() && !now.Add(d.Wait).Before(f.Deadline):
			rt.Fatalf("Next(%+v) = %+v: the next attempt starts at or after the deadline", f, d)
		case f.Attempt >= max(p.MaxAttempts, 1):
			rt.Fatalf("Next(%+v) under MaxAttempts %d = %+v: retried past the attempts", f, p.MaxAttempts, d)
		}
	})
}

// For any value, ParseRetryAfter's wait is in [0, max] (1 h for max ≤ 0),
// and 0 when the value is not valid.
func TestPropertyParseRetryAfter(t *testing.T) {
	values := rapid.OneOf(retryAfters, rapid.String(), rapid.StringMatching(`[ \t]*[+-]?[0-9]{0,25}(\.[0-9])?[ \t]*`))
	checkCases(t, func(rt *rapid.T) {
		v := values.Draw(rt, "value")
		maxWait := durations.Draw(rt, "max")
		now := propertyNow.Add(time.Duration(rapid.Int64Range(-1e18, 1e18).Draw(rt, "now offset")))
		wait, ok := ParseRetryAfter(v, now, maxWait)
		bound := maxWait
		if bound <= 0 {
			bound = time.Hour
		}
		if wait < 0 || wait > bound || (!ok && wait != 0) {
			rt.Fatalf("ParseRetryAfter(%q, %v, %v) = %v, %v; want a wait within [0, %v], 0 when not ok", v, now, maxWait, wait, ok, bound)
		}
	})
}
