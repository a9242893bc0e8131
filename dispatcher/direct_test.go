package dispatcher

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/retry"
)

// A Direct service (an HTTP service) is online from the start and stays
// so across Hearth's MQTT sessions and losses; a bridge's state is unknown
// after each.
func TestDirectServiceLinkIgnoresTheMQTTSession(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC))
	policy := retry.Policy{MaxAttempts: 3, AttemptTimeout: 5 * time.Second, Backoff: retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 10 * time.Second}}
	brk := func() *breaker.Options {
		return &breaker.Options{OpenFor: func(int) time.Duration { return time.Minute }}
	}
	d, err := New(Options{
		Services: []Service{
			{Name: "zb", Bridge: &scriptedBridge{clock: clock, msgs: make(chan bridgeMsg, 8)}, Policy: policy, Breaker: brk()},
			{Name: "rest", Bridge: &scriptedBridge{clock: clock, msgs: make(chan bridgeMsg, 8)}, Policy: policy, Breaker: brk(), Direct: true},
		},
		Journal:   &memJournal{},
		Publisher: nopPublisher{},
		Clock:     clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	links := func() (string, string) {
		b := d.Breakers()
		return b[0].Bridge, b[1].Bridge
	}
	if zb, rest := links(); zb != "unknown" || rest != "online" {
		t.Fatalf("at the start: zb %s, rest %s; want unknown, online", zb, rest)
	}
	d.BridgeState("zb", true, false)
	d.Disconnected()
	d.Session()
	if zb, rest := links(); zb != "unknown" || rest != "online" {
		t.Fatalf("after a loss and a new session: zb %s, rest %s; want unknown, online", zb, rest)
	}
}
