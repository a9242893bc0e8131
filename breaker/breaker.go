package breaker

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// State is a breaker's state. The zero State is Closed.
type State uint8

const (
	// Closed lets every call go out and counts their outcomes.
	Closed State = iota
	// Open fails every call fast, until its open period ends or, when the
	// service reported itself offline, until it reports itself online.
	Open
	// HalfOpen lets at most MaxProbes probe calls out at once; the others
	// fail fast.
	HalfOpen
)

var stateNames = [...]string{Closed: "closed", Open: "open", HalfOpen: "half_open"}

// String returns the state's name as metrics and the status page show
// it: "closed", "open" or "half_open".
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Outcome is how a call ended, as the caller classifies it for the
// breaker. The zero Outcome is no outcome: Done counts it as Canceled.
type Outcome uint8

const (
	// Success counts for the service: it resets the consecutive
	// failures, and a probe's success moves towards closing.
	Success Outcome = iota + 1
	// Failure counts against the service: it may trip a closed breaker,
	// and a probe's failure reopens a half-open one.
	Failure
	// Ignored is a call that ended badly for a reason that says nothing
	// about the service's health, such as a permanent error for an
	// invalid payload: it counts neither way.
	Ignored
	// Canceled is a call the caller gave up on, or a permit released
	// unused: it counts neither way, and frees a probe's place.
	Canceled
)

var outcomeNames = [...]string{Success: "success", Failure: "failure", Ignored: "ignored", Canceled: "canceled"}

