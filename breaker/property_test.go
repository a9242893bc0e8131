package breaker

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// machineRuns is how many random action sequences the state-machine
// property runs, each of about machineRepeats·30 actions (rapid's default
// -rapid.steps), whatever -rapid.checks says: rapid.Check runs 100 (a
// fifth under -short), so the test repeats it.
const (
	machineRuns    = 1000
	machineRepeats = 10
)

// openForVariants are the open durations a machine draws: growing, fixed,
// zero, and negative for the first trip (which counts as 0).
var openForVariants = map[string]func(trips int) time.Duration{
	"10s per trip": tenSecondsPerTrip,
	"fixed 3s":     func(int) time.Duration { return 3 * s },
	"zero":         func(int) time.Duration { return 0 },
	"squares": func(trips int) time.Duration {
		if trips == 1 {
			return -s
		}
		return time.Duration(trips*trips) * s
	},
}

// model is what a breaker must do, computed apart from its code: a list
// of the closed period's outcomes filtered by the documented window rule
// (not slots), probes found among all the permits granted by the
// half-open period they belong to (not a list of out probes), the ratio
// compared in whole percents (not floating point).
type model struct {
	threshold    int // ≤ 0: off
	ratioPercent int // < 0: off
	minCalls     int
	window       time.Duration
	maxProbes    int
	probeTimeout time.Duration
	toClose      int
	openFor      func(int) time.Duration

	state     State
	since     time.Time
	period    int // counts transitions
	offline   bool
	trips     int
	until     time.Time
	opens     []openPeriod // every open period, in order
	run       int          // consecutive failures
	outcomes  []modelOutcome
	successes int
	permits   []*modelPermit
	expected  []transition
	counts    Counts
}

type modelOutcome struct {
	at      time.Time
	failure bool
}

type modelPermit struct {
	p      *Permit
	period int
	probe  bool
	done   bool
}

func (m *model) move(to State, at time.Time) {
	m.expected = append(m.expected, transition{m.state, to, at})
	m.state, m.since = to, at
	m.period++
	m.run, m.outcomes, m.successes = 0, nil, 0
}

func (m *model) trip(at time.Time) {
	m.trips++
	m.counts.Trips++
	d := max(m.openFor(m.trips), 0)
	m.until = at.Add(d)
	m.opens = append(m.opens, openPeriod{at, d})
	m.move(Open, at)
}

// probesOut returns the current half-open period's probes not yet done.
func (m *model) probesOut() []*modelPermit {
	var out []*modelPermit
	for _, mp := range m.permits {
		if mp.probe && !mp.done && mp.period == m.period && m.state == HalfOpen {
			out = append(out, mp)
		}
	}
	return out
}

func (m *model) earliestDeadline() (time.Time, bool) {
	var first time.Time
	for _, mp := range m.probesOut() {
		if first.IsZero() || mp.p.Deadline().Before(first) {
			first = mp.p.Deadline()
		}
	}
	return first, !first.IsZero()
}

// settle applies what time alone does by now.
func (m *model) settle(now time.Time) {
	for {
		if m.state == Open && !m.offline && !now.Before(m.until) {
			m.move(HalfOpen, m.until)
			continue
		}
		if d, ok := m.earliestDeadline(); ok && !now.Before(d) {
			m.counts.Expired++
			m.trip(d)
			continue
		}
		return
	}
}

// next is when time alone next changes the breaker.
func (m *model) next() time.Time {
	switch {
	case m.state == Open && !m.offline:
		return m.until
	case m.state == HalfOpen:
		d, _ := m.earliestDeadline()
		return d
	}
	return time.Time{}
}

// inWindow returns the closed period's outcomes, and failures, counted at
// now: those whose tenth of the window is one of the ten ending with
// now's.
func (m *model) inWindow(now time.Time) (calls, failures int) {
	tenth := m.window / 10
	for _, o := range m.outcomes {
		if now.Sub(epoch)/tenth-o.at.Sub(epoch)/tenth < 10 {
			calls++
			if o.failure {
				failures++
			}
		}
	}
	return calls, failures
}

