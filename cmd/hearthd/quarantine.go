package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/api"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/health"
	"github.com/hearthd/hearth/notify"
	"github.com/hearthd/hearth/publish"
	"github.com/hearthd/hearth/store"
)

// reasonStoreQuarantined is the Reason of the notification that the store
// was quarantined.
const reasonStoreQuarantined = "store_quarantined"

// storeQuarantine tells of a quarantine of the store (store.Options.
// Quarantine: hearth.db was found damaged at start, moved to
// hearth.db.corrupt-<time>, and a fresh store opened) until an operator
// acknowledges it: while it is not acknowledged, each start logs it at
// ERROR and raises a critical notification, the gauge
// hearth_store_quarantined is 1, the degraded /readyz check
// "store_quarantine" fails (Hearth serves commands; /readyz answers 200,
// status degraded), and the retained <prefix>/bridge/store says
// "quarantined". AckQuarantine (POST /api/v1/store/ack, hearthctl store
// ack) ends all of it, leaving the acknowledged quarantine on
// <prefix>/bridge/store as last_quarantine. It is the API's
// api.StoreHealth.
type storeQuarantine struct {
	store   *store.Store
	log     *slog.Logger
	metrics *health.Metrics
	clock   clockwork.Clock
	topic   string // <prefix>/bridge/store
	// publisher publishes the retained state; nil until the connection
	// exists.
	publisher publish.Publisher

	mu    sync.Mutex // held across an acknowledgement
	q     store.Quarantine
	found bool
	// pubMu orders the retained publishes: each one, under it, sends the
	// state as it is then, so the last one sent is the newest.
	pubMu sync.Mutex
}

// newStoreQuarantine reads the store's last quarantine; an unacknowledged
// one is logged at ERROR and sets the gauge.
func newStoreQuarantine(s *store.Store, prefix string, log *slog.Logger, m *health.Metrics, clock clockwork.Clock) (*storeQuarantine, error) {
	q, found, err := s.Quarantine()
	if err != nil {
		return nil, fmt.Errorf("read the store's quarantine record: %w", err)
	}
	sq := &storeQuarantine{store: s, log: log, metrics: m, clock: clock, topic: prefix + "/bridge/store", q: q, found: found}
	unacked := found && !q.Acked()
	m.StoreQuarantined(unacked)
	switch {
	case unacked:
		log.Error("the store was found damaged and quarantined: Hearth runs on a fresh store; "+
			"commands pending in the damaged store may be lost, and op_ids it held may run again when sent without issued_at "+
			"(commands issued before the quarantine are refused as stale_command for the dedup window); "+
			"look at the file, then run hearthctl store ack",
			"file", q.File, "cause", q.Cause, "at", q.At,
			"salvaged_ops", q.Salvaged.Ops, "salvaged_audit", q.Salvaged.Audit, "salvaged_dead_letters", q.Salvaged.DeadLetters,
			"salvaged_states", q.Salvaged.States, "skipped_ops", q.Skipped.Ops, "skipped_audit", q.Skipped.Audit,
			"skipped_dead_letters", q.Skipped.DeadLetters, "skipped_states", q.Skipped.States, "ended", q.Ended,
			"stale_until", q.At.Add(opRetention))
	case found:
		log.Info("the store's last quarantine is acknowledged", "file", q.File, "at", q.At, "acked_by", q.AckedBy, "acked_at", q.AckedAt)
	}
	return sq, nil
}

// lostDedup is the dispatcher's window of refused old commands: from the
// quarantine, the dedup window (opRetention) long, acknowledged or not.
func (s *storeQuarantine) lostDedup() dispatcher.LostDedup {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.found {
		return dispatcher.LostDedup{}
	}
	return dispatcher.LostDedup{At: s.q.At, Until: s.q.At.Add(opRetention)}
}

// notification is the critical notification of an unacknowledged
// quarantine, and false when there is none.
func (s *storeQuarantine) notification() (notify.Notification, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.q
	if !s.found || q.Acked() {
		return notify.Notification{}, false
	}
	where := "was moved to " + q.File
	if q.File == "" {
		where = "was missing although its marker said a store existed"
	}
	return notify.Notification{
		Title: "Hearth's command store was damaged and quarantined",
		Message: fmt.Sprintf("At start hearth.db was found damaged (%s) and %s; Hearth runs on a fresh store "+
			"with %d commands, %d audit entries and %d dead letters salvaged (%d pending commands ended failed, store_damaged, not sent again). "+
			"Commands pending in the damaged store may be lost, and the op_ids it held are no longer known: "+
			"commands issued before %s are refused as stale until %s, but one sent again without issued_at may run again. "+
			"Look at the file, then run: hearthctl store ack",
			q.Cause, where, q.Salvaged.Ops, q.Salvaged.Audit, q.Salvaged.DeadLetters, q.Ended,
			q.At.UTC().Format(time.RFC3339), q.At.Add(opRetention).UTC().Format(time.RFC3339)),
		Severity: "critical",
		Source:   "store",
		Reason:   reasonStoreQuarantined,
		At:       q.At,
	}, true
}

