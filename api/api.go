// Package api serves Hearth's HTTP API under /api/v1: commands (POST
// /api/v1/devices/{device}/commands, GET /api/v1/ops/{op_id}, see
// RegisterCommands), the stored commands (GET /api/v1/ops, see
// RegisterOps), the devices (GET /api/v1/devices, see RegisterDevices), a
// stream of what happens (GET /api/v1/events, server-sent events, see
// Events and RegisterEvents), the state of every service's circuit
// breaker (GET /api/v1/breakers, see Register), the audit trail (GET
// /api/v1/audit, see RegisterAudit), the dead-letter store (GET
// /api/v1/deadletters, see RegisterDeadLetters) and the store's quarantine
// (GET /api/v1/store and POST /api/v1/store/ack, see RegisterStore).
// Authenticate guards all of it with the principals' bearer tokens.
//
// Every error answer is {"error":"<machine code>","detail":"<sentence>"}
// with Content-Type application/json (a command's rejection is its
// result instead); JSONErrors makes the mux's own 404 and 405 that shape
// too.
//
// It owns the HTTP shapes only: validating, storing and running commands
// and keeping breakers belong to package dispatcher; it never reads the
// store but through the small interfaces it declares.
package api

import (
	"encoding/json"
	"net/http"

	"github.com/hearthd/hearth/dispatcher"
)

// Breakers is what the API reads the breakers from; *dispatcher.Dispatcher
// is one.
type Breakers interface {
	Breakers() []dispatcher.BreakerStatus
}

// Register adds GET /api/v1/breakers to mux: 200 with
// {"breakers":[...]}, one dispatcher.BreakerStatus per service with a
// breaker, in config order.
func Register(mux *http.ServeMux, b Breakers) {
	mux.HandleFunc("GET /api/v1/breakers", func(w http.ResponseWriter, _ *http.Request) {
		list := b.Breakers()
		if list == nil {
			list = []dispatcher.BreakerStatus{} // [] rather than null
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(struct {
			Breakers []dispatcher.BreakerStatus `json:"breakers"`
		}{list})
	})
}
