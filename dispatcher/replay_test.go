package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/devices"
)

type nopJournal struct{}

func (nopJournal) Save(...devices.Op) error                          { return nil }
func (nopJournal) Lookup(string) (devices.Op, bool, error)           { return devices.Op{}, false, nil }
func (nopJournal) Pending() ([]devices.Op, error)                    { return nil, nil }
func (nopJournal) SaveState(string, map[string]any, time.Time) error { return nil }

type nopPublisher struct{}

func (nopPublisher) Publish(context.Context, string, byte, bool, []byte) error { return nil }

// R6. BreakerChange.Replay is read when a transition is delivered, not
// when it happens. breaker.notify lets one goroutine deliver every queued
// transition; a replayed state applied while another goroutine is
// delivering a live one is delivered by that goroutine after replay was
// reset, so it reaches the automations as live and fires their breaker
// triggers (and a live one delivered during a replay is suppressed).
// A replayed bridge state's transitions keep their Replay mark even when
// another goroutine (here one whose delivery of a live transition is held)
// delivers them.
func TestReplayFlagBelongsToTheTransition(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	changes := make(chan BreakerChange, 16)
	first := true
	d, err := New(Options{
		Services:  []Service{{Name: "cloud", Breaker: &breaker.Options{OpenFor: func(int) time.Duration { return time.Minute }}}},
		Journal:   nopJournal{},
		Publisher: nopPublisher{},
		Clock:     clockwork.NewFakeClockAt(time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)),
		OnBreakerChange: func(c BreakerChange) {
			changes <- c
			if first { // the live offline: hold its delivery
				first = false
				close(entered)
				<-release
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	live := make(chan struct{})
	go func() { defer close(live); d.BridgeState("cloud", false, false) }() // live: offline
	<-entered
	d.BridgeState("cloud", true, true) // the broker replays a retained "online"
	close(release)
	<-live
	close(changes)
	for c := range changes {
		if c.To != breaker.Open && !c.Replay {
			t.Errorf("transition %s → %s caused by a replayed online delivered with Replay=false", c.From, c.To)
		}
	}
}
