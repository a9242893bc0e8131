package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"go.uber.org/goleak"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/tasmota"
	"github.com/hearthd/hearth/protocols/zwavejs"
	"github.com/hearthd/hearth/retry"
	"github.com/hearthd/hearth/simulator"
)

func TestMain(m *testing.M) {
	before := goleak.IgnoreCurrent()
	code := m.Run()
	removeBuiltBinaries()
	if code == 0 {
		if err := goleak.Find(before); err != nil {
			os.Stderr.WriteString("goleak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// eventWait bounds every wait for something the system under test must do.
// Waits end as soon as the event happens; this is only the failure deadline.
const eventWait = 10 * time.Second

// t0 is when every test's fake clock starts.
var t0 = time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)

// testConfig is the configuration of the end-to-end tests: the embedded
// broker and HTTP on free loopback ports, and a Zigbee2MQTT service with 2
// attempts, 5 s attempt timeout and full-jitter backoff base 1 s, cap 10 s.
const testConfig = `
mqtt:
  listen: 127.0.0.1:0
  reconnect: {base: 10ms, cap: 100ms}
http:
  listen: 127.0.0.1:0
defaults:
  ttl: 60s
services:
  zigbee:
    protocol: zigbee2mqtt
    retry:
      max_attempts: 2
      attempt_timeout: 5s
      base: 1s
      multiplier: 2
      cap: 10s
devices:
  hall_light:
    class: light
  front_door:
    class: lock
    address: Front Door
  blinds:
    class: cover
  plug:
    class: switch
`

// ceilingRand makes every full-jitter draw its ceiling, so that backoff
// delays are exact: base·2^(n-1), capped.
type ceilingRand struct{}

func (ceilingRand) Int64N(n int64) int64 { return n - 1 }

// floorRand makes every full-jitter draw zero: no backoff at all.
type floorRand struct{}

func (floorRand) Int64N(int64) int64 { return 0 }

// harness is one hearthd with the embedded broker, a real bbolt store in a
// temp dir, a fake clock, simulated Zigbee2MQTT devices and an MQTT client
// playing the automation.
type harness struct {
	t testing.TB
	// watchLogin is what watch's clients log in with: the simulator's
	// (a broker user, which may read every topic).
	watchLogin login
	cfg        *config.Config
	clock      *dueClock
	d          *daemon
	sim        *simulator.Sim
	stopSim    func()
	client     paho.Client

	results chan devices.Result
	backlog []devices.Result
	sets    chan simulator.SetEvent
	// traffic is every set and get the simulated devices receive, in the
	// order each bridge received them: "set <device> <payload>" or
	// "get <device> <payload>", but for the fresh reads after a start
	// (see fresh).
	traffic chan string
	// fresh holds back from traffic the gets of hearthd's fresh reads of
	// safety-critical devices after each start, which every test would
	// otherwise have to expect first: hearthd tells of each one before
	// it is sent (deps.onFreshRead). Shared with the harness that takes
	// over this one's simulator.
	fresh *freshReads
}

// freshReads follows, per simulated device, hearthd's fresh reads after
// each start: sent and not yet received by the simulator (pending), and
// received, answered by the simulator, but not yet taken by hearthd
// (unanswered). settle waits for both to be none, so that no answer lands
// in the middle of a test. The simulator reports a get (take) after it
// has answered it, so hearthd may take the answer first: early counts
// those answers, for take to match.
type freshReads struct {
	mu         sync.Mutex
	pending    map[string]int
	unanswered map[string]int
	early      map[string]int // answers hearthd took before the get was reported
	total      map[string]int // sent since the harness began
}

func newFreshReads() *freshReads {
	return &freshReads{pending: map[string]int{}, unanswered: map[string]int{}, early: map[string]int{}, total: map[string]int{}}
}

func (f *freshReads) sent(device string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pending[device]++
	f.total[device]++
}

// take reports whether a get of device is a fresh read, and counts it
// received; ignored says the simulator will not answer it.
func (f *freshReads) take(device string, ignored bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pending[device] == 0 {
		return false
	}
	f.pending[device]--
	switch {
	case ignored:
	case f.early[device] > 0:
		f.early[device]-- // answered already
	default:
		f.unanswered[device]++
	}
	return true
}

// answered records that hearthd took a live report of device after its
// fresh read.
func (f *freshReads) answered(device string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.unanswered[device] > 0:
		f.unanswered[device]--
	case f.pending[device] > 0:
		f.early[device]++ // its get is yet to be reported
	}
}

// done reports whether every fresh read sent was received and, unless
// the simulator ignored it, answered.
func (f *freshReads) done() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, n := range f.pending {
		if n > 0 {
			return false
		}
	}
	for _, n := range f.unanswered {
		if n > 0 {
			return false
		}
	}
	return true
}

// received reports how many fresh reads of device hearthd sent and the
// simulator received.
func (f *freshReads) received(device string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total[device] - f.pending[device]
}

// sentTo reports how many fresh reads of device hearthd sent.
func (f *freshReads) sentTo(device string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total[device]
}

// simName is the name the simulator gives the configured device id in its
// events (GetEvent.Device), which fresh reads are counted by: its
// address, but a Tasmota's Topic (the relays and shutters of one Tasmota
// are one simulated device, see tasmotaSimDevice) and a Z-Wave node's
// address without its endpoint (simDevices).
func simName(cfg *config.Config, id string) string {
	a := address(cfg, id)
	dev, _ := cfg.Device(id)
	svc, _ := cfg.Service(dev.Service)
	switch svc.Protocol {
	case config.ProtocolTasmota:
		if addr, err := tasmota.ParseAddress(a); err == nil {
			return addr.Topic
		}
	case config.ProtocolZWaveJS:
		if addr, err := zwavejs.ParseAddress(a, svc.NodeNames); err == nil && strings.Count(a, "/") > strings.Count(addr.Node, "/") {
			return a[:strings.LastIndexByte(a, '/')]
		}
	}
	return a
}

type harnessOptions struct {
	dataDir string
	faults  simulator.Faults
	clock   *dueClock
	// brokerURL, if set, is an external broker hearthd connects to instead
	// of starting its own, so that the broker outlives a restart.
	brokerURL string
	// automation, if set, is an earlier harness whose automation client
	// (on the same external broker) stays subscribed across a restart.
	automation *harness
	// sim, if set, is an earlier harness whose simulator (on the same
	// external broker) kept running while its hearthd was stopped
	// (stopDaemon): its devices keep their states, as real ones do.
	sim *harness
	// rand draws backoff jitter; nil means ceilingRand.
	rand retry.Rand
	// config is the configuration file's text; "" means testConfig.
	config string
	// simOnFakeClock runs the simulator's latency and reconnect delays on
	// the harness's fake clock instead of the real one.
	simOnFakeClock bool
	// simLogin and automationLogin are the credentials the simulator and
	// the automation client connect with: a config with principals needs
	// them. The zero value sends none.
	simLogin, automationLogin login
	// httpLimits shortens the HTTP server's timeouts; zero: the defaults.
	httpLimits httpLimits
	// logger is hearthd's log; nil: testLogger.
	logger *slog.Logger
	// simDevice, if set, changes each simulated device before the
	// simulator starts (a light's MinLevel, a Fahrenheit thermostat).
	simDevice func(*simulator.Device)
	// notSimulated are friendly names of configured devices the simulator
	// does not play: the test plays them itself.
	notSimulated []string
}

// login is an MQTT username and password.
type login struct{ username, password string }

func newHarness(t testing.TB, o harnessOptions) *harness {
	t.Helper()
	if o.dataDir == "" {
		o.dataDir = t.TempDir()
	}
	if o.clock == nil {
		o.clock = newDueClock(t0)
	}
	if o.config == "" {
		o.config = testConfig
	}
	cfg, err := config.Parse("test.yaml", []byte(o.config))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = o.dataDir
	cfg.MQTT.URL = o.brokerURL
	openWithoutPrincipals(cfg)
	h := &harness{
		t:          t,
		cfg:        cfg,
		clock:      o.clock,
		results:    make(chan devices.Result, 8192), // a restart republishes up to 1000 results: a full channel would block the client
		sets:       make(chan simulator.SetEvent, 4096),
		traffic:    make(chan string, 4096),
		watchLogin: o.simLogin,
	}
	if o.rand == nil {
		o.rand = ceilingRand{}
	}
	if o.logger == nil {
		o.logger = testLogger(t)
	}
	h.fresh = newFreshReads()
	if o.sim != nil {
		h.fresh = o.sim.fresh
	}
	h.d, err = start(cfg, deps{clock: o.clock, rand: o.rand, connRand: ceilingRand{}, logger: o.logger, httpLimits: o.httpLimits,
		onFreshRead:  func(dev devices.Device) { h.fresh.sent(simName(cfg, dev.ID)) },
		onFreshState: func(dev devices.Device) { h.fresh.answered(simName(cfg, dev.ID)) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.stop)
	// hearthd subscribes before the simulator publishes anything: see the
	// note on mochi-mqtt below.
	waitClosed(t, h.d.conn.Up(), "hearthd connected")

	if a := o.sim; a != nil {
		h.sim, h.stopSim, h.sets, h.traffic = a.sim, a.stopSim, a.sets, a.traffic
		a.stopSim = nil // now h's to stop
	} else {
		h.startSim(o)
	}

	// The automation subscribes with wildcards only to topics nobody
	// publishes retained: mochi-mqtt v2.7.9 reads a topic's retained path
	// without its lock while scanning for a new wildcard subscription
	// (mochi-mqtt/server#200), which the race detector reports.
	if a := o.automation; a != nil {
		h.client, h.results, h.backlog = a.client, a.results, a.backlog
		a.client = nil // now h's to disconnect
		return h
	}
	h.client = paho.NewClient(paho.NewClientOptions().
		AddBroker(h.d.brokerURL).
		SetClientID("automation-" + strings.ReplaceAll(t.Name(), "/", "-")).
		SetUsername(o.automationLogin.username).
		SetPassword(o.automationLogin.password).
		SetOrderMatters(true))
	mustToken(t, h.client.Connect())
	mustToken(t, h.client.Subscribe("hearth/+/result", 1, func(_ paho.Client, m paho.Message) {
		var r devices.Result
		if err := json.Unmarshal(m.Payload(), &r); err != nil {
			t.Errorf("result is not JSON: %s", m.Payload())
			return
		}
		h.results <- r
	}))
	return h
}

// startSim starts the harness's simulated devices on hearthd's broker.
func (h *harness) startSim(o harnessOptions) {
	t, cfg := h.t, h.cfg
	simOpts := simulator.Options{
		Broker:   h.d.brokerURL,
		Username: o.simLogin.username,
		Password: o.simLogin.password,
		Logins:   bridgeLogins(cfg),
		Devices:  slices.DeleteFunc(simDevices(cfg), func(d simulator.Device) bool { return slices.Contains(o.notSimulated, d.Name) }),
		Faults:   o.faults,
		OnSet: func(e simulator.SetEvent) {
			h.sets <- e
			h.traffic <- "set " + e.Device + " " + string(e.Payload)
		},
		OnGet: func(e simulator.GetEvent) {
			if !h.fresh.take(e.Device, e.Ignored) {
				h.traffic <- "get " + e.Device + " " + string(e.Payload)
			}
		},
	}
	if o.simOnFakeClock {
		simOpts.Clock = o.clock
	}
	if o.simDevice != nil {
		for i := range simOpts.Devices {
			o.simDevice(&simOpts.Devices[i])
		}
	}
	var err error
	h.sim, err = simulator.New(simOpts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); h.sim.Run(ctx) }()
	h.stopSim = func() { cancel(); <-done }
	waitClosed(t, h.sim.Ready(), "simulator ready")
}

// stopDaemon stops hearthd alone: the simulated devices go on, on the
// external broker, for the next harness (harnessOptions.sim).
func (h *harness) stopDaemon() {
	if h.d != nil {
		h.d.stop()
		h.d = nil
	}
}

// stop stops everything in order: simulator, automation, hearthd.
func (h *harness) stop() {
	h.stopAutomation()
	h.stopHearth()
}

func (h *harness) stopAutomation() {
	if h.client != nil {
		h.client.Disconnect(0)
		h.client = nil
	}
}

// stopHearth stops the simulator and hearthd, as a power cut of the hub
// would, but leaves the automation connected to an external broker.
func (h *harness) stopHearth() {
	if h.stopSim != nil {
		h.stopSim()
		h.stopSim = nil
	}
	if h.d != nil {
		h.d.stop()
		h.d = nil
	}
}

// publish sends a command as an automation does: QoS 1, not retained.
func (h *harness) publish(device, payload string) {
	h.t.Helper()
	mustToken(h.t, h.client.Publish("hearth/"+device+"/set", 1, false, payload))
}

// result waits for the next result of opID.
func (h *harness) result(opID string) devices.Result {
	h.t.Helper()
	return h.await(func(r devices.Result) bool { return r.OpID == opID }, "a result of "+opID)
}

// final waits for the terminal result of opID, checking that the interim
// one said accepted first.
func (h *harness) final(opID string) devices.Result {
	h.t.Helper()
	if r := h.result(opID); r.Status != devices.Accepted {
		h.t.Fatalf("first result of %s: %s (%s: %s); want accepted", opID, r.Status, r.Reason, r.Detail)
	}
	return h.await(func(r devices.Result) bool { return r.OpID == opID && r.Status.Terminal() }, "the final result of "+opID)
}

func (h *harness) await(match func(devices.Result) bool, what string) devices.Result {
	h.t.Helper()
	for i, r := range h.backlog {
		if match(r) {
			h.backlog = append(h.backlog[:i], h.backlog[i+1:]...)
			return r
		}
	}
	deadline := time.NewTimer(eventWait)
	defer deadline.Stop()
	for {
		select {
		case r := <-h.results:
			if match(r) {
				return r
			}
			h.backlog = append(h.backlog, r)
		case <-deadline.C:
			h.t.Fatalf("timed out waiting for %s; results so far: %+v", what, h.backlog)
		}
	}
}

// nextSet waits for the next set message the simulated devices receive.
func (h *harness) nextSet() simulator.SetEvent {
	h.t.Helper()
	select {
	case e := <-h.sets:
		return e
	case <-time.After(eventWait):
		h.t.Fatal("timed out waiting for a set to reach a device")
		panic("unreachable")
	}
}

// noSetsYet fails if any set has reached a device.
func (h *harness) noSetsYet() {
	h.t.Helper()
	select {
	case e := <-h.sets:
		h.t.Fatalf("a set reached %s: %s", e.Device, e.Payload)
	default:
	}
}

// advance waits until hearthd (or the simulator) waits on a timer that
// moving the fake clock by d fires (an attempt timeout, a backoff), then
// moves the clock by d. A timer due later (a witness read's wait) does
// not count, so a move meant for a backoff is not made before the
// backoff is set.
func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	defer cancel()
	if err := h.clock.awaitDue(ctx, d); err != nil {
		h.t.Fatalf("hearthd never waited on a timer due within %v", d)
	}
	h.clock.Advance(d)
}

// elapse waits until hearthd waits on the fake clock at all, then moves
// it by d whether or not a timer falls due: for a move short of a timer
// (to see that nothing happens before it), or one that only lets time
// pass (towards a TTL, which no timer watches).
func (h *harness) elapse(d time.Duration) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	defer cancel()
	if err := h.clock.BlockUntilContext(ctx, 1); err != nil {
		h.t.Fatal("hearthd never waited on the clock")
	}
	h.clock.Advance(d)
}

