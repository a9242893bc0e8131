// Package outage is hearth-sim's bridge outage scenario: an embedded
// broker, two simulated Zigbee2MQTT bridges and a real hearthd configured
// for them, with a circuit breaker on one bridge's service and a local
// automation that stands in for it. Under traffic from an automation
// client, the bridge goes offline (silently, or announced) and comes
// back, and the scenario prints the timeline of hearthd's breaker as it
// observes it over MQTT — its opening, the fast failures, the probes, the
// fallback automation, its closing — and checks the five conditions of
// issue 19's breaker promise (see [Summary]).
//
// It owns the timeline, the traffic patterns, hearthd's generated
// configuration, the fault injection, the observer, the summary and its
// checks. It never imports Hearth's dispatcher, store or protocols: the
// hearthd under test is started through [Hearth], which the command
// hearth-sim outage implements with a child process.
package outage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/retry"
	"github.com/hearthd/hearth/simulator"
	"github.com/hearthd/hearth/simulator/scenario/progress"
)

// Config is one outage scenario: hearth-sim outage's flags, named alike
// (see its usage for what each means). Call Derive, then Validate.
type Config struct {
	// Progress gets a line per phase (hearthd starting, before, outage,
	// after, the checks) with the time left in it; nil prints none. The
	// timeline on stdout is printed either way.
	Progress *progress.Phases
	// Before, Outage and After are the timeline: traffic before the
	// bridge goes offline, how long it is offline, traffic after it is
	// back (-before, -outage, -after).
	Before, Outage, After time.Duration
	// Announce makes the bridge say {"state":"offline"} on its
	// bridge/state; false is a silent outage, a hung coordinator
	// (-announce).
	Announce bool
	// Pattern is the traffic, PatternSteady at Rate commands per second,
	// PatternBurst (BurstSize commands BurstSpacing apart every
	// BurstEvery) or PatternSupersede (-pattern, -rate, -burst-size,
	// -burst-every).
	Pattern    string
	Rate       float64
	BurstSize  int
	BurstEvery time.Duration
	// Threshold, AttemptTimeout, OpenFor, MaxOpenFor and ProbeTimeout
	// configure the failing service's retry and breaker in hearthd's
	// configuration (-failure-threshold, -attempt-timeout, -open-for,
	// -max-open-for, -probe-timeout).
	Threshold           int
	AttemptTimeout      time.Duration
	OpenFor, MaxOpenFor time.Duration
	ProbeTimeout        time.Duration
	// SummaryEvery is the timeline's window of summed-up results
	// (-summary-every).
	SummaryEvery time.Duration
	// HearthdLog is the file of hearthd's log; "" is hearthd.log in the
	// run's temporary directory, kept only if the run fails
	// (-hearthd-log).
	HearthdLog string
}

// Given says which breaker durations of a Config were given; Derive
// fills the others.
type Given struct {
	AttemptTimeout, OpenFor, MaxOpenFor, ProbeTimeout bool
}

// The scenario's services, devices and topics.
const (
	outageService   = "zigbee"
	outageBase      = "zigbee2mqtt"
	upstairsService = "zigbee_upstairs"
	upstairsBase    = "zigbee_upstairs"
	fallbackRule    = "landing_light_from_motion"
	fallbackDevice  = "landing_light"
	motionTopic     = "hearth-sim/hall_motion"
	fallbackTopic   = "hearth-sim/fallback"
)

// trafficDevices are the lights of the failing bridge that the automation
// client commands in turn.
var trafficDevices = []string{"hall_light", "kitchen_light"}

// The traffic patterns (-pattern).
const (
	PatternSteady    = "steady"
	PatternBurst     = "burst"
	PatternSupersede = "supersede"
)

// BurstSpacing is the time between two commands of a burst.
const BurstSpacing = 50 * time.Millisecond

// IssueAt returns when the automation client sends its command n
// (counted from 0), as an offset from the start of traffic.
func (c Config) IssueAt(n int) time.Duration {
	switch c.Pattern {
	case PatternBurst:
		return time.Duration(n/c.BurstSize)*c.BurstEvery + time.Duration(n%c.BurstSize)*BurstSpacing
	case PatternSupersede:
		return time.Duration(n) * c.supersedeInterval()
	}
	return time.Duration(float64(n) * float64(time.Second) / c.Rate)
}

// supersedeInterval is the time between two commands of -pattern
// supersede: each light gets one every 0.4 attempt timeouts.
func (c Config) supersedeInterval() time.Duration {
	return max(c.AttemptTimeout*2/5/time.Duration(len(trafficDevices)), time.Millisecond)
}

// LongestGap is the longest time between two commands of the pattern.
func (c Config) LongestGap() time.Duration {
	switch c.Pattern {
	case PatternBurst:
		return c.BurstEvery - time.Duration(c.BurstSize-1)*BurstSpacing
	case PatternSupersede:
		return c.supersedeInterval()
	}
	return time.Duration(float64(time.Second) / c.Rate)
}

// describeTraffic says what the automation client sends, for the header.
func (c Config) describeTraffic() string {
	switch c.Pattern {
	case PatternBurst:
		return fmt.Sprintf("bursts of %d commands %v apart every %v", c.BurstSize, BurstSpacing, c.BurstEvery)
	case PatternSupersede:
		return fmt.Sprintf("a command every %v (each light every %v, under the %v attempt timeout)", c.supersedeInterval(), c.supersedeInterval()*time.Duration(len(trafficDevices)), c.AttemptTimeout)
	}
	return fmt.Sprintf("%g commands/s", c.Rate)
}

