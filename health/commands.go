package health

import (
	"math"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// AttemptBuckets are the buckets of hearth_command_attempts: a command
// takes 1 to a few attempts (DESIGN.md principle 4: 2–3 at most).
var AttemptBuckets = []float64{1, 2, 3, 4, 5}

// CommandBuckets are the buckets, in seconds, of the command latencies
// (hearth_command_duration_seconds, hearth_attempt_confirm_seconds): from
// a Zigbee light's tens of milliseconds to a sleepy device's wake hours
// later.
var CommandBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600, 21600}

// IOBuckets are the buckets, in seconds, of the store commit latency and
// the intake's PUBACK wait: an fsync on an SSD takes well under a
// millisecond, on a Pi's SD card tens to hundreds.
var IOBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}

// CommandEnd is one command's end, as CommandEnded counts it. Service and
// Class are "" for a command to a device not in the configuration.
type CommandEnd struct {
	Service, Class string
	// Status is the terminal status (succeeded, failed, expired,
	// superseded, rejected) and Reason its reason code, "" for none.
	Status, Reason string
	// Accepted is false for a command rejected at the intake, which was
	// never accepted: it has no attempts and no duration.
	Accepted bool
	// Attempts is how many attempts were made.
	Attempts int
	// Duration is the time from acceptance to the end; Confirm, for a
	// command that succeeded with an attempt sent, the time from the
	// send of its last attempt to the report that confirmed it (negative:
	// none).
	Duration, Confirm time.Duration
	// SafetyAlert: a safety-critical command not carried out (the end
	// raised Hearth's critical notification).
	SafetyAlert bool
}

// commandMetrics are the series of commands, attempts and the queues.
type commandMetrics struct {
	ends             *prometheus.CounterVec
	attempts         *prometheus.HistogramVec
	successByAttempt *prometheus.CounterVec
	sent             *prometheus.CounterVec
	duration         *prometheus.HistogramVec
	confirm          *prometheus.HistogramVec
	safety           *prometheus.CounterVec
	retryAfter       *prometheus.CounterVec
	retryAfterSecs   *prometheus.CounterVec
	storeCommit      prometheus.Histogram
	puback           prometheus.Histogram
	reconnects       prometheus.Counter
}

func newCommandMetrics() *commandMetrics {
	sc := []string{"service", "class"}
	return &commandMetrics{
		ends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hearth_commands_total",
			Help: "Commands that ended since Hearth started, by service, device class, terminal status " +
				"(succeeded, failed, expired, superseded, rejected) and reason code (\"\" for none). " +
				"Service and class are empty for a command to a device not in the configuration.",
		}, []string{"service", "class", "status", "reason"}),
		attempts: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hearth_command_attempts",
			Help:    "Attempts each accepted command took, observed once as it ended (0 for one that ended before any send).",
			Buckets: AttemptBuckets,
		}, sc),
		successByAttempt: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hearth_command_success_by_attempt_total",
			Help: "Commands that succeeded, by the number of the attempt that succeeded (1 for the first): " +
				"a share of successes on attempt 2 or 3 that grows means a sick dependency.",
		}, []string{"service", "class", "attempt"}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hearth_attempts_sent_total",
			Help: "Attempts that left Hearth, by attempt number (1 for the first); a resend of an attempt whose delivery a lost connection left unknown is not counted again.",
		}, []string{"service", "class", "attempt"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hearth_command_duration_seconds",
			Help:    "Time from a command's acceptance to its end (any terminal status), on Hearth's clock.",
			Buckets: CommandBuckets,
		}, sc),
		confirm: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hearth_attempt_confirm_seconds",
			Help:    "For each command that succeeded, time from the send of the attempt that succeeded to the report that confirmed it.",
			Buckets: CommandBuckets,
		}, sc),
		safety: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hearth_safety_commands_not_carried_out_total",
			Help: "Commands to safety-critical devices (locks, alarms, valves, garage doors) not carried out: failed or expired, " +
				"or rejected unauthorized or stale_command; each also raised a critical notification.",
		}, []string{"service", "class", "status", "reason"}),
		retryAfter: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hearth_retry_after_waits_total",
			Help: "Waits before a retry that a service asked for with a Retry-After, and the retry policy honoured.",
		}, []string{"service"}),
		retryAfterSecs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hearth_retry_after_wait_seconds_total",
			Help: "Seconds of the waits that services asked for with a Retry-After.",
		}, []string{"service"}),
		storeCommit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hearth_store_commit_seconds",
			Help:    "Time each store commit (one group of writes, one bbolt transaction and its fsync) took, failed ones included.",
			Buckets: IOBuckets,
		}),
		puback: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "hearth_intake_puback_wait_seconds",
			Help: "Time from an MQTT command's arrival at Hearth's intake to its acknowledgement (the PUBACK), " +
				"which waits for the command to be stored or rejected.",
			Buckets: IOBuckets,
		}),
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hearth_mqtt_reconnects_total",
			Help: "Times Hearth's MQTT connection came back after the first connect.",
		}),
	}
}

