package health

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// BreakerStates are the circuit breaker states the metrics know, as the
// breaker package names them: every reported service has one
// hearth_breaker_state series for each.
var BreakerStates = [...]string{"closed", "open", "half_open"}

// Metrics holds Hearth's Prometheus metrics in a private registry (never
// the global one, so several daemons in one test process do not clash).
// Its methods are safe for concurrent use.
type Metrics struct {
	reg         *prometheus.Registry
	state       *prometheus.GaugeVec
	transitions *prometheus.CounterVec
	// storeFailures counts failed store commits; storeFailing is 1
	// while the last one failed.
	storeFailures prometheus.Counter
	storeFailing  prometheus.Gauge
	// storeQuarantined is 1 while a quarantine of the store is not
	// acknowledged.
	storeQuarantined prometheus.Gauge
	// cmd are the series of commands, attempts, the store's commits,
	// the intake and the MQTT connection (commands.go).
	cmd *commandMetrics
}

// NewMetrics returns Metrics with a new registry holding the Go runtime
// and process collectors, the breaker and store metrics and the series of
// commands (commands.go).
func NewMetrics() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hearth_breaker_state",
			Help: "Circuit breaker state of each service (bridge or cloud service): " +
				"1 for the state it is in (closed, open or half_open), 0 for the other two. " +
				"Open means commands to the service fail fast with breaker_open.",
		}, []string{"service", "state"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hearth_breaker_transitions_total",
			Help: "Circuit breaker state changes of each service since Hearth started, " +
				"by the state left (from) and the state entered (to).",
		}, []string{"service", "from", "to"}),
		storeFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hearth_store_commit_failures_total",
			Help: "Store commits (one group of writes, one bbolt transaction) that failed since Hearth started, " +
				"for example on a full disk or an I/O error: every command in a failed commit was refused with store_error.",
		}),
		storeFailing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hearth_store_failing",
			Help: "1 while the store's last commit failed (GET /readyz is not ready), 0 once one succeeds.",
		}),
		storeQuarantined: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "hearth_store_quarantined",
			Help: "1 while the store found damaged at start and quarantined (moved to hearth.db.corrupt-<time>) " +
				"is not acknowledged (hearthctl store ack), 0 otherwise.",
		}),
	}
	m.cmd = newCommandMetrics()
	m.reg.MustRegister(m.cmd.collectors()...)
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.state,
		m.transitions,
		m.storeFailures,
		m.storeFailing,
		m.storeQuarantined,
	)
	return m
}

// Registry returns the registry the metrics are in, for other parts of
// Hearth to register their collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// BreakerState records that service's breaker is in state ("closed",
// "open" or "half_open"): hearth_breaker_state{service,state} becomes 1
// and the other two states' series 0. A state outside BreakerStates sets
// all three to 0 (unknown) rather than adding a series.
func (m *Metrics) BreakerState(service, state string) {
	for _, s := range BreakerStates {
		v := 0.0
		if s == state {
			v = 1
		}
		m.state.WithLabelValues(service, s).Set(v)
	}
}

// BreakerTransition records that service's breaker went from one state to
// another: it counts hearth_breaker_transitions_total{service,from,to} and
// sets the state gauge as BreakerState(service, to) does. It fits a
// breaker's OnStateChange hook:
//
//	m.BreakerTransition(svc, from.String(), to.String())
func (m *Metrics) BreakerTransition(service, from, to string) {
	m.transitions.WithLabelValues(service, from, to).Inc()
	m.BreakerState(service, to)
}

// StoreCommit records the outcome of one store commit: a failure counts
// hearth_store_commit_failures_total and sets hearth_store_failing to 1;
// a success sets it to 0. It fits store.Options.OnCommit:
//
//	m.StoreCommit(err == nil)
func (m *Metrics) StoreCommit(ok bool) {
	if ok {
		m.storeFailing.Set(0)
		return
	}
	m.storeFailures.Inc()
	m.storeFailing.Set(1)
}

// StoreQuarantined sets hearth_store_quarantined: 1 while a quarantine of
// the store is not acknowledged, 0 otherwise.
func (m *Metrics) StoreQuarantined(unacknowledged bool) {
	v := 0.0
	if unacknowledged {
		v = 1
	}
	m.storeQuarantined.Set(v)
}

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Register adds GET /metrics to mux, next to the routes of
// Checker.Register.
func (m *Metrics) Register(mux *http.ServeMux) {
	mux.Handle("GET /metrics", m.Handler())
}
