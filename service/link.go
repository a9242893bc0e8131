// Package service keeps what Hearth knows of the health of one service (a
// bridge, or a cloud service automations depend on) as the commands
// through it share it: its Link, whether commands can reach its devices,
// and its circuit Breaker, with the watchers and probe rules around
// package breaker's state machine. Time is passed in; the channels it
// hands out are closed at each change, then replaced.
package service

import (
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

// Link is whether commands through one service can reach its devices:
// Hearth's MQTT session is up and the bridge says it is online. Commands
// wait while it is down (or unknown, within BridgeStateGrace), costing no
// attempt; an attempt whose confirmation window saw the link come back up
// has an unknown delivery and is sent again.
type Link struct {
	// Heard counts the live reports the service passed on, of any of its
	// devices: a bridge that talks is up.
	Heard atomic.Uint64

	mu    sync.Mutex
	state State
	since time.Time     // when state began
	up    chan struct{} // closed when the link comes up, then replaced
	gen   uint64        // counts state changes and resets
}

// State is what a service's bridge last said of itself.
type State uint8

const (
	Unknown State = iota // since the last (re)connect, no word from the bridge
	Up
	Down
)

// NewLink returns a link whose state is Unknown since now.
func NewLink(now time.Time) *Link {
	return &Link{state: Unknown, since: now, up: make(chan struct{})}
}

// String names the state as the status endpoints show it: online,
// offline or unknown.
func (s State) String() string {
	switch s {
	case Up:
		return "online"
	case Down:
		return "offline"
	}
	return "unknown"
}

// Current returns the bridge's state as last heard.
func (l *Link) Current() State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

// Set records the bridge's own state at now. It reports whether the
// state changed.
func (l *Link) Set(online bool, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	next := Down
	if online {
		next = Up
	}
	if l.state == next {
		return false
	}
	if next == Up && l.state == Unknown && !now.Before(l.since.Add(BridgeStateGrace)) {
		// Already taken as up after the grace: nothing changes for the
		// commands, and attempts under way need no resend.
		l.state, l.since = next, now
		return true
	}
	l.state, l.since = next, now
	l.gen++
	if next == Up {
		close(l.up)
		l.up = make(chan struct{})
	}
	return true
}

// Reset makes the bridge's state unknown: a new MQTT session starts, and
// what the last one said may be stale.
func (l *Link) Reset(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.state, l.since = Unknown, now
	l.gen++
}

// Ready reports whether commands may go out at now: the link is up, or
// unknown for BridgeStateGrace or longer. If not, changed is closed when
// the link comes up, and retry (zero while the link is down) is when an
// unknown state turns into an assumed up.
func (l *Link) Ready(now time.Time) (ok bool, changed <-chan struct{}, retry time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch l.state {
	case Up:
		return true, nil, time.Time{}
	case Unknown:
		if end := l.since.Add(BridgeStateGrace); now.Before(end) {
			return false, l.up, end
		}
		return true, nil, time.Time{}
	}
	return false, l.up, time.Time{}
}

// Watch returns a channel closed the next time the link comes up, and the
// link's generation: if it differs later, the link went down or was reset
// in between.
func (l *Link) Watch() (<-chan struct{}, uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.up, l.gen
}

// ChangedSince reports whether the link changed after generation gen.
func (l *Link) ChangedSince(gen uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.gen != gen
}