func (c *commandMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{c.ends, c.attempts, c.successByAttempt, c.sent, c.duration, c.confirm,
		c.safety, c.retryAfter, c.retryAfterSecs, c.storeCommit, c.puback, c.reconnects}
}

// CommandEnded counts one command's end: hearth_commands_total; for an
// accepted one hearth_command_attempts and hearth_command_duration_seconds;
// for one that succeeded after attempt n, hearth_command_success_by_attempt_total
// {attempt="n"} and hearth_attempt_confirm_seconds; for a safety alert,
// hearth_safety_commands_not_carried_out_total.
func (m *Metrics) CommandEnded(e CommandEnd) {
	c := m.cmd
	c.ends.WithLabelValues(e.Service, e.Class, e.Status, e.Reason).Inc()
	if e.SafetyAlert {
		c.safety.WithLabelValues(e.Service, e.Class, e.Status, e.Reason).Inc()
	}
	if !e.Accepted {
		return
	}
	c.attempts.WithLabelValues(e.Service, e.Class).Observe(float64(e.Attempts))
	c.duration.WithLabelValues(e.Service, e.Class).Observe(e.Duration.Seconds())
	if e.Status == "succeeded" && e.Attempts > 0 {
		c.successByAttempt.WithLabelValues(e.Service, e.Class, strconv.Itoa(e.Attempts)).Inc()
		if e.Confirm >= 0 {
			c.confirm.WithLabelValues(e.Service, e.Class).Observe(e.Confirm.Seconds())
		}
	}
}

// CommandClass makes the series of a configured service and device
// class exist from the start, at 0: hearth_commands_total{status=
// "succeeded",reason=""} and hearth_command_success_by_attempt_total
// {attempt="1"}, so that a ratio of first-attempt successes is 0, not
// absent, for a service none of whose commands has succeeded yet.
func (m *Metrics) CommandClass(service, class string) {
	m.cmd.ends.WithLabelValues(service, class, "succeeded", "")
	m.cmd.successByAttempt.WithLabelValues(service, class, "1")
}

// AttemptSent counts attempt number n (1 for the first) to a device of
// class on service: hearth_attempts_sent_total.
func (m *Metrics) AttemptSent(service, class string, n int) {
	m.cmd.sent.WithLabelValues(service, class, strconv.Itoa(n)).Inc()
}

// RetryAfter counts a wait a service asked for with a Retry-After.
func (m *Metrics) RetryAfter(service string, wait time.Duration) {
	m.cmd.retryAfter.WithLabelValues(service).Inc()
	m.cmd.retryAfterSecs.WithLabelValues(service).Add(max(wait.Seconds(), 0))
}

// StoreCommitTook observes one store commit's duration
// (store.Options.OnCommitTime).
func (m *Metrics) StoreCommitTook(d time.Duration) { m.cmd.storeCommit.Observe(d.Seconds()) }

// PubackWait observes the time from an MQTT command's arrival to its
// acknowledgement.
func (m *Metrics) PubackWait(d time.Duration) { m.cmd.puback.Observe(d.Seconds()) }

// MQTTReconnected counts one reconnect of Hearth's MQTT connection (every
// connect after the first).
func (m *Metrics) MQTTReconnected() { m.cmd.reconnects.Inc() }

