// Package health answers "is Hearth alive" and "is Hearth ready": a
// liveness endpoint that only says the process serves HTTP, and a
// readiness endpoint that runs named checks (the MQTT connection, the
// store) and reports each.
//
// It never decides what is healthy; the checks are registered by main.
package health

import (
	"encoding/json"
	"net/http"
	"sort"
	"sync"
)

// Check returns nil when the part it checks is ready, or an error saying
// why not. Checks must be quick and must not block.
type Check func() error

// Checker holds the readiness checks.
type Checker struct {
	mu     sync.RWMutex
	checks map[string]Check
}

// NewChecker returns a Checker with no checks: ready.
func NewChecker() *Checker { return &Checker{checks: map[string]Check{}} }

// Add registers check under name, replacing any check of that name.
func (c *Checker) Add(name string, check Check) {
	c.mu.Lock()
	c.checks[name] = check
	c.mu.Unlock()
}

// Report is the body of GET /readyz.
type Report struct {
	// Status is "ready" or "not_ready".
	Status string `json:"status"`
	// Checks maps each check's name to "ok" or its error.
	Checks map[string]string `json:"checks"`
}

// Ready runs every check and reports whether all passed.
func (c *Checker) Ready() (bool, Report) {
	c.mu.RLock()
	names := make([]string, 0, len(c.checks))
	for n := range c.checks {
		names = append(names, n)
	}
	sort.Strings(names)
	r := Report{Status: "ready", Checks: make(map[string]string, len(names))}
	ok := true
	for _, n := range names {
		if err := c.checks[n](); err != nil {
			r.Checks[n] = err.Error()
			ok = false
		} else {
			r.Checks[n] = "ok"
		}
	}
	c.mu.RUnlock()
	if !ok {
		r.Status = "not_ready"
	}
	return ok, r
}

// Register adds GET /healthz (200 while the process serves) and GET
// /readyz (200 with the report when ready, 503 otherwise) to mux.
func (c *Checker) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		ok, r := c.Ready()
		w.Header().Set("Content-Type", "application/json")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		json.NewEncoder(w).Encode(r)
	})
}
