// Package sleepy is hearth-sim's fleet of sleepy Z-Wave thermostats over
// a simulated day (issue 4's "done when"): on a fake clock, an embedded
// broker and the simulator's Z-Wave JS UI gateway with the sleepy
// thermostats run against a real Hearth, and every command must be
// delivered exactly once at the first wake within its TTL, or end
// superseded or expired in the dead-letter store, never written late or
// to a sleeping node.
//
// It owns the plan (devices, wake schedule, seeded commands), the
// configuration Hearth runs with, the driver that moves the fake clock
// from one instant to the next and waits for what the plan expects, the
// recorder, and the checker of the promises (check.go, pure). It never
// imports Hearth's dispatcher, store or protocols: the Hearth under test
// is started through [Hearth], which the command hearth-sim sleepy wires
// from the real parts.
package sleepy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/simulator"
	"github.com/hearthd/hearth/simulator/scenario/progress"
)

// Config is one fleet: hearth-sim sleepy's flags, named alike.
type Config struct {
	// Devices is the number of sleepy thermostats, 1–3999 (-devices).
	Devices int
	// Progress gets a line per phase (start, every 6 simulated hours,
	// the checks); nil prints none.
	Progress *progress.Phases
	// Duration is the simulated time over which commands are issued; the
	// run goes on until the last TTL (-duration).
	Duration time.Duration
	// Wake and Window are every device's wake-up interval and the awake
	// window after each wake (-wake, -window).
	Wake, Window time.Duration
	// Rate is the commands per device per hour, on average (-rate).
	Rate float64
	// Seed draws the commands: devices, values, TTLs (-seed).
	Seed uint64
	// Verbose prints every command's course, and the components'
	// warnings (-v).
	Verbose bool
	// Quiet is the real time without MQTT traffic that ends an instant,
	// once everything expected happened (-quiet).
	Quiet time.Duration
	// Settle is the real time an instant may take to settle before it
	// counts as unsettled (-settle).
	Settle time.Duration
}

// Validate reports the first bad value of c. Its messages name the
// values by hearth-sim sleepy's flags.
func (c Config) Validate() error {
	switch {
	case c.Devices < 1 || c.Devices > 3999:
		return errors.New("-devices must be within 1–3999 (Z-Wave node IDs 2–4000)")
	case c.Duration < time.Minute:
		return errors.New("-duration must be at least 1m: commands are issued at whole minutes")
	case c.Wake < time.Minute:
		return errors.New("-wake must be at least 1m")
	case c.Window <= 0 || c.Window >= c.Wake/fleetPhases:
		return fmt.Errorf("-window must be above 0 and below -wake/%d (%v), so that a phase's window ends before the next phase wakes", fleetPhases, c.Wake/fleetPhases)
	case !(c.Rate > 0 && c.Rate <= 60):
		return errors.New("-rate must be above 0 and at most 60 commands per device per hour")
	case c.Quiet < 0:
		return errors.New("-quiet must not be negative")
	case c.Settle <= 0:
		return errors.New("-settle must be positive")
	}
	return nil
}

// Hearth starts the Hearth under test for a run: the parts hearthd wires
// for the fleet's configuration (Setup.Config), on the run's broker and
// fake clock. The command hearth-sim sleepy wires Hearth's store, MQTT
// connection, zwavejs adapter, dispatcher and MQTT intake as hearthd
// does; this package never imports them.
type Hearth interface {
	// Start starts Hearth and returns once its MQTT connection is up.
	Start(s Setup) (Running, error)
}

// Setup is what a run gives the Hearth it starts.
type Setup struct {
	// Dir is a directory of its own for its store, removed after the run.
	Dir string
	// BrokerURL is the run's embedded broker.
	BrokerURL string
	// Config is hearthd's configuration of the fleet, YAML: one zwavejs
	// service with its defaults, and the sleepy thermostats.
	Config string
	// Clock is the run's fake clock; every timer must be set on it.
	Clock clockwork.Clock
	// Seed seeds Hearth's random sources.
	Seed uint64
	// Logger is the log of its parts.
	Logger *slog.Logger
	// OnResult is called with every result Hearth publishes.
	OnResult func(devices.Result)
}

