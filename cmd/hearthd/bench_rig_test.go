package main

// The rig of the figure benchmarks (bench_figures_test.go): hearthd
// in-process on the real clock, the simulator's Zigbee2MQTT bridges as
// devices, MQTT clients as automations, and the statistics they report.
// See docs/PERFORMANCE.md for how to run them and what each figure means.

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/simulator"
)

// Sizes and knobs of the figure benchmarks. The defaults keep one run of
// `go test -run '^$' -bench . -benchtime 1x ./cmd/hearthd/` within a few
// minutes on a 2-core machine; -hearth.big takes the size where
// the default is smaller (the pending commands).
var (
	benchCmds     = flag.Int("hearth.cmds", 5000, "figure benchmarks: commands per measured run of the throughput figures")
	benchInflight = flag.Int("hearth.inflight", 64, "figure benchmarks: commands outstanding at once in the throughput figures")
	benchSerial   = flag.Int("hearth.serial", 1000, "figure benchmarks: commands of the one-at-a-time latency figure")
	benchPaced    = flag.Int("hearth.paced", 4000, "figure benchmarks: commands of the half-load latency figure, per path")
	benchIdle     = flag.Int("hearth.idle", 10000, "figure benchmarks: devices of the idle heap figure")
	benchPending  = flag.Int("hearth.pending", 0, "figure benchmarks: pending commands of the pending heap and restart figures (0: 10,000, or 100,000 with -hearth.big)")
	benchBurstN   = flag.Int("hearth.burst", 50000, "figure benchmarks: commands of the burst figures, per client and path")
	benchBig      = flag.Bool("hearth.big", false, "figure benchmarks: the issue's size of the pending figures, 100,000 commands")
	benchPath     = flag.String("hearth.path", "both", "figure benchmarks: which path to run: both, raw or hearth (for a profile of one path)")
	benchLog      = flag.String("hearth.log", "", "figure benchmarks: write hearthd's log (level info) to this file instead of discarding it")
	benchWait     = flag.Duration("hearth.wait", 30*time.Second, "figure benchmarks: the failure deadline of one command; a burst waits 10 times as long in all")
)

// pendingCount is the size of the pending figures, as the flags set it.
func pendingCount() int {
	switch {
	case *benchPending > 0:
		return *benchPending
	case *benchBig:
		return 100_000
	}
	return 10_000
}

func runRaw() bool    { return *benchPath != "hearth" }
func runHearth() bool { return *benchPath != "raw" }

// rawBase is the base topic of the raw path's simulated bridge. No
// service of hearthd's has it, so hearthd neither subscribes to it nor
// hears its devices.
const rawBase = "raw"

// benchConfig is the configuration file of the figure benchmarks:
// production defaults (TTL 60 s, 2 attempts of 5 s, the breaker, Home
// Assistant discovery), the embedded broker and HTTP on free loopback
// ports, one Zigbee2MQTT service, switches sw0000… and sleepy lights
// sl00000… that wake once a day (their commands live a day).
func benchConfig(switches, sleepyLights int) string {
	var b strings.Builder
	b.WriteString("mqtt:\n  listen: 127.0.0.1:0\nhttp:\n  listen: 127.0.0.1:0\nservices:\n  zigbee:\n    protocol: zigbee2mqtt\ndevices:\n")
	for i := range switches {
		fmt.Fprintf(&b, "  %s:\n    class: switch\n", switchName(i))
	}
	for i := range sleepyLights {
		fmt.Fprintf(&b, "  %s:\n    class: light\n    sleepy: true\n    wake_interval: 24h\n", sleepyName(i))
	}
	return b.String()
}

func switchName(i int) string { return fmt.Sprintf("sw%04d", i) }
func sleepyName(i int) string { return fmt.Sprintf("sl%05d", i) }

// parseBenchConfig parses benchConfig's text with the data directory dir,
// anonymous clients admitted on the loopback listeners (as in the other
// tests of this package: both paths then run without authentication).
func parseBenchConfig(tb testing.TB, text, dir string) *config.Config {
	tb.Helper()
	cfg, err := config.Parse("bench.yaml", []byte(text))
	if err != nil {
		tb.Fatal(err)
	}
	cfg.DataDir = dir
	openWithoutPrincipals(cfg)
	return cfg
}

// startBenchHearth starts hearthd as main does, on the real clock and
// real randomness, logging at the production level (info) into
// -hearth.log or nowhere, and waits until it is connected to its broker.
// It is stopped when tb ends, unless the caller stopped it first.
func startBenchHearth(tb testing.TB, cfg *config.Config) *daemon {
	tb.Helper()
	d, err := start(cfg, deps{logger: benchLogger(tb)})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(d.stop)
	waitClosed(tb, d.conn.Up(), "hearthd connected")
	return d
}

var benchLogOnce struct {
	sync.Once
	w io.Writer
}