// Derive fills the breaker durations not given from the timeline:
// attempt_timeout = outage/60 within [250ms, 5s], max_open_for =
// min(outage/4, after/2), open_for = min(outage/10, max_open_for/2) (and
// max_open_for not below it unless given), probe_timeout =
// attempt_timeout.
func (c *Config) Derive(given Given) {
	if !given.AttemptTimeout {
		c.AttemptTimeout = min(max(c.Outage/60, 250*time.Millisecond), 5*time.Second).Round(time.Millisecond)
	}
	if !given.MaxOpenFor {
		c.MaxOpenFor = min(c.Outage/4, c.After/2).Round(time.Millisecond)
	}
	if !given.OpenFor {
		c.OpenFor = min(c.Outage/10, c.MaxOpenFor/2).Round(time.Millisecond)
	}
	if !given.MaxOpenFor && c.MaxOpenFor < c.OpenFor {
		c.MaxOpenFor = c.OpenFor
	}
	if !given.ProbeTimeout {
		c.ProbeTimeout = c.AttemptTimeout
	}
}

// Validate reports the first bad value of c. Its messages name the
// values by hearth-sim outage's flags.
func (c Config) Validate() error {
	switch {
	case c.Before <= 0 || c.Outage <= 0 || c.After <= 0:
		return errors.New("-before, -outage and -after must be more than 0")
	case !(c.Rate > 0 && c.Rate <= 100):
		return fmt.Errorf("-rate %v: want more than 0, at most 100 commands per second", c.Rate)
	case c.Pattern != PatternSteady && c.Pattern != PatternBurst && c.Pattern != PatternSupersede:
		return fmt.Errorf("-pattern %q: want steady, burst or supersede", c.Pattern)
	case c.BurstSize < 1 || c.BurstSize > 100:
		return fmt.Errorf("-burst-size %d: want 1 to 100 commands", c.BurstSize)
	case c.BurstEvery <= time.Duration(c.BurstSize)*BurstSpacing:
		return fmt.Errorf("-burst-every %v: want more than a burst lasts (%v)", c.BurstEvery, time.Duration(c.BurstSize)*BurstSpacing)
	case c.Threshold < 1:
		return fmt.Errorf("-failure-threshold %d: want at least 1", c.Threshold)
	case c.AttemptTimeout < 10*time.Millisecond:
		return fmt.Errorf("-attempt-timeout %v: want at least 10ms", c.AttemptTimeout)
	case c.OpenFor < 10*time.Millisecond || c.MaxOpenFor < c.OpenFor:
		return fmt.Errorf("-open-for %v, -max-open-for %v: want open_for at least 10ms and max_open_for not below it", c.OpenFor, c.MaxOpenFor)
	case c.ProbeTimeout < 10*time.Millisecond:
		return fmt.Errorf("-probe-timeout %v: want at least 10ms", c.ProbeTimeout)
	case c.SummaryEvery <= 0:
		return fmt.Errorf("-summary-every %v: want more than 0", c.SummaryEvery)
	}
	return nil
}

// hearthdConfig is the configuration of the scenario's hearthd.
func hearthdConfig(c Config, brokerURL, dataDir string) string {
	return fmt.Sprintf(`# Generated by hearth-sim outage.
prefix: hearth
data_dir: %q
mqtt:
  url: %q
  reconnect: {base: 100ms, cap: 1s}
http:
  listen: 127.0.0.1:0
homeassistant:
  discovery: false
services:
  %s:
    protocol: zigbee2mqtt
    base_topic: %s
    retry:
      max_attempts: 2
      attempt_timeout: %s
      base: %s
      cap: %s
    breaker:
      failure_threshold: %d
      open_for: %s
      max_open_for: %s
      max_probes: 1
      probe_timeout: %s
  %s:
    protocol: zigbee2mqtt
    base_topic: %s
devices:
  hall_light: {service: %[3]s, class: light}
  kitchen_light: {service: %[3]s, class: light}
  %[14]s: {service: %[12]s, class: light}
automations:
  # Stands in for the zigbee bridge: while it is down, motion in the hall
  # lights the landing upstairs, whose bridge is another.
  %[15]s:
    fallback_for: %[3]s
    triggers:
      - mqtt: {topic: %[16]q, payload: "on"}
    actions:
      - command: {device: %[14]s, target: {state: "ON"}}
      - notify: {title: "Zigbee bridge down", message: "hall motion lights the landing upstairs", severity: warning}
      - publish: {topic: %[17]q, payload: "landing_light on"}
`, dataDir, brokerURL,
		outageService, outageBase, c.AttemptTimeout, c.AttemptTimeout/2, c.AttemptTimeout,
		c.Threshold, c.OpenFor, c.MaxOpenFor, c.ProbeTimeout,
		upstairsService, upstairsBase, fallbackDevice, fallbackRule, motionTopic, fallbackTopic)
}

// Hearth starts the Hearth under test: a hearthd reading configFile, the
// scenario's generated configuration, and writing its log to log. The
// command hearth-sim outage runs a hearthd child process.
type Hearth interface {
	Start(configFile string, log io.Writer) (Process, error)
}

// Process is a running hearthd.
type Process interface {
	// Done is closed once it exited; Err then says why.
	Done() <-chan struct{}
	Err() error
	// Stop ends it, gracefully if it can; it is an error if it had
	// already exited or did not stop gracefully.
	Stop() error
	// String names it for the header, such as "hearthd bin/hearthd, pid
	// 4242".
	String() string
}

// bridgeReconnect spaces the simulated bridges' reconnects as real
// firmware should: exponential backoff with full jitter, base 250 ms, cap
// 30 s.
func bridgeReconnect(n int, prev time.Duration, r simulator.Rand) time.Duration {
	return retry.Backoff{Base: 250 * time.Millisecond, Multiplier: 2, Cap: 30 * time.Second}.Delay(n, prev, r)
}

