package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/simulator"
)

// outageUsage heads the outage subcommand's -h output.
const outageUsage = `usage: hearth-sim outage [flags]

The bridge outage: an embedded broker, a simulated Zigbee2MQTT bridge
"zigbee2mqtt" (lights hall_light and kitchen_light) and a second one
"zigbee_upstairs" (light landing_light), and a hearthd child process
configured for both, with a circuit breaker on the service "zigbee" and a
local automation that stands in for it: while zigbee's breaker is not
closed, motion in the hall (a message on hearth-sim/hall_motion) turns the
landing light on, notifies, and publishes on hearth-sim/fallback.

An automation client commands the two lights of the failing bridge in
turn, alternately ON and OFF, in one of three patterns (-pattern):

  steady     -rate commands per second (each light gets one every
             2/rate s: at the defaults, 2 s, faster than the 5 s attempt
             timeout, so each command supersedes the last one's attempt);
  burst      bursts of -burst-size commands 50 ms apart (a scene, an
             automation firing), one every -burst-every, silence between;
  supersede  each light a new command every 0.4 attempt timeouts, however
             long that is: traffic that always supersedes itself before an
             attempt can time out (a dimmer drag, a slider).

After -before, the bridge goes offline for -outage: it ignores every set
and get (silently, a hung coordinator, so that the breaker must trip on
timeouts; or, with -announce, saying {"state":"offline"} on its
bridge/state). Then it is back for -after. Motion is seen once before the outage, three times
during it and once after it.

The run is in real time (hearthd is a separate process). It prints a
timeline from what it observes over MQTT, then a summary, and fails if
any of these did not hold:

  1. the breaker opened during the outage, once no more than
     failure_threshold sets (plus one per other light, in flight) had run
     out their attempt timeout unanswered; a set whose command a newer one
     superseded counts too: it went out, and nothing answered it;
  2. commands sent during the outage failed fast (breaker_open, no
     attempt, in less than the attempt timeout, median), and of those sent
     after the breaker opened no more timed out than there were probes;
  3. the fallback automation acted during the outage (its publish, its
     notification or its command), and never before it;
  4. after the breaker first opened, at most one set per cooldown (an open
     period and the half-open one after it) reached the silent bridge: the
     probe (max_probes 1); and at least one in all, when the outage
     outlasted a cooldown and a command came after it. A set that reaches
     the bridge within 50 ms of an opening left hearthd before it, and
     counts before it;
  5. the breaker closed after the bridge came back, within the longest
     open period (max_open_for) plus one probe (probe_timeout) plus the
     longest gap between two commands.

Durations of the breaker not given are derived from the timeline:
attempt_timeout = outage/60 within [250ms, 5s], max_open_for =
min(outage/4, after/2), open_for = min(outage/10, max_open_for/2),
probe_timeout = attempt_timeout.

flags:
`

// outageConfig is the outage subcommand's flags.
type outageConfig struct {
	hearthd                string
	before, outage, after  time.Duration
	announce               bool
	rate                   float64
	pattern                string
	burstSize              int
	burstEvery             time.Duration
	threshold              int
	attemptTimeout         time.Duration
	openFor, maxOpenFor    time.Duration
	probeTimeout           time.Duration
	summaryEvery           time.Duration
	hearthdLog             string
	hearthdLogLevel        string
	derivedTimeout         bool // attemptTimeout was derived, not given
	derivedOpen, derivedMx bool
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
	patternSteady    = "steady"
	patternBurst     = "burst"
	patternSupersede = "supersede"
)

// burstSpacing is the time between two commands of a burst.
const burstSpacing = 50 * time.Millisecond

// issueAt returns when the automation client sends its command n
// (counted from 0), as an offset from the start of traffic.
func (c outageConfig) issueAt(n int) time.Duration {
	switch c.pattern {
	case patternBurst:
		return time.Duration(n/c.burstSize)*c.burstEvery + time.Duration(n%c.burstSize)*burstSpacing
	case patternSupersede:
		return time.Duration(n) * c.supersedeInterval()
	}
	return time.Duration(float64(n) * float64(time.Second) / c.rate)
}