func benchLogger(tb testing.TB) *slog.Logger {
	benchLogOnce.Do(func() {
		benchLogOnce.w = io.Discard
		if *benchLog != "" {
			f, err := os.Create(*benchLog)
			if err != nil {
				tb.Fatal(err)
			}
			benchLogOnce.w = f // open until the test binary exits
		}
	})
	return slog.New(slog.NewTextHandler(benchLogOnce.w, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// startSim runs a simulated Zigbee2MQTT bridge under base with the
// switches named by names, on the real clock without faults, until tb
// ends. onSet, if not nil, is called for every set a device receives.
func startSim(tb testing.TB, brokerURL, clientID, base string, names []string, onSet func(simulator.SetEvent)) {
	tb.Helper()
	devs := make([]simulator.Device, len(names))
	for i, n := range names {
		devs[i] = simulator.Device{Name: n, Class: simulator.ClassSwitch, BaseTopic: base}
	}
	sim, err := simulator.New(simulator.Options{Broker: brokerURL, ClientID: clientID, Devices: devs, OnSet: onSet})
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sim.Run(ctx) }()
	tb.Cleanup(func() { cancel(); <-done })
	waitClosed(tb, sim.Ready(), "simulator "+clientID+" ready")
}

func switchNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = switchName(i)
	}
	return names
}

// newAutomation connects an MQTT 3.1.1 client (eclipse/paho.mqtt.golang)
// as an automation does, subscribed at QoS 1 to filter with handle, and
// disconnects it when tb ends. It does not reconnect: a lost connection
// (hearthd stopped) ends it.
func newAutomation(tb testing.TB, brokerURL, clientID, filter string, handle paho.MessageHandler) paho.Client {
	tb.Helper()
	c := paho.NewClient(paho.NewClientOptions().AddBroker(brokerURL).SetClientID(clientID).SetOrderMatters(true).SetAutoReconnect(false))
	mustToken(tb, c.Connect())
	tb.Cleanup(func() { c.Disconnect(0) })
	if filter != "" {
		mustToken(tb, c.Subscribe(filter, 1, handle))
	}
	return c
}

// path is one way of commanding the same devices and hearing them
// confirm: the raw path (automation → broker → device → broker →
// automation) or Hearth's (automation → hearthd → device → hearthd →
// result to the automation). Both use the same client code, the same
// broker and the same simulated devices; only topics and payloads differ.
// At most one command per device is outstanding.
type path struct {
	name   string
	client paho.Client
	devs   []string
	index  map[string]int
	// command returns the topic and payload that command device i to
	// state ("ON" or "OFF"), and what confirms it (see confirm).
	command func(i int, state string, seq int64) (topic, payload, token string)

	mu sync.Mutex
	// expect is, per device, what confirms its outstanding command; ""
	// when none is outstanding.
	expect []string
	done   []chan bool // per device: the outcome of its outstanding command
	flip   []bool      // per device: the state its next command asks
	seq    atomic.Int64
}

func newPath(name string, devs []string) *path {
	p := &path{name: name, devs: devs, index: make(map[string]int, len(devs)),
		expect: make([]string, len(devs)), done: make([]chan bool, len(devs)), flip: make([]bool, len(devs))}
	for i, d := range devs {
		p.index[d] = i
		p.done[i] = make(chan bool, 1)
	}
	return p
}

// settle ends device's outstanding command if token confirms it (ok) or
// ends it otherwise (!ok); anything else is ignored.
func (p *path) settle(device, token string, ok bool) {
	i, known := p.index[device]
	if !known {
		return
	}
	p.mu.Lock()
	match := p.expect[i] != "" && p.expect[i] == token
	if match {
		p.expect[i] = ""
	}
	p.mu.Unlock()
	if match {
		p.done[i] <- ok
	}
}

// rawPath commands the raw bridge's switches directly: a set on
// raw/<device>/set, confirmed by the device's next state report with the
// target state.
func rawPath(tb testing.TB, brokerURL string, devs []string) *path {
	p := newPath("raw", devs)
	p.command = func(i int, state string, _ int64) (string, string, string) {
		return rawBase + "/" + p.devs[i] + "/set", `{"state":"` + state + `"}`, state
	}
	p.client = newAutomation(tb, brokerURL, "bench-raw-automation", rawBase+"/+", func(_ paho.Client, m paho.Message) {
		device := strings.TrimPrefix(m.Topic(), rawBase+"/")
		var st map[string]any
		if json.Unmarshal(m.Payload(), &st) != nil {
			return
		}
		if s, _ := st["state"].(string); s != "" {
			p.settle(device, s, true)
		}
	})
	return p
}

// hearthPath commands hearthd's switches: a command with an op_id on
// hearth/<device>/set, confirmed by its result succeeded; another
// terminal result ends it as failed.
func hearthPath(tb testing.TB, brokerURL string, devs []string) *path {
	p := newPath("hearth", devs)
	p.command = func(i int, state string, seq int64) (string, string, string) {
		op := "b" + strconv.FormatInt(seq, 10)
		return "hearth/" + p.devs[i] + "/set", `{"state":"` + state + `","op_id":"` + op + `"}`, op
	}
	p.client = newAutomation(tb, brokerURL, "bench-hearth-automation", "hearth/+/result", func(_ paho.Client, m paho.Message) {
		var r devices.Result
		if json.Unmarshal(m.Payload(), &r) != nil {
			return
		}
		if r.Status.Terminal() {
			p.settle(r.Device, r.OpID, r.Status == devices.Succeeded)
		}
	})
	return p
}

