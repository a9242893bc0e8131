package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"net"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/retry"
	"github.com/hearthd/hearth/simulator"
)

// powerLossUsage heads the power-loss subcommand's -h output.
const powerLossUsage = `usage: hearth-sim power-loss [flags]

The power-loss flood: connects -devices simulated devices (one MQTT client
each) to the broker, cuts them all at once, and measures how they come back
with the -strategy's reconnect backoff: the peak connections accepted per
100 ms at the broker, against the even spread N/(10·base) that full jitter
aims at; the most accepted in any one second; the time until all are back;
the devices' connection attempts, refusals and failures; and the devices
lost (not back within -timeout). -compare runs every strategy, prints one
table and writes a plot of accepts per 100 ms. See docs/RECONNECT.md.

Strategies (retry.Backoff, multiplier 2, -base and -cap): none (reconnect
at once); fixed (every retry waits base, no jitter: paho's auto-reconnect
style); exponential (no jitter); full, equal and decorrelated jitter. With
full jitter the first reconnect after the cut is uniform over [0, base].

-cut clients drops every device's connection at the same instant, from
below MQTT (the devices see a lost connection, the broker sends their
wills); -cut broker closes the embedded broker and starts a new one on the
same address. -transport pipe (the default) connects the devices to the
embedded broker through in-memory pipes, which use no file descriptors;
tcp uses loopback TCP, two descriptors per device. With -broker URL the
devices connect over TCP to an external broker: the broker-side
measurements are then unavailable, and accepts are timed by the devices.

flags:
`

// powerLossConfig is the power-loss subcommand's flags.
type powerLossConfig struct {
	devices      int
	strategy     string
	compare      bool
	base, cap    time.Duration
	cut          string
	transport    string
	brokerURL    string
	listen       string
	maxRate      float64
	burst        int
	timeout      time.Duration
	settle       time.Duration
	availability bool
	seed         uint64
	plot         string
	plotSet      bool // -plot was given
}

// external reports whether the devices connect to an external broker.
func (c powerLossConfig) external() bool { return c.brokerURL != "" }

// window is the reconnect window W over which full jitter spreads the
// first reconnects: the base.
func (c powerLossConfig) window() time.Duration { return c.base }

// even is the even spread N/(10·W): accepts per 100 ms if the reconnects
// were spread evenly over the window.
func (c powerLossConfig) even() float64 {
	return float64(c.devices) / (10 * c.window().Seconds())
}

// strategy is one row of the table.
type strategy struct {
	// name is the row and legend name.
	name string
	// backoff spaces reconnects; nil is no backoff.
	backoff simulator.Backoff
}

// reconnectStrategies are the strategies of the power-loss scenario, in
// table order: no backoff, the two without jitter, the three jitters.
func reconnectStrategies(base, limit time.Duration) []strategy {
	wrap := func(b retry.Backoff) simulator.Backoff {
		b.Base, b.Multiplier, b.Cap = base, 2, limit
		return func(n int, prev time.Duration, r simulator.Rand) time.Duration { return b.Delay(n, prev, r) }
	}
	return []strategy{
		{name: "none"},
		{name: "fixed", backoff: wrap(retry.Backoff{Strategy: retry.Fixed, Jitter: retry.None})},
		{name: "exponential", backoff: wrap(retry.Backoff{Strategy: retry.Exponential, Jitter: retry.None})},
		{name: "full", backoff: wrap(retry.Backoff{Strategy: retry.Exponential, Jitter: retry.Full})},
		{name: "equal", backoff: wrap(retry.Backoff{Strategy: retry.Exponential, Jitter: retry.Equal})},
		{name: "decorrelated", backoff: wrap(retry.Backoff{Strategy: retry.Exponential, Jitter: retry.Decorrelated})},
	}
}

// floodRun is what one strategy's run measured.
type floodRun struct {
	strategy string
	// Setup is how long the devices took to connect before the cut; down
	// how long the broker was away during a -cut broker, cutTook how long
	// dropping every connection took during a -cut clients.
	setup, down, cutTook time.Duration
	// setupAttempts counts the devices' connection attempts in the setup.
	setupAttempts int
	// The devices' own counts since the cut.
	attempts, refusals, failures int
	// lost counts the devices not back within the timeout; allBack is when
	// the last device came back, since the cut (if none was lost).
	lost    int
	allBack time.Duration
	// accepts are the connections accepted since the cut, as offsets from
	// it, sorted: at the broker, or at the devices (brokerSide false).
	accepts    []time.Duration
	brokerSide bool
	// refusedBy counts the broker's refusals since the cut by reason.
	refusedBy map[string]int
}

