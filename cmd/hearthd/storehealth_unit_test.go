package main

import (
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/health"
	"github.com/hearthd/hearth/notify"
)

// A flapping store (a commit that fits in free pages between ones that
// fail) is one outage: one notification; readiness follows the last
// commit. Failures after storeQuiet of successes are a new outage,
// notified again.
func TestStoreOutageIsNotifiedOnceUntilQuiet(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC))
	var notes []notify.Notification
	h := &storeHealth{path: "/data/hearth.db", log: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: health.NewMetrics(), clock: clock}
	full := errors.New("no space left on device")
	h.onCommit(full) // before the dispatcher exists: held
	h.setNotify(func(n notify.Notification) { notes = append(notes, n) })
	if len(notes) != 1 {
		t.Fatalf("%d notifications once the dispatcher exists; want the held one", len(notes))
	}
	for _, err := range []error{nil, full, full, nil} {
		clock.Advance(10 * time.Second)
		h.onCommit(err)
		if got := h.check() != nil; got != (err != nil) {
			t.Errorf("after a commit with %v: check failing = %v", err, got)
		}
	}
	if len(notes) != 1 {
		t.Errorf("%d notifications for one flapping outage; want 1", len(notes))
	}
	clock.Advance(storeQuiet)
	h.onCommit(full)
	if len(notes) != 2 {
		t.Errorf("%d notifications after a new outage %v after recovery; want 2", len(notes), storeQuiet)
	}
}

// Damage found while running is notified once, however often it is met,
// and fails the store check from then on: a commit that succeeds later
// does not make a damaged store ready again; only a restart (which
// quarantines it) does. A damage found before the dispatcher exists is
// held beside an outage's notification, not in place of it.
func TestStoreDamageIsNotifiedOnceAndFailsTheCheckUntilARestart(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC))
	var notes []notify.Notification
	h := &storeHealth{path: "/data/hearth.db", log: slog.New(slog.NewTextHandler(io.Discard, nil)), metrics: health.NewMetrics(), clock: clock}
	h.onCommit(errors.New("no space left on device"))
	bad := errors.New(`database file /data/hearth.db is damaged: op "x": record fails its checksum`)
	h.onDamage(bad)
	h.setNotify(func(n notify.Notification) { notes = append(notes, n) })
	h.onDamage(bad)
	h.onCommit(nil)
	if len(notes) != 2 || notes[1].Reason != "store_damaged" || notes[1].Severity != "critical" {
		t.Fatalf("notifications %+v; want the outage's, then one critical store_damaged", notes)
	}
	if err := h.check(); err == nil {
		t.Error("the store check passes after a successful commit; want it failing while the store is damaged")
	}
}