// Running is a started Hearth.
type Running interface {
	// Bridges returns what each service's bridge last said of itself:
	// online, offline or unknown, for the services with a breaker.
	Bridges() []string
	// DeadLetters returns the status of every op in the dead-letter
	// store, by op_id.
	DeadLetters() (map[string]devices.Status, error)
	// Lookup returns the op stored under opID, and false if there is none.
	Lookup(opID string) (devices.Op, bool, error)
	// Stop stops every part and closes the store.
	Stop()
}

// Run runs the fleet of c against the Hearth that h starts: it prints the
// header and the counts on stdout (with Verbose, every command's course
// too) and its progress on stderr, and returns the counts. Its error is
// one of setup or of the context; the promises that did not hold are in
// the summary (see Summary.Err).
func Run(ctx context.Context, c Config, h Hearth, stdout, stderr io.Writer) (Summary, error) {
	level := slog.LevelError
	if c.Verbose {
		level = slog.LevelWarn
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	plan := newFleetPlan(sleepyStart, c.Devices, c.Duration, c.Wake, c.Window, c.Rate, c.Seed)
	fmt.Fprintf(stdout, "Sleepy fleet: %d Z-Wave thermostats waking every %s for %s (first wakes in %d phases %s apart); %s of commands, %g per device per hour, TTLs %s; seed %d.\n",
		c.Devices, c.Wake, c.Window, fleetPhases, c.Wake/fleetPhases, c.Duration, c.Rate, fmtTTLs(), c.Seed)
	started := time.Now()
	s, err := runFleet(ctx, c, h, plan, log, stdout, stderr)
	if err != nil {
		return s, err
	}
	printFleetSummary(stdout, s, time.Since(started))
	return s, nil
}

// Err is nil if every promise held, else an error naming those that did
// not.
func (s Summary) Err() error {
	if f := s.Failures(); len(f) > 0 {
		return fmt.Errorf("%d conditions did not hold: %s", len(f), strings.Join(f, "; "))
	}
	return nil
}

// maxUnsettled is how many unsettled instants stop a run: past a few,
// the system is stuck or broken, and every further instant would only
// wait -settle.
const maxUnsettled = 5

// sleepyStart is the fake clock's start: a Monday, midnight UTC.
var sleepyStart = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

func fmtTTLs() string {
	var s []string
	for _, d := range fleetTTLs {
		if d%time.Hour == 0 {
			s = append(s, fmt.Sprintf("%dh", d/time.Hour))
		} else {
			s = append(s, fmt.Sprintf("%dm", d/time.Minute))
		}
	}
	return strings.Join(s, "/")
}

func printFleetSummary(w io.Writer, s Summary, wall time.Duration) {
	fmt.Fprintf(w, "\nSimulated %s (%d clock instants) in %s of wall time.\n\n", s.Simulated, s.Instants, wall.Round(100*time.Millisecond))
	must := func(n int) string {
		if n == 0 {
			return "   must be 0"
		}
		return "   must be 0: FAILED"
	}
	rows := []struct {
		name string
		n    int
		note string
	}{
		{"commands issued", s.Issued, ""},
		{"fresh at a wake (expected deliveries)", s.Fresh, ""},
		{"delivered exactly once at that wake", s.DeliveredOnce, ""},
		{"confirmed succeeded", s.Succeeded, ""},
		{"superseded before a wake", s.Superseded, fmt.Sprintf("   %d in the dead-letter store", s.SupersededDead)},
		{"expired before a wake", s.Expired, fmt.Sprintf("   %d in the dead-letter store", s.ExpiredDead)},
		{"delivered twice", s.Twice, must(s.Twice)},
		{"delivered late, past TTL", s.Late, must(s.Late)},
		{"written while asleep (gateway queued)", s.Asleep, must(s.Asleep)},
		{"missed (fresh, not written at its wake)", s.Missed, must(s.Missed)},
		{"written though not fresh", s.Stale, must(s.Stale)},
		{"writes no command asked for", s.Stray, must(s.Stray)},
		{"ended otherwise than expected", s.WrongEnd, must(s.WrongEnd)},
		{"wakes off the schedule (devices)", s.WakeMismatch, must(s.WakeMismatch)},
		{"unsettled instants (harness)", s.Unsettled, must(s.Unsettled)},
	}
	for _, r := range rows {
		fmt.Fprintf(w, "  %-42s %6d%s\n", r.name, r.n, r.note)
	}
	if len(s.Examples) > 0 {
		fmt.Fprintln(w, "\nFirst violations:")
		for _, e := range s.Examples {
			fmt.Fprintln(w, "  "+e)
		}
	}
	if s.Aborted != "" {
		fmt.Fprintf(w, "\nIncomplete: %s; the counts include the commands it never reached.\n", s.Aborted)
	}
	if f := s.Failures(); len(f) == 0 {
		fmt.Fprintf(w, "\nAll held: every fresh command was written once, at its wake, and confirmed; nothing stale, late or to a sleeping node.\n")
	} else {
		fmt.Fprintf(w, "\nDid not hold: %s\n", strings.Join(f, "; "))
	}
}

// fleetInstant is what happens at one instant of the fake clock.
type fleetInstant struct {
	at         time.Time
	firstWakes []int // devices woken for the first time (Sim.Wake)
	wakes      []int // devices that wake
	sleeps     []int // devices whose awake window ends
	deliveries []int // commands issued earlier, delivered at a wake now
	expiries   []int // commands that expire now
	issues     []int // commands issued now
	supersedes []int // commands superseded by one issued now
}

// instants lists the instants to drive, in order, up to p.end.
func (p *fleetPlan) instants() []*fleetInstant {
	byAt := map[time.Time]*fleetInstant{}
	at := func(t time.Time) *fleetInstant {
		in := byAt[t]
		if in == nil {
			in = &fleetInstant{at: t}
			byAt[t] = in
		}
		return in
	}
	at(p.t0)
	for i := range p.devices {
		first := p.firstWake(i)
		at(first).firstWakes = append(at(first).firstWakes, i)
		for w := first; !w.After(p.end); w = w.Add(p.wake) {
			at(w).wakes = append(at(w).wakes, i)
			if s := w.Add(p.window); !s.After(p.end) {
				at(s).sleeps = append(at(s).sleeps, i)
			}
		}
	}
	for c, cmd := range p.commands {
		at(cmd.issued).issues = append(at(cmd.issued).issues, c)
		e := p.expect(c)
		switch {
		case e.status == devices.Succeeded && e.at.After(cmd.issued):
			at(e.at).deliveries = append(at(e.at).deliveries, c)
		case e.status == devices.Expired:
			at(e.at).expiries = append(at(e.at).expiries, c)
		case e.status == devices.Superseded:
			at(e.at).supersedes = append(at(e.at).supersedes, c)
		}
	}
	list := slices.Collect(maps.Values(byAt))
	slices.SortFunc(list, func(a, b *fleetInstant) int { return a.at.Compare(b.at) })
	return list
}

// runFleet runs the scenario of plan p against the Hearth that hs starts,
// and checks it.
func runFleet(ctx context.Context, c Config, hs Hearth, p *fleetPlan, log *slog.Logger, stdout, stderr io.Writer) (Summary, error) {
	dir, err := os.MkdirTemp("", "hearth-sim-sleepy-")
	if err != nil {
		return Summary{}, err
	}
	defer os.RemoveAll(dir)

	clock := newFleetClock(p.t0)
	rec := newFleetRecorder(p)
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0", Logger: log.With("component", "broker")})
	if err != nil {
		return Summary{}, fmt.Errorf("broker: %w", err)
	}
	defer b.Close()

	// The observer subscribes first, before anything is retained: it sees
	// every message (the quiet check) and the nodes' statuses, and it is
	// the automation that publishes the commands.
	observer := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("sleepy-automation").SetOrderMatters(true))
	if err := tokenErr(observer.Connect()); err != nil {
		return Summary{}, fmt.Errorf("observer: %w", err)
	}
	defer observer.Disconnect(0)
	if err := tokenErr(observer.Subscribe("#", 1, func(_ paho.Client, m paho.Message) { rec.message(m.Topic(), m.Payload()) })); err != nil {
		return Summary{}, fmt.Errorf("observer: %w", err)
	}

	h, err := hs.Start(Setup{Dir: dir, BrokerURL: b.URL(), Config: fleetConfig(p), Clock: clock, Seed: c.Seed, Logger: log, OnResult: rec.result})
	if err != nil {
		return Summary{}, err
	}
	defer h.Stop()

	simDevs := make([]simulator.Device, len(p.devices))
	for i, d := range p.devices {
		simDevs[i] = simulator.Device{Name: d.id, Class: simulator.ClassClimate, Protocol: simulator.ProtocolZWaveJS,
			NodeID: d.node, WakeInterval: p.wake, AwakeWindow: p.window}
	}
	sim, err := simulator.New(simulator.Options{
		Broker:   b.URL(),
		ClientID: "sleepy-gateway",
		Devices:  simDevs,
		Clock:    clock,
		Rand:     rand.New(rand.NewPCG(c.Seed, 2)),
		Logger:   log.With("component", "simulator"),
		OnSet:    rec.set,
	})
	if err != nil {
		return Summary{}, err
	}
	simCtx, stopSim := context.WithCancel(ctx)
	simDone := make(chan struct{})
	go func() { defer close(simDone); sim.Run(simCtx) }()
	defer func() { stopSim(); <-simDone }()

	// Ready: the gateway is up, and Hearth has every node's value (so it
	// has seen every node's status Asleep, published before the values)
	// and the gateway online.
	d := &fleetDriver{c: c, p: p, clock: clock, rec: rec, sim: sim, observer: observer, h: h, stdout: stdout, start: time.Now()}
	c.Progress.Printf("starting %d thermostats and Hearth", len(p.devices))
	if !d.await("the simulated gateway and Hearth ready", func(r *fleetRecorder) []string {
		var missing []string
		if n := len(r.mirrors); n < len(p.devices) {
			missing = append(missing, fmt.Sprintf("Hearth mirrors %d of %d thermostats' setpoints", n, len(p.devices)))
		}
		for _, bridge := range h.Bridges() {
			if bridge != "online" {
				missing = append(missing, "gateway "+bridge)
			}
		}
		return missing
	}) {
		return Summary{}, errors.New("the gateway and Hearth did not come up: " + strings.Join(d.notes, "; "))
	}
	d.notes = nil

	instants := p.instants()
	c.Progress.Printf("ready; simulating %v of commands", c.Duration)
	lastProgress := p.t0
	aborted, reached := "", p.t0
	for _, in := range instants {
		if ctx.Err() != nil {
			return Summary{}, ctx.Err()
		}
		if d.unsettled >= maxUnsettled {
			// Each further instant would wait -settle again: stop, and
			// let the checker count what never happened.
			aborted = fmt.Sprintf("the run was stopped at %s after %d unsettled instants", fmtOffset(in.at.Sub(p.t0)), d.unsettled)
			fmt.Fprintln(stderr, "sleepy: "+aborted)
			break
		}
		d.step(in)
		reached = in.at
		if in.at.Sub(lastProgress) >= time.Hour*6 || in == instants[len(instants)-1] {
			lastProgress = in.at
			c.Progress.Printf("%s simulated, %d commands issued", fmtOffset(in.at.Sub(p.t0)), rec.issued())
		}
	}

	c.Progress.Printf("checking what the thermostats received")
	o, err := d.observed()
	if err != nil {
		return Summary{}, err
	}
	s := checkFleet(p, o)
	s.Instants = len(instants)
	s.Simulated = reached.Sub(p.t0)
	s.Aborted = aborted
	s.Published = rec.issued()
	s.Examples = append(d.notes[:min(len(d.notes), maxExamples)], s.Examples...)
	if c.Verbose {
		printFleetCourse(stdout, p, o)
	}
	return s, nil
}

