// Package health makes Hearth's own condition visible, in two ways:
//
//   - Checker: GET /healthz (the process serves HTTP) and GET /readyz,
//     which runs named readiness checks (the MQTT connection, the store)
//     and also shows informational entries, such as each service's
//     breaker, that never make Hearth unready: an open breaker means a
//     service is down, not that Hearth cannot take commands. A degraded
//     check (AddDegraded) sits between: while it fails Hearth serves,
//     /readyz answers 200 with status "degraded", and the check's text
//     says what an operator must look at.
//   - Metrics: Prometheus metrics in a private registry, served at
//     GET /metrics, starting with each service's breaker state and
//     transitions; other parts add their collectors to Registry.
//
// (Home Assistant's MQTT discovery is package homeassistant.)
//
// It never decides what is healthy (main registers the checks and reports
// the states), never holds a breaker, and never talks MQTT. It imports nothing of Hearth's.
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
	mu       sync.RWMutex
	checks   map[string]Check
	degraded map[string]bool // names of the checks added with AddDegraded
	info     map[string]func() any
}

// NewChecker returns a Checker with no checks: ready.
func NewChecker() *Checker {
	return &Checker{checks: map[string]Check{}, degraded: map[string]bool{}, info: map[string]func() any{}}
}

// Add registers check under name, replacing any check of that name.
func (c *Checker) Add(name string, check Check) {
	c.mu.Lock()
	c.checks[name] = check
	delete(c.degraded, name)
	c.mu.Unlock()
}

// AddDegraded registers check under name as a degraded check, replacing
// any check of that name: while it fails, Hearth still serves and is
// ready (GET /readyz answers 200, so a container's health check does not
// restart it), but Report.Status is "degraded", the check's error is its
// entry in Report.Checks and its name is in Report.Degraded. Use it for a
// condition an operator must act on that does not stop commands, such as
// a store quarantined at start and not yet acknowledged.
func (c *Checker) AddDegraded(name string, check Check) {
	c.mu.Lock()
	c.checks[name] = check
	c.degraded[name] = true
	c.mu.Unlock()
}

// AddInfo registers f under name, replacing any entry of that name. Each
// report calls f and shows its value, encoded as JSON, under Report.Info;
// it never affects readiness. Use it for what an operator wants to see
// next to the checks but that does not make Hearth unready, such as each
// service's breaker: an open breaker means the service is down, not that
// Hearth cannot take commands. f must be quick, must not block, and must
// return a value encoding/json can encode.
func (c *Checker) AddInfo(name string, f func() any) {
	c.mu.Lock()
	c.info[name] = f
	c.mu.Unlock()
}

// Report is the body of GET /readyz.
type Report struct {
	// Status is "ready", "degraded" (every check passed but some degraded
	// check, see AddDegraded: still ready, HTTP 200) or "not_ready".
	Status string `json:"status"`
	// Checks maps each check's name to "ok" or its error.
	Checks map[string]string `json:"checks"`
	// Degraded names the degraded checks (AddDegraded) that fail, sorted;
	// omitted when none does.
	Degraded []string `json:"degraded,omitempty"`
	// Info maps each AddInfo entry's name to its value, for example
	// {"services": {"z2m": {"state": "open", "since": "2026-11-29T23:00:00Z"}}}.
	// It is omitted when no entry is registered.
	Info map[string]any `json:"info,omitempty"`
}

// Ready runs every check and reports whether all but the degraded ones
// (AddDegraded) passed; the report also carries every AddInfo entry's
// current value, which readiness ignores.
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
			if c.degraded[n] {
				r.Degraded = append(r.Degraded, n)
			} else {
				ok = false
			}
		} else {
			r.Checks[n] = "ok"
		}
	}
	if len(c.info) > 0 {
		r.Info = make(map[string]any, len(c.info))
		for n, f := range c.info {
			r.Info[n] = f()
		}
	}
	c.mu.RUnlock()
	switch {
	case !ok:
		r.Status = "not_ready"
	case len(r.Degraded) > 0:
		r.Status = "degraded"
	}
	return ok, r
}

// Register adds GET /healthz (200 while the process serves) and GET
// /readyz (200 with the report when ready or degraded, 503 otherwise) to
// mux.
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