// supersedeInterval is the time between two commands of -pattern
// supersede: each light gets one every 0.4 attempt timeouts.
func (c outageConfig) supersedeInterval() time.Duration {
	return max(c.attemptTimeout*2/5/time.Duration(len(trafficDevices)), time.Millisecond)
}

// longestGap is the longest time between two commands of the pattern.
func (c outageConfig) longestGap() time.Duration {
	switch c.pattern {
	case patternBurst:
		return c.burstEvery - time.Duration(c.burstSize-1)*burstSpacing
	case patternSupersede:
		return c.supersedeInterval()
	}
	return time.Duration(float64(time.Second) / c.rate)
}

// describeTraffic says what the automation client sends, for the header.
func (c outageConfig) describeTraffic() string {
	switch c.pattern {
	case patternBurst:
		return fmt.Sprintf("bursts of %d commands %v apart every %v", c.burstSize, burstSpacing, c.burstEvery)
	case patternSupersede:
		return fmt.Sprintf("a command every %v (each light every %v, under the %v attempt timeout)", c.supersedeInterval(), c.supersedeInterval()*time.Duration(len(trafficDevices)), c.attemptTimeout)
	}
	return fmt.Sprintf("%g commands/s", c.rate)
}

// derive fills the breaker durations not given from the timeline.
func (c *outageConfig) derive(set map[string]bool) {
	if !set["attempt-timeout"] {
		c.attemptTimeout = min(max(c.outage/60, 250*time.Millisecond), 5*time.Second).Round(time.Millisecond)
	}
	if !set["max-open-for"] {
		c.maxOpenFor = min(c.outage/4, c.after/2).Round(time.Millisecond)
	}
	if !set["open-for"] {
		c.openFor = min(c.outage/10, c.maxOpenFor/2).Round(time.Millisecond)
	}
	if !set["max-open-for"] && c.maxOpenFor < c.openFor {
		c.maxOpenFor = c.openFor
	}
	if !set["probe-timeout"] {
		c.probeTimeout = c.attemptTimeout
	}
}

func (c outageConfig) validate() error {
	switch {
	case c.before <= 0 || c.outage <= 0 || c.after <= 0:
		return errors.New("-before, -outage and -after must be more than 0")
	case !(c.rate > 0 && c.rate <= 100):
		return fmt.Errorf("-rate %v: want more than 0, at most 100 commands per second", c.rate)
	case c.pattern != patternSteady && c.pattern != patternBurst && c.pattern != patternSupersede:
		return fmt.Errorf("-pattern %q: want steady, burst or supersede", c.pattern)
	case c.burstSize < 1 || c.burstSize > 100:
		return fmt.Errorf("-burst-size %d: want 1 to 100 commands", c.burstSize)
	case c.burstEvery <= time.Duration(c.burstSize)*burstSpacing:
		return fmt.Errorf("-burst-every %v: want more than a burst lasts (%v)", c.burstEvery, time.Duration(c.burstSize)*burstSpacing)
	case c.threshold < 1:
		return fmt.Errorf("-failure-threshold %d: want at least 1", c.threshold)
	case c.attemptTimeout < 10*time.Millisecond:
		return fmt.Errorf("-attempt-timeout %v: want at least 10ms", c.attemptTimeout)
	case c.openFor < 10*time.Millisecond || c.maxOpenFor < c.openFor:
		return fmt.Errorf("-open-for %v, -max-open-for %v: want open_for at least 10ms and max_open_for not below it", c.openFor, c.maxOpenFor)
	case c.probeTimeout < 10*time.Millisecond:
		return fmt.Errorf("-probe-timeout %v: want at least 10ms", c.probeTimeout)
	case c.summaryEvery <= 0:
		return fmt.Errorf("-summary-every %v: want more than 0", c.summaryEvery)
	}
	return nil
}