// perTenth returns the accepts per 100 ms since the cut, bucket i holding
// [i·100 ms, (i+1)·100 ms).
func (r floodRun) perTenth() []int {
	if len(r.accepts) == 0 {
		return nil
	}
	buckets := make([]int, r.accepts[len(r.accepts)-1]/(100*time.Millisecond)+1)
	for _, a := range r.accepts {
		buckets[a/(100*time.Millisecond)]++
	}
	return buckets
}

// peakTenth is the most accepts in one 100 ms bucket.
func (r floodRun) peakTenth() int {
	return slices.Max(append(r.perTenth(), 0))
}

// peakSecond is the most accepts in any one-second window [t, t+1 s),
// wherever it starts.
func (r floodRun) peakSecond() int {
	peak, lo := 0, 0
	for hi, a := range r.accepts {
		for a-r.accepts[lo] >= time.Second {
			lo++
		}
		peak = max(peak, hi-lo+1)
	}
	return peak
}

// runPowerLoss is the power-loss subcommand: it parses args, runs the
// scenario for one strategy or, with -compare, for every strategy, prints
// the table on stdout and writes the plot.
func runPowerLoss(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hearth-sim power-loss", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), powerLossUsage)
		fs.PrintDefaults()
	}
	var c powerLossConfig
	fs.IntVar(&c.devices, "devices", 10000, "number of simulated devices")
	fs.StringVar(&c.strategy, "strategy", "full", "reconnect backoff: none, fixed, exponential, full, equal or decorrelated")
	fs.BoolVar(&c.compare, "compare", false, "run every strategy and print one table")
	fs.DurationVar(&c.base, "base", 5*time.Second, "backoff base: the first reconnect's delay (fixed, exponential) or its ceiling (full jitter's window W)")
	fs.DurationVar(&c.cap, "cap", 16*time.Second, "backoff cap: no delay is longer")
	fs.StringVar(&c.cut, "cut", "clients", "what fails: clients (every connection dropped at once) or broker (the embedded broker restarts)")
	fs.StringVar(&c.transport, "transport", "pipe", "how devices reach the embedded broker: pipe (in memory) or tcp (loopback)")
	fs.StringVar(&c.brokerURL, "broker", "", "external broker URL, tcp://host:port (implies -transport tcp); default: an embedded broker")
	fs.StringVar(&c.listen, "listen", "127.0.0.1:0", "TCP listen address of the embedded broker, with -transport tcp")
	fs.Float64Var(&c.maxRate, "max-connect-rate", 0, "embedded broker's accept guard: CONNECTs accepted per second, 0 for none")
	fs.IntVar(&c.burst, "connect-burst", 0, "the accept guard's bucket size; 0 means 1")
	fs.DurationVar(&c.timeout, "timeout", time.Minute, "how long to wait for the devices, before and after the cut; those not back are lost")
	fs.DurationVar(&c.settle, "settle", time.Second, "quiet time between the last device connecting and the cut")
	fs.BoolVar(&c.availability, "availability", true, "devices publish availability online after connecting, with a retained offline will")
	fs.Uint64Var(&c.seed, "seed", 1, "random seed: device i draws its jitter from PCG(seed, i)")
	fs.StringVar(&c.plot, "plot", "docs/reconnect-power-loss.svg", `plot file of -compare, SVG (or PNG if it ends in .png); written for one strategy only if given; "" writes none`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	c.plotSet = set["plot"]
	if fs.NArg() > 0 {
		return fmt.Errorf("power-loss: unexpected argument %q (flags start with -)", fs.Arg(0))
	}
	if c.external() && !set["transport"] {
		c.transport = "tcp"
	}
	if err := c.validate(); err != nil {
		return fmt.Errorf("power-loss: %w", err)
	}
	if c.plot != "" && (c.compare || c.plotSet) {
		if err := checkPlotPath(c.plot); err != nil {
			return fmt.Errorf("power-loss: -plot %w", err)
		}
	}

	strats := reconnectStrategies(c.base, c.cap)
	if !c.compare {
		i := slices.IndexFunc(strats, func(s strategy) bool { return s.name == c.strategy })
		strats = strats[i : i+1]
	}
	// Errors only: the broker warns of every connection a cut drops, and
	// the table counts what matters.
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	var runs []floodRun
	for _, s := range strats {
		fmt.Fprintf(stderr, "power-loss: %s: %d devices…\n", s.name, c.devices)
		r, err := runFlood(ctx, c, s, log)
		if err != nil {
			return fmt.Errorf("power-loss: %s: %w", s.name, err)
		}
		runs = append(runs, r)
		runtime.GC() // the next run starts from a clean heap
	}
	if err := printFloodTable(stdout, c, runs); err != nil {
		return err
	}
	if c.plot == "" || !(c.compare || c.plotSet) {
		return nil
	}
	if err := writeFloodPlot(c.plot, c, runs); err != nil {
		return fmt.Errorf("power-loss: plot: %w", err)
	}
	fmt.Fprintf(stdout, "\nplot written to %s\n", c.plot)
	return nil
}

