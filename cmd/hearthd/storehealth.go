package main

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/health"
	"github.com/hearthd/hearth/notify"
)

// storeQuiet is how long commits must succeed after an outage before a
// new failure counts as a new outage, logged at ERROR and notified again.
// A nearly full disk flaps: a commit that fits in bbolt's free pages
// succeeds between ones that must grow the file and fail.
const storeQuiet = time.Minute

// storeHealth follows the store's commits (store.Options.OnCommit) and
// tells the truth about them: while commits fail (a full disk, an I/O
// error) the /readyz check "store" fails, every failed commit is
// counted, and the outage is logged at ERROR and notified once, at its
// first failure, not once per command. The first commit that succeeds
// makes Hearth ready again by itself, and an INFO line says so; failures
// again within storeQuiet of that are the same outage (a WARN line, no
// new notification).
type storeHealth struct {
	path    string
	log     *slog.Logger
	metrics *health.Metrics
	clock   clockwork.Clock

	mu      sync.Mutex
	failing error     // the last failed commit's error during an outage, or nil
	since   time.Time // when the outage began
	failed  int       // commits failed in this outage
	// recovered is when the last outage's first successful commit came,
	// zero before any outage.
	recovered time.Time
	// notify is the dispatcher's Notify, nil until the dispatcher
	// exists; held are the notifications raised before then.
	notify func(notify.Notification)
	held   []notify.Notification
	// damage is the first damage a read, prune or commit found while
	// Hearth runs (store.Options.OnDamage), and damagedAt when; it stays
	// until a restart quarantines the store.
	damage    error
	damagedAt time.Time
}

// onDamage records damage found in the open store (a record that fails
// its checksum, a page bbolt panicked on). The first is logged at ERROR
// and notified; from then on /readyz's store check fails, until a restart
// finds the damage at open and quarantines the store. It runs on the
// goroutine that found it and never blocks.
func (h *storeHealth) onDamage(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.damage != nil {
		return
	}
	h.damage, h.damagedAt = err, h.clock.Now()
	h.log.Error("the store is damaged: restart hearthd to quarantine it and start on a fresh store with what can be salvaged; "+
		"until then commands whose records are damaged are refused with store_error, and an op_id whose key is damaged may run again",
		"path", h.path, "err", err)
	n := notify.Notification{
		Title: "Hearth's command store is damaged",
		Message: fmt.Sprintf("Reading %s found damage (%v). Restart hearthd: it then moves the damaged file aside, "+
			"starts on a fresh store with every record that can be read, and says what was lost.", h.path, err),
		Severity: "critical",
		Source:   "store",
		Reason:   string(devices.ReasonStoreDamaged),
		At:       h.damagedAt,
	}
	h.raiseLocked(n)
}

// onCommit records one commit's result. It runs in the store's writer
// goroutine: it never calls the store and never blocks (Notify does not).
func (h *storeHealth) onCommit(err error) {
	h.metrics.StoreCommit(err == nil)
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		if h.failing != nil {
			h.log.Info("store commits succeed again; ready", "path", h.path,
				"failed_commits", h.failed, "outage", h.clock.Since(h.since).Round(time.Millisecond))
			h.failing, h.recovered = nil, h.clock.Now()
		}
		return
	}
	if h.failing != nil {
		h.failing = err
		h.failed++
		return
	}
	h.failing = err
	now := h.clock.Now()
	if !h.recovered.IsZero() && now.Sub(h.recovered) < storeQuiet {
		h.failed++
		h.log.Warn("store commits are failing again; not ready", "path", h.path, "err", err,
			"failed_commits", h.failed, "outage", now.Sub(h.since).Round(time.Millisecond))
		return
	}
	h.since, h.failed = now, 1
	h.log.Error("store commits are failing: commands are refused with store_error and /readyz is not ready until one succeeds",
		"path", h.path, "err", err)
	n := notify.Notification{
		Title: "Hearth cannot store commands",
		Message: fmt.Sprintf("Writing to %s fails (%v): commands are refused with store_error until a write succeeds "+
			"(free disk space or fix the disk; Hearth recovers by itself).", h.path, err),
		Severity: "critical",
		Source:   "store",
		Reason:   string(devices.ReasonStoreError),
		At:       h.since,
	}
	h.raiseLocked(n)
}

// raiseLocked sends n, or holds it until the dispatcher exists. Call
// with mu held.
func (h *storeHealth) raiseLocked(n notify.Notification) {
	if h.notify == nil {
		h.held = append(h.held, n)
		return
	}
	h.notify(n)
}

// setNotify hands the dispatcher's Notify over, sending a notification
// held since before it existed.
func (h *storeHealth) setNotify(f func(notify.Notification)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.notify = f
	for _, n := range h.held {
		f(n)
	}
	h.held = nil
}

// check is the /readyz check "store": an error while commits fail, and
// from the first damage found on, until a restart.
func (h *storeHealth) check() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.damage != nil {
		return fmt.Errorf("damaged since %s: %v; restart hearthd to quarantine it", h.damagedAt.UTC().Format(time.RFC3339), h.damage)
	}
	if h.failing == nil {
		return nil
	}
	return fmt.Errorf("commits failing since %s (%d failed): %v", h.since.UTC().Format(time.RFC3339), h.failed, h.failing)
}
