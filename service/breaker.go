package service

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hearthd/hearth/breaker"
)

// Breaker is a service's circuit breaker as the commands through the
// service share it: package breaker's state machine, channels that wake
// whoever waits on it, a replayed offline's deferral, and the probe rules
// (Vouch, WaitForProbe, Spare).
type Breaker struct {
	*breaker.Breaker

	mu      sync.Mutex
	changed chan struct{} // closed at each transition, probe admitted or place freed; then replaced
	moved   chan struct{} // closed at each transition only, then replaced
	// offlineDue, if not zero, is when a replayed offline takes effect
	// unless the bridge says online first.
	offlineDue time.Time
	// The probe rules: vouched is the start of a half-open period the
	// bridge's own online began (a restart); spared, the start of the
	// half-open period whose one lost probe was spared; waiters counts,
	// by device, the commands waiting for a probe's place.
	vouched, spared time.Time
	waiters         map[string]int

	// Held counts the commands waiting, reported queued, for the open
	// breaker to let them through (the service holds).
	Held atomic.Int64
}

// NewBreaker returns the breaker of opts. opts.OnTransition, if set, sees
// every transition before the breaker's watchers are woken.
func NewBreaker(opts breaker.Options) *Breaker {
	b := &Breaker{changed: make(chan struct{}), moved: make(chan struct{})}
	theirs := opts.OnTransition
	opts.OnTransition = func(tr breaker.Transition) {
		if theirs != nil {
			theirs(tr)
		}
		b.transitioned()
	}
	b.Breaker = breaker.New(opts)
	return b
}

// Vouch records that the half-open period begun at since follows the
// bridge's own online report.
func (b *Breaker) Vouch(since time.Time) {
	b.mu.Lock()
	b.vouched = since
	b.mu.Unlock()
}

// WaitForProbe counts a command of device dev waiting for a probe's
// place (n = 1) or no longer (n = -1).
func (b *Breaker) WaitForProbe(dev string, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waiters == nil {
		b.waiters = map[string]int{}
	}
	b.waiters[dev] += n
	if b.waiters[dev] <= 0 {
		delete(b.waiters, dev)
	}
}

// Waiting returns how many commands of device dev wait for a probe's
// place.
func (b *Breaker) Waiting(dev string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.waiters[dev]
}

// Spare reports whether the lost probe of device dev, in the half-open
// period begun at since, is spared: the period follows the bridge's own
// online, no probe of it was spared yet, and a command of another device
// waits to be the next probe. It records the spare.
func (b *Breaker) Spare(dev string, since time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.vouched.Equal(since) || b.spared.Equal(since) {
		return false
	}
	for other, n := range b.waiters {
		if other != dev && n > 0 {
			b.spared = since
			return true
		}
	}
	return false
}

// DeferOffline sets (or, with the zero time, cancels) the time a
// replayed offline takes effect, and wakes the watchers (the breaker's
// clock).
func (b *Breaker) DeferOffline(due time.Time) {
	b.mu.Lock()
	b.offlineDue = due
	b.mu.Unlock()
	b.Signal()
}

// DueOffline returns when a deferred offline takes effect; zero if none.
func (b *Breaker) DueOffline() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.offlineDue
}

// TakeDueOffline clears the deferred offline due at due and reports true,
// or reports false if it was cancelled or replaced meanwhile.
func (b *Breaker) TakeDueOffline(due time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.offlineDue.Equal(due) {
		return false
	}
	b.offlineDue = time.Time{}
	return true
}

// Watch returns a channel closed at the breaker's next transition, or
// when a probe is admitted or its place freed (Signal).
func (b *Breaker) Watch() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changed
}

// WatchMoves returns a channel closed at the breaker's next transition
// only.
func (b *Breaker) WatchMoves() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.moved
}

// Signal wakes the watchers: a probe was admitted or its place freed.
func (b *Breaker) Signal() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.changed)
	b.changed = make(chan struct{})
}

// transitioned wakes every watcher, those of moves too.
func (b *Breaker) transitioned() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.changed)
	b.changed = make(chan struct{})
	close(b.moved)
	b.moved = make(chan struct{})
}
