package main

import (
	"context"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// dueClock is the harness's fake clock: a clockwork.FakeClock that also
// knows when each of its timers and tickers is next due, so that a test
// moves time only once hearthd waits on a timer the move fires (see
// harness.advance). Counting waiters cannot tell two timers apart: an
// attempt's backoff and a witness read's wait are one waiter each, and a
// move meant for the backoff could pass the witness's instead, before the
// backoff is set.
//
// A timer is recorded and created under mu, and Advance moves the clock
// under mu, so a timer's recorded due time is the one the fake clock
// fires it at.
type dueClock struct {
	*clockwork.FakeClock
	mu  sync.Mutex
	due map[*dueEntry]struct{}
}

// dueEntry is one timer's (period 0) or ticker's due time.
type dueEntry struct {
	at     time.Time
	period time.Duration
}

func newDueClock(at time.Time) *dueClock {
	return &dueClock{FakeClock: clockwork.NewFakeClockAt(at), due: map[*dueEntry]struct{}{}}
}

// record adds a timer due d from now (a ticker if period > 0); mu is held.
func (c *dueClock) record(d, period time.Duration) *dueEntry {
	e := &dueEntry{at: c.FakeClock.Now().Add(d), period: period}
	c.due[e] = struct{}{}
	return e
}

func (c *dueClock) forget(e *dueEntry) {
	c.mu.Lock()
	delete(c.due, e)
	c.mu.Unlock()
}

// After records its timer; it is never stopped, and is forgotten once due.
func (c *dueClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.record(d, 0)
	return c.FakeClock.After(d)
}

// Sleep waits on an After, so that mu is not held while it sleeps.
func (c *dueClock) Sleep(d time.Duration) { <-c.After(d) }

func (c *dueClock) NewTimer(d time.Duration) clockwork.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &dueTimer{Timer: c.FakeClock.NewTimer(d), c: c, e: c.record(d, 0)}
}

func (c *dueClock) AfterFunc(d time.Duration, f func()) clockwork.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &dueTimer{Timer: c.FakeClock.AfterFunc(d, f), c: c, e: c.record(d, 0)}
}

func (c *dueClock) NewTicker(d time.Duration) clockwork.Ticker {
	c.mu.Lock()
	defer c.mu.Unlock()
	return &dueTicker{Ticker: c.FakeClock.NewTicker(d), c: c, e: c.record(d, d)}
}

// Advance moves the fake clock by d under mu (see dueClock).
func (c *dueClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.FakeClock.Advance(d)
}

// dueWithin reports whether a timer or ticker is due within d from now,
// so that moving the clock by d fires it. It forgets the timers that are
// past due (they fired).
func (c *dueClock) dueWithin(d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.FakeClock.Now()
	found := false
	for e := range c.due {
		at := e.at
		if e.period > 0 && !at.After(now) {
			at = at.Add(e.period * (now.Sub(at)/e.period + 1)) // the next tick
		}
		switch {
		case !at.After(now):
			delete(c.due, e)
		case !at.After(now.Add(d)):
			found = true
		}
	}
	return found
}

// awaitDue waits in real time, until ctx ends, for a timer due within d.
func (c *dueClock) awaitDue(ctx context.Context, d time.Duration) error {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for !c.dueWithin(d) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

type dueTimer struct {
	clockwork.Timer
	c *dueClock
	e *dueEntry
}

func (t *dueTimer) Stop() bool {
	t.c.forget(t.e)
	return t.Timer.Stop()
}

func (t *dueTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	delete(t.c.due, t.e)
	t.e = t.c.record(d, 0)
	return t.Timer.Reset(d)
}

type dueTicker struct {
	clockwork.Ticker
	c *dueClock
	e *dueEntry
}

func (t *dueTicker) Stop() {
	t.c.forget(t.e)
	t.Ticker.Stop()
}

func (t *dueTicker) Reset(d time.Duration) {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	delete(t.c.due, t.e)
	t.e = t.c.record(d, d)
	t.Ticker.Reset(d)
}

// dueIn reports whether a timer is due exactly d from now: for a test
// that must know one particular timer is set (an attempt's timeout) while
// another, sooner, is pending (a witness read's wait, never stopped).
func (c *dueClock) dueIn(d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := c.FakeClock.Now().Add(d)
	for e := range c.due {
		if e.period == 0 && e.at.Equal(at) {
			return true
		}
	}
	return false
}
