package sleepy

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/hearthd/hearth/devices"
)

// The sleepy scenario's ground truth and its checker: what the plan says
// must happen to every command, and the counts that compare it with what
// the gateway received and Hearth answered. Pure: the unit tests feed it
// fabricated event logs.

// fleetPhases is how many groups the fleet's first wakes are spread over,
// one wake interval / fleetPhases apart: device i first wakes at
// (i mod fleetPhases) × wake/fleetPhases.
const fleetPhases = 10

// fleetTTLs are the TTLs a command draws from: some shorter than the wake
// interval (so that some expire before any wake), some longer.
var fleetTTLs = []time.Duration{2 * time.Minute, 4 * time.Minute, 10 * time.Minute, time.Hour}

// fleetSetpoints is the pool of setpoint values: 5.0–35.0 °C in steps of
// 0.1 (the climate class's range), without 20.0, the simulated
// thermostats' initial setpoint, so that no command asks for the state a
// device already has. A device takes them in a random order without
// repeating, so that a write to it names the command it came from (for
// its first len(fleetSetpoints) commands; after that a value comes back,
// never one of the device's previous command).
var fleetSetpoints = func() []float64 {
	var vs []float64
	for n := 50; n <= 350; n++ {
		if n != 200 {
			vs = append(vs, float64(n)/10)
		}
	}
	return vs
}()

// fleetDevice is one simulated thermostat.
type fleetDevice struct {
	id    string        // Hearth's device ID, also the node's name in the gateway's topics
	node  int           // Z-Wave node ID
	first time.Duration // first wake, after the start
}

// fleetCommand is one command the scenario sends.
type fleetCommand struct {
	device   int // index in fleetPlan.devices
	opID     string
	value    float64 // current_heating_setpoint
	ttl      time.Duration
	issued   time.Time
	deadline time.Time // issued + ttl
	next     time.Time // when the device's next command is issued; zero if none
}

// fleetPlan is the scenario: the devices, their wake schedule and the
// commands, all decided before the run from the seed.
type fleetPlan struct {
	t0           time.Time
	wake, window time.Duration
	duration     time.Duration // commands are issued in [t0, t0+duration)
	devices      []fleetDevice
	commands     []fleetCommand // in issue order
	byDevice     [][]int        // indices of each device's commands, in issue order
	byValue      []map[float64][]int
	end          time.Time // the last instant driven: every command has ended by then
	byOpID       map[string]int
}

// newFleetPlan draws the commands: at every whole minute in [t0,
// t0+duration) each device gets a command with probability rate/60, a TTL
// from fleetTTLs and the device's next setpoint value.
func newFleetPlan(t0 time.Time, n int, duration, wake, window time.Duration, rate float64, seed uint64) *fleetPlan {
	p := emptyFleetPlan(t0, n, duration, wake, window)
	r := rand.New(rand.NewPCG(seed, seed^0x5eed))
	perms := make([][]int, n)
	for i := range n {
		perms[i] = r.Perm(len(fleetSetpoints))
	}
	prob := rate / 60
	for at := t0; at.Before(t0.Add(duration)); at = at.Add(time.Minute) {
		for i := range n {
			if r.Float64() >= prob {
				continue
			}
			k := len(p.byDevice[i])
			p.add(i, at, fleetTTLs[r.IntN(len(fleetTTLs))], fleetSetpoints[perms[i][k%len(fleetSetpoints)]])
		}
	}
	return p
}

// emptyFleetPlan returns a plan of n devices, their first wakes spread
// over fleetPhases phases, and no commands yet.
func emptyFleetPlan(t0 time.Time, n int, duration, wake, window time.Duration) *fleetPlan {
	p := &fleetPlan{t0: t0, wake: wake, window: window, duration: duration, end: t0.Add(duration),
		byDevice: make([][]int, n), byValue: make([]map[float64][]int, n), byOpID: map[string]int{}}
	for i := range n {
		p.devices = append(p.devices, fleetDevice{
			id:    fmt.Sprintf("thermo_%03d", i),
			node:  i + 2, // node 1 is the controller
			first: time.Duration(i%fleetPhases) * (wake / fleetPhases),
		})
		p.byValue[i] = map[float64][]int{}
	}
	return p
}