// Run runs the scenario of c against the hearthd that h starts, printing
// the timeline and the summary on stdout (stderr gets the broker's and
// the simulator's errors), and returns the summary. Its error is one of
// setup; conditions that did not hold are in the summary's Failed.
func Run(ctx context.Context, c Config, h Hearth, stdout, stderr io.Writer) (Summary, error) {
	var sum Summary
	dir, err := os.MkdirTemp("", "hearth-sim-outage-")
	if err != nil {
		return sum, err
	}
	keep := false
	defer func() {
		if !keep {
			os.RemoveAll(dir)
		}
	}()
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))

	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0", Logger: log.With("component", "broker")})
	if err != nil {
		return sum, fmt.Errorf("broker: %w", err)
	}
	defer b.Close()

	obs := newOutageObserver(c, stdout)
	sim, err := simulator.New(simulator.Options{
		Broker:   b.URL(),
		ClientID: "hearth-sim-outage",
		Devices: []simulator.Device{
			{Name: "hall_light", Class: simulator.ClassLight, BaseTopic: outageBase},
			{Name: "kitchen_light", Class: simulator.ClassLight, BaseTopic: outageBase},
			{Name: fallbackDevice, Class: simulator.ClassLight, BaseTopic: upstairsBase},
		},
		Reconnect: bridgeReconnect,
		Logger:    log.With("component", "simulator"),
		OnSet:     obs.onSet,
	})
	if err != nil {
		return sum, err
	}
	simCtx, stopSim := context.WithCancel(context.Background())
	simDone := make(chan error, 1)
	go func() { simDone <- sim.Run(simCtx) }()
	defer func() {
		stopSim()
		<-simDone
	}()
	if err := waitFor(ctx, sim.Ready(), 10*time.Second); err != nil {
		return sum, fmt.Errorf("simulator not ready: %w", err)
	}

	// The observer subscribes before hearthd starts, so it sees every
	// transition and result.
	client, err := obs.connect(ctx, b.URL())
	if err != nil {
		return sum, err
	}
	defer client.Disconnect(250)

	configFile := filepath.Join(dir, "hearth.yaml")
	if err := os.WriteFile(configFile, []byte(hearthdConfig(c, b.URL(), filepath.Join(dir, "data"))), 0o600); err != nil {
		return sum, err
	}
	logFile := c.HearthdLog
	if logFile == "" {
		logFile = filepath.Join(dir, "hearthd.log")
	}
	hlog, err := os.Create(logFile)
	if err != nil {
		return sum, err
	}
	defer hlog.Close()
	c.Progress.Printf("starting hearthd (its log: %s)", logFile)
	hd, err := h.Start(configFile, hlog)
	if err != nil {
		return sum, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = hd.Stop()
		}
	}()
	select {
	case <-obs.hearthOnline:
	case <-hd.Done():
		keep = c.HearthdLog == ""
		return sum, fmt.Errorf("hearthd exited at start (%v); its log: %s", hd.Err(), logFile)
	case <-time.After(15 * time.Second):
		keep = c.HearthdLog == ""
		return sum, fmt.Errorf("hearthd not online within 15s; its log: %s", logFile)
	case <-ctx.Done():
		return sum, ctx.Err()
	}

	fmt.Fprintf(stdout, "Bridge outage: %s before, %s %s outage of %s, %s after; %s to %s.\n",
		c.Before, c.Outage, map[bool]string{true: "announced", false: "silent"}[c.Announce], outageBase, c.After, c.describeTraffic(), strings.Join(trafficDevices, ", "))
	fmt.Fprintf(stdout, "Breaker of %s: failure_threshold %d, attempt_timeout %s (2 attempts), open_for %s, max_open_for %s, probe_timeout %s, max_probes 1.\n",
		outageService, c.Threshold, c.AttemptTimeout, c.OpenFor, c.MaxOpenFor, c.ProbeTimeout)
	fmt.Fprintf(stdout, "%s.\n\n", hd)

	runErr := obs.drive(ctx, client, sim, hd.Done())
	c.Progress.Printf("stopping hearthd; checking the timeline")
	stopped = true
	stopErr := hd.Stop()
	obs.finish()
	sum = obs.summary()
	printSummary(stdout, c, sum)
	if runErr == nil && stopErr != nil {
		runErr = stopErr
	}
	if runErr != nil || len(sum.Failed) > 0 {
		keep = c.HearthdLog == ""
		fmt.Fprintf(stdout, "hearthd's log: %s\n", logFile)
	}
	return sum, runErr
}

// ---------------------------------------------------------------------------
// Observing

// cmdRecord is one command of the automation client.
type cmdRecord struct {
	device   string
	issued   time.Time
	done     time.Time // its terminal result's arrival; zero if none
	status   string
	reason   string
	attempts int
}

// transition is one breaker state change, as published by hearthd.
type transition struct {
	at    time.Time
	state string
}

// bridgeSet is one set that reached the failing bridge in its outage.
type bridgeSet struct {
	at     time.Time
	device string
}

// fallbackAction is one thing the fallback automation did.
type fallbackAction struct {
	at   time.Time
	what string
}