func (m *model) done(mp *modelPermit, o Outcome, now time.Time) {
	if mp.done {
		return // a second Done counts nothing
	}
	mp.done = true
	switch o {
	case Success:
		m.counts.Successes++
	case Failure:
		m.counts.Failures++
	case Ignored:
		m.counts.Ignored++
	default:
		m.counts.Canceled++
	}
	if mp.period != m.period {
		return
	}
	switch {
	case m.state == HalfOpen && o == Success:
		m.successes++
		if m.successes >= m.toClose {
			m.trips = 0
			m.move(Closed, now)
		}
	case m.state == HalfOpen && o == Failure:
		m.trip(now)
	case m.state == Closed && o == Success:
		m.run = 0
		m.outcomes = append(m.outcomes, modelOutcome{now, false})
	case m.state == Closed && o == Failure:
		m.run++
		m.outcomes = append(m.outcomes, modelOutcome{now, true})
		calls, failures := m.inWindow(now)
		if (m.threshold > 0 && m.run >= m.threshold) ||
			(m.ratioPercent >= 0 && calls >= m.minCalls && failures*100 >= m.ratioPercent*calls) {
			m.trip(now)
		}
	}
}

// machine drives a breaker and its model with the same actions.
type machine struct {
	b      *Breaker
	m      *model
	now    time.Time
	actual *recorder
}

// openPeriod is an open period the model started, for the invariants.
type openPeriod struct {
	start time.Time
	least time.Duration // -1: held open offline, ended by an online report
}

func newMachine(t *rapid.T) *machine {
	variant := rapid.SampledFrom([]string{"10s per trip", "fixed 3s", "zero", "squares"}).Draw(t, "open for")
	m := &model{
		threshold:    rapid.SampledFrom([]int{-1, 1, 2, 3, 5}).Draw(t, "failure threshold"),
		ratioPercent: rapid.SampledFrom([]int{-1, 28, 50, 100, 150}).Draw(t, "failure ratio %"),
		minCalls:     rapid.SampledFrom([]int{1, 3, 10}).Draw(t, "min calls"),
		window:       rapid.SampledFrom([]time.Duration{s, 10 * s, 30 * s}).Draw(t, "window"),
		maxProbes:    rapid.IntRange(1, 3).Draw(t, "max probes"),
		probeTimeout: rapid.SampledFrom([]time.Duration{s, 5 * s}).Draw(t, "probe timeout"),
		toClose:      rapid.IntRange(1, 3).Draw(t, "successes to close"),
		openFor:      openForVariants[variant],
	}
	r := &recorder{}
	opts := Options{
		FailureThreshold: m.threshold,
		FailureRatio:     float64(m.ratioPercent) / 100,
		MinCalls:         m.minCalls,
		Window:           m.window,
		MaxProbes:        m.maxProbes,
		ProbeTimeout:     m.probeTimeout,
		SuccessesToClose: m.toClose,
		OpenFor:          m.openFor,
		OnStateChange:    r.on,
	}
	start := epoch.Add(time.Duration(rapid.Int64Range(0, 10_000).Draw(t, "start ms")) * ms)
	return &machine{b: New(opts), m: m, now: start, actual: r}
}

// before runs the model up to the time of an action on the breaker.
func (mc *machine) before() { mc.m.settle(mc.now) }

func (mc *machine) Advance(t *rapid.T) {
	var d time.Duration
	switch k := rapid.IntRange(0, 3).Draw(t, "advance kind"); {
	case k == 0 && !mc.m.next().IsZero() && mc.m.next().After(mc.now):
		d = mc.m.next().Sub(mc.now) // exactly to the next deadline
		d -= time.Duration(rapid.IntRange(0, 1).Draw(t, "1ns before"))
	default:
		d = rapid.SampledFrom([]time.Duration{0, 1, ms, 250 * ms, s, 3 * s, 10 * s, 45 * s}).Draw(t, "advance")
	}
	mc.now = mc.now.Add(d)
}

