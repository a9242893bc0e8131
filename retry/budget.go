package retry

import (
	"math"
	"sync"
	"time"
)

// Budget limits a service's retries to a fraction of its first attempts
// over a sliding window, with a floor so that a quiet service can still
// retry: a retry is allowed when, counting it, the retries within the
// window are at most max(MinRetries, Ratio·first attempts within it).
// This caps how much load retries add when a whole bridge fails, as the
// retry budgets of Envoy, Finagle and gRPC do.
//
// The window slides in tenths of Window: it is the current tenth and the
// nine before, so between 0.9 and 1 Window long. It is a token bucket whose
// deposits expire: each first attempt deposits
// Ratio of a token, each retry withdraws one, and both leave the window
// after Window. Time comes from the caller, and must not go back (a
// monotonic clock). A Budget is safe for concurrent
// use; a nil *Budget allows every retry.
type Budget struct {
	ratio      float64
	minRetries int
	window     time.Duration

	mu    sync.Mutex
	slots [budgetSlots]budgetSlot
}

// budgetSlots is how many slices the window is counted in: the window
// slides in steps of Window/budgetSlots.
const budgetSlots = 10

type budgetSlot struct {
	start   int64 // the slot's start, in steps since the zero time
	firsts  int
	retries int
}

// The defaults of a service's retry budget.
const (
	DefaultBudgetRatio      = 0.2
	DefaultBudgetMinRetries = 3
	DefaultBudgetWindow     = 10 * time.Second
)

// NewBudget returns a budget allowing, within any window, max(minRetries,
// ratio·first attempts) retries. Zero values take the defaults (0.2, 3,
// 10 s); a negative ratio or minRetries counts as 0.
func NewBudget(ratio float64, minRetries int, window time.Duration) *Budget {
	if ratio == 0 {
		ratio = DefaultBudgetRatio
	}
	if minRetries == 0 {
		minRetries = DefaultBudgetMinRetries
	}
	if window <= 0 {
		window = DefaultBudgetWindow
	}
	return &Budget{ratio: max(ratio, 0), minRetries: max(minRetries, 0), window: window}
}

// FirstAttempt records a first attempt at now: it adds Ratio to the
// retries the window allows.
func (b *Budget) FirstAttempt(now time.Time) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.slot(now).firsts++
}

// TryRetry reports whether a retry at now fits the budget, and if so
// counts it.
func (b *Budget) TryRetry(now time.Time) bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.slot(now)
	firsts, retries := b.counts(now)
	allowed := max(float64(b.minRetries), b.ratio*float64(firsts))
	// The tolerance keeps a product such as 0.29·100 = 28.999999999999996
	// from costing a retry.
	if float64(retries+1) > allowed+1e-9 {
		return false
	}
	s.retries++
	return true
}

func (b *Budget) step() int64 {
	return max(int64(b.window/budgetSlots), 1)
}

// slot returns the slot counting now, emptied if it held an older step.
func (b *Budget) slot(now time.Time) *budgetSlot {
	at := now.UnixNano() / b.step()
	s := &b.slots[(at%budgetSlots+budgetSlots)%budgetSlots]
	if s.start != at {
		*s = budgetSlot{start: at}
	}
	return s
}

// counts sums the slots within the window ending at now.
func (b *Budget) counts(now time.Time) (firsts, retries int) {
	at := now.UnixNano() / b.step()
	for i := range b.slots {
		s := &b.slots[i]
		if s.start > at-budgetSlots && s.start <= at {
			firsts += s.firsts
			retries += s.retries
		}
	}
	return firsts, retries
}

// Tokens returns the retries the budget would allow at now: within the
// window ending at now, max(MinRetries, Ratio·first attempts) less the
// retries counted, never below 0. It may be fractional (Ratio of a token
// per first attempt), and it only reads: it counts nothing. A nil
// *Budget allows every retry and has +Inf tokens.
func (b *Budget) Tokens(now time.Time) float64 {
	if b == nil {
		return math.Inf(1)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	firsts, retries := b.counts(now)
	return max(max(float64(b.minRetries), b.ratio*float64(firsts))-float64(retries), 0)
}