// outageObserver watches the run over MQTT and the simulator, prints the
// timeline as it goes and keeps what the summary needs. Its fields after
// mu are guarded by it.
type outageObserver struct {
	c            Config
	out          io.Writer
	hearthOnline chan struct{}
	onlineOnce   sync.Once

	mu                     sync.Mutex
	t0                     time.Time // the start of traffic; zero before
	outageStart, outageEnd time.Time
	end                    time.Time
	cmds                   map[string]*cmdRecord // by op_id
	transitions            []transition
	state                  string             // the breaker's last published state
	sets                   []bridgeSet        // sets that reached the failing bridge in the outage
	fallback               []fallbackAction   // during the whole run
	motions                []time.Time        // motion events sent
	window                 map[string][]int64 // the current summary window: status/reason → latencies (ns)
	windowStart            time.Time
	firstFast              bool // the first fast failure was printed
	timeoutLines           int
}

func newOutageObserver(c Config, out io.Writer) *outageObserver {
	return &outageObserver{c: c, out: out, hearthOnline: make(chan struct{}), cmds: map[string]*cmdRecord{}, window: map[string][]int64{}}
}

// offset formats the time since the start of traffic as +mm:ss.d.
func (o *outageObserver) offset(at time.Time) string {
	d := at.Sub(o.t0)
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	d = d.Round(100 * time.Millisecond)
	return fmt.Sprintf("%s%02d:%04.1f", sign, int(d/time.Minute), (d % time.Minute).Seconds())
}

// line prints one timeline line. Call with mu held.
func (o *outageObserver) line(at time.Time, format string, args ...any) {
	if o.t0.IsZero() {
		return // before the start: hearthd's startup
	}
	fmt.Fprintf(o.out, "%s  %s\n", o.offset(at), fmt.Sprintf(format, args...))
}

// connect connects the observer's MQTT client and subscribes to what the
// timeline shows.
func (o *outageObserver) connect(ctx context.Context, url string) (paho.Client, error) {
	opts := paho.NewClientOptions().AddBroker(url).SetClientID("hearth-sim-outage-observer").
		SetCleanSession(true).SetAutoReconnect(false).SetConnectTimeout(5 * time.Second)
	client := paho.NewClient(opts)
	if err := awaitToken(ctx, client.Connect()); err != nil {
		return nil, fmt.Errorf("observer: connect: %w", err)
	}
	filters := map[string]byte{
		"hearth/bridge/state":                           1,
		"hearth/services/" + outageService + "/state":   1,
		"hearth/+/result":                               1,
		"hearth/notifications":                          1,
		fallbackTopic:                                   1,
		outageBase + "/bridge/state":                    1,
		"hearth/services/" + upstairsService + "/state": 1,
	}
	if err := awaitToken(ctx, client.SubscribeMultiple(filters, o.onMessage)); err != nil {
		client.Disconnect(0)
		return nil, fmt.Errorf("observer: subscribe: %w", err)
	}
	return client, nil
}

func awaitToken(ctx context.Context, tok paho.Token) error {
	select {
	case <-tok.Done():
		return tok.Error()
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(10 * time.Second):
		return errTimeout
	}
}

// onMessage handles one message of the observer's subscriptions.
func (o *outageObserver) onMessage(_ paho.Client, m paho.Message) {
	now := time.Now()
	topic, payload := m.Topic(), m.Payload()
	switch {
	case topic == "hearth/bridge/state":
		if string(payload) == "online" {
			o.onlineOnce.Do(func() { close(o.hearthOnline) })
		}
	case topic == "hearth/services/"+outageService+"/state":
		var st serviceStatePayload
		if json.Unmarshal(payload, &st) == nil {
			o.breakerState(now, st, m.Retained())
		}
	case strings.HasSuffix(topic, "/result"):
		var r resultPayload
		if json.Unmarshal(payload, &r) == nil {
			o.result(now, r)
		}
	case topic == "hearth/notifications":
		var n notificationPayload
		if json.Unmarshal(payload, &n) == nil && n.Source == "automation:"+fallbackRule {
			o.fallbackDid(now, fmt.Sprintf("notification %q (%s)", n.Title, n.Severity))
		}
	case topic == fallbackTopic:
		o.fallbackDid(now, fmt.Sprintf("published %s %q", topic, payload))
	case topic == outageBase+"/bridge/state" && !m.Retained():
		o.mu.Lock()
		o.line(now, "%s/bridge/state %s", outageBase, payload)
		o.mu.Unlock()
	}
}

// serviceStatePayload is hearthd's <prefix>/services/<service>/state.
type serviceStatePayload struct {
	State string    `json:"state"`
	Since time.Time `json:"since"`
}

// resultPayload is hearthd's <prefix>/<device>/result.
type resultPayload struct {
	OpID     string `json:"op_id"`
	Device   string `json:"device"`
	Status   string `json:"status"`
	Reason   string `json:"reason"`
	Attempts int    `json:"attempts"`
}

// notificationPayload is hearthd's <prefix>/notifications.
type notificationPayload struct {
	Title    string `json:"title"`
	Severity string `json:"severity"`
	Source   string `json:"source"`
}

// unanswered reports whether a terminal result is that of a command sent
// but never confirmed: it failed or expired after at least one attempt
// (reason timeout, or retry_budget_exhausted or breaker_open when a
// timed-out attempt's retry was refused).
func unanswered(status, reason string, attempts int) bool {
	return (status == "failed" || status == "expired") && attempts > 0 && reason != "permanent_error"
}

// terminal reports whether a result status ends its command.
func terminal(status string) bool {
	switch status {
	case "succeeded", "failed", "expired", "superseded", "rejected":
		return true
	}
	return false
}

