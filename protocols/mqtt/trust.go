package mqtt

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Trust tells a bridge adapter whether a message comes from the bridge: a
// broker that stamps every message with its publisher's authenticated
// username in a user property (the embedded broker's
// broker.Options.StampUsernameProperty) makes the stamp the proof. The
// zero value, and any Trust without Publisher, trusts every message.
// Safe for concurrent use; set its fields before the first Trusted.
type Trust struct {
	// Publisher is the only username whose messages are trusted; ""
	// trusts all.
	Publisher string
	// StampProperty is the user property that carries the username.
	StampProperty string
	// Logger receives a warning for a dropped message at most once per
	// untrustedLogInterval, with the count of those in between; nil
	// discards them.
	Logger *slog.Logger
	// What names the adapter in the warning ("zigbee2mqtt").
	What string

	dropped atomic.Uint64
	mu      sync.Mutex
	logged  time.Time
	since   uint64
}

// untrustedLogInterval spaces the warnings of dropped messages.
const untrustedLogInterval = time.Minute

// Trusted reports whether m is the publisher's: always without Publisher;
// else only when m's last StampProperty value is Publisher (a missing
// stamp is an anonymous or unverified publisher). A message it does not
// trust is counted (Dropped) and warned of, rate-limited.
func (t *Trust) Trusted(m Message) bool {
	if t.Publisher == "" {
		return true
	}
	stamp, ok := m.UserProperty(t.StampProperty)
	if ok && stamp == t.Publisher {
		return true
	}
	t.dropped.Add(1)
	t.mu.Lock()
	t.since++
	now := time.Now()
	if !t.logged.IsZero() && now.Sub(t.logged) < untrustedLogInterval {
		t.mu.Unlock()
		return false
	}
	n := t.since
	t.since, t.logged = 0, now
	t.mu.Unlock()
	if t.Logger != nil {
		t.Logger.Warn(t.What+": dropped a message on the bridge's topics that the bridge's account did not publish; it confirms nothing",
			"topic", m.Topic, "publisher", stamp, "want_publisher", t.Publisher, "retained", m.Retained, "dropped_since_last_warning", n)
	}
	return false
}

// Dropped returns how many messages Trusted refused.
func (t *Trust) Dropped() uint64 { return t.dropped.Load() }