// String returns the outcome's name: "success", "failure", "ignored" or
// "canceled".
func (o Outcome) String() string {
	if o != 0 && int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// The defaults of Options' zero values.
const (
	DefaultFailureThreshold = 5
	DefaultFailureRatio     = 0.5
	DefaultWindow           = 30 * time.Second
	DefaultMinCalls         = 10
	// DefaultOpenFor is the first open period without Options.OpenFor;
	// each further trip doubles it, up to DefaultMaxOpenFor.
	DefaultOpenFor    = 30 * time.Second
	DefaultMaxOpenFor = 5 * time.Minute
	DefaultMaxProbes  = 1
	// DefaultProbeTimeout is how long a probe may take before it counts
	// as a failure.
	DefaultProbeTimeout     = 10 * time.Second
	DefaultSuccessesToClose = 1
)

// Options configure a Breaker. Every zero value means its Default*
// constant.
type Options struct {
	// FailureThreshold is how many consecutive failures trip a closed
	// breaker (Ignored and Canceled outcomes neither break nor extend a
	// run); 0 means DefaultFailureThreshold (5), a negative value turns
	// this rule off.
	FailureThreshold int
	// FailureRatio trips a closed breaker when, counting a failure, at
	// least this fraction of the Success and Failure outcomes within the
	// last Window were failures, and there were at least MinCalls of
	// them; 0 means DefaultFailureRatio (0.5), a negative value turns
	// this rule off (so does one above 1).
	FailureRatio float64
	// Window is the sliding window FailureRatio is measured over; 0 or
	// less means DefaultWindow (30 s). It slides in tenths: it is the
	// current tenth of Window and the nine before (tenths counted from
	// the Unix epoch), so between 0.9 and 1 Window long.
	Window time.Duration
	// MinCalls is how many outcomes the window must hold before
	// FailureRatio may trip the breaker; 0 or less means DefaultMinCalls
	// (10).
	MinCalls int
	// OpenFor returns how long the breaker stays open after its trips-th
	// trip since it last closed (trips ≥ 1): the daemon passes its retry
	// backoff with jitter. A negative result counts as 0. nil means
	// DefaultOpenFor (30 s) doubling per trip up to DefaultMaxOpenFor
	// (5 min), without jitter: 30 s, 1 min, 2 min, 4 min, 5 min, 5 min…
	// It runs with the breaker's lock held: it must not call the breaker,
	// and a random source it shares with other breakers must be safe for
	// concurrent use.
	OpenFor func(trips int) time.Duration
	// MaxProbes is how many probes a half-open breaker lets out at once;
	// 0 or less means DefaultMaxProbes (1).
	MaxProbes int
	// ProbeTimeout is how long a probe may take: a probe with no outcome
	// by its deadline (its admission plus ProbeTimeout) counts as a
	// failure. 0 or less means DefaultProbeTimeout (10 s).
	ProbeTimeout time.Duration
	// SuccessesToClose is how many probe successes close a half-open
	// breaker; 0 or less means DefaultSuccessesToClose (1).
	SuccessesToClose int
	// OnStateChange, if not nil, is called after each transition with the
	// states and the time it took effect: for a lazy transition, the end
	// of the open period or the probe's deadline, not the time of the
	// call that noticed it. See the package's caveats for when it runs.
	OnStateChange func(from, to State, at time.Time)
	// OnTransition, if not nil, is called after each transition like
	// OnStateChange (after it, when both are set), with whether Replay
	// caused it.
	OnTransition func(Transition)
}

// Transition is one change of a breaker's state.
type Transition struct {
	From, To State
	// At is when it took effect (see Options.OnStateChange).
	At time.Time
	// Replay: it happened within Breaker.Replay, because of what a
	// replayed message said rather than what the service did now.
	Replay bool
}

// ErrOpen is what every *OpenError is: errors.Is(err, ErrOpen) reports a
// call the breaker failed fast.
var ErrOpen = errors.New("circuit breaker open")

// OpenError is Allow's refusal: the breaker is open, or half-open with
// every probe place taken.
type OpenError struct {
	// State is Open or HalfOpen.
	State State
	// Until is the next time the breaker changes on its own: the end of
	// the open period, or in half-open the earliest probe deadline. A
	// probe's outcome may change it sooner. It is the zero time while the
	// service reports itself offline.
	Until time.Time
}

func (e *OpenError) Error() string {
	switch {
	case e.State == HalfOpen:
		return fmt.Sprintf("circuit breaker half-open: probes in flight until %s", e.Until.Format(time.RFC3339Nano))
	case e.Until.IsZero():
		return "circuit breaker open: service offline"
	}
	return fmt.Sprintf("circuit breaker open until %s", e.Until.Format(time.RFC3339Nano))
}

// Is reports whether target is ErrOpen.
func (e *OpenError) Is(target error) bool { return target == ErrOpen }

// Counts are a breaker's totals since New, for metrics.
type Counts struct {
	// Allowed and Rejected count Allow's permits and refusals.
	Allowed, Rejected uint64
	// Successes, Failures, Ignored and Canceled count every outcome
	// reported, including those discarded because the state changed
	// since their permit; Canceled includes outcomes of no known kind.
	Successes, Failures, Ignored, Canceled uint64
	// Expired counts probes that missed their deadline.
	Expired uint64
	// Trips counts transitions to open for failures (not for an offline
	// report).
	Trips uint64
}

// Snapshot is a breaker's state at one time, for metrics and the status
// page.
type Snapshot struct {
	State State
	// Since is when State began.
	Since time.Time
	// Until is when the breaker next changes on its own, as in
	// OpenError; the zero time when closed, half-open with no probe out,
	// or open while offline.
	Until time.Time
	// Offline reports that the service said it is offline (ReportHealth)
	// and has not said it is back.
	Offline bool
	// Trips is how many times the breaker tripped since it last closed.
	Trips int
	// ConsecutiveFailures, WindowCalls and WindowFailures are the closed
	// state's counts: the current run of failures, and the Success and
	// Failure outcomes within the window.
	ConsecutiveFailures, WindowCalls, WindowFailures int
	// Probes is how many probes are out; ProbeSuccesses how many
	// succeeded in this half-open period.
	Probes, ProbeSuccesses int
	// Counts are the totals since New.
	Counts Counts
}

// A Breaker is one service's circuit breaker. It is safe for concurrent
// use.
type Breaker struct {
	threshold    int
	ratio        float64 // < 0: off
	minCalls     int
	openFor      func(trips int) time.Duration
	maxProbes    int
	probeTimeout time.Duration
	toClose      int
	onChange     func(from, to State, at time.Time)
	onTransition func(Transition)

	mu          sync.Mutex
	now         time.Time // the latest time seen
	state       State
	since       time.Time
	gen         uint64 // counts transitions: a permit from an older one is stale
	until       time.Time
	offline     bool
	trips       int
	consecutive int
	window      window
	probes      []*Permit // out, in order of admission (and so of deadline)
	successes   int       // probe successes in this half-open period
	counts      Counts

	pending    []Transition // for onChange and onTransition, in order
	delivering bool         // a goroutine is calling them
	replaying  int          // Replay calls under way
}

// New returns a closed breaker with opts' settings.
func New(opts Options) *Breaker {
	b := &Breaker{
		threshold:    opts.FailureThreshold,
		ratio:        opts.FailureRatio,
		minCalls:     opts.MinCalls,
		openFor:      opts.OpenFor,
		maxProbes:    opts.MaxProbes,
		probeTimeout: opts.ProbeTimeout,
		toClose:      opts.SuccessesToClose,
		onChange:     opts.OnStateChange,
		onTransition: opts.OnTransition,
	}
	if b.threshold == 0 {
		b.threshold = DefaultFailureThreshold
	}
	if b.ratio == 0 {
		b.ratio = DefaultFailureRatio
	}
	if b.minCalls <= 0 {
		b.minCalls = DefaultMinCalls
	}
	if b.openFor == nil {
		b.openFor = defaultOpenFor
	}
	if b.maxProbes <= 0 {
		b.maxProbes = DefaultMaxProbes
	}
	if b.probeTimeout <= 0 {
		b.probeTimeout = DefaultProbeTimeout
	}
	if b.toClose <= 0 {
		b.toClose = DefaultSuccessesToClose
	}
	w := opts.Window
	if w <= 0 {
		w = DefaultWindow
	}
	b.window.step = max(w/windowSlots, 1)
	return b
}

// defaultOpenFor is DefaultOpenFor·2^(trips-1), capped at
// DefaultMaxOpenFor.
func defaultOpenFor(trips int) time.Duration {
	d := DefaultOpenFor
	for i := 1; i < trips && d < DefaultMaxOpenFor; i++ {
		d *= 2
	}
	return min(d, DefaultMaxOpenFor)
}

// A Permit lets one call go out, and comes only from Allow. Its holder
// reports the call's outcome with Done — Canceled when the call never
// went out — and only the first Done counts. A probe never reported
// counts as failed at its deadline; a closed breaker's permit never
// reported is simply not counted.
type Permit struct {
	b        *Breaker
	gen      uint64
	probe    bool
	deadline time.Time
	done     bool // guarded by b.mu
}

// Probe reports whether the permit is a half-open breaker's probe; a nil
// *Permit is not.
func (p *Permit) Probe() bool { return p != nil && p.probe }

// Deadline returns a probe's deadline, by which the caller should end the
// call (for example with context.WithDeadline): at and after it the probe
// counts as failed. It is the zero time for a closed breaker's permit,
// whose call the caller bounds itself.
func (p *Permit) Deadline() time.Time { return p.deadline }

// Current reports whether p's call may still go out at now: its outcome
// has not been reported, and the breaker has not changed state since it
// granted p (a closed breaker that another call's failure opened, a probe
// whose deadline passed). A caller asks it at the last moment before the
// call, so that no call reaches a service the breaker has just found
// broken; one that is no longer current is released Canceled and asked
// for again. A nil *Permit (no breaker) is always current.
func (p *Permit) Current(now time.Time) bool {
	if p == nil || p.b == nil {
		return true
	}
	b := p.b
	b.mu.Lock()
	b.advance(now)
	ok := !p.done && p.gen == b.gen
	b.mu.Unlock()
	b.notify()
	return ok
}

// Done reports the outcome of the permit's call at now. An outcome of no
// known kind counts as Canceled. It is discarded when the breaker has
// changed state since the permit was granted (see the package's caveats);
// a nil *Permit does nothing.
func (p *Permit) Done(o Outcome, now time.Time) {
	if p == nil || p.b == nil {
		return
	}
	b := p.b
	b.mu.Lock()
	now = b.advance(now)
	if !p.done {
		p.done = true
		b.record(p, o, now)
	}
	b.mu.Unlock()
	b.notify()
}

// record counts outcome o of p, at now.
func (b *Breaker) record(p *Permit, o Outcome, now time.Time) {
	switch o {
	case Success:
		b.counts.Successes++
	case Failure:
		b.counts.Failures++
	case Ignored:
		b.counts.Ignored++
	default:
		b.counts.Canceled++
	}
	if p.gen != b.gen {
		return
	}
	if b.state == HalfOpen {
		// p is one of this half-open period's probes, not yet done: the
		// probes still out.
		b.probes = slices.DeleteFunc(b.probes, func(q *Permit) bool { return q == p })
		switch o {
		case Success:
			b.successes++
			if b.successes >= b.toClose {
				b.trips = 0
				b.setState(Closed, now)
			}
		case Failure:
			b.trip(now)
		}
		return
	}
	// Closed: a permit of an open breaker is never granted.
	switch o {
	case Success:
		b.consecutive = 0
		b.window.add(now, false)
	case Failure:
		b.consecutive++
		b.window.add(now, true)
		if b.shouldTrip(now) {
			b.trip(now)
		}
	}
}

// shouldTrip reports whether a closed breaker's counts at now trip it.
func (b *Breaker) shouldTrip(now time.Time) bool {
	if b.threshold > 0 && b.consecutive >= b.threshold {
		return true
	}
	if b.ratio < 0 {
		return false
	}
	calls, failures := b.window.counts(now)
	// The tolerance keeps a product such as 0.28·25 = 7.000000000000001
	// from needing another failure.
	return calls >= b.minCalls && float64(failures) >= b.ratio*float64(calls)-1e-9
}

// Allow returns a permit for one call at now, or an *OpenError when the
// call must fail fast: the breaker is open, or half-open with MaxProbes
// probes out. A closed breaker always allows; a half-open one's permits
// are probes, each with its deadline.
func (b *Breaker) Allow(now time.Time) (*Permit, error) {
	b.mu.Lock()
	now = b.advance(now)
	var p *Permit
	var err error
	switch {
	case b.state == Closed:
		p = &Permit{b: b, gen: b.gen}
	case b.state == HalfOpen && len(b.probes) < b.maxProbes:
		p = &Permit{b: b, gen: b.gen, probe: true, deadline: now.Add(b.probeTimeout)}
		b.probes = append(b.probes, p)
	default:
		err = &OpenError{State: b.state, Until: b.next()}
	}
	if err != nil {
		b.counts.Rejected++
	} else {
		b.counts.Allowed++
	}
	b.mu.Unlock()
	b.notify()
	return p, err
}

// State returns the breaker's state at now.
func (b *Breaker) State(now time.Time) State {
	b.mu.Lock()
	b.advance(now)
	s := b.state
	b.mu.Unlock()
	b.notify()
	return s
}

// Snapshot returns the breaker's state and counts at now.
func (b *Breaker) Snapshot(now time.Time) Snapshot {
	b.mu.Lock()
	now = b.advance(now)
	s := Snapshot{
		State:               b.state,
		Since:               b.since,
		Until:               b.next(),
		Offline:             b.offline,
		Trips:               b.trips,
		ConsecutiveFailures: b.consecutive,
		Probes:              len(b.probes),
		ProbeSuccesses:      b.successes,
		Counts:              b.counts,
	}
	s.WindowCalls, s.WindowFailures = b.window.counts(now)
	b.mu.Unlock()
	b.notify()
	return s
}

// Expire applies the transitions due by now — an open period that ended,
// a probe that missed its deadline — and returns when the next one falls
// due: the end of the open period, or the earliest probe deadline; the
// zero time when none is pending. Every other method applies them too.
// A caller that wants OnStateChange on time waits on its clock until the
// time Expire returned and calls it again; Allow and ReportHealth may
// bring that time nearer (a probe admitted, an online report), so it asks
// Expire again after them.
func (b *Breaker) Expire(now time.Time) time.Time {
	b.mu.Lock()
	b.advance(now)
	next := b.next()
	b.mu.Unlock()
	b.notify()
	return next
}

// ReportHealth tells the breaker at now whether the service reports itself
// online, as a bridge's availability does (Zigbee2MQTT's bridge/state, an
// MQTT will).
//
// Offline opens the breaker at once, from any state, and holds it open
// while the service stays offline: its open period stops counting, and
// Allow's OpenError has a zero Until. Going offline is not a trip: it
// does not lengthen later open periods.
//
// Online after offline makes the breaker half-open at now, so that a probe
// decides: its success closes it, its failure opens it for the next open
// period (OpenFor(trips+1)). Online at any other time does nothing: an
// open period caused by failures runs its course even if the service says
// it is fine.
func (b *Breaker) ReportHealth(online bool, now time.Time) {
	b.mu.Lock()
	now = b.advance(now)
	switch {
	case !online && !b.offline:
		b.offline = true
		b.until = time.Time{}
		if b.state != Open {
			b.setState(Open, now)
		}
	case online && b.offline:
		b.offline = false
		b.setState(HalfOpen, now) // held open until now
	}
	b.mu.Unlock()
	b.notify()
}

// ForgetOffline drops an offline hold as if the service had never
// reported it: a breaker that the offline alone opened (no trip since it
// last closed) closes again at now; one that had tripped goes half-open,
// as an online report would make it. Without an offline hold it does
// nothing.
//
// A caller uses it when it can no longer trust what the service last said
// of itself: a broker that shuts down sends every client's will, so the
// "offline" a caller hears just before losing its own connection may be
// the broker's doing, not the service's.
func (b *Breaker) ForgetOffline(now time.Time) {
	b.mu.Lock()
	now = b.advance(now)
	if b.offline {
		b.offline = false
		if b.trips == 0 {
			b.setState(Closed, now)
		} else {
			b.setState(HalfOpen, now)
		}
	}
	b.mu.Unlock()
	b.notify()
}

// advance applies the transitions due by now and returns now, or the
// latest time seen if now is earlier.
func (b *Breaker) advance(now time.Time) time.Time {
	if now.Before(b.now) {
		now = b.now
	}
	b.now = now
	for {
		switch {
		case b.state == Open && !b.offline && !now.Before(b.until):
			b.setState(HalfOpen, b.until)
		case b.state == HalfOpen && len(b.probes) > 0 && !now.Before(b.probes[0].deadline):
			// Probes are admitted in time order with one timeout: the
			// first is the earliest deadline.
			b.counts.Expired++
			b.trip(b.probes[0].deadline)
		default:
			return now
		}
	}
}

// next returns when the breaker next changes on its own.
func (b *Breaker) next() time.Time {
	switch {
	case b.state == Open && !b.offline:
		return b.until
	case b.state == HalfOpen && len(b.probes) > 0:
		return b.probes[0].deadline
	}
	return time.Time{}
}

// trip opens the breaker at at, for its next open period.
func (b *Breaker) trip(at time.Time) {
	b.trips++
	b.counts.Trips++
	b.until = at.Add(max(b.openFor(b.trips), 0))
	b.setState(Open, at)
}

// setState moves the breaker to state to at at, starting a new generation
// with fresh counts, and queues the transition for onChange.
func (b *Breaker) setState(to State, at time.Time) {
	from := b.state
	b.state = to
	b.since = at
	b.gen++
	b.consecutive = 0
	b.window.reset()
	clear(b.probes)
	b.probes = b.probes[:0]
	b.successes = 0
	if b.onChange != nil || b.onTransition != nil {
		b.pending = append(b.pending, Transition{From: from, To: to, At: at, Replay: b.replaying > 0})
	}
}

// Replay runs f, in which the caller tells the breaker what a replayed
// message said (a retained status the broker sent on subscribe, say, with
// ReportHealth): the transitions that happen while f runs reach
// OnTransition with Replay set, so that nothing acts on old news as if it
// were new. A transition another goroutine causes while f runs is marked
// too; keep f short.
func (b *Breaker) Replay(f func()) {
	b.mu.Lock()
	b.replaying++
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.replaying--
		b.mu.Unlock()
		b.notify()
	}()
	f()
}

// notify calls onChange for the queued transitions, in order, without
// holding b.mu. One goroutine delivers at a time; one that finds another
// delivering leaves its transitions to it, so that onChange may call the
// breaker without deadlock.
func (b *Breaker) notify() {
	if b.onChange == nil && b.onTransition == nil {
		return
	}
	b.mu.Lock()
	if b.delivering {
		b.mu.Unlock()
		return
	}
	b.delivering = true
	finished := false
	defer func() {
		if !finished { // onChange panicked: let the next call deliver
			b.mu.Lock()
			b.delivering = false
			b.mu.Unlock()
		}
	}()
	for len(b.pending) > 0 {
		t := b.pending[0]
		b.pending = b.pending[1:]
		b.mu.Unlock()
		if b.onChange != nil {
			b.onChange(t.From, t.To, t.At)
		}
		if b.onTransition != nil {
			b.onTransition(t)
		}
		b.mu.Lock()
	}
	b.pending = nil
	b.delivering = false
	finished = true
	b.mu.Unlock()
}
