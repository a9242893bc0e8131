package automations

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// runWith runs an engine for rules with clock and loc, stopping it at the
// end of the test.
func runWith(t *testing.T, clock clockwork.Clock, fake *clockwork.FakeClock, loc *time.Location, rules ...Rule) *harness {
	t.Helper()
	h := &harness{t: t, clock: fake, rec: &recorder{}, logs: &syncBuffer{}}
	e, err := New(Options{Rules: rules, Commander: h.rec, Publisher: h.rec, Notifier: h.rec,
		Clock: clock, Location: loc, Logger: slog.New(slog.NewTextHandler(h.logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h.e = e
	ctx, cancel := context.WithCancel(context.Background())
	deadline, stop := context.WithTimeout(context.Background(), 10*time.Second)
	h.ctx = deadline
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run() = %v", err)
		}
		stop()
	})
	return h
}

// A daily cron time inside a DST change runs once on each of those
// nights, as in Vixie cron.
//
// Cron across DST in Europe/Berlin: "30 2 * * *" (lock up at 02:30). The
// fault this pins: it was skipped entirely on the spring-forward night
// and ran twice on the fall-back night. Vixie cron (and what users expect
// of "every night") runs it once on each.
func TestCronAcrossDST(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip(err)
	}
	for _, tc := range []struct {
		name  string
		start time.Time
	}{
		{"spring forward (02:00→03:00)", time.Date(2026, 3, 28, 12, 0, 0, 0, berlin)},
		{"fall back (03:00→02:00)", time.Date(2026, 10, 24, 12, 0, 0, 0, berlin)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := clockwork.NewFakeClockAt(tc.start)
			h := runWith(t, fake, fake, berlin, Rule{
				Name:     "lock_up",
				Triggers: []Trigger{{Schedule: &ScheduleTrigger{Cron: "30 2 * * *"}}},
				Actions:  []Action{notify("lock up")},
			})
			// Step through the night 15 minutes at a time, as a running
			// host's clock would pass it.
			for range 24 * 4 {
				h.advanceUpTo(15 * time.Minute)
			}
			var at []string
			for _, n := range h.rec.Notes() {
				at = append(at, n.At.In(berlin).Format("2006-01-02 15:04 MST"))
			}
			if len(at) != 1 {
				t.Errorf("fired %d times in the 24 hours around the DST change, at %v; want once", len(at), at)
			}
		})
	}
}

// advanceUpTo moves the clock by d once the engine waits on its timer,
// and waits until it waits again.
func (h *harness) advanceUpTo(d time.Duration) {
	h.t.Helper()
	if err := h.clock.BlockUntilContext(h.ctx, 1); err != nil {
		h.t.Fatalf("no schedule timer: %v", err)
	}
	h.clock.Advance(d)
	h.sync()
	if err := h.clock.BlockUntilContext(h.ctx, 1); err != nil {
		h.t.Fatalf("no schedule timer after the advance: %v", err)
	}
}

// steppedClock is a real clock's behaviour on a fake one: timers run on
// elapsed (monotonic) time, Now is the wall clock, which NTP may step.
type steppedClock struct {
	*clockwork.FakeClock
	mu     sync.Mutex
	offset time.Duration
}

func (c *steppedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.FakeClock.Now().Add(c.offset)
}
func (c *steppedClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c *steppedClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }
func (c *steppedClock) step(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

// A schedule fires once at its wall-clock time after NTP steps the clock
// forward.
//
// A Raspberry Pi has no RTC: it boots with the time it shut down at
// (fake-hwclock), Hearth starts, and NTP steps the clock forward minutes
// later. The fault this pins: the engine armed one timer for the whole
// wait to the next cron time, on elapsed time, so after the step a 23:00
// rule fired hours late (here at 06:31 the next morning). Docs: "After a clock jump over several
// times it fires once."
func TestScheduleAfterWallClockStep(t *testing.T) {
	fake := clockwork.NewFakeClockAt(time.Date(2026, 11, 27, 15, 0, 0, 0, cet)) // stale boot time
	clock := &steppedClock{FakeClock: fake}
	h := runWith(t, clock, fake, cet, Rule{
		Name:     "night_lock",
		Triggers: []Trigger{{Schedule: &ScheduleTrigger{Cron: "0 23 * * *"}}},
		Actions:  []Action{notify("lock the doors")},
	})
	if err := fake.BlockUntilContext(h.ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.step(7*time.Hour + 30*time.Minute) // NTP: it is really 22:30
	for range 4 {                            // 22:30 → 23:30 wall time, in 15-minute steps
		h.advanceUpTo(15 * time.Minute)
	}
	if n := len(h.rec.Notes()); n != 1 {
		t.Errorf("by 23:30 (wall clock) after an NTP step the 23:00 rule fired %d times; want 1", n)
	}
}
