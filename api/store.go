package api

import (
	"errors"
	"log/slog"
	"net/http"
	"time"
)

// The states of StoreState.State.
const (
	// StoreOK: the store opened as it was left, or its last quarantine
	// is acknowledged.
	StoreOK = "ok"
	// StoreQuarantined: the store was found damaged at start and moved
	// aside, and no operator has acknowledged it yet.
	StoreQuarantined = "quarantined"
)

// StoreCounts counts records by kind (the store's Counts).
type StoreCounts struct {
	Ops         int `json:"ops"`
	Audit       int `json:"audit"`
	DeadLetters int `json:"dead_letters"`
	States      int `json:"states"`
}

// StoreQuarantine is a quarantine of the store: when hearthd found
// hearth.db damaged at start, where the file went, why, what was copied
// into the fresh store, and who acknowledged it.
type StoreQuarantine struct {
	At time.Time `json:"at"`
	// File is where the damaged hearth.db was moved
	// (hearth.db.corrupt-<time>); omitted when there was no file to move.
	File  string `json:"file,omitempty"`
	Cause string `json:"cause"`
	// Salvaged and Skipped count the records copied from the damaged file
	// and those found there but not trusted.
	Salvaged StoreCounts `json:"salvaged"`
	Skipped  StoreCounts `json:"skipped"`
	// Ended is how many salvaged commands were still pending: each was
	// ended failed, store_damaged, and not sent again.
	Ended   int       `json:"ended"`
	AckedAt time.Time `json:"acked_at,omitzero"`
	AckedBy string    `json:"acked_by,omitempty"`
}

// StoreState is the body of GET /api/v1/store and POST
// /api/v1/store/ack, and the retained payload hearthd publishes on
// <prefix>/bridge/store:
//
//	{"state":"ok"}
//	{"state":"quarantined","at":…,"file":…,"cause":…,"salvaged":{…},"skipped":{…},"ended":N}
//	{"state":"ok","last_quarantine":{"at":…,…,"acked_at":…,"acked_by":…}}
type StoreState struct {
	// State is StoreOK or StoreQuarantined.
	State string `json:"state"`
	// The unacknowledged quarantine, inline, while State is
	// StoreQuarantined.
	*StoreQuarantine
	// LastQuarantine is the last, acknowledged, quarantine, if any.
	LastQuarantine *StoreQuarantine `json:"last_quarantine,omitempty"`
}

// StoreHealth is what the store endpoints read and acknowledge; hearthd
// adapts its store to it. It must be safe for concurrent use.
type StoreHealth interface {
	// StoreState says whether the store is quarantined now.
	StoreState() (StoreState, error)
	// AckQuarantine records that principal ("" when the API is open)
	// acknowledged the last quarantine, and returns the state after it.
	// Acknowledging again changes nothing and returns the state. It
	// returns an error wrapping ErrNoQuarantine when the store was never
	// quarantined.
	AckQuarantine(principal string) (StoreState, error)
}

// ErrNoQuarantine is StoreHealth.AckQuarantine's error when there is no
// quarantine to acknowledge.
var ErrNoQuarantine = errors.New("the store was never quarantined: nothing to acknowledge")

// Store is what the store endpoints use.
type Store struct {
	Health StoreHealth
	// MayAck decides whether principal ("" when the API is open) may
	// acknowledge a quarantine: nil allows, an error (said in the 403
	// answer) refuses. A nil MayAck refuses everyone: closed by default.
	MayAck func(principal string) error
	Logger *slog.Logger
}

// RegisterStore adds the store endpoints to mux. They serve only requests
// that passed Authenticate (any other is answered 500), which must wrap
// mux.
//
// GET /api/v1/store answers 200 with a StoreState.
//
// POST /api/v1/store/ack (no body needed; any body is ignored)
// acknowledges the last quarantine in the authenticated principal's name:
// 200 with the StoreState after it ({"state":"ok","last_quarantine":{…}}),
// the same again for a quarantine already acknowledged; 403
// {"error":"forbidden"} when MayAck refuses the principal; 409
// {"error":"no_quarantine"} when the store was never quarantined. An
// error of the store is 500 {"error":"store_error"}.
//
// It panics if s lacks its Health, a wiring mistake.
func RegisterStore(mux *http.ServeMux, s Store) {
	if s.Health == nil {
		panic("api: RegisterStore needs a StoreHealth")
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	mux.HandleFunc("GET /api/v1/store", func(w http.ResponseWriter, r *http.Request) {
		if _, ok := principalOf(r); !ok {
			s.notAuthenticated(w, r)
			return
		}
		st, err := s.Health.StoreState()
		if err != nil {
			s.Logger.Error("read the store's quarantine", "err", err)
			writeError(w, http.StatusInternalServerError, "store_error", "the store could not be read")
			return
		}
		writeJSON(w, http.StatusOK, st)
	})
	mux.HandleFunc("POST /api/v1/store/ack", func(w http.ResponseWriter, r *http.Request) {
		principal, ok := principalOf(r)
		if !ok {
			s.notAuthenticated(w, r)
			return
		}
		if s.MayAck == nil {
			writeError(w, http.StatusForbidden, "forbidden", "nobody may acknowledge a quarantine through this API")
			return
		}
		if err := s.MayAck(principal); err != nil {
			writeError(w, http.StatusForbidden, "forbidden", err.Error())
			return
		}
		st, err := s.Health.AckQuarantine(principal)
		switch {
		case errors.Is(err, ErrNoQuarantine):
			writeError(w, http.StatusConflict, "no_quarantine", err.Error())
		case err != nil:
			s.Logger.Error("acknowledge the store's quarantine", "principal", principal, "err", err)
			writeError(w, http.StatusInternalServerError, "store_error", "the acknowledgement could not be stored")
		default:
			writeJSON(w, http.StatusOK, st)
		}
	})
}

func (s Store) notAuthenticated(w http.ResponseWriter, r *http.Request) {
	s.Logger.Error("the store API is served without api.Authenticate: refusing", "path", r.URL.Path)
	writeError(w, http.StatusInternalServerError, "not_authenticated", "the server is misconfigured: its API is not behind authentication")
}
