// Package powerloss is hearth-sim's power-loss flood (docs/RECONNECT.md):
// thousands of simulator.Flood devices connected to an embedded broker (or
// an external one) are cut all at once, from below MQTT or by restarting
// the broker, and reconnect with one of the reconnect strategies while the
// broker's accepts are timed.
//
// It owns the strategies (retry.Backoff values), the embedded broker's
// lifecycle and accept log, the cut, what is measured (peaks per 100 ms
// and per second against the even spread N/(10·W), attempts, refusals,
// lost devices), the table and the plot. It parses no flags: the command
// hearth-sim power-loss fills a [Config] and calls [Run].
package powerloss

import (
	"bytes"
	"context"
	"errors"
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
	"github.com/hearthd/hearth/simulator/scenario/chart"
	"github.com/hearthd/hearth/simulator/scenario/progress"
)

// Config is one power-loss scenario: hearth-sim power-loss's flags, named
// alike.
type Config struct {
	// Devices is the number of simulated devices (-devices).
	Devices int
	// Progress gets a line per phase of each run (connecting, cut, all
	// back); nil prints none.
	Progress *progress.Phases
	// Strategy names the reconnect backoff of a single run, one of
	// Strategies' names (-strategy); with Compare every strategy runs.
	Strategy string
	Compare  bool
	// Base and Cap are the backoff's base, also the reconnect window W
	// of the even spread, and cap (-base, -cap).
	Base, Cap time.Duration
	// Cut is what fails: "clients" (every connection dropped at once) or
	// "broker" (the embedded broker restarts) (-cut).
	Cut string
	// Transport is how devices reach the broker: "pipe" (in memory, the
	// embedded broker only) or "tcp" (-transport).
	Transport string
	// BrokerURL is an external broker, tcp://host:port; "" starts an
	// embedded one (-broker). An external broker is reached over tcp.
	BrokerURL string
	// Listen is the embedded broker's TCP address with Transport "tcp"
	// (-listen).
	Listen string
	// MaxRate and Burst are the embedded broker's accept guard: CONNECTs
	// accepted per second, 0 for none, and its bucket, 0 meaning 1
	// (-max-connect-rate, -connect-burst).
	MaxRate float64
	Burst   int
	// Timeout bounds the wait for the devices, before and after the cut;
	// those not back are lost (-timeout).
	Timeout time.Duration
	// Settle is the quiet time between the last device connecting and
	// the cut (-settle).
	Settle time.Duration
	// Availability makes devices publish availability online after
	// connecting, with a retained offline will (-availability).
	Availability bool
	// Seed: device i draws its jitter from PCG(Seed, i) (-seed).
	Seed uint64
	// Plot is the plot file, SVG or PNG by its extension, written with
	// Compare or if PlotSet (the -plot flag was given); "" writes none.
	Plot    string
	PlotSet bool
}

// External reports whether the devices connect to an external broker.
func (c Config) External() bool { return c.BrokerURL != "" }

// Window is the reconnect window W over which full jitter spreads the
// first reconnects: the base.
func (c Config) Window() time.Duration { return c.Base }

// Even is the even spread N/(10·W): accepts per 100 ms if the reconnects
// were spread evenly over the window.
func (c Config) Even() float64 {
	return float64(c.Devices) / (10 * c.Window().Seconds())
}

// Strategy is one row of the table.
type Strategy struct {
	// Name is the row and legend name.
	Name string
	// Backoff spaces reconnects; nil is no backoff.
	Backoff simulator.Backoff
}

