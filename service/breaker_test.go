package service

import (
	"testing"
	"time"

	"github.com/hearthd/hearth/breaker"
)

// A lost probe is spared once per half-open period, and only when the
// bridge's own online began the period and another device's command waits
// to be the next probe.
func TestLostProbeIsSparedOnceWhenAnotherDeviceWaits(t *testing.T) {
	b := NewBreaker(breaker.Options{FailureThreshold: 1})
	since := t0
	if b.Spare("lock", since) {
		t.Fatal("spared in a period the bridge's online did not begin")
	}
	b.Vouch(since)
	if b.Spare("lock", since) {
		t.Fatal("spared with no other device waiting")
	}
	b.WaitForProbe("lock", 1)
	if b.Spare("lock", since) {
		t.Fatal("spared for a command of the same device")
	}
	b.WaitForProbe("lamp", 1)
	if !b.Spare("lock", since) {
		t.Fatal("not spared though the bridge vouched and another device waits")
	}
	if b.Spare("lock", since) {
		t.Error("spared a second time in the same half-open period")
	}
	b.WaitForProbe("lamp", -1)
	if n := b.Waiting("lamp"); n != 0 {
		t.Errorf("Waiting(lamp) = %d after it stopped waiting, want 0", n)
	}
}

// A transition wakes both kinds of watchers; Signal wakes only those of
// every change, not those of transitions.
func TestTransitionWakesEveryWatcherAndSignalOnlyWatch(t *testing.T) {
	b := NewBreaker(breaker.Options{FailureThreshold: 1, OpenFor: func(int) time.Duration { return time.Minute }})
	changed, moved := b.Watch(), b.WatchMoves()
	b.Signal()
	select {
	case <-changed:
	default:
		t.Fatal("Signal did not wake Watch")
	}
	select {
	case <-moved:
		t.Fatal("Signal woke WatchMoves")
	default:
	}
	changed = b.Watch()
	p, err := b.Allow(t0)
	if err != nil {
		t.Fatal(err)
	}
	p.Done(breaker.Failure, t0) // trips: closed → open
	for name, ch := range map[string]<-chan struct{}{"Watch": changed, "WatchMoves": moved} {
		select {
		case <-ch:
		default:
			t.Errorf("the transition to open did not wake %s", name)
		}
	}
}

// A deferred offline is taken once, at the time it was set for; one
// cancelled or replaced meanwhile is not.
func TestDeferredOfflineIsTakenOnlyAtItsOwnTime(t *testing.T) {
	b := NewBreaker(breaker.Options{FailureThreshold: 1})
	due := t0.Add(BridgeStateGrace)
	b.DeferOffline(due)
	if got := b.DueOffline(); !got.Equal(due) {
		t.Fatalf("DueOffline() = %v, want %v", got, due)
	}
	if b.TakeDueOffline(due.Add(time.Second)) {
		t.Error("took an offline deferred to another time")
	}
	if !b.TakeDueOffline(due) {
		t.Fatal("did not take the offline at its time")
	}
	if b.TakeDueOffline(due) {
		t.Error("took the same offline twice")
	}
}