// check is the degraded /readyz check "store_quarantine": an error while
// a quarantine is not acknowledged.
func (s *storeQuarantine) check() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.found || s.q.Acked() {
		return nil
	}
	return fmt.Errorf("the store was found damaged (%s) and quarantined at %s to %q; pending commands may be lost; "+
		"look at the file, then run hearthctl store ack", s.q.Cause, s.q.At.UTC().Format(time.RFC3339), s.q.File)
}

// StoreState returns the state shown on GET /api/v1/store and
// <prefix>/bridge/store.
func (s *storeQuarantine) StoreState() (api.StoreState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stateLocked(), nil
}

func (s *storeQuarantine) stateLocked() api.StoreState {
	if !s.found {
		return api.StoreState{State: api.StoreOK}
	}
	q := apiQuarantine(s.q)
	if !s.q.Acked() {
		return api.StoreState{State: api.StoreQuarantined, StoreQuarantine: &q}
	}
	return api.StoreState{State: api.StoreOK, LastQuarantine: &q}
}

// AckQuarantine records principal's acknowledgement in the store and in
// the audit trail, and ends the announcement: the gauge is 0, the
// degraded check passes, and <prefix>/bridge/store is published again.
// A quarantine already acknowledged is left as it is (no audit entry).
func (s *storeQuarantine) AckQuarantine(principal string) (api.StoreState, error) {
	s.mu.Lock()
	if !s.found {
		s.mu.Unlock()
		return api.StoreState{}, api.ErrNoQuarantine
	}
	if s.q.Acked() {
		defer s.mu.Unlock()
		return s.stateLocked(), nil
	}
	now := s.clock.Now()
	q, err := s.store.AckQuarantine(principal, now)
	if err != nil {
		s.mu.Unlock()
		if errors.Is(err, store.ErrNoQuarantine) {
			return api.StoreState{}, fmt.Errorf("%w (%v)", api.ErrNoQuarantine, err)
		}
		return api.StoreState{}, err
	}
	s.q = q
	by := principal
	if by == "" {
		by = "an unauthenticated client (http.allow_anonymous)"
	}
	// The quarantine record holds who and when too: a failed audit
	// append is logged, and the acknowledgement stands.
	if err := s.store.AppendAudit(devices.AuditEntry{
		At: q.AckedAt, Event: devices.AuditStoreAcked, Principal: principal,
		Detail: fmt.Sprintf("%s acknowledged the quarantine of the store at %s (%s, moved to %q)",
			by, q.At.UTC().Format(time.RFC3339), q.Cause, q.File),
	}); err != nil {
		s.log.Error("audit entry of the store quarantine's acknowledgement not stored", "err", err)
	}
	s.metrics.StoreQuarantined(false)
	s.log.Info("store quarantine acknowledged", "by", principal, "at", q.AckedAt, "file", q.File)
	st := s.stateLocked()
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.publish(ctx)
	return st, nil
}

// publish sends the state, retained, on <prefix>/bridge/store: at every
// connect and at an acknowledgement. A publish that fails is sent again
// at the next connect.
func (s *storeQuarantine) publish(ctx context.Context) {
	s.pubMu.Lock()
	defer s.pubMu.Unlock()
	if s.publisher == nil {
		return
	}
	st, _ := s.StoreState()
	body, err := json.Marshal(st)
	if err != nil {
		s.log.Error("store state not encoded", "err", err) // plain fields: cannot happen
		return
	}
	if err := s.publisher.Publish(ctx, s.topic, 1, true, body); err != nil {
		s.log.Warn("store state not published; it is sent again at the next connect", "topic", s.topic, "err", err)
	}
}

// apiQuarantine is q in the API's shape; the conversions of Counts keep
// the two types' fields the same at compile time.
func apiQuarantine(q store.Quarantine) api.StoreQuarantine {
	return api.StoreQuarantine{At: q.At.UTC(), File: q.File, Cause: q.Cause,
		Salvaged: api.StoreCounts(q.Salvaged), Skipped: api.StoreCounts(q.Skipped),
		Ended: q.Ended, AckedAt: q.AckedAt, AckedBy: q.AckedBy}
}

// mayAckQuarantine is who may acknowledge a quarantine: a principal
// allowed every action on every configured device, as an operator is;
// anyone when the HTTP API is open (http.allow_anonymous) or when every
// principal may command everything.
func (d *daemon) mayAckQuarantine(principal string) error {
	if !d.principals.Required() {
		return nil
	}
	grants := *d.authz.grants.Load()
	if grants == nil {
		return nil
	}
	g, ok := grants[principal]
	if !ok {
		return fmt.Errorf("principal %q is not configured (any more)", principal)
	}
	for _, dev := range d.cfg.Devices {
		if !g.Allows(dev.ID, devices.ActionAny) {
			return fmt.Errorf("principal %q may not command every device (not every action on %s): acknowledging a quarantine of the store takes a principal allowed every device", principal, dev.ID)
		}
	}
	return nil
}