// add appends a command to device i, issued at at (not before the
// device's previous command) with ttl and setpoint value.
func (p *fleetPlan) add(i int, at time.Time, ttl time.Duration, value float64) {
	k := len(p.byDevice[i])
	c := fleetCommand{
		device:   i,
		opID:     fmt.Sprintf("fleet-%s-%04d", p.devices[i].id, k),
		value:    value,
		ttl:      ttl,
		issued:   at,
		deadline: at.Add(ttl),
	}
	if c.deadline.After(p.end) {
		p.end = c.deadline
	}
	idx := len(p.commands)
	if k > 0 {
		p.commands[p.byDevice[i][k-1]].next = at
	}
	p.commands = append(p.commands, c)
	p.byDevice[i] = append(p.byDevice[i], idx)
	p.byValue[i][value] = append(p.byValue[i][value], idx)
	p.byOpID[c.opID] = idx
}

// firstWake returns device i's first wake.
func (p *fleetPlan) firstWake(i int) time.Time { return p.t0.Add(p.devices[i].first) }

// lastWake returns device i's latest wake at or before t, and false if it
// has not woken yet.
func (p *fleetPlan) lastWake(i int, t time.Time) (time.Time, bool) {
	first := p.firstWake(i)
	if t.Before(first) {
		return time.Time{}, false
	}
	k := t.Sub(first) / p.wake
	return first.Add(k * p.wake), true
}

// awakeFrom returns the first instant at or after t at which device i is
// awake: t itself inside an awake window [wake, wake+window), else its
// next wake.
func (p *fleetPlan) awakeFrom(i int, t time.Time) time.Time {
	w, ok := p.lastWake(i, t)
	if !ok {
		return p.firstWake(i)
	}
	if t.Before(w.Add(p.window)) {
		return t
	}
	return w.Add(p.wake)
}

// nextTransition returns when device i next wakes or falls asleep after
// t (the simulator's timer for it): its first wake before it, the end of
// the awake window inside one, else its next wake.
func (p *fleetPlan) nextTransition(i int, t time.Time) time.Time {
	w, ok := p.lastWake(i, t)
	switch {
	case !ok:
		// Until it is first woken (Sim.Wake), the simulator's own first
		// wake is one interval after its start.
		return p.t0.Add(p.wake)
	case t.Before(w.Add(p.window)):
		return w.Add(p.window)
	}
	return w.Add(p.wake)
}

// fleetExpect is what must become of a command.
type fleetExpect struct {
	// fresh: a wake of its device falls in [issued, deadline) and no newer
	// command for the device was issued before it; the command must be
	// written to the node exactly once, at that wake (at), and succeed.
	fresh bool
	// status is the command's end: succeeded if fresh, else superseded
	// (at the newer command's issue) or expired (at its deadline).
	status devices.Status
	at     time.Time
}

// expect returns what must become of command c. At one instant the
// scenario lets the wakes happen before it issues the instant's
// commands, so a command issued at the instant its predecessor is
// delivered does not supersede it.
func (p *fleetPlan) expect(c int) fleetExpect {
	cmd := p.commands[c]
	next := cmd.next
	at := p.awakeFrom(cmd.device, cmd.issued)
	if at.Before(cmd.deadline) && (next.IsZero() || !next.Before(at)) {
		return fleetExpect{fresh: true, status: devices.Succeeded, at: at}
	}
	if !next.IsZero() && next.Before(cmd.deadline) {
		return fleetExpect{status: devices.Superseded, at: next}
	}
	return fleetExpect{status: devices.Expired, at: cmd.deadline}
}

// fleetWrite is one value write the gateway received for a node.
type fleetWrite struct {
	device int
	value  float64
	at     time.Time // on the fake clock, when the gateway took it
	queued bool      // the node was asleep: the gateway put it in its wake-up queue
}

// fleetObserved is what the run saw.
type fleetObserved struct {
	writes []fleetWrite
	// final is each command's terminal result, by op_id.
	final map[string]devices.Result
	// dead is the status of each op_id in the dead-letter store.
	dead map[string]devices.Status
	// stored is each command as Hearth stored it (attempts, last send),
	// by op_id; nil skips the check against it.
	stored map[string]devices.Op
	// wakes are the node statuses Awake seen, per device, by the
	// gateway's timestamp.
	wakes [][]time.Time
	// unsettled counts the instants at which the system did not reach its
	// expected quiet state (see the driver) within the real-time bound.
	unsettled int
}

