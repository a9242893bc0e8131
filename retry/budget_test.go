package retry

import (
	"math"
	"slices"
	"sync"
	"testing"
	"time"
)

// epoch is a fake clock's start, on a whole multiple of every window below
// (Unix time 1767225600 s), so that the budget's tenths of a window begin
// on whole tenths after it.
var epoch = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// events are the calls on a budget in a simulation, in time order.
type events struct {
	at     []time.Time
	first  []bool // a first attempt; else a granted retry
	firsts []int  // firsts[i] is how many of the first i events are first attempts
}

func (ev *events) add(at time.Time, first bool) {
	if len(ev.firsts) == 0 {
		ev.firsts = []int{0}
	}
	n := ev.firsts[len(ev.firsts)-1]
	if first {
		n++
	}
	ev.at, ev.first, ev.firsts = append(ev.at, at), append(ev.first, first), append(ev.firsts, n)
}

// count returns the first attempts and granted retries at times in
// [from, to], or (from, to] when open.
func (ev *events) count(from, to time.Time, open bool) (firsts, retries int) {
	lo, _ := slices.BinarySearchFunc(ev.at, from, func(a, b time.Time) int {
		if open && a.Equal(b) {
			return -1
		}
		return a.Compare(b)
	})
	hi, _ := slices.BinarySearchFunc(ev.at, to, func(a, b time.Time) int {
		if a.Equal(b) {
			return -1
		}
		return a.Compare(b)
	})
	firsts = ev.firsts[hi] - ev.firsts[lo]
	return firsts, hi - lo - firsts
}

// A failing service: 100 first attempts a second for 30 s, each failing
// and asking for a retry. The budget grants about a fifth of them, and
// never more than the window allows.
func TestBudgetUnderAFailingService(t *testing.T) {
	const (
		ratio      = 0.2
		minRetries = 3
		window     = 10 * time.Second
		tenth      = window / 10
		rate       = 100 // first attempts a second
		run        = 30 * time.Second
	)
	for _, offset := range []time.Duration{0, 999 * time.Millisecond} {
		b := NewBudget(ratio, minRetries, window)
		start := epoch.Add(offset)
		var ev events
		var grants []time.Time
		firsts := 0
		for now := start; now.Before(start.Add(run)); now = now.Add(time.Second / rate) {
			b.FirstAttempt(now)
			firsts++
			ev.add(now, true)
			if b.TryRetry(now) {
				ev.add(now, false)
				grants = append(grants, now)
			}
		}
		if firsts != 3000 {
			t.Fatalf("simulated %d first attempts, want 3000", firsts)
		}

		// Over the whole run: about Ratio of the first attempts, plus at
		// most the floor, and not trivially few.
		if got, most, least := len(grants), ratio*float64(firsts)+minRetries, 0.15*float64(firsts); float64(got) > most || float64(got) <= least {
			t.Errorf("offset %v: granted %d retries for %d first attempts, want within (%v, %v]", offset, got, firsts, least, most)
		}

		for _, g := range grants {
			// Whatever the alignment of its tenths, the window the
			// budget counts at a grant at g covers at least the last
			// 0.9·Window and at most the last Window: the retries of
			// the last 0.9·Window fit the allowance of the last Window.
			f, _ := ev.count(g.Add(-window), g, true)
			_, r := ev.count(g.Add(-window+tenth), g, false)
			if allowed := max(minRetries, ratio*float64(f)); float64(r) > allowed {
				t.Fatalf("offset %v: at +%v, %d retries in the last 0.9·window > max(%d, %v·%d firsts in the last window)", offset, g.Sub(start), r, minRetries, ratio, f)
			}
			if offset != 0 {
				continue
			}
			// With tenths starting on whole tenths after epoch, the
			// window at g is exactly the ten tenths ending with g's own:
			// from the start of g's tenth less nine tenths, to g.
			from := epoch.Add(g.Sub(epoch).Truncate(tenth) - 9*tenth)
			f, r = ev.count(from, g, false)
			if allowed := max(minRetries, ratio*float64(f)); float64(r) > allowed {
				t.Fatalf("at +%v, %d retries since %v > max(%d, %v·%d firsts)", g.Sub(start), r, from.Sub(start), minRetries, ratio, f)
			}
		}
	}
}

// A quiet service, one first attempt a minute: the floor lets each of its
// failures retry, up to MinRetries within a window.
func TestBudgetFloorLetsAQuietServiceRetry(t *testing.T) {
	b := NewBudget(0.2, 3, 10*time.Second)
	for i := range 60 {
		now := epoch.Add(time.Duration(i) * time.Minute)
		b.FirstAttempt(now)
		if !b.TryRetry(now) {
			t.Fatalf("minute %d: retry refused after one first attempt, want granted by the floor of 3", i)
		}
	}
	now := epoch.Add(time.Hour)
	b.FirstAttempt(now)
	for i := 1; i <= 3; i++ {
		if !b.TryRetry(now.Add(time.Duration(i) * time.Second)) {
			t.Errorf("retry %d within the window refused, want granted (floor 3)", i)
		}
	}
	if b.TryRetry(now.Add(4 * time.Second)) {
		t.Errorf("retry 4 within the window granted, want refused: max(3, 0.2·1) = 3")
	}
}