func (mc *machine) Allow(t *rapid.T) {
	mc.before()
	m := mc.m
	p, err := mc.b.Allow(mc.now)
	switch {
	case m.state == Closed || (m.state == HalfOpen && len(m.probesOut()) < m.maxProbes):
		probe := m.state == HalfOpen
		var deadline time.Time
		if probe {
			deadline = mc.now.Add(m.probeTimeout)
		}
		if err != nil || p.Probe() != probe || !p.Deadline().Equal(deadline) {
			t.Fatalf("Allow at +%v in %v: %v (probe %v, deadline %v), want a permit (probe %v, deadline %v)", mc.now.Sub(epoch), m.state, err, p != nil && p.Probe(), deadlineOf(p), probe, deadline)
		}
		m.permits = append(m.permits, &modelPermit{p: p, period: m.period, probe: probe})
		m.counts.Allowed++
	default:
		var oe *OpenError
		if !errors.As(err, &oe) || !errors.Is(err, ErrOpen) || p != nil {
			t.Fatalf("Allow at +%v in %v = %v, %v; want an *OpenError", mc.now.Sub(epoch), m.state, p, err)
		}
		if oe.State != m.state || !oe.Until.Equal(m.next()) {
			t.Fatalf("Allow at +%v refused with %v until %v, want %v until %v", mc.now.Sub(epoch), oe.State, oe.Until, m.state, m.next())
		}
		// Open never ends before its time: Until is never past.
		if !oe.Until.IsZero() && !oe.Until.After(mc.now) {
			t.Fatalf("Allow at +%v refused until %v, which is not after now", mc.now.Sub(epoch), oe.Until)
		}
		m.counts.Rejected++
	}
}

func deadlineOf(p *Permit) time.Time {
	if p == nil {
		return time.Time{}
	}
	return p.Deadline()
}

var outcomes = rapid.SampledFrom([]Outcome{Success, Failure, Failure, Ignored, Canceled, 0})

func (mc *machine) Done(t *rapid.T) {
	if len(mc.m.permits) == 0 {
		t.Skip("no permit")
	}
	mp := rapid.SampledFrom(mc.m.permits).Draw(t, "permit")
	o := outcomes.Draw(t, "outcome")
	mc.before()
	mp.p.Done(o, mc.now)
	mc.m.done(mp, o, mc.now)
}

// Call is Allow and Done at once, which moves a closed breaker along.
func (mc *machine) Call(t *rapid.T) {
	n := len(mc.m.permits)
	mc.Allow(t)
	if len(mc.m.permits) == n {
		return // refused
	}
	mp := mc.m.permits[n]
	o := outcomes.Draw(t, "outcome")
	mp.p.Done(o, mc.now)
	mc.m.done(mp, o, mc.now)
}

func (mc *machine) Health(t *rapid.T) {
	online := rapid.Bool().Draw(t, "online")
	mc.before()
	m := mc.m
	mc.b.ReportHealth(online, mc.now)
	switch {
	case !online && !m.offline:
		m.offline = true
		if m.state != Open {
			m.opens = append(m.opens, openPeriod{mc.now, -1})
			m.move(Open, mc.now)
		} else {
			m.opens[len(m.opens)-1].least = -1 // now held: it ends on the online report
		}
	case online && m.offline:
		m.offline = false
		m.move(HalfOpen, mc.now)
	}
}

func (mc *machine) Expire(t *rapid.T) {
	mc.before()
	if got, want := mc.b.Expire(mc.now), mc.m.next(); !got.Equal(want) {
		t.Fatalf("Expire(+%v) = %v, want %v", mc.now.Sub(epoch), got, want)
	}
}