// printFleetCourse prints every command's course, for -v.
func printFleetCourse(w io.Writer, p *fleetPlan, o fleetObserved) {
	writes := map[int][]time.Time{}
	for _, wr := range o.writes {
		if c := p.attribute(wr.device, wr.value, wr.at); c >= 0 {
			writes[c] = append(writes[c], wr.at)
		}
	}
	fmt.Fprintln(w, "\nCommands (issued, device, op_id, setpoint, TTL: expected; what happened):")
	rel := func(t time.Time) string { return fmtOffset(t.Sub(p.t0)) }
	for c, cmd := range p.commands {
		e := p.expect(c)
		var ws []string
		for _, t := range writes[c] {
			ws = append(ws, rel(t))
		}
		r := o.final[cmd.opID]
		fmt.Fprintf(w, "  %s %s %s %.1f %s: %s at %s; written [%s], ended %s at %s\n",
			rel(cmd.issued), p.devices[cmd.device].id, cmd.opID, cmd.value, cmd.ttl, e.status, rel(e.at), strings.Join(ws, " "), r.Status, rel(r.At))
	}
}

// fleetDriver moves the fake clock through the plan's instants.
type fleetDriver struct {
	c        Config
	p        *fleetPlan
	clock    *fleetClock
	rec      *fleetRecorder
	sim      *simulator.Sim
	observer paho.Client
	h        Running
	stdout   io.Writer

	start     time.Time // real time
	unsettled int
	notes     []string // why instants did not settle
}