// Summary is the scenario's counts, from the checker and the run.
type Summary struct {
	Devices, Instants int
	Simulated         time.Duration // how far the clock was driven
	Issued            int           // commands issued
	Published         int           // of those, published by the automation (all, unless the run was aborted)
	Fresh             int           // fresh at a wake: the expected deliveries
	DeliveredOnce     int           // fresh, written exactly once, at that wake, while awake
	Succeeded         int           // fresh, and ended succeeded
	Superseded        int           // expected and ended superseded, never written
	SupersededDead    int           // of those, in the dead-letter store
	Expired           int           // expected and ended expired, never written
	ExpiredDead       int           // of those, in the dead-letter store

	// Must be 0.
	Twice        int // commands written more than once (or sent more than once, by Hearth's count)
	Late         int // writes at or after their command's deadline
	Asleep       int // writes the gateway had to queue: the node was asleep
	Missed       int // fresh, but not written exactly once at its wake
	Stale        int // writes of a command that was not fresh, before its deadline
	Stray        int // writes no command of the device asks for
	WrongEnd     int // commands that ended otherwise than expected (or not at all)
	NotDead      int // superseded or expired, but not in the dead-letter store
	WakeMismatch int // devices whose observed wakes differ from the schedule
	Skew         int // writes whose gateway time differs from Hearth's send time
	Unsettled    int // instants the system did not settle at (see the driver)

	// Aborted, if not empty, says why the run stopped before the end.
	Aborted string

	// Examples holds a few lines describing violations.
	Examples []string
}

// Failures names the must-be-0 counts that are not 0, and the broken
// identities (delivered == fresh, and every command accounted for once).
func (s Summary) Failures() []string {
	var f []string
	for _, c := range []struct {
		name string
		n    int
	}{
		{"delivered twice", s.Twice},
		{"delivered late", s.Late},
		{"written while asleep", s.Asleep},
		{"missed", s.Missed},
		{"written though not fresh", s.Stale},
		{"stray writes", s.Stray},
		{"unexpected ends", s.WrongEnd},
		{"not in the dead-letter store", s.NotDead},
		{"wake schedule mismatches", s.WakeMismatch},
		{"send/receipt time skews", s.Skew},
		{"unsettled instants", s.Unsettled},
	} {
		if c.n != 0 {
			f = append(f, fmt.Sprintf("%s: %d", c.name, c.n))
		}
	}
	if s.Aborted != "" {
		f = append(f, s.Aborted)
	}
	if s.DeliveredOnce != s.Fresh || s.Succeeded != s.Fresh {
		f = append(f, fmt.Sprintf("delivered %d and succeeded %d of %d fresh", s.DeliveredOnce, s.Succeeded, s.Fresh))
	}
	if s.Superseded+s.Expired+s.DeliveredOnce != s.Issued {
		f = append(f, fmt.Sprintf("superseded %d + expired %d + delivered %d ≠ issued %d", s.Superseded, s.Expired, s.DeliveredOnce, s.Issued))
	}
	return f
}

// maxExamples bounds the violation lines a summary keeps.
const maxExamples = 10

func (s *Summary) example(format string, args ...any) {
	if len(s.Examples) < maxExamples {
		s.Examples = append(s.Examples, fmt.Sprintf(format, args...))
	}
}

// attribute returns the command of device d that a write of value at at
// stands for: the latest one with that value issued at or before at; -1
// if none.
func (p *fleetPlan) attribute(d int, value float64, at time.Time) int {
	best := -1
	for _, c := range p.byValue[d][value] {
		if !p.commands[c].issued.After(at) {
			best = c
		}
	}
	return best
}

