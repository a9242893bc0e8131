package retry

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// Pearson's chi-square test of jittered delays against the uniform law on
// the integers of [lo, hi].
//
// k = 20 bins of (almost) equal width and N = 10^5 draws put 5,000 in each
// bin, far above the 5 the χ² approximation needs. Under the uniform law
// the statistic follows χ² with ν = k-1 = 19 degrees of freedom; we reject
// when it exceeds the upper 1-α quantile with α = 10^-3, so a correct
// jitter with a random seed would fail one run in a thousand. The seed is
// fixed, so the test is deterministic, and the critical value is derived,
// not tuned to the seed.
const (
	chiBins    = 20
	chiSamples = 100_000
	chiAlpha   = 1e-3
)

// chiCritical returns the upper 1-alpha quantile of χ² with nu degrees of
// freedom by the Wilson–Hilferty approximation (1931), which treats
// (χ²/ν)^(1/3) as normal with mean 1 - 2/(9ν) and variance 2/(9ν):
//
//	q ≈ ν·(1 - 2/(9ν) + z·√(2/(9ν)))³, z = Φ⁻¹(1-α) = √2·erf⁻¹(1-2α).
func chiCritical(nu int, alpha float64) float64 {
	z := math.Sqrt2 * math.Erfinv(1-2*alpha)
	v := 2 / (9 * float64(nu))
	return float64(nu) * math.Pow(1-v+z*math.Sqrt(v), 3)
}

// chiSquare returns Pearson's statistic of samples against the uniform law
// on the integers of [lo, hi], counted in chiBins bins: value x falls in
// bin ⌊(x-lo)·k/span⌋, span = hi-lo+1, and bin i holds exactly the
// integers from ⌈i·span/k⌉ to ⌈(i+1)·span/k⌉-1 above lo.
func chiSquare(t *testing.T, samples []time.Duration, lo, hi time.Duration) float64 {
	t.Helper()
	span := int64(hi-lo) + 1
	k := int64(chiBins)
	var observed [chiBins]int
	for _, x := range samples {
		if x < lo || x > hi {
			t.Fatalf("sample %d outside [%d, %d]", x, lo, hi)
		}
		observed[int64(x-lo)*k/span]++
	}
	ceilDiv := func(a, b int64) int64 { return (a + b - 1) / b }
	stat := 0.0
	for i := range k {
		width := ceilDiv((i+1)*span, k) - ceilDiv(i*span, k)
		expected := float64(len(samples)) * float64(width) / float64(span)
		d := float64(observed[i]) - expected
		stat += d * d / expected
	}
	return stat
}

// The approximation against the published value: χ²(19) at 0.999 is
// 43.820 (NIST/SEMATECH e-Handbook of Statistical Methods, §1.3.6.7.4).
func TestChiCritical(t *testing.T) {
	if got, want := chiCritical(19, 0.001), 43.820; math.Abs(got-want) > 0.005*want {
		t.Errorf("chiCritical(19, 0.001) = %.3f, want %.3f within 0.5%%", got, want)
	}
}

// lowerHalf is a broken source that only draws from the lower half of
// [0, n).
type lowerHalf struct{ r *rand.Rand }

func (l lowerHalf) Int64N(n int64) int64 { return l.r.Int64N((n + 1) / 2) }

// shortTop is a broken source that never draws from the top tenth.
type shortTop struct{ r *rand.Rand }

func (s shortTop) Int64N(n int64) int64 { return s.r.Int64N(max(n/10*9, 1)) }

func TestJitterIsUniform(t *testing.T) {
	critical := chiCritical(chiBins-1, chiAlpha)
	// Ceilings 1, 2, 4, then the cap 5 s - 1 ns: t = 4999999999 ns.
	exp := Backoff{Base: s, Multiplier: 2, Cap: 5*s - 1}
	const ceiling = 5*s - 1
	tests := []struct {
		name   string
		b      Backoff
		n      int
		prev   time.Duration
		lo, hi time.Duration // the law's interval
	}{
		{"full: uniform[0, t]", with(exp, Full), 4, 0, 0, ceiling},
		{"equal: t/2 + uniform[0, t/2]", with(exp, Equal), 9, 0, ceiling - ceiling/2, ceiling},
		{"decorrelated: uniform[base, 3·prev]", Backoff{Base: s, Cap: time.Minute, Jitter: Decorrelated}, 2, 2*s + 13, s, 6*s + 39},
	}
	draw := func(b Backoff, n int, prev time.Duration, r Rand) []time.Duration {
		samples := make([]time.Duration, chiSamples)
		for i := range samples {
			samples[i] = b.Delay(n, prev, r)
		}
		return samples
	}
	for i, tc := range tests {
		r := rand.New(rand.NewPCG(20260101, uint64(i)))
		stat := chiSquare(t, draw(tc.b, tc.n, tc.prev, r), tc.lo, tc.hi)
		t.Logf("%s: χ² = %.2f, critical %.2f", tc.name, stat, critical)
		if stat > critical {
			t.Errorf("%s: χ² = %.2f over %d bins, want ≤ %.2f (α = %g): not uniform on [%v, %v]", tc.name, stat, chiBins, critical, chiAlpha, tc.lo, tc.hi)
		}
	}

	// The same test must reject a source that is clearly not uniform,
	// drawn through the same full jitter; else it cannot fail.
	broken := []struct {
		name string
		r    Rand
	}{
		{"lower half only", lowerHalf{rand.New(rand.NewPCG(20260101, 3))}},
		{"never the top tenth", shortTop{rand.New(rand.NewPCG(20260101, 3))}},
	}
	for _, bc := range broken {
		samples := make([]time.Duration, chiSamples)
		for i := range samples {
			samples[i] = with(exp, Full).Delay(4, 0, bc.r)
		}
		stat := chiSquare(t, samples, 0, ceiling)
		t.Logf("broken source, %s: χ² = %.2f, critical %.2f", bc.name, stat, critical)
		if stat <= critical {
			t.Errorf("broken source, %s: χ² = %.2f ≤ %.2f, want the test to reject it", bc.name, stat, critical)
		}
	}
}
