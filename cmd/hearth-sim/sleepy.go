package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/protocols/mqtt"
	"github.com/hearthd/hearth/protocols/zwavejs"
	"github.com/hearthd/hearth/retry"
	"github.com/hearthd/hearth/simulator/scenario/sleepy"
	"github.com/hearthd/hearth/store"
)

// sleepyUsage heads the sleepy subcommand's -h output.
const sleepyUsage = `usage: hearth-sim sleepy [flags]

A fleet of sleepy Z-Wave thermostats over a simulated day (issue 4's "done
when"). In one process and on a fake clock it runs the real parts: the
embedded MQTT broker, a bbolt store in a temporary directory, the zwavejs
adapter and the dispatcher, wired as hearthd wires one zwavejs service, and
the simulator's Z-Wave JS UI gateway with -devices battery thermostats.
Each wakes every -wake and listens for -window; their first wakes are
spread over 10 phases, device i first waking at (i mod 10)·wake/10.

At every whole minute each device gets a command with probability
-rate/60: a current_heating_setpoint (a value the device has not been
sent before) with a TTL of 2m, 4m, 10m or 1h, published on
hearth/<device>/set. A command is fresh at a wake when a wake of its
device falls in [issued, deadline) and no newer command for the device was
issued before that wake. Each fresh command must be written to its node
exactly once, at that wake, and succeed; every other command must never be
written, and end superseded or expired, in the dead-letter store; nothing
may be written to a sleeping node (the gateway's wake-up queue stays
empty) or past its TTL.

The clock moves from one interesting instant to the next (wakes, ends of
awake windows, commands, deadlines); at each it waits, in real time, for
the events the plan expects, then for every timer of the dispatcher and
the simulator to be set where the plan says, then for the broker to be
quiet for -quiet. An instant that does not settle within -settle is
counted (unsettled instants) and makes the run fail, so that slowness is
reported, never miscounted.

It prints the counts and exits 1 if any must-be-0 count is not 0.

flags:
`

// runSleepy is the sleepy subcommand: it parses args into a sleepy.Config
// and runs the scenario against Hearth's real parts (fleetHearth), which
// prints the summary on stdout; it returns an error if a must-be-0 count
// is not 0.
func runSleepy(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hearth-sim sleepy", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), sleepyUsage)
		fs.PrintDefaults()
	}
	var c sleepy.Config
	fs.IntVar(&c.Devices, "devices", 200, "number of sleepy thermostats")
	fs.DurationVar(&c.Duration, "duration", 24*time.Hour, "simulated time over which commands are issued (the run goes on until the last TTL)")
	fs.DurationVar(&c.Wake, "wake", 5*time.Minute, "wake-up interval of every device")
	fs.DurationVar(&c.Window, "window", 10*time.Second, "awake window after every wake")
	fs.Float64Var(&c.Rate, "rate", 2, "commands per device per hour, on average")
	fs.Uint64Var(&c.Seed, "seed", 1, "random seed of the commands (devices, values, TTLs)")
	fs.BoolVar(&c.Verbose, "v", false, "print every command's course, and the components' warnings")
	fs.DurationVar(&c.Quiet, "quiet", 2*time.Millisecond, "real time without MQTT traffic that ends an instant, once everything expected happened")
	fs.DurationVar(&c.Settle, "settle", 30*time.Second, "real time an instant may take to settle before it counts as unsettled")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("sleepy: unexpected argument %q (flags start with -)", fs.Arg(0))
	}
	if err := c.Validate(); err != nil {
		return fmt.Errorf("sleepy: %w", err)
	}
	c.Progress = phasesFor(stderr, "sleepy")
	s, err := sleepy.Run(ctx, c, fleetHearth{}, stdout, stderr)
	if err != nil {
		return fmt.Errorf("sleepy: %w", err)
	}
	if err := s.Err(); err != nil {
		return fmt.Errorf("sleepy: %w", err)
	}
	return nil
}

// fleetHearth is Hearth's side of the sleepy scenario, its sleepy.Hearth:
// it starts the parts hearthd wires for one zwavejs service (see
// cmd/hearthd/daemon.go, which hearth-sim may not import): the store,
// Hearth's MQTT connection, the zwavejs adapter, the dispatcher and the
// MQTT intake of hearth/<device>/set.
type fleetHearth struct{}

// runningHearth is a started fleetHearth: sleepy.Running.
type runningHearth struct {
	store *store.Store
	conn  *mqtt.Conn
	disp  *dispatcher.Dispatcher
	stop  func()
}

// Bridges returns what the bridge of each service with a breaker last
// said of itself.
func (h *runningHearth) Bridges() []string {
	var states []string
	for _, s := range h.disp.Breakers() {
		states = append(states, s.Bridge)
	}
	return states
}

// DeadLetters returns the status of every dead letter in the store, by
// op_id, reading it page by page.
func (h *runningHearth) DeadLetters() (map[string]devices.Status, error) {
	dead := map[string]devices.Status{}
	var after uint64
	for {
		page, err := h.store.DeadLetters(store.DeadLetterQuery{After: after, Limit: store.MaxDeadLetterLimit})
		if err != nil {
			return nil, err
		}
		for _, dl := range page {
			dead[dl.OpID] = dl.Status
			after = dl.Seq
		}
		if len(page) < store.MaxDeadLetterLimit {
			return dead, nil
		}
	}
}