// step drives one instant: the clock moves to it; the wakes, awake
// windows' ends, deliveries and expiries due happen and settle; then the
// instant's commands are published and settle.
func (d *fleetDriver) step(in *fleetInstant) {
	d.clock.advanceTo(in.at)
	for _, i := range in.firstWakes {
		d.sim.Wake(d.p.devices[i].id) // the phase: its interval counts from now
	}
	ok := d.await("wakes, deliveries and expiries", func(r *fleetRecorder) []string {
		var missing []string
		for _, i := range in.wakes {
			if !r.sawStatus(i, "Awake", in.at) {
				missing = append(missing, d.p.devices[i].id+" awake")
			}
		}
		for _, i := range in.sleeps {
			if !r.sawStatus(i, "Asleep", in.at) {
				missing = append(missing, d.p.devices[i].id+" asleep")
			}
		}
		for _, c := range in.deliveries {
			missing = append(missing, r.missingDelivery(c)...)
		}
		for _, c := range in.expiries {
			if r.final[d.p.commands[c].opID].Status != devices.Expired {
				missing = append(missing, d.p.commands[c].opID+" expired")
			}
		}
		return missing
	})
	ok = d.settle(in.at) && ok
	if len(in.issues) > 0 {
		// Commands go the way an automation's do, published on
		// hearth/<device>/set through the broker, not handed to
		// dispatcher.Submit: the MQTT intake (JSON, op_id, ttl, the
		// retain check, the acknowledgement after storing) is part of
		// what is tested, and its cost is small.
		for _, c := range in.issues {
			cmd := d.p.commands[c]
			payload, _ := json.Marshal(map[string]any{"current_heating_setpoint": cmd.value, "op_id": cmd.opID, "ttl": cmd.ttl.String()})
			d.rec.sent()
			if err := tokenErr(d.observer.Publish("hearth/"+d.p.devices[cmd.device].id+"/set", 1, false, payload)); err != nil {
				d.note(in.at, "publish "+cmd.opID+": "+err.Error())
			}
		}
		ok = d.await("the commands' first results", func(r *fleetRecorder) []string {
			var missing []string
			for _, c := range in.issues {
				opID := d.p.commands[c].opID
				if !r.saw(opID, devices.Accepted) {
					missing = append(missing, opID+" accepted")
				}
				if e := d.p.expect(c); e.fresh && e.at.Equal(in.at) {
					missing = append(missing, r.missingDelivery(c)...)
				} else if !r.saw(opID, devices.Queued) {
					missing = append(missing, opID+" queued")
				}
			}
			for _, c := range in.supersedes {
				if r.final[d.p.commands[c].opID].Status != devices.Superseded {
					missing = append(missing, d.p.commands[c].opID+" superseded")
				}
			}
			return missing
		}) && ok
		ok = d.settle(in.at) && ok
	}
	if !d.quiet() {
		d.note(in.at, "the broker was never quiet")
		ok = false
	}
	if !ok {
		d.unsettled++
	}
}