// WatchMQTT exports hearth_mqtt_connected: 1 while connected() says
// Hearth's MQTT connection is up, read at each scrape. Call it once.
func (m *Metrics) WatchMQTT(connected func() bool) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "hearth_mqtt_connected",
		Help: "1 while Hearth's MQTT connection (to the embedded broker or an external one) is up, 0 otherwise.",
	}, func() float64 {
		if connected() {
			return 1
		}
		return 0
	}))
}

// BuildInfo exports hearth_build_info{version,revision,goversion} 1.
// Call it once.
func (m *Metrics) BuildInfo(version, revision, goVersion string) {
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name:        "hearth_build_info",
		Help:        "Always 1; its labels say which build of Hearth runs: version (set at build time), VCS revision and Go version.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": goVersion},
	}, func() float64 { return 1 }))
}

// ServiceLoad is what waits on one service at a scrape (WatchLoad).
type ServiceLoad struct {
	Service string
	// Commands: the service takes commands (a bridge); Pending, Sleepy,
	// Held and Witnessed are exported for it only.
	Commands bool
	// Pending counts the commands accepted and not ended; Sleepy, of
	// them, those to sleepy devices; Held, those waiting for the
	// service's open breaker. Witnessed counts the attempts that timed
	// out in the service's silence and wait for a witness read's answer.
	Pending, Sleepy, Held, Witnessed int
	// RetryTokens is how many retries the service's retry budget allows
	// now; not exported when infinite (no budget).
	RetryTokens float64
}

// WatchLoad exports, from load called at each scrape,
// hearth_queue_depth, hearth_sleepy_commands_pending,
// hearth_breaker_held_commands, hearth_breaker_witness_waiting and
// hearth_retry_budget_tokens, each by service. load must be quick and safe for concurrent use. Call it once.
func (m *Metrics) WatchLoad(load func() []ServiceLoad) {
	m.reg.MustRegister(loadCollector(load))
}

var (
	queueDepthDesc = prometheus.NewDesc("hearth_queue_depth",
		"Commands accepted and not ended, per service: waiting their turn in their device's queue or being attempted.", []string{"service"}, nil)
	sleepyDesc = prometheus.NewDesc("hearth_sleepy_commands_pending",
		"Commands accepted and not ended for sleepy (battery) devices, per service: most wait for the device's next wake.", []string{"service"}, nil)
	heldDesc = prometheus.NewDesc("hearth_breaker_held_commands",
		"Commands waiting for their service's open circuit breaker to let them through (breaker.hold), per service.", []string{"service"}, nil)
	witnessDesc = prometheus.NewDesc("hearth_breaker_witness_waiting",
		"Attempts that timed out in their service's silence, waiting for a witness read (another device of the service asked for its state) to say whether the service is talking, per service.", []string{"service"}, nil)
	tokensDesc = prometheus.NewDesc("hearth_retry_budget_tokens",
		"Retries the service's retry budget allows now: max(min_retries, ratio × first attempts in the window) less the retries in it.", []string{"service"}, nil)
)

type loadCollector func() []ServiceLoad

func (loadCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- queueDepthDesc
	ch <- sleepyDesc
	ch <- heldDesc
	ch <- witnessDesc
	ch <- tokensDesc
}

func (f loadCollector) Collect(ch chan<- prometheus.Metric) {
	for _, l := range f() {
		if l.Commands {
			ch <- prometheus.MustNewConstMetric(queueDepthDesc, prometheus.GaugeValue, float64(l.Pending), l.Service)
			ch <- prometheus.MustNewConstMetric(sleepyDesc, prometheus.GaugeValue, float64(l.Sleepy), l.Service)
			ch <- prometheus.MustNewConstMetric(heldDesc, prometheus.GaugeValue, float64(l.Held), l.Service)
			ch <- prometheus.MustNewConstMetric(witnessDesc, prometheus.GaugeValue, float64(l.Witnessed), l.Service)
		}
		if !math.IsInf(l.RetryTokens, 0) && !math.IsNaN(l.RetryTokens) {
			ch <- prometheus.MustNewConstMetric(tokensDesc, prometheus.GaugeValue, l.RetryTokens, l.Service)
		}
	}
}