// Lookup returns the op stored under opID.
func (h *runningHearth) Lookup(opID string) (devices.Op, bool, error) { return h.store.Lookup(opID) }

// Stop stops the dispatcher and the connection and closes the store.
func (h *runningHearth) Stop() { h.stop() }

// Start starts Hearth's parts on the broker at the clock of su, as
// hearthd's start does for its config with one zwavejs service, and
// returns once its connection is up.
func (fleetHearth) Start(su sleepy.Setup) (sleepy.Running, error) {
	dir, brokerURL, clock, seed, log, onResult := su.Dir, su.BrokerURL, su.Clock, su.Seed, su.Logger, su.OnResult
	cfg, err := config.Parse("sleepy.yaml", []byte(su.Config))
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		return nil, err
	}
	h := &runningHearth{store: st}
	var disp *dispatcher.Dispatcher
	h.conn = mqtt.New(mqtt.Options{
		URL:      brokerURL,
		ClientID: "hearth-sleepy",
		Status:   mqtt.Announcement{Topic: cfg.Prefix + "/bridge/state", Online: "online", Offline: "offline"},
		OnLost: func() {
			if disp != nil {
				disp.Disconnected()
			}
		},
		OnSession: func() {
			if disp != nil {
				disp.Session()
			}
		},
		OnConnect: func(context.Context) {
			if disp != nil {
				disp.Reconnected()
			}
		},
		Clock:  clock,
		Rand:   &syncRand{r: rand.New(rand.NewPCG(seed, 3))},
		Logger: log.With("component", "mqtt"),
	})
	s := cfg.Services[0]
	var devs []devices.Device
	var ddevs []dispatcher.Device
	for _, d := range cfg.Devices {
		devs = append(devs, d.Device)
		ddevs = append(ddevs, dispatcher.Device{Device: d.Device, TTL: d.TTL})
	}
	adapter := zwavejs.New(h.conn, zwavejs.Options{
		Service:     s.Name,
		BaseTopic:   s.BaseTopic,
		GatewayName: s.GatewayName,
		Devices:     devs,
		Logger:      log.With("component", "zwavejs"),
	})
	rnd := &syncRand{r: rand.New(rand.NewPCG(seed, 4))}
	svc := dispatcher.Service{
		Name:        s.Name,
		Bridge:      adapter,
		Policy:      s.Retry.Policy,
		Budget:      retry.NewBudget(s.Retry.Budget.Ratio, s.Retry.Budget.MinRetries, s.Retry.Budget.Window),
		Hold:        s.Breaker.Hold,
		ReadTimeout: s.ReadTimeout,
	}
	if bk := s.Breaker; bk.Enabled {
		backoff := bk.OpenBackoff()
		svc.Breaker = &breaker.Options{
			FailureThreshold: bk.FailureThreshold,
			FailureRatio:     bk.FailureRatio,
			Window:           bk.Window,
			MinCalls:         bk.MinCalls,
			OpenFor:          func(trips int) time.Duration { return backoff.Delay(trips, 0, rnd) },
			MaxProbes:        bk.MaxProbes,
			ProbeTimeout:     bk.ProbeTimeout,
			SuccessesToClose: bk.SuccessesToClose,
		}
	}
	disp, err = dispatcher.New(dispatcher.Options{
		Prefix:        cfg.Prefix,
		Services:      []dispatcher.Service{svc},
		Devices:       ddevs,
		Journal:       st,
		Publisher:     h.conn,
		Audit:         st,
		DeadLetters:   st,
		Clock:         clock,
		Rand:          rnd,
		RepublishRate: cfg.MQTT.RepublishRate,
		OnResult:      onResult,
		Logger:        log.With("component", "dispatcher"),
	})
	if err != nil {
		st.Close()
		return nil, err
	}
	h.disp = disp
	// The intake, as hearthd's: a command message is acknowledged to the
	// broker once the dispatcher has answered it.
	prefix := cfg.Prefix + "/"
	intake := func(m mqtt.Message) {
		device, ok := strings.CutPrefix(m.Topic, prefix)
		if ok {
			device, ok = strings.CutSuffix(device, "/set")
		}
		if !ok || (m.Retained && len(m.Payload) == 0) {
			m.Ack()
			return
		}
		if err := disp.Submit(context.Background(), dispatcher.Request{
			Device: device, Payload: m.Payload, Retained: m.Retained,
			Done: func(devices.Result) { m.Ack() },
		}); err != nil {
			log.Warn("command not taken", "topic", m.Topic, "err", err)
		}
	}
	if err := h.conn.SubscribeManualAck(context.Background(), cfg.Prefix+"/+/set", 1, intake); err != nil {
		st.Close()
		return nil, err
	}
	if err := adapter.Start(context.Background(), disp); err != nil {
		st.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	dispDone, connDone := make(chan struct{}), make(chan struct{})
	go func() { defer close(dispDone); disp.Run(ctx) }()
	go func() { defer close(connDone); h.conn.Run(ctx) }()
	h.stop = func() {
		cancel()
		<-dispDone
		<-connDone
		st.Close()
	}
	select {
	case <-h.conn.Up():
	case <-time.After(10 * time.Second):
		h.stop()
		return nil, errors.New("hearth's MQTT connection did not come up within 10s")
	}
	return h, nil
}

// syncRand is a random source safe for concurrent use.
type syncRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (s *syncRand) Int64N(n int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r.Int64N(n)
}
