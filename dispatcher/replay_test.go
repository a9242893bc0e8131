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

// A replayed bridge state's transitions keep their Replay mark even when
// another goroutine (here one whose delivery of a live transition is held)
// delivers them.
//
// The fault this pins: BreakerChange.Replay was read when a transition
// was delivered, not when it happened. breaker.notify lets one goroutine
// deliver every queued transition; a replayed state applied while another
// goroutine was delivering a live one was delivered by that goroutine
// after replay was reset, so it reached the automations as live and fired
// their breaker triggers (and a live one delivered during a replay was
// suppressed).
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