// advanceTimeout moves the clock by d, the attempt timeout of the one
// attempt in flight, which a retry follows, and waits until hearthd's
// timers are as many as before: the backoff in the attempt's place, and
// the witness read that an attempt timed out in the bridge's silence asks
// answered (in real time), its timer stopped. Moving the clock again
// before that could find only the witness's timer and pass the backoff
// before it is set.
//
// The count is taken once the attempt's own timer is set: the simulator
// can hear a request before hearthd's send returns and sets it, and a
// count taken before would be one short for ever.
func (h *harness) advanceTimeout(d time.Duration) {
	h.t.Helper()
	h.eventually("the attempt's timer", func() bool { return h.clock.dueIn(d) })
	n := h.waiters()
	h.advance(d)
	h.eventually("the backoff's timer, the witness read answered", func() bool { return h.waiters() == n })
}

// settle waits until hearthd has heard every bridge say it is online and
// has the state of each of devices (their first reports): a test that
// then changes a bridge's state is not overtaken by the simulator's start.
func (h *harness) settle(ids ...string) {
	h.t.Helper()
	topics := make([]string, len(ids))
	for i, d := range ids {
		topics[i] = "hearth/" + d
	}
	if len(topics) > 0 {
		mirrors := h.watch(topics...) // retained: each arrives once hearthd has it
		seen := map[string]bool{}
		deadline := time.After(eventWait)
		for len(seen) < len(topics) {
			select {
			case m := <-mirrors:
				seen[m.Topic()] = true
			case <-deadline:
				h.t.Fatalf("hearthd mirrored %d of the %d devices' states", len(seen), len(topics))
			}
		}
	}
	h.eventually("every bridge online", func() bool {
		for _, b := range h.d.disp.Breakers() {
			if !b.Watched && !b.Notify && b.Bridge != "online" {
				return false
			}
		}
		return true
	})
	if !h.within(eventWait, h.fresh.done) {
		h.t.Fatalf("timed out waiting for the fresh reads after the start answered: %s", h.fresh)
	}
}