// checkFleet compares what was observed with the plan.
func checkFleet(p *fleetPlan, o fleetObserved) Summary {
	s := Summary{Devices: len(p.devices), Issued: len(p.commands), Unsettled: o.unsettled}
	rel := func(t time.Time) string { return fmtOffset(t.Sub(p.t0)) }

	writes := make([][]fleetWrite, len(p.commands))
	for _, w := range o.writes {
		dev := p.devices[w.device].id
		if w.queued {
			s.Asleep++
			s.example("%s: value %.1f written at %s while the node slept (the gateway queued it)", dev, w.value, rel(w.at))
		}
		c := p.attribute(w.device, w.value, w.at)
		if c < 0 {
			s.Stray++
			s.example("%s: value %.1f written at %s, which no command asked for", dev, w.value, rel(w.at))
			continue
		}
		writes[c] = append(writes[c], w)
		if cmd := p.commands[c]; !w.at.Before(cmd.deadline) {
			s.Late++
			s.example("%s: %s written at %s, at or past its deadline %s", dev, cmd.opID, rel(w.at), rel(cmd.deadline))
		}
	}

	for c, cmd := range p.commands {
		e := p.expect(c)
		ws := writes[c]
		dev := p.devices[cmd.device].id
		r, ended := o.final[cmd.opID]
		stored, haveStored := o.stored[cmd.opID]
		if len(ws) > 1 || (haveStored && stored.Attempts > 1) {
			s.Twice++
			s.example("%s: %s written %d times (Hearth counts %d attempts)", dev, cmd.opID, len(ws), stored.Attempts)
		}
		if e.fresh {
			s.Fresh++
			if len(ws) == 1 && ws[0].at.Equal(e.at) && !ws[0].queued {
				s.DeliveredOnce++
				if haveStored && !stored.LastSentAt.Equal(ws[0].at) {
					s.Skew++
					s.example("%s: %s sent by Hearth at %s, received by the gateway at %s", dev, cmd.opID, rel(stored.LastSentAt), rel(ws[0].at))
				}
			} else {
				s.Missed++
				at := "never"
				if len(ws) > 0 {
					at = "at " + rel(ws[0].at)
				}
				s.example("%s: %s (issued %s, TTL %s) fresh at the wake %s, written %d times, first %s", dev, cmd.opID, rel(cmd.issued), cmd.ttl, rel(e.at), len(ws), at)
			}
		} else if len(ws) > 0 && ws[0].at.Before(cmd.deadline) {
			s.Stale++
			s.example("%s: %s (issued %s, TTL %s, to end %s at %s) written at %s", dev, cmd.opID, rel(cmd.issued), cmd.ttl, e.status, rel(e.at), rel(ws[0].at))
		}
		switch {
		case !ended:
			s.WrongEnd++
			s.example("%s: %s never ended; want %s at %s", dev, cmd.opID, e.status, rel(e.at))
			continue
		case r.Status != e.status || !r.At.Equal(e.at):
			s.WrongEnd++
			s.example("%s: %s (issued %s, TTL %s) ended %s/%s at %s; want %s at %s", dev, cmd.opID, rel(cmd.issued), cmd.ttl, r.Status, r.Reason, rel(r.At), e.status, rel(e.at))
			continue
		}
		switch e.status {
		case devices.Succeeded:
			s.Succeeded++
		case devices.Superseded, devices.Expired:
			dead := o.dead[cmd.opID] == e.status
			if !dead {
				s.NotDead++
				s.example("%s: %s ended %s but is not in the dead-letter store", dev, cmd.opID, e.status)
			}
			if e.status == devices.Superseded {
				s.Superseded++
				if dead {
					s.SupersededDead++
				}
			} else {
				s.Expired++
				if dead {
					s.ExpiredDead++
				}
			}
		}
	}

	if o.wakes != nil {
		for i := range p.devices {
			var want []time.Time
			for w := p.firstWake(i); !w.After(p.end); w = w.Add(p.wake) {
				want = append(want, w)
			}
			if got := o.wakes[i]; !slices.EqualFunc(got, want, time.Time.Equal) {
				s.WakeMismatch++
				s.example("%s: woke %d times (first %s), scheduled %d times (first %s)", p.devices[i].id, len(got), firstOf(got, rel), len(want), firstOf(want, rel))
			}
		}
	}
	return s
}

func firstOf(ts []time.Time, rel func(time.Time) string) string {
	if len(ts) == 0 {
		return "none"
	}
	return rel(ts[0])
}

// fmtOffset formats an offset from the start as +hh:mm:ss.
func fmtOffset(d time.Duration) string {
	sign := "+"
	if d < 0 {
		sign, d = "-", -d
	}
	return fmt.Sprintf("%s%02d:%02d:%02d", sign, int(d.Hours()), int(d.Minutes())%60, int(d.Seconds())%60)
}