func (d *fleetDriver) note(at time.Time, msg string) {
	d.notes = append(d.notes, fmt.Sprintf("harness at %s: %s", fmtOffset(at.Sub(d.p.t0)), msg))
	if d.c.Verbose {
		fmt.Fprintln(d.stdout, d.notes[len(d.notes)-1])
	}
}

// await waits, in real time up to -settle, until cond reports nothing
// missing; it notes what was still missing if not.
func (d *fleetDriver) await(what string, cond func(*fleetRecorder) []string) bool {
	deadline := time.Now().Add(d.c.Settle)
	for {
		news := d.rec.newsChan()
		d.rec.mu.Lock()
		missing := cond(d.rec)
		d.rec.mu.Unlock()
		if len(missing) == 0 {
			return true
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			d.note(d.clock.Now(), fmt.Sprintf("waiting for %s: still missing %s", what, shorten(missing)))
			return false
		}
		t := time.NewTimer(wait)
		select {
		case <-news:
		case <-t.C:
		}
		t.Stop()
	}
}

// settle waits, in real time up to -settle, until the timers set on the
// fake clock are exactly those the plan expects at now: each node's next
// wake or end of its awake window (the simulator), and each pending
// command's deadline (the dispatcher, waiting for a wake). So every
// goroutine that had something to do at now has done it, and none will
// read the clock late.
func (d *fleetDriver) settle(now time.Time) bool {
	deadline := time.Now().Add(d.c.Settle)
	poll := time.NewTicker(time.Millisecond)
	defer poll.Stop()
	for {
		changed := d.clock.changedChan()
		news := d.rec.newsChan()
		want := map[time.Time]int{}
		for i := range d.p.devices {
			want[d.p.nextTransition(i, now)]++
		}
		d.rec.mu.Lock()
		for c := range d.rec.pending {
			want[d.p.commands[c].deadline]++
		}
		d.rec.mu.Unlock()
		have := d.clock.pending()
		if maps.Equal(want, have) {
			return true
		}
		if time.Now().After(deadline) {
			d.note(now, "timers on the fake clock differ from the plan's: "+timerDiff(want, have, d.p.t0))
			return false
		}
		select {
		case <-changed:
		case <-news:
		case <-poll.C:
		}
	}
}

