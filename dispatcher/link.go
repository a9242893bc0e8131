package dispatcher

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// BridgeStateGrace is how long, after each (re)connect, a service's bridge
// state may stay unknown before Hearth assumes the bridge is up. A bridge
// that keeps its state retained (Zigbee2MQTT's bridge/state) answers at
// once; after a broker restart that lost it, the bridge announces itself
// when it reconnects. A bridge that never says is taken as up after this.
const BridgeStateGrace = 10 * time.Second

// link is whether commands through one service can reach its devices:
// Hearth's MQTT session is up and the bridge says it is online. Commands
// wait while it is down (or unknown, within BridgeStateGrace), costing no
// attempt; an attempt whose confirmation window saw the link come back up
// has an unknown delivery and is sent again.
type link struct {
	// heard counts the live reports the service passed on, of any of its
	// devices: a bridge that talks is up.
	heard atomic.Uint64

	mu    sync.Mutex
	state linkState
	since time.Time     // when state began
	up    chan struct{} // closed when the link comes up, then replaced
	gen   uint64        // counts state changes and resets
}

type linkState uint8

const (
	linkUnknown linkState = iota // since the last (re)connect, no word from the bridge
	linkUp
	linkDown
)

func newLink(now time.Time) *link {
	return &link{state: linkUnknown, since: now, up: make(chan struct{})}
}

// String names the state as the status endpoints show it.
func (s linkState) String() string {
	switch s {
	case linkUp:
		return "online"
	case linkDown:
		return "offline"
	}
	return "unknown"
}

// current returns the bridge's state as last heard.
func (l *link) current() linkState {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

// set records the bridge's own state. It reports whether the state
// changed.
func (l *link) set(online bool, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	next := linkDown
	if online {
		next = linkUp
	}
	if l.state == next {
		return false
	}
	if next == linkUp && l.state == linkUnknown && !now.Before(l.since.Add(BridgeStateGrace)) {
		// Already taken as up after the grace: nothing changes for the
		// commands, and attempts under way need no resend.
		l.state, l.since = next, now
		return true
	}
	l.state, l.since = next, now
	l.gen++
	if next == linkUp {
		close(l.up)
		l.up = make(chan struct{})
	}
	return true
}

// reset makes the bridge's state unknown: a new MQTT session starts, and
// what the last one said may be stale.
func (l *link) reset(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state, l.since = linkUnknown, now
	l.gen++
}

// ready reports whether commands may go out at now: the link is up, or
// unknown for BridgeStateGrace or longer. If not, changed is closed when
// the link comes up, and retry (zero while the link is down) is when an
// unknown state turns into an assumed up.
func (l *link) ready(now time.Time) (ok bool, changed <-chan struct{}, retry time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch l.state {
	case linkUp:
		return true, nil, time.Time{}
	case linkUnknown:
		if end := l.since.Add(BridgeStateGrace); now.Before(end) {
			return false, l.up, end
		}
		return true, nil, time.Time{}
	}
	return false, l.up, time.Time{}
}

// watch returns a channel closed the next time the link comes up, and the
// link's generation: if it differs later, the link went down or was reset
// in between.
func (l *link) watch() (<-chan struct{}, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.up, l.gen
}

// changedSince reports whether the link changed after generation gen.
func (l *link) changedSince(gen uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gen != gen
}

// awaitLink waits until the service's link is ready (see link.ready).
// ready is false when op's deadline passed first, or when the breaker
// changed (the caller asks it again); stop means t ended or
// ctx is done.
func (q *deviceQueue) awaitLink(ctx context.Context, t *task, deadline time.Time) (ready, stop bool) {
	for {
		now := q.d.now()
		if !now.Before(deadline) {
			return false, false // never send after the deadline, even if the link is up
		}
		var breakerChanged <-chan struct{}
		if q.svc.breaker != nil {
			// Transitions only: a probe's place freed by another command
			// changes nothing here (and would wake waiters in turn).
			breakerChanged = q.svc.breaker.watchMoves()
		}
		ok, changed, retryAt := q.svc.link.ready(now)
		if ok {
			return true, false
		}
		until := deadline
		if !retryAt.IsZero() && retryAt.Before(until) {
			until = retryAt
		}
		q.d.log.Info("waiting for the bridge", "op_id", t.opID, "device", q.dev.ID, "service", q.svc.Name, "until", until)
		switch q.pause(ctx, t, until, changed, breakerChanged) {
		case waitChanged:
			// The breaker may have opened (a replayed offline that
			// held): the caller asks it again.
			return false, false
		case waitStop:
			return false, true
		}
	}
}