func (c powerLossConfig) validate() error {
	names := []string{}
	for _, s := range reconnectStrategies(c.base, c.cap) {
		names = append(names, s.name)
	}
	switch {
	case c.devices < 1:
		return errors.New("-devices must be at least 1")
	case !c.compare && !slices.Contains(names, c.strategy):
		return fmt.Errorf("-strategy %q: want one of %s", c.strategy, strings.Join(names, ", "))
	case c.base <= 0:
		return errors.New("-base must be positive: it is also the reconnect window of the even spread")
	case c.cap < c.base:
		return fmt.Errorf("-cap %v is below -base %v", c.cap, c.base)
	case c.cut != "clients" && c.cut != "broker":
		return fmt.Errorf("-cut %q: want clients or broker", c.cut)
	case c.transport != "pipe" && c.transport != "tcp":
		return fmt.Errorf("-transport %q: want pipe or tcp", c.transport)
	case c.external() && c.transport != "tcp":
		return errors.New("-broker: an external broker is reached over -transport tcp only")
	case c.external() && c.cut == "broker":
		return errors.New("-cut broker restarts the embedded broker; with -broker, cut the clients")
	case c.external() && (c.maxRate != 0 || c.burst != 0):
		return errors.New("-max-connect-rate and -connect-burst configure the embedded broker, not one given by -broker")
	case !(c.maxRate >= 0) || math.IsInf(c.maxRate, 0):
		return errors.New("-max-connect-rate must be a number of at least 0")
	case c.burst < 0:
		return errors.New("-connect-burst must not be negative")
	case c.timeout <= 0:
		return errors.New("-timeout must be positive")
	case c.settle < 0:
		return errors.New("-settle must not be negative")
	}
	if c.external() {
		if _, err := brokerAddr(c.brokerURL); err != nil {
			return err
		}
	}
	if c.transport == "tcp" {
		// Each device holds one descriptor, and its peer in an embedded
		// broker another; keep some for everything else.
		need := uint64(c.devices) + 64
		if !c.external() {
			need += uint64(c.devices)
		}
		var lim syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && need > lim.Cur {
			return fmt.Errorf("-transport tcp with %d devices needs about %d file descriptors, the limit is %d: use -transport pipe or fewer devices", c.devices, need, lim.Cur)
		}
	}
	return nil
}

// brokerAddr returns the host:port of an external broker URL.
func brokerAddr(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "tcp" && u.Scheme != "mqtt") || u.Host == "" || u.Port() == "" {
		return "", fmt.Errorf("-broker %q: want tcp://host:port", raw)
	}
	return u.Host, nil
}

// connectLog records the embedded broker's CONNECT decisions since the cut.
type connectLog struct {
	mu        sync.Mutex
	from      time.Time
	accepts   []time.Time
	refusedBy map[string]int
}

// start drops what was recorded and records from t on.
func (l *connectLog) start(t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.from, l.accepts, l.refusedBy = t, nil, map[string]int{}
}

// observe is the broker's OnConnect.
func (l *connectLog) observe(ev broker.ConnectEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.from.IsZero() || ev.At.Before(l.from) {
		return
	}
	if ev.Accepted {
		l.accepts = append(l.accepts, ev.At)
	} else {
		l.refusedBy[ev.Refusal]++
	}
}

// embedded is the embedded broker of a run, restartable on the same
// address; devices dial the current one.
type embedded struct {
	opts    broker.Options
	current atomic.Pointer[broker.Broker]
}

// errBrokerDown fails a dial while the embedded broker restarts.
var errBrokerDown = errors.New("embedded broker is restarting")