// runOutage is the outage subcommand: it parses args, runs the scenario,
// prints its timeline and summary on stdout, and returns an error naming
// the conditions that did not hold.
func runOutage(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hearth-sim outage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), outageUsage)
		fs.PrintDefaults()
	}
	var c outageConfig
	fs.StringVar(&c.hearthd, "hearthd", "", `hearthd executable; default: "hearthd" next to hearth-sim, else in PATH`)
	fs.DurationVar(&c.before, "before", 30*time.Second, "traffic before the outage")
	fs.DurationVar(&c.outage, "outage", 5*time.Minute, "how long the bridge is offline")
	fs.DurationVar(&c.after, "after", time.Minute, "traffic after the bridge is back")
	fs.BoolVar(&c.announce, "announce", false, `the bridge says {"state":"offline"} on its bridge/state; default: a silent outage (a hung coordinator)`)
	fs.Float64Var(&c.rate, "rate", 1, "commands per second to the failing bridge's lights (-pattern steady)")
	fs.StringVar(&c.pattern, "pattern", patternSteady, "traffic pattern: steady, burst or supersede (see above)")
	fs.IntVar(&c.burstSize, "burst-size", 6, "commands per burst (-pattern burst)")
	fs.DurationVar(&c.burstEvery, "burst-every", 10*time.Second, "time from one burst to the next (-pattern burst)")
	fs.IntVar(&c.threshold, "failure-threshold", 5, "breaker failure_threshold: consecutive failed attempts that open it")
	fs.DurationVar(&c.attemptTimeout, "attempt-timeout", 0, "retry attempt_timeout of the zigbee service; default: derived (see above)")
	fs.DurationVar(&c.openFor, "open-for", 0, "breaker open_for; default: derived")
	fs.DurationVar(&c.maxOpenFor, "max-open-for", 0, "breaker max_open_for; default: derived")
	fs.DurationVar(&c.probeTimeout, "probe-timeout", 0, "breaker probe_timeout; default: the attempt timeout")
	fs.DurationVar(&c.summaryEvery, "summary-every", 10*time.Second, "the timeline sums up results over windows this long")
	fs.StringVar(&c.hearthdLog, "hearthd-log", "", "file for hearthd's log; default: hearthd.log in the run's temporary directory, kept only if the run fails")
	fs.StringVar(&c.hearthdLogLevel, "hearthd-log-level", "info", "hearthd's -log-level")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("outage: unexpected argument %q (flags start with -)", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	c.derive(set)
	if err := c.validate(); err != nil {
		return fmt.Errorf("outage: %w", err)
	}
	bin, err := findHearthd(c.hearthd)
	if err != nil {
		return fmt.Errorf("outage: %w", err)
	}
	c.hearthd = bin
	sum, err := runOutageScenario(ctx, c, stdout, stderr)
	if err != nil {
		return fmt.Errorf("outage: %w", err)
	}
	if len(sum.Failed) > 0 {
		return fmt.Errorf("outage: %d of 5 conditions did not hold: %s", len(sum.Failed), strings.Join(sum.Failed, "; "))
	}
	return nil
}

// findHearthd returns the hearthd executable to run: path if given, else
// "hearthd" next to this executable, else "hearthd" in PATH.
func findHearthd(path string) (string, error) {
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("-hearthd: %w", err)
		}
		return path, nil
	}
	if self, err := os.Executable(); err == nil {
		next := filepath.Join(filepath.Dir(self), "hearthd")
		if st, err := os.Stat(next); err == nil && !st.IsDir() {
			return next, nil
		}
	}
	if p, err := exec.LookPath("hearthd"); err == nil {
		return p, nil
	}
	return "", errors.New(`no hearthd next to hearth-sim nor in PATH: build both with "go build -o bin/ ./cmd/..." and run bin/hearth-sim, or pass -hearthd PATH`)
}

// hearthdConfig is the configuration of the scenario's hearthd.
func hearthdConfig(c outageConfig, brokerURL, dataDir string) string {
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
		outageService, outageBase, c.attemptTimeout, c.attemptTimeout/2, c.attemptTimeout,
		c.threshold, c.openFor, c.maxOpenFor, c.probeTimeout,
		upstairsService, upstairsBase, fallbackDevice, fallbackRule, motionTopic, fallbackTopic)
}

// hearthdProc is the hearthd child process.
type hearthdProc struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it exited
	err  error         // Wait's result, set before done closes
}