func (mc *machine) Snapshot(t *rapid.T) {
	mc.before()
	m := mc.m
	got := mc.b.Snapshot(mc.now)
	want := Snapshot{
		State:          m.state,
		Since:          m.since,
		Until:          m.next(),
		Offline:        m.offline,
		Trips:          m.trips,
		Probes:         len(m.probesOut()),
		ProbeSuccesses: m.successes,
		Counts:         m.counts,
	}
	if m.state == Closed {
		want.ConsecutiveFailures = m.run
		want.WindowCalls, want.WindowFailures = m.inWindow(mc.now)
	}
	if !got.Since.Equal(want.Since) || !got.Until.Equal(want.Until) {
		t.Fatalf("Snapshot(+%v) since %v until %v, want since %v until %v", mc.now.Sub(epoch), got.Since, got.Until, want.Since, want.Until)
	}
	got.Since, got.Until, want.Since, want.Until = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if got != want {
		t.Fatalf("Snapshot(+%v):\n got %+v\nwant %+v", mc.now.Sub(epoch), got, want)
	}
	// The breaker never stays half-open with a probe past its deadline.
	if got.State == HalfOpen && got.Probes > 0 && !mc.b.Expire(mc.now).After(mc.now) {
		t.Fatalf("half-open at +%v with a probe at or past its deadline", mc.now.Sub(epoch))
	}
}

// Check holds after every action: the breaker's transitions are the
// model's, and, stated apart, the invariants: only allowed edges, each
// from the state the previous one went to, at non-decreasing times; an
// open period never ends before its duration; never more than MaxProbes
// probes of one half-open period out.
func (mc *machine) Check(t *rapid.T) {
	got := mc.actual.list()
	if !sameTransitions(got, mc.m.expected) {
		t.Fatalf("transitions:\n got %v\nwant %v", got, mc.m.expected)
	}
	edges := map[[2]State]bool{{Closed, Open}: true, {Open, HalfOpen}: true, {HalfOpen, Open}: true, {HalfOpen, Closed}: true}
	prev := transition{to: Closed}
	opens := 0
	for i, tr := range got {
		if !edges[[2]State{tr.from, tr.to}] || tr.from != prev.to || (i > 0 && tr.at.Before(prev.at)) {
			t.Fatalf("transition %v after %v", tr, prev)
		}
		if tr.to == Open {
			opens++
		}
		if tr.from == Open {
			op := mc.m.opens[opens-1]
			if !op.start.Equal(prev.at) {
				t.Fatalf("open period %d starts at %v, model says %v", opens, prev.at, op.start)
			}
			if op.least >= 0 && tr.at.Sub(op.start) < op.least {
				t.Fatalf("open at +%v ended after %v, before its %v", op.start.Sub(epoch), tr.at.Sub(op.start), op.least)
			}
		}
		prev = tr
	}
	perPeriod := map[int]int{}
	for _, mp := range mc.m.permits {
		if mp.probe && !mp.done {
			perPeriod[mp.period]++
			if perPeriod[mp.period] > mc.m.maxProbes {
				t.Fatalf("%d probes of one half-open period out, want at most %d", perPeriod[mp.period], mc.m.maxProbes)
			}
		}
	}
}

// A random sequence of calls, outcomes, health reports and clock steps:
// the breaker does what the model says, and the invariants hold.
func TestPropertyStateMachine(t *testing.T) {
	for ran := 0; ran < machineRuns; {
		rapid.Check(t, func(rt *rapid.T) {
			mc := newMachine(rt)
			actions := rapid.StateMachineActions(mc)
			for range machineRepeats {
				rt.Repeat(actions)
			}
			ran++
		})
	}
}

// The machine must reach every state and edge, or it proves little.
func TestPropertyStateMachineReachesEveryEdge(t *testing.T) {
	seen := map[string]bool{}
	rapid.Check(t, func(rt *rapid.T) {
		mc := newMachine(rt)
		actions := rapid.StateMachineActions(mc)
		for range machineRepeats {
			rt.Repeat(actions)
		}
		for _, tr := range mc.actual.list() {
			seen[fmt.Sprintf("%v→%v", tr.from, tr.to)] = true
		}
		if mc.m.counts.Expired > 0 {
			seen["probe expired"] = true
		}
	})
	for _, want := range []string{"closed→open", "open→half_open", "half_open→open", "half_open→closed", "probe expired"} {
		if !seen[want] {
			t.Errorf("no run reached %s; seen %v", want, slices.Sorted(maps.Keys(seen)))
		}
	}
}
