// Package api serves Hearth's HTTP API under /api/v1. For now that is the
// state of every service's circuit breaker (GET /api/v1/breakers); the
// command and op endpoints of the design are still to come.
//
// It owns the HTTP shapes only: what a breaker is and how its state is
// kept belong to package dispatcher.
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