func startHearthd(bin, configFile string, logLevel string, out io.Writer) (*hearthdProc, error) {
	p := &hearthdProc{done: make(chan struct{})}
	p.cmd = exec.Command(bin, "-config", configFile, "-log-level", logLevel)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start hearthd: %w", err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop ends hearthd with SIGTERM, and kills it if it has not exited
// within 10 s.
func (p *hearthdProc) stop() error {
	select {
	case <-p.done:
		return fmt.Errorf("hearthd exited early: %v", p.err)
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return errors.New("hearthd did not stop within 10s of SIGTERM: killed")
	}
}

// runOutageScenario runs the scenario of c, printing the timeline and the
// summary on stdout, and returns the summary. Its error is one of setup;
// conditions that did not hold are in the summary's Failed.
func runOutageScenario(ctx context.Context, c outageConfig, stdout, stderr io.Writer) (outageSummary, error) {
	var sum outageSummary
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
		Reconnect: simReconnect,
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
	logFile := c.hearthdLog
	if logFile == "" {
		logFile = filepath.Join(dir, "hearthd.log")
	}
	hlog, err := os.Create(logFile)
	if err != nil {
		return sum, err
	}
	defer hlog.Close()
	hd, err := startHearthd(c.hearthd, configFile, c.hearthdLogLevel, hlog)
	if err != nil {
		return sum, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = hd.stop()
		}
	}()
	select {
	case <-obs.hearthOnline:
	case <-hd.done:
		keep = c.hearthdLog == ""
		return sum, fmt.Errorf("hearthd exited at start (%v); its log: %s", hd.err, logFile)
	case <-time.After(15 * time.Second):
		keep = c.hearthdLog == ""
		return sum, fmt.Errorf("hearthd not online within 15s; its log: %s", logFile)
	case <-ctx.Done():
		return sum, ctx.Err()
	}

	fmt.Fprintf(stdout, "Bridge outage: %s before, %s %s outage of %s, %s after; %s to %s.\n",
		c.before, c.outage, map[bool]string{true: "announced", false: "silent"}[c.announce], outageBase, c.after, c.describeTraffic(), strings.Join(trafficDevices, ", "))
	fmt.Fprintf(stdout, "Breaker of %s: failure_threshold %d, attempt_timeout %s (2 attempts), open_for %s, max_open_for %s, probe_timeout %s, max_probes 1.\n",
		outageService, c.threshold, c.attemptTimeout, c.openFor, c.maxOpenFor, c.probeTimeout)
	fmt.Fprintf(stdout, "hearthd %s, pid %d.\n\n", c.hearthd, hd.cmd.Process.Pid)

	runErr := obs.drive(ctx, client, sim, hd.done)
	stopped = true
	stopErr := hd.stop()
	obs.finish()
	sum = obs.summary()
	printOutageSummary(stdout, c, sum)
	if runErr == nil && stopErr != nil {
		runErr = stopErr
	}
	if runErr != nil || len(sum.Failed) > 0 {
		keep = c.hearthdLog == ""
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
	c            outageConfig
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

func newOutageObserver(c outageConfig, out io.Writer) *outageObserver {
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
		if o.c.announce {
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
		if s.at.Add(o.c.attemptTimeout).Before(at) {
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

	outageAt := start.Add(o.c.before)
	backAt := outageAt.Add(o.c.outage)
	endAt := backAt.Add(o.c.after)
	// Motion: once before the outage, three times during it, once after.
	motions := []time.Time{
		start.Add(o.c.before / 2),
		outageAt.Add(o.c.outage / 4), outageAt.Add(o.c.outage / 2), outageAt.Add(3 * o.c.outage / 4),
		backAt.Add(3 * o.c.after / 4),
	}
	nextCmd := start
	nextFlush := start.Add(o.c.summaryEvery)
	phase := 0 // 0 before, 1 outage, 2 after
	n := 0
	for {
		now := time.Now()
		if phase == 0 && !now.Before(outageAt) {
			phase = 1
			o.mu.Lock()
			o.flushWindow(now)
			o.outageStart = now
			o.line(now, "OUTAGE: bridge %s goes offline (%s)", outageBase, map[bool]string{true: "announced on bridge/state", false: "silent: a hung coordinator"}[o.c.announce])
			o.mu.Unlock()
			if err := sim.SetBridgeOnline(outageBase, false, o.c.announce); err != nil {
				return err
			}
		}
		if phase == 1 && !now.Before(backAt) {
			phase = 2
			if err := sim.SetBridgeOnline(outageBase, true, o.c.announce); err != nil {
				return err
			}
			o.mu.Lock()
			o.flushWindow(now)
			o.outageEnd = now
			o.line(now, "RECOVERY: bridge %s is back", outageBase)
			o.mu.Unlock()
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
			nextFlush = nextFlush.Add(o.c.summaryEvery)
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
			nextCmd = start.Add(o.c.issueAt(n))
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

// outageSummary is what the run measured, and which of the issue's five
// conditions did not hold. Durations are -1 when what they time did not
// happen.
type outageSummary struct {
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

func (o *outageObserver) summary() outageSummary {
	o.mu.Lock()
	defer o.mu.Unlock()
	s := outageSummary{OpenAfter: -1, ClosedAfter: -1, FastMedian: -1, OpenBound: o.c.threshold + len(trafficDevices) - 1}
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
		s.ProbesExpected = !o.c.announce && !o.outageEnd.IsZero() &&
			o.outageEnd.Sub(firstOpen) > o.c.openFor+2*o.c.longestGap()
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
		s.Failed = append(s.Failed, fmt.Sprintf("1: the breaker opened after %d failed attempts, more than its threshold %d (+%d in flight)", s.AttemptsBeforeOpen, o.c.threshold, len(trafficDevices)-1))
	}
	switch {
	case s.FailedFast == 0:
		s.Failed = append(s.Failed, "2: no command failed fast (breaker_open) during the outage")
	case s.FastMedian >= o.c.attemptTimeout:
		s.Failed = append(s.Failed, fmt.Sprintf("2: fast failures took %.3f s (median), not less than the attempt timeout %s", s.FastMedian.Seconds(), o.c.attemptTimeout))
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
	switch limit := o.c.closeBound(); {
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

// closeBound is the latest the breaker may close after the recovery: the
// longest open period, then the next command (at most the longest gap
// between two) as its probe, answered within probe_timeout.
func (c outageConfig) closeBound() time.Duration {
	return c.maxOpenFor + c.longestGap() + c.probeTimeout
}

// printOutageSummary writes the summary after the timeline.
func printOutageSummary(w io.Writer, c outageConfig, s outageSummary) {
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
		ok(1), sec(s.OpenAfter), s.AttemptsBeforeOpen, c.threshold, s.OpenBound, s.SetsBeforeOpen)
	fmt.Fprintf(&b, "  [%s] 2. commands sent during the outage: %d failed fast (breaker_open, no attempt, %s median, want under %s), %d timed out (%d of them sent after the breaker opened, want at most the %d probes), %d superseded, %d other\n",
		ok(2), s.FailedFast, fmtMedian(s.FastMedian), c.attemptTimeout, s.TimedOut, s.TimedOutAfterOpen, len(s.Probes), s.Superseded, s.OtherResults)
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
			ok(4), len(s.Probes), s.MaxProbesPerCooldown, orNone(probes), orNone(gaps), c.openFor, c.maxOpenFor)
	case s.OpenAfter < 0:
		fmt.Fprintf(&b, "  [%s] 4. sets that reached the silent bridge after the breaker opened: none, as the breaker never opened\n", ok(4))
	case c.announce:
		fmt.Fprintf(&b, "  [%s] 4. sets that reached the bridge after the breaker opened: none (the bridge's own offline holds the breaker open: no probe until it says online)\n", ok(4))
	case !s.ProbesExpected:
		fmt.Fprintf(&b, "  [%s] 4. sets that reached the silent bridge after the breaker opened: none (the outage ended before a cooldown had passed and a command come)\n", ok(4))
	default:
		fmt.Fprintf(&b, "  [%s] 4. sets that reached the silent bridge after the breaker opened: none, though the outage outlasted a cooldown\n", ok(4))
	}
	fmt.Fprintf(&b, "  [%s] 5. breaker closed %s after the bridge came back (want within %.1f s: max_open_for, the longest gap between commands, probe_timeout)\n", ok(5), sec(s.ClosedAfter), c.closeBound().Seconds())
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