// Strategies are the strategies of the power-loss scenario, in
// table order: no backoff, the two without jitter, the three jitters.
func Strategies(base, limit time.Duration) []Strategy {
	wrap := func(b retry.Backoff) simulator.Backoff {
		b.Base, b.Multiplier, b.Cap = base, 2, limit
		return func(n int, prev time.Duration, r simulator.Rand) time.Duration { return b.Delay(n, prev, r) }
	}
	return []Strategy{
		{Name: "none"},
		{Name: "fixed", Backoff: wrap(retry.Backoff{Strategy: retry.Fixed, Jitter: retry.None})},
		{Name: "exponential", Backoff: wrap(retry.Backoff{Strategy: retry.Exponential, Jitter: retry.None})},
		{Name: "full", Backoff: wrap(retry.Backoff{Strategy: retry.Exponential, Jitter: retry.Full})},
		{Name: "equal", Backoff: wrap(retry.Backoff{Strategy: retry.Exponential, Jitter: retry.Equal})},
		{Name: "decorrelated", Backoff: wrap(retry.Backoff{Strategy: retry.Exponential, Jitter: retry.Decorrelated})},
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

// Run runs the scenario of c for its Strategy or, with Compare, for every
// strategy, prints the table on stdout and writes the plot; stderr gets
// its progress and the broker's and devices' errors. Its errors start
// with "power-loss: ".
func Run(ctx context.Context, c Config, stdout, stderr io.Writer) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("power-loss: %w", err)
	}
	if c.Plot != "" && (c.Compare || c.PlotSet) {
		if _, err := chart.Format(c.Plot); err != nil { // fail before a long run
			return fmt.Errorf("power-loss: -plot %w", err)
		}
	}

	strats := Strategies(c.Base, c.Cap)
	if !c.Compare {
		i := slices.IndexFunc(strats, func(s Strategy) bool { return s.Name == c.Strategy })
		strats = strats[i : i+1]
	}
	// Errors only: the broker warns of every connection a cut drops, and
	// the table counts what matters.
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	var runs []floodRun
	for _, s := range strats {
		r, err := runFlood(ctx, c, s, log)
		if err != nil {
			return fmt.Errorf("power-loss: %s: %w", s.Name, err)
		}
		runs = append(runs, r)
		runtime.GC() // the next run starts from a clean heap
	}
	if err := printFloodTable(stdout, c, runs); err != nil {
		return err
	}
	if c.Plot == "" || !(c.Compare || c.PlotSet) {
		return nil
	}
	if err := writeFloodPlot(c.Plot, c, runs); err != nil {
		return fmt.Errorf("power-loss: plot: %w", err)
	}
	fmt.Fprintf(stdout, "\nplot written to %s\n", c.Plot)
	return nil
}