// breakerState records a breaker state published by hearthd, received at
// at. The transition is timed by the state's since, hearthd's own clock
// on the same host, so that a late delivery does not move it.
func (o *outageObserver) breakerState(at time.Time, st serviceStatePayload, retained bool) {
	state := st.State
	o.mu.Lock()
	defer o.mu.Unlock()
	if state == o.state {
		return // a republish
	}
	from := o.state
	o.state = state
	if o.t0.IsZero() {
		return // the state at start
	}
	o.flushWindow(at)
	if !st.Since.IsZero() {
		at = st.Since
	}
	o.transitions = append(o.transitions, transition{at: at, state: state})
	why := ""
	switch {
	case state == "open" && from == "half_open":
		why = " (the probe failed)"
	case state == "open":
		if o.c.Announce {
			why = " (the bridge said offline)"
		} else {
			why = fmt.Sprintf(" (%d attempts timed out since the outage began; %d sets unanswered)", o.failedBefore(at), o.setsBefore(at))
		}
	case state == "closed":
		why = " (the probe succeeded)"
	}
	if retained {
		why += " [retained]"
	}
	o.line(at, "breaker %s %s → %s%s", outageService, from, state, why)
}

// setsBefore counts the sets that reached the failing bridge in the outage
// before at. Call with mu held.
func (o *outageObserver) setsBefore(at time.Time) int {
	n := 0
	for _, s := range o.sets {
		if s.at.Before(at) {
			n++
		}
	}
	return n
}

// failedBefore counts the sets to the failing bridge in the outage that
// were failed attempts by at: unanswered for the attempt timeout. A set
// whose command a newer one superseded meanwhile counts too: it went out,
// and the silent bridge answered nothing, which hearthd's breaker counts
// as a failure at the attempt's timeout. Call with mu held.
func (o *outageObserver) failedBefore(at time.Time) int {
	n := 0
	for _, s := range o.sets {
		if s.at.Add(o.c.AttemptTimeout).Before(at) {
			n++
		}
	}
	return n
}

func (o *outageObserver) result(at time.Time, r resultPayload) {
	if !terminal(r.Status) {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	rec := o.cmds[r.OpID]
	if r.Device == fallbackDevice && strings.HasPrefix(r.OpID, "auto-") {
		o.fallback = append(o.fallback, fallbackAction{at: at, what: "command result " + r.Status})
		o.line(at, "fallback: %s ON %s (%s)", fallbackDevice, r.Status, r.OpID)
		return
	}
	if rec == nil || !rec.done.IsZero() {
		return
	}
	rec.done, rec.status, rec.reason, rec.attempts = at, r.Status, r.Reason, r.Attempts
	key := r.Status
	if r.Reason != "" && r.Status != "succeeded" {
		key += " (" + r.Reason + ")"
	}
	lat := at.Sub(rec.issued)
	switch {
	case r.Reason == "breaker_open" && r.Attempts == 0 && !o.firstFast:
		o.firstFast = true
		o.line(at, "first fast failure: %s %s failed (breaker_open) %.3f s after it was sent, %d attempts", r.Device, r.OpID, lat.Seconds(), r.Attempts)
		return
	case unanswered(r.Status, r.Reason, r.Attempts) && o.timeoutLines < 50:
		o.timeoutLines++
		o.line(at, "unanswered: %s %s sent, no report, then %s (%s) after %.1f s, %d attempts", r.Device, r.OpID, r.Status, r.Reason, lat.Seconds(), r.Attempts)
		return
	}
	o.window[key] = append(o.window[key], int64(lat))
}

// flushWindow prints the summary of the results since the last flush and
// starts a new window at at. Call with mu held.
func (o *outageObserver) flushWindow(at time.Time) {
	if len(o.window) > 0 && !o.t0.IsZero() {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(o.window)) {
			lats := o.window[k]
			slices.Sort(lats)
			parts = append(parts, fmt.Sprintf("%d %s in %.3f s median", len(lats), k, time.Duration(lats[len(lats)/2]).Seconds()))
		}
		since := "results since " + o.offset(o.windowStart)
		if o.offset(at) == o.offset(o.windowStart) {
			since = "results"
		}
		fmt.Fprintf(o.out, "%s  %s: %s\n", o.offset(at), since, strings.Join(parts, ", "))
	}
	o.window = map[string][]int64{}
	o.windowStart = at
}

func (o *outageObserver) fallbackDid(at time.Time, what string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.fallback = append(o.fallback, fallbackAction{at: at, what: what})
	o.line(at, "fallback: %s", what)
}

// onSet sees every set the simulated bridges receive.
func (o *outageObserver) onSet(ev simulator.SetEvent) {
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case ev.Device == fallbackDevice:
		o.fallback = append(o.fallback, fallbackAction{at: now, what: "set " + string(ev.Payload)})
		o.line(now, "fallback: %s/%s/set %s", upstairsBase, ev.Device, ev.Payload)
	case ev.Reason == simulator.ReasonBridgeOffline:
		o.sets = append(o.sets, bridgeSet{at: now, device: ev.Device})
		what := "set"
		if o.state != "closed" && o.state != "" {
			what = "probe"
		}
		o.line(now, "%s reached the offline bridge: %s %s (breaker %s)", what, ev.Device, ev.Payload, o.state)
	}
}