// String tells the fresh reads not yet done, for a failure's message.
func (f *freshReads) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprintf("pending %v, unanswered %v, early %v, sent %v", f.pending, f.unanswered, f.early, f.total)
}

// eventually polls cond every millisecond until it holds, and fails the
// test after eventWait: for states hearthd shows but announces nowhere.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	if !h.within(eventWait, cond) {
		h.t.Fatalf("timed out waiting for %s", what)
	}
}

// within polls cond every millisecond until it holds (true) or d has
// passed (false).
func (h *harness) within(d time.Duration, cond func() bool) bool {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(d)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			return false
		}
	}
	return true
}

// awaitDisconnected waits until hearthd has noticed that its MQTT
// connection is gone.
func (h *harness) awaitDisconnected() {
	h.t.Helper()
	h.eventually("hearthd to notice that its connection is gone", func() bool { return !h.d.conn.Connected() })
}

// driveReconnect waits until hearthd has noticed that its connection is
// gone, then moves the fake clock 10 ms at a time, whenever hearthd waits
// on it, until hearthd is connected again: the loss reaches hearthd's
// parts one after the other, so which timer is set at a given moment (a
// republish sweep's, the reconnect's) varies.
func (h *harness) driveReconnect() {
	h.t.Helper()
	h.awaitDisconnected()
	deadline := time.Now().Add(eventWait)
	for !h.d.conn.Connected() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := h.clock.BlockUntilContext(ctx, 1)
		cancel()
		if err == nil && !h.d.conn.Connected() {
			h.clock.Advance(10 * time.Millisecond)
		} else if time.Now().After(deadline) {
			h.t.Fatal("hearthd did not reconnect")
		}
	}
}