func (e *embedded) start() error {
	b, err := broker.Start(e.opts)
	if err != nil {
		return err
	}
	e.opts.Listen = b.Addr() // a restart listens on the same address
	e.current.Store(b)
	return nil
}

// restart closes the broker and starts a new one on the same address; it
// returns how long no broker was there.
func (e *embedded) restart() (time.Duration, error) {
	start := time.Now()
	old := e.current.Swap(nil)
	if err := old.Close(); err != nil {
		return 0, fmt.Errorf("close embedded broker: %w", err)
	}
	if err := e.start(); err != nil {
		return 0, fmt.Errorf("restart embedded broker: %w", err)
	}
	return time.Since(start), nil
}

func (e *embedded) close() {
	if b := e.current.Swap(nil); b != nil {
		b.Close()
	}
}

// dialPipe is a device's dial through an in-memory pipe.
func (e *embedded) dialPipe(context.Context) (net.Conn, error) {
	b := e.current.Load()
	if b == nil {
		return nil, errBrokerDown
	}
	return b.DialPipe()
}

// dialTCP returns a dial over TCP to addr.
func dialTCP(addr string) simulator.Dial {
	return func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "tcp", addr)
	}
}

// runFlood runs the scenario once with strategy s: broker up, devices
// connected, the cut, the devices back (or the timeout), and everything
// stopped again.
func runFlood(ctx context.Context, c powerLossConfig, s strategy, log *slog.Logger) (floodRun, error) {
	run := floodRun{strategy: s.name, brokerSide: !c.external()}
	var emb *embedded
	conns := &connectLog{}
	var dial simulator.Dial
	if c.external() {
		addr, _ := brokerAddr(c.brokerURL)
		dial = dialTCP(addr)
	} else {
		listen := "" // pipes only
		if c.transport == "tcp" {
			listen = c.listen
		}
		emb = &embedded{opts: broker.Options{
			Listen:         listen,
			Logger:         log.With("component", "broker"),
			MaxConnectRate: c.maxRate,
			ConnectBurst:   c.burst,
			OnConnect:      conns.observe,
		}}
		if err := emb.start(); err != nil {
			return run, err
		}
		defer emb.close()
		dial = emb.dialPipe
		if c.transport == "tcp" {
			dial = dialTCP(emb.opts.Listen)
		}
	}

	// The setup is not measured and starts alike for every strategy:
	// without a guard every device connects at once; with one, the first
	// connections are spread at 80 % of the guard's rate, and the few
	// refused (two CONNECTs less than 1/rate apart) retry with full jitter.
	// Were they to retry with the strategy, fixed and exponential backoff
	// would already send their synchronised waves during the setup.
	var ramp time.Duration
	if c.maxRate > 0 {
		ramp = time.Duration(float64(c.devices) / (0.8 * c.maxRate) * float64(time.Second))
	}
	flood, err := simulator.NewFlood(simulator.FloodOptions{
		Devices:      c.devices,
		Dial:         dial,
		Backoff:      s.backoff,
		StartBackoff: setupBackoff,
		Ramp:         ramp,
		Availability: c.availability,
		Seed:         c.seed,
		Logger:       log.With("component", "flood"),
	})
	if err != nil {
		return run, err
	}
	fctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- flood.Run(fctx) }()
	defer func() {
		stop()
		<-done
	}()

	begin := time.Now()
	if err := waitFor(ctx, flood.Ready(), ramp+c.timeout); err != nil {
		return run, fmt.Errorf("setup: %d devices not connected: %w", lostDevices(flood.Result()), err)
	}
	run.setup = time.Since(begin)
	for _, d := range flood.Result().Devices {
		run.setupAttempts += d.Attempts
	}
	if err := sleep(ctx, c.settle); err != nil {
		return run, err
	}
	runtime.GC() // the setup's garbage is not collected during the measurement

	conns.start(time.Now())
	var cut time.Time
	if c.cut == "broker" {
		cut = flood.StartRound()
		if run.down, err = emb.restart(); err != nil {
			return run, err
		}
	} else {
		cut = flood.Cut()
		run.cutTook = time.Since(cut)
	}
	if err := waitFor(ctx, flood.Back(), c.timeout-time.Since(cut)); err != nil && ctx.Err() != nil {
		return run, err
	}

	res := flood.Result()
	for _, d := range res.Devices {
		run.attempts += d.Attempts
		run.refusals += d.Refusals
		run.failures += d.Failures
		if d.Back.IsZero() {
			run.lost++
			continue
		}
		run.allBack = max(run.allBack, d.Back.Sub(cut))
		if !run.brokerSide {
			run.accepts = append(run.accepts, d.Back.Sub(cut))
		}
	}
	if run.brokerSide {
		conns.mu.Lock()
		for _, at := range conns.accepts {
			if !at.Before(cut) {
				run.accepts = append(run.accepts, at.Sub(cut))
			}
		}
		run.refusedBy = conns.refusedBy
		conns.mu.Unlock()
	}
	slices.Sort(run.accepts)
	return run, nil
}