// send publishes device i's next command (QoS 1, not retained; the
// publisher does not wait for its PUBACK: the confirmation is what it
// waits for).
func (p *path) send(i int) {
	p.mu.Lock()
	p.flip[i] = !p.flip[i]
	state := "OFF"
	if p.flip[i] {
		state = "ON"
	}
	topic, payload, token := p.command(i, state, p.seq.Add(1))
	p.expect[i] = token
	p.mu.Unlock()
	p.client.Publish(topic, 1, false, payload)
}

// await waits for the outcome of device i's outstanding command: true
// when it was confirmed, false when it ended otherwise or not within
// -hearth.wait (then it is forgotten).
func (p *path) await(i int) bool {
	t := time.NewTimer(*benchWait)
	defer t.Stop()
	select {
	case ok := <-p.done[i]:
		return ok
	case <-t.C:
		p.mu.Lock()
		p.expect[i] = ""
		p.mu.Unlock()
		select {
		case ok := <-p.done[i]: // confirmed meanwhile
			return ok
		default:
			return false
		}
	}
}

// tally is what measured runs of a path saw.
type tally struct {
	n, failed int
	elapsed   time.Duration
	latencies []time.Duration // of the confirmed commands
}

func (r tally) perSecond() float64 { return float64(r.n-r.failed) / r.elapsed.Seconds() }

// quantile returns the q-quantile (0–1) of the confirmed commands'
// latencies, nearest rank; 0 without any.
func (r tally) quantile(q float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	s := slices.Clone(r.latencies)
	slices.Sort(s)
	k := int(q*float64(len(s))+0.5) - 1
	return s[min(max(k, 0), len(s)-1)]
}

func (r *tally) add(o tally) {
	r.n += o.n
	r.failed += o.failed
	r.elapsed += o.elapsed
	r.latencies = append(r.latencies, o.latencies...)
}

// closedLoop sends n commands, inflight at a time, each to a device with
// none outstanding, each next one as soon as one is confirmed: the
// confirmed commands per second are the path's throughput at that
// concurrency.
func (p *path) closedLoop(n, inflight int) tally {
	free := make(chan int, len(p.devs))
	for i := range p.devs {
		free <- i
	}
	var left atomic.Int64
	left.Store(int64(n))
	var mu sync.Mutex
	r := tally{n: n, latencies: make([]time.Duration, 0, n)}
	var wg sync.WaitGroup
	start := time.Now()
	for range min(inflight, len(p.devs)) {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				i := <-free
				t := time.Now()
				p.send(i)
				ok := p.await(i)
				lat := time.Since(t)
				free <- i
				mu.Lock()
				if ok {
					r.latencies = append(r.latencies, lat)
				} else {
					r.failed++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	return r
}

// paced sends n commands at rate per second, each at its due time
// whatever the ones before it do (an open loop), each to a device with
// none outstanding. A command's latency counts from its due time, so that
// a sender held back counts against the path (no coordinated omission).
func (p *path) paced(n int, rate float64) tally {
	free := make(chan int, len(p.devs))
	for i := range p.devs {
		free <- i
	}
	var mu sync.Mutex
	r := tally{n: n, latencies: make([]time.Duration, 0, n)}
	var wg sync.WaitGroup
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	for k := range n {
		due := start.Add(time.Duration(k) * interval)
		if wait := time.Until(due); wait > 0 {
			time.Sleep(wait)
		}
		i := <-free
		p.send(i)
		wg.Go(func() {
			ok := p.await(i)
			lat := time.Since(due)
			free <- i
			mu.Lock()
			if ok {
				r.latencies = append(r.latencies, lat)
			} else {
				r.failed++
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	return r
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// reportLatency reports the p50 and p99 of both runs in milliseconds,
// the p99 Hearth adds, and their ratio.
func reportLatency(b *testing.B, raw, hearth tally) {
	if runRaw() {
		b.ReportMetric(ms(raw.quantile(0.5)), "raw_p50_ms")
		b.ReportMetric(ms(raw.quantile(0.99)), "raw_p99_ms")
	}
	if runHearth() {
		b.ReportMetric(ms(hearth.quantile(0.5)), "hearth_p50_ms")
		b.ReportMetric(ms(hearth.quantile(0.99)), "hearth_p99_ms")
		b.ReportMetric(float64(hearth.failed), "hearth_failed")
	}
	if runRaw() && runHearth() {
		b.ReportMetric(ms(hearth.quantile(0.99)-raw.quantile(0.99)), "added_p99_ms")
		b.ReportMetric(float64(hearth.quantile(0.99))/float64(raw.quantile(0.99)), "p99_ratio")
	}
}

// liveHeap returns the bytes of live heap objects after a full GC.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC() // the first may leave finalizers' objects for the second
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// rss returns the resident set size of this whole process (the test
// binary: hearthd, the load generator, the simulator) from
// /proc/self/status, in bytes; 0 where there is none.
func rss() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }
