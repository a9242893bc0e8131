package automations

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/oklog/ulid/v2"
	"github.com/robfig/cron/v3"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/topic"
)

// Commander hands a command to Hearth's intake, as if it had arrived on
// hearth/<device>/set. payload is the JSON command body: target attributes
// plus the reserved keys op_id and, when set, ttl. It should return once
// the command is accepted or refused, not wait for its outcome.
type Commander interface {
	Command(ctx context.Context, device string, payload []byte) error
}

// Publisher publishes one MQTT message at QoS 1.
type Publisher interface {
	Publish(ctx context.Context, topic string, payload []byte, retained bool) error
}

// Notifier delivers a notification to people.
type Notifier interface {
	Notify(ctx context.Context, n Notification) error
}

// Notification is what a NotifyAction sends.
type Notification struct {
	Title    string
	Message  string
	Severity string // "info", "warning" or "critical"
	// Source says who sent it: "automation:<rule name>".
	Source string
	// At is when the rule ran, by the engine's clock.
	At time.Time
}

// Options configure an Engine. Zero values take the defaults documented
// on each field.
type Options struct {
	// Rules are the automations; Status lists them in this order. The
	// rules one event triggers run each on its own worker, in no order
	// among themselves.
	Rules []Rule
	// Commander, Publisher and Notifier carry out actions. Each may be nil
	// when no rule has an action of its kind.
	Commander Commander
	Publisher Publisher
	Notifier  Notifier
	// Clock gives the time and the schedule timers. Default: the real
	// clock.
	Clock clockwork.Clock
	// Location is where cron expressions and time conditions are read.
	// Default: time.Local.
	Location *time.Location
	// Logger logs every run, skip and failed action. Default:
	// slog.Default().
	Logger *slog.Logger
	// NeedsLive reports whether conditions on device hold only on a value
	// reported live since the engine started: Hearth's safety-critical
	// devices, whose retained state (the broker's replay, the store's
	// last saved state) is from before the start and may be wrong (a
	// lock turned by hand while Hearth was down). Until a live report or
	// a fresh read confirms it, a condition on such a device does not
	// hold, whatever it asks. Nil: retained values count for every
	// device.
	NeedsLive func(device string) bool
	// Confirmed returns a device's confirmed state (what it last reported,
	// or what Hearth last confirmed of it), for the toggles of
	// CommandAction: attribute → value, nil when unknown. Nil: no toggle
	// can be resolved, and a rule that toggles sends nothing.
	Confirmed func(device string) map[string]any
	// QueueLimit bounds the runs of one rule waiting for its actions (a
	// rule's actions run one run at a time, in the order of the events;
	// each rule has its own queue, so a slow action holds back only its
	// own rule). Past it the oldest waiting run is dropped, logged and
	// counted (RuleStatus.Dropped): the newest event is the one that says
	// what is wanted now. 0: DefaultQueueLimit.
	QueueLimit int
	// EventQueue bounds the events waiting for the loop: past it an MQTT
	// message is dropped, logged and counted (EventsDropped). Device
	// states and breaker states are always queued: they are state, not
	// events, and conditions read them. The loop only matches events
	// (actions run on the rules' workers), so the queue fills only under
	// a flood. 0: DefaultEventQueue.
	EventQueue int
}

// DefaultEventQueue is Options.EventQueue when it is 0.
const DefaultEventQueue = 10000

// DefaultQueueLimit is Options.QueueLimit when it is 0.
const DefaultQueueLimit = 64

// RuleStatus is where one rule stands.
type RuleStatus struct {
	Name string `json:"name"`
	// Active is false while the rule is paused by FallbackFor or Requires.
	Active bool `json:"active"`
	// Runs counts the times its actions ran.
	Runs int `json:"runs"`
	// Skipped counts the times a trigger fired while the rule was paused
	// or its conditions did not hold.
	Skipped int `json:"skipped"`
	// LastRun is when its actions last ran; zero (left out of JSON) if
	// never.
	LastRun time.Time `json:"last_run,omitzero"`
	// Repeats counts the copies of an event already seen that ran
	// nothing (MQTTTrigger.RepeatWindow).
	Repeats int `json:"repeats"`
	// Queued is how many runs wait for the actions of an earlier one.
	Queued int `json:"queued"`
	// Dropped counts the runs pushed out of a full queue
	// (Options.QueueLimit) before their actions ran.
	Dropped int `json:"dropped"`
}

// Engine runs rules. Its methods are safe for concurrent use; DeviceState,
// Message and BreakerState never block on the rules.
type Engine struct {
	rules     []*rule
	commander Commander
	publisher Publisher
	notifier  Notifier
	clock     clockwork.Clock
	loc       *time.Location
	log       *slog.Logger
	confirmed func(device string) map[string]any
	limit     int
	workers   sync.WaitGroup

	qmu    sync.Mutex
	queue  []event
	signal chan struct{} // capacity 1: there are events in queue
	// eventLimit bounds queue for MQTT messages (Options.EventQueue);
	// eventsDropped counts those dropped past it.
	eventLimit    int
	eventsDropped atomic.Uint64

	mu       sync.Mutex // guards the fields below, which the loop writes
	running  bool
	breakers map[string]string         // service → state; absent: closed
	state    map[string]map[string]any // device → attribute → last value
	// live holds, by device, the attributes whose last value was
	// reported live (not retained) since the start.
	live      map[string]map[string]bool
	needsLive func(device string) bool
}

type rule struct {
	Rule
	schedules map[int]cron.Schedule // by trigger index
	next      map[int]time.Time     // by trigger index: next fire time
	// fired is, by trigger index, the civil time (see civil) the
	// schedule last fired for, so that a civil time that comes twice (the
	// hour repeated when daylight saving time ends) fires once.
	fired map[int]time.Time
	// seen is, by event identity (see identify), when a copy of that
	// event last came: the loop's own.
	seen map[[sha256.Size]byte]time.Time
	// runs wait here for the rule's worker (runActions).
	qmu  sync.Mutex
	runs []run
	wake chan struct{} // capacity 1: runs is not empty
	// status is guarded by Engine.mu.
	status RuleStatus
}

// run is one run of a rule's actions, queued for its worker, or a barrier.
type run struct {
	why string
	at  time.Time // the engine's clock when the trigger fired
	// event identifies the event, and stamp is its time, for the op_ids
	// of the run's commands (opID).
	event string
	stamp time.Time

	barrier chan struct{} // tests: closed when the worker reaches it
}

// event is one thing that happened, queued for the loop. Exactly one
// group of fields is set.
type event struct {
	device string
	state  map[string]any

	topic    string
	payload  []byte
	retained bool
	message  bool

	service      string
	breakerState string

	barrier chan struct{} // tests: closed when every earlier event is handled
}

// New validates the rules and returns an engine for them. Every problem
// is reported, each naming its rule: names that are invalid or used
// twice, a trigger, condition or action that does not set exactly one
// kind, a cron expression that does not parse, an unknown op, an action
// whose carrier (Commander, Publisher, Notifier) is nil.
func New(o Options) (*Engine, error) {
	e := &Engine{
		commander: o.Commander,
		publisher: o.Publisher,
		notifier:  o.Notifier,
		clock:     o.Clock,
		loc:       o.Location,
		log:       o.Logger,
		confirmed: o.Confirmed,
		limit:     o.QueueLimit,
		signal:    make(chan struct{}, 1),
		breakers:  map[string]string{},
		state:     map[string]map[string]any{},
		live:      map[string]map[string]bool{},
		needsLive: o.NeedsLive,
	}
	if e.clock == nil {
		e.clock = clockwork.NewRealClock()
	}
	if e.loc == nil {
		e.loc = time.Local
	}
	if e.log == nil {
		e.log = slog.Default()
	}
	if e.limit <= 0 {
		e.limit = DefaultQueueLimit
	}
	e.eventLimit = o.EventQueue
	if e.eventLimit <= 0 {
		e.eventLimit = DefaultEventQueue
	}
	var errs []error
	seen := map[string]bool{}
	for i := range o.Rules {
		r := o.Rules[i]
		name := r.Name
		if name == "" {
			name = fmt.Sprintf("#%d", i+1)
		}
		if seen[r.Name] {
			errs = append(errs, fmt.Errorf("rule %s: name used twice", name))
			continue
		}
		seen[r.Name] = true
		schedules, problems := r.validate(&o)
		for _, err := range problems {
			errs = append(errs, fmt.Errorf("rule %s: %w", name, err))
		}
		if len(problems) > 0 {
			continue
		}
		e.rules = append(e.rules, &rule{Rule: r, schedules: schedules, next: map[int]time.Time{}, fired: map[int]time.Time{},
			seen: map[[sha256.Size]byte]time.Time{}, wake: make(chan struct{}, 1), status: RuleStatus{Name: r.Name}})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, r := range e.rules {
		r.status.Active = e.active(r)
	}
	return e, nil
}

// DeviceState reports a device's state, as the device or its bridge
// published it: attribute → value, numbers in any Go or JSON form. A
// report may name only some attributes; the others keep their last value.
// A retained report (the broker's replay on subscribe) updates the state
// that conditions see but triggers nothing: no actuation from replay. It
// never blocks: the report is queued, and no report is ever dropped.
func (e *Engine) DeviceState(device string, state map[string]any, retained bool) {
	e.push(event{device: device, state: maps.Clone(state), retained: retained})
}

// Message reports an MQTT message on one of Topics. A retained message
// triggers nothing: it is a replay. It never blocks.
func (e *Engine) Message(topic string, payload []byte, retained bool) {
	e.push(event{message: true, topic: topic, payload: append([]byte(nil), payload...), retained: retained})
}

// BreakerState reports a service's circuit breaker state: "closed",
// "open" or "half_open". A service never reported is closed. replay says
// the change comes from a retained message the broker replayed (the
// service's status as it was before Hearth started): it pauses and
// resumes rules, but triggers nothing. It never blocks.
func (e *Engine) BreakerState(service, state string, replay bool) {
	e.push(event{service: service, breakerState: state, retained: replay})
}

// Topics returns the MQTT topic filters the rules' MQTT triggers need, in
// rule order, each once. The caller subscribes to them and passes what
// arrives to Message.
func (e *Engine) Topics() []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range e.rules {
		for _, t := range r.Triggers {
			if t.MQTT != nil && !seen[t.MQTT.Topic] {
				seen[t.MQTT.Topic] = true
				out = append(out, t.MQTT.Topic)
			}
		}
	}
	return out
}

// EventsDropped counts the MQTT messages dropped because the event queue
// was full (Options.EventQueue) since the engine was made.
func (e *Engine) EventsDropped() uint64 { return e.eventsDropped.Load() }

// Status returns where each rule stands, in rule order.
func (e *Engine) Status() []RuleStatus {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]RuleStatus, len(e.rules))
	for i, r := range e.rules {
		out[i] = r.status
	}
	return out
}

func (e *Engine) push(ev event) {
	e.qmu.Lock()
	if ev.message && len(e.queue) >= e.eventLimit {
		e.qmu.Unlock()
		if n := e.eventsDropped.Add(1); n == 1 || n%1000 == 0 {
			e.log.Warn("automations: MQTT message dropped: the engine's event queue is full", "topic", ev.topic,
				"limit", e.eventLimit, "dropped_so_far", n)
		}
		return
	}
	e.queue = append(e.queue, ev)
	e.qmu.Unlock()
	select {
	case e.signal <- struct{}{}:
	default:
	}
}

// take returns every queued event and empties the queue.
func (e *Engine) take() []event {
	e.qmu.Lock()
	defer e.qmu.Unlock()
	q := e.queue
	e.queue = nil
	return q
}

// sync waits until every event queued before it is handled, or ctx is
// done. For tests.
func (e *Engine) sync(ctx context.Context) error {
	done := make(chan struct{})
	e.push(event{barrier: done})
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run handles events and schedule times, one at a time in this goroutine,
// until ctx is done; then it returns ctx's error. Actions get ctx. Run may
// be called once.
func (e *Engine) Run(ctx context.Context) error {
	e.mu.Lock()
	if e.running {
		e.mu.Unlock()
		return errors.New("automations: Run called twice")
	}
	e.running = true
	e.mu.Unlock()
	for _, r := range e.rules {
		e.workers.Go(func() { e.runActions(ctx, r) })
	}
	defer e.workers.Wait()

	now := e.clock.Now()
	e.plan(now)
	// One timer, for the earliest schedule time, or a minute if that is
	// later: a timer runs on elapsed time, and the wall clock may be
	// stepped meanwhile (a Raspberry Pi without a real-time clock boots
	// with a stale time until NTP corrects it). Re-armed only when the
	// time changes, so that events do not churn the clock's timers.
	var timer clockwork.Timer
	var armed time.Time
	last := now
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if next, ok := e.nextFire(); !ok || !next.Equal(armed) {
			if timer != nil {
				timer.Stop()
				timer = nil
			}
			armed = time.Time{}
			if ok {
				timer, armed = e.clock.NewTimer(min(next.Sub(e.clock.Now()), maxScheduleWait)), next
			}
		}
		var wake <-chan time.Time
		if timer != nil {
			wake = timer.Chan()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-e.signal:
			for _, ev := range e.take() {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				e.handle(ctx, ev)
			}
		case <-wake:
			timer, armed = nil, time.Time{}
			now := e.clock.Now()
			if now.Before(last.Add(-maxScheduleWait)) {
				// The wall clock went back: the next times were
				// computed from a time that has not come.
				e.log.Info("automations: the clock went back; schedules planned again", "from", last, "to", now)
				e.plan(now)
			}
			last = now
			e.fireSchedules(ctx)
		}
	}
}

// maxScheduleWait bounds one wait of the schedule timer, so that a step
// of the wall clock delays a schedule by at most this.
const maxScheduleWait = time.Minute

// plan computes every schedule's next time from now.
func (e *Engine) plan(now time.Time) {
	for _, r := range e.rules {
		for i, s := range r.schedules {
			r.next[i] = e.nextTime(s, now, r.fired[i])
		}
	}
}

// Schedules run on civil time: the wall clock's reading in e.loc, taken
// as if it were UTC, in which no hour is skipped or repeated. A cron time
// that falls into the hour skipped when daylight saving time begins fires
// once, within that hour's end (time.Date decides); one that falls into
// the hour repeated when it ends fires once, the first time.

// civil returns the wall-clock reading of t in loc, as a UTC time.
func (e *Engine) civil(t time.Time) time.Time {
	l := t.In(e.loc)
	return time.Date(l.Year(), l.Month(), l.Day(), l.Hour(), l.Minute(), l.Second(), l.Nanosecond(), time.UTC)
}

// nextTime returns the instant of s's next civil time after now's, and
// after fired, the civil time it last fired for.
func (e *Engine) nextTime(s cron.Schedule, now, fired time.Time) time.Time {
	from := e.civil(now)
	if fired.After(from) {
		from = fired
	}
	c := s.Next(from)
	if c.IsZero() {
		return time.Time{}
	}
	return time.Date(c.Year(), c.Month(), c.Day(), c.Hour(), c.Minute(), c.Second(), c.Nanosecond(), e.loc)
}

// nextFire returns the earliest next time of any schedule trigger.
func (e *Engine) nextFire() (time.Time, bool) {
	var first time.Time
	for _, r := range e.rules {
		for _, t := range r.next {
			if !t.IsZero() && (first.IsZero() || t.Before(first)) {
				first = t
			}
		}
	}
	return first, !first.IsZero()
}

// fireSchedules fires every schedule trigger whose time has come, once
// each however many of its times have passed, and computes its next time
// from now.
func (e *Engine) fireSchedules(ctx context.Context) {
	now := e.clock.Now()
	for _, r := range e.rules {
		fired := false
		for i, s := range r.schedules {
			next := r.next[i]
			if next.IsZero() || next.After(now) {
				continue
			}
			c := e.civil(next)
			if c.After(r.fired[i]) {
				r.fired[i] = c
			}
			r.next[i] = e.nextTime(s, now, r.fired[i])
			if !fired {
				fired = true
				// The event is the schedule's time, whenever it is
				// handled: fired again after a restart, it has the same
				// op_ids.
				cronSpec := r.Triggers[i].Schedule.Cron
				e.trigger(r, "schedule "+cronSpec, "schedule\x00"+cronSpec+"\x00"+c.Format(time.RFC3339Nano), next)
			}
		}
	}
}

func (e *Engine) handle(ctx context.Context, ev event) {
	switch {
	case ev.barrier != nil:
		e.barrier(ev.barrier)
	case ev.message:
		e.handleMessage(ctx, ev)
	case ev.service != "":
		e.handleBreaker(ctx, ev.service, ev.breakerState, ev.retained)
	case ev.device != "":
		e.handleState(ctx, ev.device, ev.state, ev.retained)
	}
}

func (e *Engine) handleMessage(ctx context.Context, ev event) {
	if ev.retained {
		e.log.Debug("automations: retained message triggers nothing", "topic", ev.topic)
		return
	}
	obj, isObject := jsonObject(ev.payload)
	now := e.clock.Now()
	for _, r := range e.rules {
		for i, t := range r.Triggers {
			m := t.MQTT
			if m == nil || !topic.Match(m.Topic, ev.topic) || (m.Payload != nil && *m.Payload != string(ev.payload)) {
				continue
			}
			if len(m.Fields) > 0 && (!isObject || !fieldsHold(m.Fields, obj)) {
				continue
			}
			id, stamp := identify(m, ev.topic, ev.payload, obj, isObject)
			if e.repeat(r, i, m, id, now) {
				break
			}
			if stamp.IsZero() {
				stamp = now
			}
			e.trigger(r, "mqtt "+ev.topic, "mqtt\x00"+string(id[:]), stamp)
			break
		}
	}
}

func (e *Engine) handleBreaker(ctx context.Context, service, state string, replay bool) {
	if !validBreakerState(state) {
		e.log.Warn("automations: unknown breaker state ignored", "service", service, "state", state)
		return
	}
	e.mu.Lock()
	old := e.breakerState(service)
	if state == Closed {
		delete(e.breakers, service)
	} else {
		e.breakers[service] = state
	}
	for _, r := range e.rules {
		active := e.active(r)
		if active != r.status.Active {
			e.log.Info("automations: rule "+map[bool]string{true: "resumed", false: "paused"}[active],
				"rule", r.Name, "service", service, "breaker", state)
		}
		r.status.Active = active
	}
	e.mu.Unlock()
	if old == state || replay {
		return
	}
	for _, r := range e.rules {
		for _, t := range r.Triggers {
			b := t.Breaker
			if b == nil || b.Service != service || (b.To != "" && b.To != state) {
				continue
			}
			e.trigger(r, "breaker "+service+" "+old+" → "+state, "breaker\x00"+service+"\x00"+state, e.clock.Now())
			break
		}
	}
}

func (e *Engine) handleState(ctx context.Context, device string, report map[string]any, retained bool) {
	e.mu.Lock()
	last, known := e.state[device]
	if !known {
		last = map[string]any{}
		e.state[device] = last
	}
	type change struct {
		from, to any
		first    bool
	}
	live := e.live[device]
	if live == nil {
		live = map[string]bool{}
		e.live[device] = live
	}
	changes := map[string]change{}
	for k, v := range report {
		// A replay never takes back what a live report confirmed: the
		// value it carries is older.
		live[k] = live[k] && equal(last[k], v) || !retained
		old, seen := last[k]
		if seen && equal(old, v) {
			continue
		}
		changes[k] = change{from: old, to: v, first: !seen}
		last[k] = v
	}
	e.mu.Unlock()
	if retained {
		return // a replay: the new baseline, not a change
	}
	for _, r := range e.rules {
		for _, t := range r.Triggers {
			s := t.State
			if s == nil || s.Device != device {
				continue
			}
			c, ok := changes[s.Attribute]
			if !ok || c.first {
				continue // no change, or only the baseline
			}
			if (s.To != nil && !equal(c.to, s.To)) || (s.From != nil && !equal(c.from, s.From)) {
				continue
			}
			why := fmt.Sprintf("state %s.%s %v → %v", device, s.Attribute, c.from, c.to)
			e.trigger(r, why, "state\x00"+why, e.clock.Now())
			break
		}
	}
}

// breakerState returns a service's breaker state. e.mu must be held.
func (e *Engine) breakerState(service string) string {
	if s, ok := e.breakers[service]; ok {
		return s
	}
	return Closed
}

// active reports whether r's gates hold. e.mu must be held (or the loop
// not yet started).
func (e *Engine) active(r *rule) bool {
	if r.FallbackFor != "" && e.breakerState(r.FallbackFor) == Closed {
		return false
	}
	for _, s := range r.Requires {
		if e.breakerState(s) != Closed {
			return false
		}
	}
	return true
}

// trigger queues a run of r, fired by why, for r's worker if its gates
// and conditions hold, and counts a skip if not. event identifies the
// event and stamp is its time, for the op_ids of the run's commands.
func (e *Engine) trigger(r *rule, why, event string, stamp time.Time) {
	now := e.clock.Now()
	e.mu.Lock()
	reason := ""
	if !r.status.Active {
		reason = "paused"
		if r.FallbackFor != "" && e.breakerState(r.FallbackFor) == Closed {
			reason = "paused: " + r.FallbackFor + " is closed (fallback_for)"
		}
		for _, s := range r.Requires {
			if st := e.breakerState(s); st != Closed {
				reason = "paused: required " + s + " is " + st
			}
		}
	} else if i := e.failedCondition(r, now); i >= 0 {
		reason = fmt.Sprintf("condition %d does not hold", i+1)
	}
	if reason != "" {
		r.status.Skipped++
		e.mu.Unlock()
		e.log.Info("automations: rule skipped", "rule", r.Name, "trigger", why, "reason", reason)
		return
	}
	e.mu.Unlock()
	e.enqueue(r, run{why: why, at: now, event: event, stamp: stamp})
}

// failedCondition returns the index of the first condition of r that does
// not hold at now, or -1. e.mu must be held.
func (e *Engine) failedCondition(r *rule, now time.Time) int {
	for i, c := range r.Conditions {
		switch {
		case c.Time != nil:
			if !c.Time.holds(now.In(e.loc)) {
				return i
			}
		case c.State != nil:
			v, ok := e.state[c.State.Device][c.State.Attribute]
			if !ok || v == nil || !compare(c.State.Op, v, c.State.Value) {
				return i // an unknown value satisfies no condition
			}
			if e.needsLive != nil && !e.live[c.State.Device][c.State.Attribute] && e.needsLive(c.State.Device) {
				return i // a replay from before the start, not yet confirmed
			}
		}
	}
	return -1
}

func (e *Engine) act(ctx context.Context, r *rule, index int, a Action, rn run) error {
	switch {
	case a.Command != nil:
		c := a.Command
		body := maps.Clone(c.Target)
		if c.Toggle != "" {
			target, err := e.resolveToggle(c)
			if err != nil {
				return err
			}
			body = target
		}
		body[devices.KeyOpID] = opID(r.Name, index, rn)
		if c.TTL > 0 {
			body[devices.KeyTTL] = c.TTL.String()
		}
		payload, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("command to %s: %w", c.Device, err)
		}
		if err := e.commander.Command(ctx, c.Device, payload); err != nil {
			return fmt.Errorf("command to %s: %w", c.Device, err)
		}
		e.log.Info("automations: command sent", "rule", r.Name, "device", c.Device, "op_id", body[devices.KeyOpID])
	case a.Publish != nil:
		p := a.Publish
		if err := e.publisher.Publish(ctx, p.Topic, []byte(p.Payload), p.Retain); err != nil {
			return fmt.Errorf("publish to %s: %w", p.Topic, err)
		}
	case a.Notify != nil:
		n := a.Notify
		sev := n.Severity
		if sev == "" {
			sev = SeverityInfo
		}
		if err := e.notifier.Notify(ctx, Notification{Title: n.Title, Message: n.Message, Severity: sev, Source: "automation:" + r.Name, At: rn.at}); err != nil {
			return fmt.Errorf("notify: %w", err)
		}
	}
	return nil
}

// toggled maps a toggleable value to its opposite.
var toggled = map[any]any{"ON": "OFF", "OFF": "ON", true: false, false: true}

// resolveToggle returns c's absolute target: its Toggle attribute's
// confirmed value, flipped.
func (e *Engine) resolveToggle(c *CommandAction) (map[string]any, error) {
	var state map[string]any
	if e.confirmed != nil {
		state = e.confirmed(c.Device)
	}
	v, ok := state[c.Toggle]
	if !ok || v == nil {
		return nil, fmt.Errorf("toggle %s of %s: its confirmed state is unknown, so nothing is sent", c.Toggle, c.Device)
	}
	flip, ok := toggled[v]
	if !ok {
		return nil, fmt.Errorf("toggle %s of %s: its confirmed value %v has no opposite (want ON or OFF)", c.Toggle, c.Device, v)
	}
	return map[string]any{c.Toggle: flip}, nil
}

// opID returns the op_id of action index of rule in rn: "auto-" and a
// ULID whose time is the event's (rn.stamp, in ms) and whose 80 random
// bits are the first of SHA-256(rule, index, event). The same event gives
// the same op_id, so Hearth's intake refuses a second command for it;
// another event of the same kind at another time gives another.
func opID(rule string, index int, rn run) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%s", rule, index, rn.event))
	id, err := ulid.New(ulid.Timestamp(rn.stamp), bytes.NewReader(sum[:]))
	if err != nil {
		// Only a time past the year 10889 fails: no event's.
		id = ulid.ULID{}
		copy(id[6:], sum[:])
	}
	return "auto-" + id.String()
}

// enqueue queues rn for r's worker, dropping the oldest waiting run when
// the queue is full.
func (e *Engine) enqueue(r *rule, rn run) {
	r.qmu.Lock()
	var dropped *run
	if rn.barrier == nil {
		waiting := 0
		for _, q := range r.runs {
			if q.barrier == nil {
				waiting++
			}
		}
		if waiting >= e.limit {
			for i, q := range r.runs {
				if q.barrier == nil {
					dropped = &q
					r.runs = slices.Delete(r.runs, i, i+1)
					break
				}
			}
		}
	}
	r.runs = append(r.runs, rn)
	queued := 0
	for _, q := range r.runs {
		if q.barrier == nil {
			queued++
		}
	}
	r.qmu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	if rn.barrier != nil {
		return
	}
	e.mu.Lock()
	r.status.Queued = queued
	if dropped != nil {
		r.status.Dropped++
	}
	e.mu.Unlock()
	if dropped != nil {
		e.log.Warn("automations: run dropped: the rule's queue is full", "rule", r.Name, "trigger", dropped.why,
			"triggered_at", dropped.at, "limit", e.limit)
	}
}

// take takes r's oldest waiting run.
func (r *rule) take() (run, bool) {
	r.qmu.Lock()
	defer r.qmu.Unlock()
	if len(r.runs) == 0 {
		return run{}, false
	}
	rn := r.runs[0]
	r.runs = slices.Delete(r.runs, 0, 1)
	return rn, true
}

// runActions is r's worker: it runs r's queued runs one at a time, in
// order, until ctx is done.
func (e *Engine) runActions(ctx context.Context, r *rule) {
	for {
		rn, ok := r.take()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-r.wake:
				continue
			}
		}
		if rn.barrier != nil {
			close(rn.barrier)
			continue
		}
		if ctx.Err() != nil {
			return
		}
		e.mu.Lock()
		r.status.Runs++
		r.status.LastRun = rn.at
		r.status.Queued = max(r.status.Queued-1, 0)
		e.mu.Unlock()
		e.log.Info("automations: rule runs", "rule", r.Name, "trigger", rn.why)
		for i, a := range r.Actions {
			if err := e.act(ctx, r, i, a, rn); err != nil {
				e.log.Warn("automations: action failed", "rule", r.Name, "action", i+1, "err", err)
			}
		}
	}
}