// quiet waits until no MQTT message has passed the broker for -quiet,
// up to -settle.
func (d *fleetDriver) quiet() bool {
	deadline := time.Now().Add(d.c.Settle)
	for {
		since := d.rec.sinceLastMessage()
		if since >= d.c.Quiet {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(d.c.Quiet - since)
	}
}

func timerDiff(want, have map[time.Time]int, t0 time.Time) string {
	var missing, extra []string
	for t, n := range want {
		if k := n - have[t]; k > 0 {
			missing = append(missing, fmt.Sprintf("%s×%d", fmtOffset(t.Sub(t0)), k))
		}
	}
	for t, n := range have {
		if k := n - want[t]; k > 0 {
			extra = append(extra, fmt.Sprintf("%s×%d", fmtOffset(t.Sub(t0)), k))
		}
	}
	slices.Sort(missing)
	slices.Sort(extra)
	return fmt.Sprintf("missing %s; unexpected %s", shorten(missing), shorten(extra))
}

func shorten(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	if len(s) > 5 {
		return strings.Join(s[:5], ", ") + fmt.Sprintf(" and %d more", len(s)-5)
	}
	return strings.Join(s, ", ")
}

// observed gathers what the run saw for the checker: the recorder's
// events, and the dead letters and stored ops from the store.
func (d *fleetDriver) observed() (fleetObserved, error) {
	r := d.rec
	r.mu.Lock()
	o := fleetObserved{
		writes:    slices.Clone(r.writes),
		final:     maps.Clone(r.final),
		wakes:     make([][]time.Time, len(r.awake)),
		unsettled: d.unsettled,
	}
	for i, ws := range r.awake {
		o.wakes[i] = slices.Clone(ws)
	}
	r.mu.Unlock()
	dead, err := d.h.DeadLetters()
	if err != nil {
		return o, fmt.Errorf("dead letters: %w", err)
	}
	o.dead = dead
	o.stored = map[string]devices.Op{}
	for _, cmd := range d.p.commands {
		op, ok, err := d.h.Lookup(cmd.opID)
		if err != nil {
			return o, fmt.Errorf("store: %w", err)
		}
		if ok {
			o.stored[cmd.opID] = op
		}
	}
	return o, nil
}

// fleetRecorder collects what the run sees: the gateway's writes
// (simulator.Options.OnSet), Hearth's results (Setup.OnResult)
// and every MQTT message (the observer), node statuses among them.
type fleetRecorder struct {
	p     *fleetPlan
	index map[string]int // device ID → index

	mu       sync.Mutex
	news     chan struct{} // closed at every event, then replaced
	lastMsg  time.Time     // real time of the last MQTT message seen
	writes   []fleetWrite
	written  map[int]int // command → writes attributed so far
	results  map[string][]devices.Status
	final    map[string]devices.Result
	pending  map[int]bool // commands accepted and not ended
	awake    [][]time.Time
	statuses map[fleetStatus]bool
	mirrors  map[string]bool // hearth/<device> seen
	nIssued  int
}

type fleetStatus struct {
	device int
	word   string
	at     int64 // Unix ms, the gateway's timestamp
}

func newFleetRecorder(p *fleetPlan) *fleetRecorder {
	r := &fleetRecorder{p: p, index: map[string]int{}, news: make(chan struct{}), written: map[int]int{},
		results: map[string][]devices.Status{}, final: map[string]devices.Result{}, pending: map[int]bool{},
		awake: make([][]time.Time, len(p.devices)), statuses: map[fleetStatus]bool{}, mirrors: map[string]bool{}}
	for i, d := range p.devices {
		r.index[d.id] = i
	}
	return r
}

// newsChan returns the channel closed at the next event.
func (r *fleetRecorder) newsChan() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.news
}