// Deposits and withdrawals leave the window: a budget spent by a burst
// allows the floor again once the burst has left, after at least 0.9 and
// at most 1 Window whatever the alignment.
func TestBudgetCountsLeaveAfterTheWindow(t *testing.T) {
	const window = 10 * time.Second
	for _, offset := range []time.Duration{0, 999 * time.Millisecond, 5*time.Second + 1} {
		b := NewBudget(0.2, 3, window)
		t0 := epoch.Add(offset)
		for range 100 {
			b.FirstAttempt(t0)
		}
		granted := 0
		for b.TryRetry(t0) {
			granted++
			if granted > 1000 {
				t.Fatal("the budget never refused")
			}
		}
		if granted != 20 {
			t.Errorf("offset %v: granted %d retries after 100 first attempts, want 20 (0.2·100)", offset, granted)
		}
		if b.TryRetry(t0.Add(window*9/10 - 1)) {
			t.Errorf("offset %v: retry granted 0.9·window after the burst, want refused: the burst is still counted", offset)
		}
		for i := 1; i <= 3; i++ {
			if !b.TryRetry(t0.Add(window)) {
				t.Errorf("offset %v: retry %d one window after the burst refused, want granted by the floor", offset, i)
			}
		}
		if b.TryRetry(t0.Add(window)) {
			t.Errorf("offset %v: retry 4 one window after the burst granted, want refused (floor 3, no first attempts)", offset)
		}
	}
}

func TestBudgetParameters(t *testing.T) {
	tests := []struct {
		name            string
		b               *Budget
		firsts          int
		want            int // retries granted at one instant after firsts
		wantAfterWindow int // and 10 s later, with no first attempts
	}{
		{"defaults: floor 3", NewBudget(0, 0, 0), 1, 3, 3},
		{"defaults: ratio 0.2", NewBudget(0, 0, 0), 100, 20, 3},
		{"ratio 0.5, floor 1", NewBudget(0.5, 1, time.Minute), 10, 5, 0}, // a minute's window: all still counted
		{"negative ratio is 0: only the floor", NewBudget(-1, 5, 10*s), 1000, 5, 5},
		{"negative floor is 0", NewBudget(0.5, -1, 10*s), 0, 0, 0},
		{"negative floor, ratio 0.5 of 3", NewBudget(0.5, -1, 10*s), 3, 1, 0},
	}
	for _, tc := range tests {
		for range tc.firsts {
			tc.b.FirstAttempt(epoch)
		}
		got := 0
		for got <= 2000 && tc.b.TryRetry(epoch) {
			got++
		}
		if got != tc.want {
			t.Errorf("%s: granted %d retries after %d first attempts, want %d", tc.name, got, tc.firsts, tc.want)
		}
		later := epoch.Add(10 * time.Second)
		got = 0
		for got <= 2000 && tc.b.TryRetry(later) {
			got++
		}
		if got != tc.wantAfterWindow {
			t.Errorf("%s: granted %d retries 10s later, want %d", tc.name, got, tc.wantAfterWindow)
		}
	}
}

func TestNilBudgetAllowsEveryRetry(t *testing.T) {
	var b *Budget
	b.FirstAttempt(epoch) // must not panic
	for i := range 1000 {
		if !b.TryRetry(epoch) {
			t.Fatalf("nil budget refused retry %d, want every retry allowed", i+1)
		}
	}
}

// Four goroutines, each recording first attempts and asking for retries at
// one instant: under -race the budget is race-free, and it grants exactly
// 0.2·4000 = 800 retries: each retry request follows its own first attempt,
// so the k-th request sees at least k first attempts.
func TestBudgetConcurrentUse(t *testing.T) {
	b := NewBudget(0.2, 3, 10*time.Second)
	const workers, each = 4, 1000
	var wg sync.WaitGroup
	granted := make([]int, workers)
	for w := range workers {
		wg.Go(func() {
			for range each {
				b.FirstAttempt(epoch)
				if b.TryRetry(epoch) {
					granted[w]++
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for _, g := range granted {
		total += g
	}
	if total != 800 {
		t.Errorf("granted %d retries to %d concurrent first attempts, want 800", total, workers*each)
	}
}

// Regression: 0.29 × 100 is 28.999999999999996 in floating point; the
// budget still allows the 29 retries the ratio promises.
func TestBudgetRatioProductIsNotRoundedDown(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	b := NewBudget(0.29, 1, 10*time.Second)
	for range 100 {
		b.FirstAttempt(now)
	}
	got := 0
	for b.TryRetry(now) {
		got++
	}
	if got != 29 {
		t.Errorf("retries allowed for 100 first attempts at ratio 0.29: %d, want 29", got)
	}
}

// Tokens says what TryRetry would allow, without spending it: the floor on
// a quiet service, Ratio per first attempt above it, one less per retry,
// none below zero, and all back once the window has passed.
func TestBudgetTokensTellWhatIsLeft(t *testing.T) {
	b := NewBudget(0.5, 2, 10*time.Second)
	steps := []struct {
		what string
		do   func()
		at   time.Time
		want float64
	}{
		{"quiet: the floor", func() {}, epoch, 2},
		{"6 first attempts: 0.5·6", func() {
			for range 6 {
				b.FirstAttempt(epoch)
			}
		}, epoch, 3},
		{"one retry spent", func() { b.TryRetry(epoch) }, epoch.Add(time.Second), 2},
		{"two more spent, one refused", func() {
			b.TryRetry(epoch)
			b.TryRetry(epoch)
			b.TryRetry(epoch)
		}, epoch.Add(time.Second), 0},
		{"the window passed", func() {}, epoch.Add(11 * time.Second), 2},
	}
	for _, s := range steps {
		s.do()
		if got := b.Tokens(s.at); got != s.want {
			t.Errorf("%s: Tokens = %v, want %v", s.what, got, s.want)
		}
	}
	if got := (*Budget)(nil).Tokens(epoch); !math.IsInf(got, 1) {
		t.Errorf("nil budget: Tokens = %v, want +Inf", got)
	}
}