// barrier closes done once every rule's worker has reached what was
// queued for it so far (for sync).
func (e *Engine) barrier(done chan struct{}) {
	marks := make([]chan struct{}, len(e.rules))
	for i, r := range e.rules {
		marks[i] = make(chan struct{})
		e.enqueue(r, run{barrier: marks[i]})
	}
	go func() {
		for _, m := range marks {
			<-m
		}
		close(done)
	}()
}

// repeat reports whether the event id, come now on r's trigger index, is
// a repeat of one seen within its window, and counts and logs it if so.
// Either way it is the event's latest copy now: the window slides.
func (e *Engine) repeat(r *rule, index int, m *MQTTTrigger, id [sha256.Size]byte, now time.Time) bool {
	window := m.RepeatWindow
	if window <= 0 {
		window = DefaultRepeatWindow
	}
	key := sha256.Sum256(append(id[:], byte(index)))
	last, seen := r.seen[key]
	r.seen[key] = now
	if len(r.seen) > maxSeen {
		for k, t := range r.seen {
			if now.Sub(t) > MaxRepeatWindow {
				delete(r.seen, k)
			}
		}
	}
	if !seen || now.Sub(last) >= window {
		return false
	}
	e.mu.Lock()
	r.status.Repeats++
	e.mu.Unlock()
	e.log.Info("automations: repeat of an event ignored", "rule", r.Name, "trigger", index+1, "topic", m.Topic,
		"since_last_copy", now.Sub(last), "window", window)
	return true
}

// maxSeen is how many event identities a rule keeps before it forgets
// those older than MaxRepeatWindow.
const maxSeen = 1024

// jsonObject decodes payload as a JSON object, numbers as float64.
func jsonObject(payload []byte) (map[string]any, bool) {
	var obj map[string]any
	if err := json.Unmarshal(payload, &obj); err != nil || obj == nil {
		return nil, false
	}
	return obj, true
}

// fieldsHold reports whether obj holds every value of want.
func fieldsHold(want, obj map[string]any) bool {
	for k, v := range want {
		got, ok := obj[k]
		if !ok || !equal(got, v) {
			return false
		}
	}
	return true
}

// identify returns the identity of the event a message on topic carries
// for m (see MQTTTrigger.EventID), and its own time when the payload
// says when the bridge received it (Z-Wave JS UI's "time" and
// Zigbee2MQTT's "last_seen", in ms since the Unix epoch or, for
// last_seen, RFC 3339), else the zero time.
func identify(m *MQTTTrigger, topic string, payload []byte, obj map[string]any, isObject bool) (id [sha256.Size]byte, own time.Time) {
	h := sha256.New()
	h.Write([]byte(topic))
	h.Write([]byte{0})
	switch {
	case !isObject:
		h.Write(payload)
	case len(m.EventID) > 0:
		values := make([]any, len(m.EventID))
		for i, f := range m.EventID {
			values[i] = obj[f]
		}
		b, _ := json.Marshal(values) // decoded JSON values always encode
		h.Write(b)
	default:
		rest := maps.Clone(obj)
		for _, f := range VolatileFields {
			delete(rest, f)
		}
		b, _ := json.Marshal(rest) // map keys sorted: canonical
		h.Write(b)
	}
	copy(id[:], h.Sum(nil))
	if isObject {
		own = ownTime(obj)
	}
	return id, own
}

// ownTime reads the time a bridge stamped an event with; zero if none.
func ownTime(obj map[string]any) time.Time {
	for _, f := range []string{"time", "last_seen"} {
		switch v := obj[f].(type) {
		case float64:
			if v > 0 && v < 1<<47 {
				return time.UnixMilli(int64(v))
			}
		case string:
			if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
				return t
			}
		}
	}
	return time.Time{}
}