// signal announces an event. Call with r.mu held.
func (r *fleetRecorder) signal() {
	close(r.news)
	r.news = make(chan struct{})
}

func (r *fleetRecorder) sinceLastMessage() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return time.Since(r.lastMsg)
}

func (r *fleetRecorder) issued() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nIssued
}

// sent records that a command is being published.
func (r *fleetRecorder) sent() {
	r.mu.Lock()
	r.nIssued++
	r.mu.Unlock()
}

// message takes one MQTT message the observer saw.
func (r *fleetRecorder) message(topic string, payload []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastMsg = time.Now()
	if dev, ok := strings.CutPrefix(topic, "hearth/"); ok && !strings.Contains(dev, "/") {
		r.mirrors[dev] = true
	}
	if rest, ok := strings.CutPrefix(topic, simulator.DefaultZWavePrefix+"/"); ok {
		if dev, ok := strings.CutSuffix(rest, "/status"); ok {
			if i, known := r.index[dev]; known {
				var st struct {
					Time   int64  `json:"time"`
					Status string `json:"status"`
				}
				if json.Unmarshal(payload, &st) == nil {
					r.statuses[fleetStatus{i, st.Status, st.Time}] = true
					if st.Status == "Awake" {
						r.awake[i] = append(r.awake[i], time.UnixMilli(st.Time).UTC())
					}
				}
			}
		}
	}
	r.signal()
}

// set takes one write the gateway received.
func (r *fleetRecorder) set(e simulator.SetEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, known := r.index[e.Device]
	v, isNum := e.Attrs["value"].(float64)
	if !known || !isNum || !strings.HasSuffix(e.Topic, "/67/0/setpoint/1/set") {
		// Not a setpoint write of a thermostat: recorded as a stray write.
		i, v = max(i, 0), -1
	}
	w := fleetWrite{device: i, value: v, at: e.At, queued: e.Queued}
	r.writes = append(r.writes, w)
	if c := r.p.attribute(i, v, e.At); c >= 0 {
		r.written[c]++
	}
	r.signal()
}

// result takes one result Hearth published.
func (r *fleetRecorder) result(res devices.Result) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results[res.OpID] = append(r.results[res.OpID], res.Status)
	c, known := r.p.byOpID[res.OpID]
	switch {
	case res.Status.Terminal():
		if _, dup := r.final[res.OpID]; !dup {
			r.final[res.OpID] = res
		}
		delete(r.pending, c)
	case known && (res.Status == devices.Accepted || res.Status == devices.Queued):
		if _, ended := r.final[res.OpID]; !ended {
			r.pending[c] = true
		}
	}
	r.signal()
}

// saw reports whether opID had a result of status. Call with r.mu held.
func (r *fleetRecorder) saw(opID string, status devices.Status) bool {
	return slices.Contains(r.results[opID], status)
}