// advanceAfter waits until at least waiters goroutines of hearthd wait on
// the fake clock, then moves it by d: for when more than one timer must be
// set first (a probe's attempt, and the breaker watching its deadline).
func (h *harness) advanceAfter(waiters int, d time.Duration) {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	defer cancel()
	if err := h.clock.BlockUntilContext(ctx, waiters); err != nil {
		h.t.Fatalf("hearthd never had %d waiters on the clock", waiters)
	}
	h.clock.Advance(d)
}

func mustToken(t testing.TB, tok paho.Token) {
	t.Helper()
	if !tok.WaitTimeout(eventWait) {
		t.Fatal("mqtt: timed out")
	}
	if err := tok.Error(); err != nil {
		t.Fatal(err)
	}
}

func waitClosed(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(eventWait):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// testLogger writes hearthd's log into the test's log, shown on failure or
// with -v.
func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type tWriter struct{ t testing.TB }

var logMu sync.Mutex

func (w tWriter) Write(p []byte) (int, error) {
	logMu.Lock()
	defer logMu.Unlock()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// deadlineConfig is testConfig with 2 attempts of 1 s, a fixed 1 s backoff
// without jitter and a policy deadline of 5 s (the TTL stays 60 s).
var deadlineConfig = strings.Replace(testConfig, `      max_attempts: 2
      attempt_timeout: 5s
      base: 1s
      multiplier: 2
      cap: 10s`, `      max_attempts: 2
      attempt_timeout: 1s
      backoff: fixed
      jitter: none
      base: 1s
      deadline: 5s`, 1)

// driveUntilEnded moves the fake clock 500 ms at a time, each time waiters
// goroutines of hearthd wait on it, until opID is terminal in the store or
// the commands' TTL (60 s of fake time) has passed, and returns the stored
// op. Any waiter lets the clock move (a reconnect's backoff, a witness
// read), so fake time runs ahead of the attempts' own timers: the bound is
// the TTL, not the attempts' sum.
func (h *harness) driveUntilEnded(opID string, waiters int) devices.Op {
	h.t.Helper()
	deadline := time.Now().Add(eventWait)
	for h.clock.Since(t0) < 60*time.Second {
		if op, _, _ := h.d.store.Lookup(opID); op.Status.Terminal() {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := h.clock.BlockUntilContext(ctx, waiters)
		cancel()
		if err == nil {
			h.clock.Advance(500 * time.Millisecond)
		} else if time.Now().After(deadline) {
			h.t.Fatalf("at +%v hearthd did not wait on the clock", h.clock.Since(t0))
		}
	}
	op, _, err := h.d.store.Lookup(opID)
	if err != nil {
		h.t.Fatal(err)
	}
	return op
}

// withoutBreaker turns off the breaker of every zigbee2mqtt service in
// config, for tests of what happens without one.
func withoutBreaker(config string) string {
	return strings.ReplaceAll(config, "    protocol: zigbee2mqtt\n", "    protocol: zigbee2mqtt\n    breaker: {enabled: false}\n")
}

// openWithoutPrincipals makes a test's config without principals run as
// every test did before authentication was on by default: the embedded
// broker and the HTTP API admit anonymous clients (on the tests' loopback
// addresses), so that the simulator and the automation connect without an
// account and each test keeps its meaning. A config with principals, and
// the tests of authentication itself, run with authentication on.
func openWithoutPrincipals(cfg *config.Config) {
	if len(cfg.Principals) > 0 {
		return
	}
	cfg.MQTT.AllowAnonymous = cfg.MQTT.URL == "" // an external broker decides for itself
	cfg.HTTP.AllowAnonymous = true
}

// withBridgeAccount gives config's Zigbee2MQTT services the accounts of
// bridgeLogin (service zigbee) and upstairsLogin (service upstairs, if
// any), as a config names a bridge's account: the broker's ACL lets each
// publish only under its own base topic.
func withBridgeAccount(config string) string {
	config = strings.Replace(config, "  zigbee:\n    protocol: zigbee2mqtt\n",
		"  zigbee:\n    protocol: zigbee2mqtt\n    mqtt_username: "+bridgeLogin.username+"\n    mqtt_password: "+bridgeLogin.password+"\n", 1)
	return strings.Replace(config, "  upstairs:\n    protocol: zigbee2mqtt\n",
		"  upstairs:\n    protocol: zigbee2mqtt\n    mqtt_username: "+upstairsLogin.username+"\n    mqtt_password: "+upstairsLogin.password+"\n", 1)
}

var upstairsLogin = login{"upstairs", "upstairs-password"}

// bridgeLogins are the accounts the simulated bridges log in with, by
// base topic: each MQTT service's own (from the config or the credentials
// file that start filled cfg from), unless the embedded broker admits
// anyone.
func bridgeLogins(cfg *config.Config) map[string]simulator.Login {
	if cfg.MQTT.AllowAnonymous || cfg.MQTT.URL != "" {
		return nil
	}
	logins := map[string]simulator.Login{}
	for _, s := range cfg.Services {
		if s.BaseTopic != "" && s.MQTTPassword != "" {
			logins[s.BaseTopic] = simulator.Login{Username: s.MQTTUsername, Password: s.MQTTPassword, ClientID: s.ClientID}
		}
		if s.Protocol == config.ProtocolTasmota && s.MQTTPassword != "" {
			logins[s.FullTopic] = simulator.Login{Username: s.MQTTUsername, Password: s.MQTTPassword}
		}
	}
	return logins
}