// drive runs the timeline: traffic, motion, the outage and its end. It
// returns early if ctx is done or hearthd exits.
func (o *outageObserver) drive(ctx context.Context, client paho.Client, sim *simulator.Sim, hearthdDone <-chan struct{}) error {
	start := time.Now()
	o.mu.Lock()
	o.t0, o.windowStart = start, start
	if o.state == "" {
		o.state = "closed"
	}
	o.line(start, "traffic starts: %s; breaker %s %s", o.c.describeTraffic(), outageService, o.state)
	o.mu.Unlock()
	o.c.Progress.Printf("before the outage: %v of traffic", o.c.Before)

	outageAt := start.Add(o.c.Before)
	backAt := outageAt.Add(o.c.Outage)
	endAt := backAt.Add(o.c.After)
	// Motion: once before the outage, three times during it, once after.
	motions := []time.Time{
		start.Add(o.c.Before / 2),
		outageAt.Add(o.c.Outage / 4), outageAt.Add(o.c.Outage / 2), outageAt.Add(3 * o.c.Outage / 4),
		backAt.Add(3 * o.c.After / 4),
	}
	nextCmd := start
	nextFlush := start.Add(o.c.SummaryEvery)
	phase := 0 // 0 before, 1 outage, 2 after
	n := 0
	for {
		now := time.Now()
		if phase == 0 && !now.Before(outageAt) {
			phase = 1
			o.mu.Lock()
			o.flushWindow(now)
			o.outageStart = now
			o.line(now, "OUTAGE: bridge %s goes offline (%s)", outageBase, map[bool]string{true: "announced on bridge/state", false: "silent: a hung coordinator"}[o.c.Announce])
			o.mu.Unlock()
			if err := sim.SetBridgeOnline(outageBase, false, o.c.Announce); err != nil {
				return err
			}
			o.c.Progress.Printf("outage: bridge %s offline for %v", outageBase, o.c.Outage)
		}
		if phase == 1 && !now.Before(backAt) {
			phase = 2
			if err := sim.SetBridgeOnline(outageBase, true, o.c.Announce); err != nil {
				return err
			}
			o.mu.Lock()
			o.flushWindow(now)
			o.outageEnd = now
			o.line(now, "RECOVERY: bridge %s is back", outageBase)
			o.mu.Unlock()
			o.c.Progress.Printf("after the outage: %v of traffic", o.c.After)
		}
		if !now.Before(endAt) {
			o.mu.Lock()
			o.flushWindow(now)
			o.end = now
			o.line(now, "traffic ends")
			o.mu.Unlock()
			return nil
		}
		if len(motions) > 0 && !now.Before(motions[0]) {
			motions = motions[1:]
			o.mu.Lock()
			o.motions = append(o.motions, now)
			o.line(now, "motion in the hall (%s on); breaker %s %s", motionTopic, outageService, o.state)
			o.mu.Unlock()
			client.Publish(motionTopic, 1, false, "on")
		}
		if !now.Before(nextFlush) {
			o.mu.Lock()
			o.flushWindow(now)
			o.mu.Unlock()
			nextFlush = nextFlush.Add(o.c.SummaryEvery)
		}
		if !now.Before(nextCmd) {
			dev := trafficDevices[n%len(trafficDevices)]
			state := []string{"ON", "OFF"}[(n/len(trafficDevices))%2]
			opID := fmt.Sprintf("sim-%05d", n)
			n++
			payload, _ := json.Marshal(map[string]string{"state": state, "op_id": opID})
			o.mu.Lock()
			o.cmds[opID] = &cmdRecord{device: dev, issued: now}
			o.mu.Unlock()
			client.Publish("hearth/"+dev+"/set", 1, false, payload)
			nextCmd = start.Add(o.c.IssueAt(n))
		}
		wake := slices.MinFunc([]time.Time{nextCmd, nextFlush, endAt, outageAt, backAt, firstOr(motions, endAt)}, func(a, b time.Time) int {
			// Past events (the outage start, once passed) do not wake.
			if !a.After(now) {
				return 1
			}
			if !b.After(now) {
				return -1
			}
			return a.Compare(b)
		})
		select {
		case <-time.After(max(time.Until(wake), time.Millisecond)):
		case <-hearthdDone:
			return errors.New("hearthd exited during the run")
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func firstOr(ts []time.Time, def time.Time) time.Time {
	if len(ts) > 0 {
		return ts[0]
	}
	return def
}

// finish prints what is left of the results window once hearthd stopped.
func (o *outageObserver) finish() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.flushWindow(time.Now())
}

// ---------------------------------------------------------------------------
// Summary

// Summary is what the run measured, and which of the issue's five
// conditions did not hold. Durations are -1 when what they time did not
// happen.
type Summary struct {
	// OpenAfter is the time from the outage start to the breaker's first
	// opening in it; AttemptsBeforeOpen the failed attempts in between:
	// sets the bridge ignored that ran out their attempt timeout before it,
	// superseded or not (SetsBeforeOpen counts every set before it).
	// OpenBound is the most that condition 1 allows: the failure threshold,
	// plus one in flight for every other device commanded (each device
	// has one attempt in flight at most).
	OpenAfter          time.Duration
	AttemptsBeforeOpen int
	SetsBeforeOpen     int
	OpenBound          int
	// Of the commands sent in the outage: those that failed fast
	// (breaker_open without an attempt) and their median time from the
	// publish to the result; those that timed out (failed or expired after
	// an attempt: see unanswered) and those of them sent after the breaker
	// opened; those superseded by a newer command to their device; others.
	FailedFast        int
	FastMedian        time.Duration
	TimedOut          int
	TimedOutAfterOpen int
	Superseded        int
	OtherResults      int
	Unanswered        int // commands of the whole run with no terminal result
	// Probes are the sets that reached the offline bridge after the breaker
	// first opened, as offsets from the outage start; ProbeGaps the times
	// between them. MaxProbesPerCooldown is the most sets in one open
	// period and the half-open period that follows it. ProbesExpected says
	// the outage was long enough for at least one probe.
	Probes               []time.Duration
	ProbeGaps            []time.Duration
	MaxProbesPerCooldown int
	ProbesExpected       bool
	// ClosedAfter is the time from the recovery to the breaker's closing.
	ClosedAfter time.Duration
	// FallbackActions and FallbackBefore count what the fallback automation
	// did during the outage and before it.
	FallbackActions int
	FallbackBefore  int
	FallbackAfter   int
	// Failed names the conditions that did not hold.
	Failed []string
}

func (o *outageObserver) summary() Summary {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := Summary{OpenAfter: -1, ClosedAfter: -1, FastMedian: -1, OpenBound: o.c.Threshold + len(trafficDevices) - 1}
	var firstOpen time.Time
	for _, t := range o.transitions {
		if t.state == "open" && !t.at.Before(o.outageStart) && (o.outageEnd.IsZero() || t.at.Before(o.outageEnd)) {
			firstOpen = t.at
			break
		}
	}
	if !firstOpen.IsZero() {
		s.OpenAfter = firstOpen.Sub(o.outageStart)
		s.AttemptsBeforeOpen = o.failedBefore(firstOpen)
		s.SetsBeforeOpen = o.setsBefore(firstOpen)
	}
	if !o.outageEnd.IsZero() {
		for _, t := range o.transitions {
			if t.state == "closed" && t.at.After(o.outageEnd) {
				s.ClosedAfter = t.at.Sub(o.outageEnd)
				break
			}
		}
	}
	inOutage := func(at time.Time) bool {
		return !o.outageStart.IsZero() && !at.Before(o.outageStart) && (o.outageEnd.IsZero() || at.Before(o.outageEnd))
	}
	var fast []time.Duration
	for _, r := range o.cmds {
		if r.done.IsZero() {
			s.Unanswered++
			continue
		}
		if !inOutage(r.issued) {
			continue
		}
		switch {
		case r.reason == "breaker_open" && r.attempts == 0:
			s.FailedFast++
			fast = append(fast, r.done.Sub(r.issued))
		case unanswered(r.status, r.reason, r.attempts):
			s.TimedOut++
			if !firstOpen.IsZero() && r.issued.After(firstOpen) {
				s.TimedOutAfterOpen++
			}
		case r.status == "superseded":
			s.Superseded++
		case r.status != "succeeded":
			s.OtherResults++
		}
	}
	if len(fast) > 0 {
		slices.Sort(fast)
		s.FastMedian = fast[len(fast)/2]
	}
	// Probes: sets after the first opening, counted per cooldown (an open
	// period and the half-open one after it, up to the next opening).
	var opens []time.Time
	for _, t := range o.transitions {
		if t.state == "open" {
			opens = append(opens, t.at)
		}
	}
	if !firstOpen.IsZero() {
		perCooldown := map[int]int{}
		for _, set := range o.sets {
			// A set that reaches the bridge within inFlightGrace of an
			// opening left hearthd before it: it counts before it.
			at := set.at.Add(-inFlightGrace)
			if at.Before(firstOpen) {
				continue
			}
			s.Probes = append(s.Probes, set.at.Sub(o.outageStart))
			i := 0
			for j, op := range opens {
				if !at.Before(op) {
					i = j
				}
			}
			perCooldown[i]++
			s.MaxProbesPerCooldown = max(s.MaxProbesPerCooldown, perCooldown[i])
		}
		for i := 1; i < len(s.Probes); i++ {
			s.ProbeGaps = append(s.ProbeGaps, s.Probes[i]-s.Probes[i-1])
		}
		// A silent outage lets a probe out once open_for has passed and a
		// command comes: expect one if the outage outlasts that.
		s.ProbesExpected = !o.c.Announce && !o.outageEnd.IsZero() &&
			o.outageEnd.Sub(firstOpen) > o.c.OpenFor+2*o.c.LongestGap()
	}
	for _, f := range o.fallback {
		switch {
		case f.at.Before(o.outageStart) || o.outageStart.IsZero():
			s.FallbackBefore++
		case inOutage(f.at):
			s.FallbackActions++
		default:
			s.FallbackAfter++
		}
	}

	if s.OpenAfter < 0 {
		s.Failed = append(s.Failed, "1: the breaker did not open during the outage")
	} else if s.AttemptsBeforeOpen > s.OpenBound {
		s.Failed = append(s.Failed, fmt.Sprintf("1: the breaker opened after %d failed attempts, more than its threshold %d (+%d in flight)", s.AttemptsBeforeOpen, o.c.Threshold, len(trafficDevices)-1))
	}
	switch {
	case s.FailedFast == 0:
		s.Failed = append(s.Failed, "2: no command failed fast (breaker_open) during the outage")
	case s.FastMedian >= o.c.AttemptTimeout:
		s.Failed = append(s.Failed, fmt.Sprintf("2: fast failures took %.3f s (median), not less than the attempt timeout %s", s.FastMedian.Seconds(), o.c.AttemptTimeout))
	case s.TimedOutAfterOpen > len(s.Probes):
		s.Failed = append(s.Failed, fmt.Sprintf("2: %d commands sent while the breaker was open timed out, but only %d were probes", s.TimedOutAfterOpen, len(s.Probes)))
	}
	switch {
	case s.FallbackActions == 0:
		s.Failed = append(s.Failed, "3: the fallback automation did not act during the outage")
	case s.FallbackBefore > 0:
		s.Failed = append(s.Failed, fmt.Sprintf("3: the fallback automation acted %d times before the outage, while the breaker was closed", s.FallbackBefore))
	}
	switch {
	case s.MaxProbesPerCooldown > 1:
		s.Failed = append(s.Failed, fmt.Sprintf("4: %d sets reached the offline bridge in one cooldown, want at most 1 (max_probes)", s.MaxProbesPerCooldown))
	case s.ProbesExpected && len(s.Probes) == 0:
		s.Failed = append(s.Failed, "4: no probe during the outage, though it outlasted a cooldown")
	}
	switch limit := o.c.CloseBound(); {
	case s.ClosedAfter < 0:
		s.Failed = append(s.Failed, "5: the breaker did not close after the recovery")
	case s.ClosedAfter > limit:
		s.Failed = append(s.Failed, fmt.Sprintf("5: the breaker closed %.1f s after the recovery, later than one open period, one probe and one gap between commands (%.1f s)", s.ClosedAfter.Seconds(), limit.Seconds()))
	}
	return s
}

// inFlightGrace is how long after a breaker opening a set may reach the
// bridge though hearthd sent it before: the broker's delivery time.
// hearthd checks its permit at the moment of each send, so a set sent
// after the opening would arrive later than that.
const inFlightGrace = 50 * time.Millisecond

// CloseBound is the latest the breaker may close after the recovery: the
// longest open period, then the next command (at most the longest gap
// between two) as its probe, answered within probe_timeout.
func (c Config) CloseBound() time.Duration {
	return c.MaxOpenFor + c.LongestGap() + c.ProbeTimeout
}

// Err is nil if all five conditions held, else an error naming those
// that did not.
func (s Summary) Err() error {
	if len(s.Failed) == 0 {
		return nil
	}
	return fmt.Errorf("%d of 5 conditions did not hold: %s", len(s.Failed), strings.Join(s.Failed, "; "))
}

// printSummary writes the summary after the timeline.
func printSummary(w io.Writer, c Config, s Summary) {
	var b bytes.Buffer
	sec := func(d time.Duration) string {
		if d < 0 {
			return "never"
		}
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	ok := func(n int) string {
		for _, f := range s.Failed {
			if strings.HasPrefix(f, fmt.Sprint(n)+":") {
				return "FAIL"
			}
		}
		return "ok"
	}
	fmt.Fprintf(&b, "\nSummary\n")
	fmt.Fprintf(&b, "  [%s] 1. breaker opened %s after the outage began, once %d sets had run out the attempt timeout unanswered, superseded ones included (threshold %d, at most %d with one in flight per other light); %d sets reached the bridge before\n",
		ok(1), sec(s.OpenAfter), s.AttemptsBeforeOpen, c.Threshold, s.OpenBound, s.SetsBeforeOpen)
	fmt.Fprintf(&b, "  [%s] 2. commands sent during the outage: %d failed fast (breaker_open, no attempt, %s median, want under %s), %d timed out (%d of them sent after the breaker opened, want at most the %d probes), %d superseded, %d other\n",
		ok(2), s.FailedFast, fmtMedian(s.FastMedian), c.AttemptTimeout, s.TimedOut, s.TimedOutAfterOpen, len(s.Probes), s.Superseded, s.OtherResults)
	fmt.Fprintf(&b, "  [%s] 3. fallback automation: %d actions during the outage (want some), %d before it (want none), %d after it\n",
		ok(3), s.FallbackActions, s.FallbackBefore, s.FallbackAfter)
	var probes, gaps []string
	for _, p := range s.Probes {
		probes = append(probes, fmt.Sprintf("+%.1f", p.Seconds()))
	}
	for _, g := range s.ProbeGaps {
		gaps = append(gaps, fmt.Sprintf("%.1f", g.Seconds()))
	}
	switch {
	case len(s.Probes) > 0:
		fmt.Fprintf(&b, "  [%s] 4. sets that reached the silent bridge after the breaker opened: %d probes (at most %d per cooldown, want at most 1) at %s s since the outage began; cooldowns between them %s s (open_for %s doubling to %s)\n",
			ok(4), len(s.Probes), s.MaxProbesPerCooldown, orNone(probes), orNone(gaps), c.OpenFor, c.MaxOpenFor)
	case s.OpenAfter < 0:
		fmt.Fprintf(&b, "  [%s] 4. sets that reached the silent bridge after the breaker opened: none, as the breaker never opened\n", ok(4))
	case c.Announce:
		fmt.Fprintf(&b, "  [%s] 4. sets that reached the bridge after the breaker opened: none (the bridge's own offline holds the breaker open: no probe until it says online)\n", ok(4))
	case !s.ProbesExpected:
		fmt.Fprintf(&b, "  [%s] 4. sets that reached the silent bridge after the breaker opened: none (the outage ended before a cooldown had passed and a command come)\n", ok(4))
	default:
		fmt.Fprintf(&b, "  [%s] 4. sets that reached the silent bridge after the breaker opened: none, though the outage outlasted a cooldown\n", ok(4))
	}
	fmt.Fprintf(&b, "  [%s] 5. breaker closed %s after the bridge came back (want within %.1f s: max_open_for, the longest gap between commands, probe_timeout)\n", ok(5), sec(s.ClosedAfter), c.CloseBound().Seconds())
	if s.Unanswered > 0 {
		fmt.Fprintf(&b, "  %d commands got no terminal result\n", s.Unanswered)
	}
	if len(s.Failed) == 0 {
		fmt.Fprintf(&b, "All 5 conditions held.\n")
	} else {
		fmt.Fprintf(&b, "%d of 5 conditions did not hold.\n", len(s.Failed))
	}
	_, _ = w.Write(b.Bytes())
}

func fmtMedian(d time.Duration) string {
	if d < 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.3f s", d.Seconds())
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// errTimeout is waitFor's error when the time ran out.
var errTimeout = errors.New("timed out")

// waitFor waits until ch is closed, d has passed or ctx is done.
func waitFor(ctx context.Context, ch <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-t.C:
		return fmt.Errorf("%w after %v", errTimeout, d)
	case <-ctx.Done():
		return ctx.Err()
	}
}
