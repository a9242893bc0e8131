package automations

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/oklog/ulid/v2"
	"github.com/robfig/cron/v3"

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
	// Rules are the automations, run in this order when one event
	// triggers several.
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
}

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
	entropy   io.Reader // monotonic ULID entropy; used by the loop only

	qmu    sync.Mutex
	queue  []event
	signal chan struct{} // capacity 1: there are events in queue

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
	fired  map[int]time.Time
	status RuleStatus
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
		entropy:   ulid.Monotonic(rand.Reader, 0),
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
		e.rules = append(e.rules, &rule{Rule: r, schedules: schedules, next: map[int]time.Time{}, fired: map[int]time.Time{}, status: RuleStatus{Name: r.Name}})
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
			if c := e.civil(next); c.After(r.fired[i]) {
				r.fired[i] = c
			}
			r.next[i] = e.nextTime(s, now, r.fired[i])
			if !fired {
				fired = true
				e.trigger(ctx, r, "schedule "+r.Triggers[i].Schedule.Cron)
			}
		}
	}
}

func (e *Engine) handle(ctx context.Context, ev event) {
	switch {
	case ev.barrier != nil:
		close(ev.barrier)
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
	for _, r := range e.rules {
		for _, t := range r.Triggers {
			m := t.MQTT
			if m == nil || !topic.Match(m.Topic, ev.topic) || (m.Payload != nil && *m.Payload != string(ev.payload)) {
				continue
			}
			e.trigger(ctx, r, "mqtt "+ev.topic)
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
			e.trigger(ctx, r, "breaker "+service+" "+old+" → "+state)
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
			e.trigger(ctx, r, fmt.Sprintf("state %s.%s %v → %v", device, s.Attribute, c.from, c.to))
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

// trigger runs r, fired by why, if its gates and conditions hold, and
// counts a run or a skip.
func (e *Engine) trigger(ctx context.Context, r *rule, why string) {
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
	r.status.Runs++
	r.status.LastRun = now
	e.mu.Unlock()
	e.log.Info("automations: rule runs", "rule", r.Name, "trigger", why)
	for i, a := range r.Actions {
		if err := e.act(ctx, r, a, now); err != nil {
			e.log.Warn("automations: action failed", "rule", r.Name, "action", i+1, "err", err)
		}
	}
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

func (e *Engine) act(ctx context.Context, r *rule, a Action, now time.Time) error {
	switch {
	case a.Command != nil:
		c := a.Command
		body := maps.Clone(c.Target)
		id, err := ulid.New(ulid.Timestamp(now), e.entropy)
		if err != nil {
			return fmt.Errorf("op_id: %w", err)
		}
		body["op_id"] = "auto-" + id.String()
		if c.TTL > 0 {
			body["ttl"] = c.TTL.String()
		}
		payload, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("command to %s: %w", c.Device, err)
		}
		if err := e.commander.Command(ctx, c.Device, payload); err != nil {
			return fmt.Errorf("command to %s: %w", c.Device, err)
		}
		e.log.Info("automations: command sent", "rule", r.Name, "device", c.Device, "op_id", body["op_id"])
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
		if err := e.notifier.Notify(ctx, Notification{Title: n.Title, Message: n.Message, Severity: sev, Source: "automation:" + r.Name, At: now}); err != nil {
			return fmt.Errorf("notify: %w", err)
		}
	}
	return nil
}