// Validate reports the first bad value of c, or a file descriptor limit
// too low for its devices over TCP. Its messages name the values by
// hearth-sim power-loss's flags.
func (c Config) Validate() error {
	names := []string{}
	for _, s := range Strategies(c.Base, c.Cap) {
		names = append(names, s.Name)
	}
	switch {
	case c.Devices < 1:
		return errors.New("-devices must be at least 1")
	case !c.Compare && !slices.Contains(names, c.Strategy):
		return fmt.Errorf("-strategy %q: want one of %s", c.Strategy, strings.Join(names, ", "))
	case c.Base <= 0:
		return errors.New("-base must be positive: it is also the reconnect window of the even spread")
	case c.Cap < c.Base:
		return fmt.Errorf("-cap %v is below -base %v", c.Cap, c.Base)
	case c.Cut != "clients" && c.Cut != "broker":
		return fmt.Errorf("-cut %q: want clients or broker", c.Cut)
	case c.Transport != "pipe" && c.Transport != "tcp":
		return fmt.Errorf("-transport %q: want pipe or tcp", c.Transport)
	case c.External() && c.Transport != "tcp":
		return errors.New("-broker: an external broker is reached over -transport tcp only")
	case c.External() && c.Cut == "broker":
		return errors.New("-cut broker restarts the embedded broker; with -broker, cut the clients")
	case c.External() && (c.MaxRate != 0 || c.Burst != 0):
		return errors.New("-max-connect-rate and -connect-burst configure the embedded broker, not one given by -broker")
	case !(c.MaxRate >= 0) || math.IsInf(c.MaxRate, 0):
		return errors.New("-max-connect-rate must be a number of at least 0")
	case c.Burst < 0:
		return errors.New("-connect-burst must not be negative")
	case c.Timeout <= 0:
		return errors.New("-timeout must be positive")
	case c.Settle < 0:
		return errors.New("-settle must not be negative")
	}
	if c.External() {
		if _, err := brokerAddr(c.BrokerURL); err != nil {
			return err
		}
	}
	if c.Transport == "tcp" {
		// Each device holds one descriptor, and its peer in an embedded
		// broker another; keep some for everything else.
		need := uint64(c.Devices) + 64
		if !c.External() {
			need += uint64(c.Devices)
		}
		var lim syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && need > lim.Cur {
			return fmt.Errorf("-transport tcp with %d devices needs about %d file descriptors, the limit is %d: use -transport pipe or fewer devices", c.Devices, need, lim.Cur)
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
func runFlood(ctx context.Context, c Config, s Strategy, log *slog.Logger) (floodRun, error) {
	run := floodRun{strategy: s.Name, brokerSide: !c.External()}
	var emb *embedded
	conns := &connectLog{}
	var dial simulator.Dial
	if c.External() {
		addr, _ := brokerAddr(c.BrokerURL)
		dial = dialTCP(addr)
	} else {
		listen := "" // pipes only
		if c.Transport == "tcp" {
			listen = c.Listen
		}
		emb = &embedded{opts: broker.Options{
			Listen:         listen,
			Logger:         log.With("component", "broker"),
			MaxConnectRate: c.MaxRate,
			ConnectBurst:   c.Burst,
			OnConnect:      conns.observe,
		}}
		if err := emb.start(); err != nil {
			return run, err
		}
		defer emb.close()
		dial = emb.dialPipe
		if c.Transport == "tcp" {
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
	if c.MaxRate > 0 {
		ramp = time.Duration(float64(c.Devices) / (0.8 * c.MaxRate) * float64(time.Second))
	}
	flood, err := simulator.NewFlood(simulator.FloodOptions{
		Devices:      c.Devices,
		Dial:         dial,
		Backoff:      s.Backoff,
		StartBackoff: setupBackoff,
		Ramp:         ramp,
		Availability: c.Availability,
		Seed:         c.Seed,
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
	c.Progress.Printf("%s: connecting %d devices", s.Name, c.Devices)
	if err := waitFor(ctx, flood.Ready(), ramp+c.Timeout); err != nil {
		return run, fmt.Errorf("setup: %d devices not connected: %w", lostDevices(flood.Result()), err)
	}
	run.setup = time.Since(begin)
	c.Progress.Printf("%s: all %d devices connected; cutting the %s", s.Name, c.Devices, c.Cut)
	for _, d := range flood.Result().Devices {
		run.setupAttempts += d.Attempts
	}
	if err := sleep(ctx, c.Settle); err != nil {
		return run, err
	}
	runtime.GC() // the setup's garbage is not collected during the measurement

	conns.start(time.Now())
	var cut time.Time
	if c.Cut == "broker" {
		cut = flood.StartRound()
		if run.down, err = emb.restart(); err != nil {
			return run, err
		}
	} else {
		cut = flood.Cut()
		run.cutTook = time.Since(cut)
	}
	c.Progress.Printf("%s: cut; waiting up to %v for the devices to come back", s.Name, c.Timeout)
	if err := waitFor(ctx, flood.Back(), c.Timeout-time.Since(cut)); err != nil && ctx.Err() != nil {
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
	if run.lost > 0 {
		c.Progress.Printf("%s: %d of %d devices back, %d lost", s.Name, c.Devices-run.lost, c.Devices, run.lost)
	} else {
		c.Progress.Printf("%s: all %d devices back", s.Name, c.Devices)
	}
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
func printFloodTable(w io.Writer, c Config, runs []floodRun) error {
	where := fmt.Sprintf("embedded broker over %s", map[string]string{"pipe": "in-memory pipes", "tcp": "loopback TCP"}[c.Transport])
	if c.External() {
		where = "external broker " + c.BrokerURL + " over TCP"
	}
	guard := "no accept guard"
	if c.MaxRate > 0 {
		guard = fmt.Sprintf("accept guard %g/s, burst %d", c.MaxRate, max(c.Burst, 1))
	}
	fmt.Fprintf(w, "Power-loss flood: %d devices, cut %s, %s, %s; %d cores.\n", c.Devices, c.Cut, where, guard, runtime.GOMAXPROCS(0))
	fmt.Fprintf(w, "Backoff base %v, cap %v, multiplier 2; timeout %v; seed %d.\n", c.Base, c.Cap, c.Timeout, c.Seed)
	fmt.Fprintf(w, "Even spread N/(10·W) over W = base %v: %.0f accepts per 100 ms.\n", c.Window(), c.Even())
	if c.External() {
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
			back = fmt.Sprintf(">%.0f", c.Timeout.Seconds())
		}
		fmt.Fprintf(tw, "%-*s\t%d\t%d\t%d\t%d\t%.2f\t%d\t%s\t%d\t\n", width, r.strategy, r.attempts, r.refusals, r.failures,
			r.peakTenth(), float64(r.peakTenth())/c.Even(), r.peakSecond(), back, r.lost)
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
		if c.Cut == "broker" {
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