// setupBackoff spaces the retries of the devices' first connection:
// full jitter, base 250 ms, cap 2 s, whatever the strategy measured.
func setupBackoff(n int, prev time.Duration, r simulator.Rand) time.Duration {
	return retry.Backoff{Base: 250 * time.Millisecond, Multiplier: 2, Cap: 2 * time.Second}.Delay(n, prev, r)
}

// lostDevices counts the devices of a result that are not back.
func lostDevices(res simulator.FloodResult) int {
	n := 0
	for _, d := range res.Devices {
		if d.Back.IsZero() {
			n++
		}
	}
	return n
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

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// printFloodTable writes the runs as one table, a row per strategy.
func printFloodTable(w io.Writer, c powerLossConfig, runs []floodRun) error {
	where := fmt.Sprintf("embedded broker over %s", map[string]string{"pipe": "in-memory pipes", "tcp": "loopback TCP"}[c.transport])
	if c.external() {
		where = "external broker " + c.brokerURL + " over TCP"
	}
	guard := "no accept guard"
	if c.maxRate > 0 {
		guard = fmt.Sprintf("accept guard %g/s, burst %d", c.maxRate, max(c.burst, 1))
	}
	fmt.Fprintf(w, "Power-loss flood: %d devices, cut %s, %s, %s; %d cores.\n", c.devices, c.cut, where, guard, runtime.GOMAXPROCS(0))
	fmt.Fprintf(w, "Backoff base %v, cap %v, multiplier 2; timeout %v; seed %d.\n", c.base, c.cap, c.timeout, c.seed)
	fmt.Fprintf(w, "Even spread N/(10·W) over W = base %v: %.0f accepts per 100 ms.\n", c.window(), c.even())
	if c.external() {
		fmt.Fprintln(w, "Broker-side measurements unavailable (external broker): accepts are timed by the devices, at their CONNACK.")
	} else {
		fmt.Fprintln(w, "Accepts are timed at the broker; attempts, refusals and failures are counted by the devices.")
	}
	fmt.Fprintln(w)

	// Names left-aligned, numbers right-aligned: the names are padded to
	// one width, so aligning them right changes nothing.
	width := len("strategy")
	for _, r := range runs {
		width = max(width, len(r.strategy))
	}
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%-*s\tattempts\trefusals\tfailed\tpeak/100ms\t×even\tpeak/s\tall back (s)\tlost\t\n", width, "strategy")
	for _, r := range runs {
		back := fmt.Sprintf("%.2f", r.allBack.Seconds())
		if r.lost > 0 {
			back = fmt.Sprintf(">%.0f", c.timeout.Seconds())
		}
		fmt.Fprintf(tw, "%-*s\t%d\t%d\t%d\t%d\t%.2f\t%d\t%s\t%d\t\n", width, r.strategy, r.attempts, r.refusals, r.failures,
			r.peakTenth(), float64(r.peakTenth())/c.even(), r.peakSecond(), back, r.lost)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for line := range strings.Lines(table.String()) {
		if _, err := fmt.Fprintln(w, strings.TrimRight(line, " \n")); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	for _, r := range runs {
		fmt.Fprintf(w, "%s: setup %.1fs (%d attempts)", r.strategy, r.setup.Seconds(), r.setupAttempts)
		if c.cut == "broker" {
			fmt.Fprintf(w, ", broker down %.0fms", float64(r.down)/float64(time.Millisecond))
		} else {
			fmt.Fprintf(w, ", cut took %.0fms", float64(r.cutTook)/float64(time.Millisecond))
		}
		if len(r.refusedBy) > 0 {
			var reasons []string
			for _, k := range slices.Sorted(maps.Keys(r.refusedBy)) {
				reasons = append(reasons, fmt.Sprintf("%s %d", k, r.refusedBy[k]))
			}
			fmt.Fprintf(w, ", broker refusals: %s", strings.Join(reasons, ", "))
		}
		fmt.Fprintln(w)
	}
	return nil
}
