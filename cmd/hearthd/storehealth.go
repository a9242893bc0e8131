package main

import (
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/health"
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
	// exists; held is an outage's notification raised before then.
	notify func(dispatcher.Notification)
	held   *dispatcher.Notification
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
	n := dispatcher.Notification{
		Title: "Hearth cannot store commands",
		Message: fmt.Sprintf("Writing to %s fails (%v): commands are refused with store_error until a write succeeds "+
			"(free disk space or fix the disk; Hearth recovers by itself).", h.path, err),
		Severity: "critical",
		Source:   "store",
		Reason:   string(devices.ReasonStoreError),
		At:       h.since,
	}
	if h.notify == nil {
		h.held = &n
		return
	}
	h.notify(n)
}

// setNotify hands the dispatcher's Notify over, sending a notification
// held since before it existed.
func (h *storeHealth) setNotify(notify func(dispatcher.Notification)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.notify = notify
	if h.held != nil {
		notify(*h.held)
		h.held = nil
	}
}

// check is the /readyz check "store": an error while commits fail.
func (h *storeHealth) check() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failing == nil {
		return nil
	}
	return fmt.Errorf("commits failing since %s (%d failed): %v", h.since.UTC().Format(time.RFC3339), h.failed, h.failing)
}