// sawStatus reports whether device i's node status word was published at
// at. Call with r.mu held.
func (r *fleetRecorder) sawStatus(i int, word string, at time.Time) bool {
	return r.statuses[fleetStatus{i, word, at.UnixMilli()}]
}

// missingDelivery says what is missing of command c's delivery: its write
// and its succeeded result. Call with r.mu held.
func (r *fleetRecorder) missingDelivery(c int) []string {
	var missing []string
	opID := r.p.commands[c].opID
	if r.written[c] == 0 {
		missing = append(missing, opID+" written")
	}
	if r.final[opID].Status != devices.Succeeded {
		missing = append(missing, opID+" succeeded")
	}
	return missing
}

// fleetConfig is the configuration hearthd would read for the fleet: one
// zwavejs service with its defaults, and the sleepy thermostats.
func fleetConfig(p *fleetPlan) string {
	var b strings.Builder
	b.WriteString("services:\n  zwave:\n    protocol: zwavejs\ndevices:\n")
	for _, d := range p.devices {
		fmt.Fprintf(&b, "  %s:\n    service: zwave\n    class: climate\n    sleepy: true\n    wake_interval: %s\n    awake_window: %s\n", d.id, p.wake, p.window)
	}
	return b.String()
}

// tokenErr waits up to 10 s for t and returns its error.
func tokenErr(t paho.Token) error {
	if !t.WaitTimeout(10 * time.Second) {
		return errors.New("no answer from the broker within 10s")
	}
	return t.Error()
}

// fleetClock is a fake clock (clockwork's) that also keeps the deadline
// of every timer set on it and not yet fired or stopped, so that the
// driver can tell when every goroutine has set the timer it waits on.
// Only the driver advances it (advanceTo). Tickers are not tracked: none
// of the parts sets one on the clock while the fleet runs.
type fleetClock struct {
	*clockwork.FakeClock

	mu      sync.Mutex
	timers  map[*fleetTimer]time.Time
	changed chan struct{} // closed at every change of timers, then replaced
}

func newFleetClock(t0 time.Time) *fleetClock {
	return &fleetClock{FakeClock: clockwork.NewFakeClockAt(t0), timers: map[*fleetTimer]time.Time{}, changed: make(chan struct{})}
}

type fleetTimer struct {
	clockwork.Timer
	c *fleetClock
}

// setLocked records t's deadline d from now, or forgets t if d fires it
// at once. Call with c.mu held.
func (c *fleetClock) setLocked(t *fleetTimer, d time.Duration) {
	if d > 0 {
		c.timers[t] = c.FakeClock.Now().Add(d)
	} else {
		delete(c.timers, t)
	}
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *fleetClock) NewTimer(d time.Duration) clockwork.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fleetTimer{c: c}
	t.Timer = c.FakeClock.NewTimer(d)
	c.setLocked(t, d)
	return t
}

func (c *fleetClock) AfterFunc(d time.Duration, f func()) clockwork.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fleetTimer{c: c}
	t.Timer = c.FakeClock.AfterFunc(d, f)
	c.setLocked(t, d)
	return t
}

func (c *fleetClock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).Chan() }

func (c *fleetClock) Sleep(d time.Duration) { <-c.After(d) }

func (t *fleetTimer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	active := t.Timer.Reset(d)
	t.c.setLocked(t, d)
	return active
}

func (t *fleetTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	active := t.Timer.Stop()
	t.c.setLocked(t, 0)
	return active
}

// advanceTo moves the clock to at, firing every timer due by then.
func (c *fleetClock) advanceTo(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if d := at.Sub(c.FakeClock.Now()); d > 0 {
		c.FakeClock.Advance(d)
	}
	for t, due := range c.timers {
		if !due.After(at) {
			delete(c.timers, t)
		}
	}
	close(c.changed)
	c.changed = make(chan struct{})
}

// pending returns the deadlines of the timers set and not yet fired or
// stopped, with their counts.
func (c *fleetClock) pending() map[time.Time]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[time.Time]int, len(c.timers))
	for _, due := range c.timers {
		m[due]++
	}
	return m
}

func (c *fleetClock) changedChan() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}
