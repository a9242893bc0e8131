package automations

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/hearthd/hearth/devices"
)

// Rule is one local automation: when one of its Triggers fires and all its
// Conditions hold, its Actions run in order.
type Rule struct {
	// Name identifies the rule in logs, in Status and in the Source of its
	// notifications: lower-case letters, digits, '_' and '-', as service
	// names are. Unique among the rules.
	Name string
	// Triggers are the events that start the rule: at least one.
	Triggers []Trigger
	// Conditions must all hold when a trigger fires. None: always.
	Conditions []Condition
	// Actions run in order; an action that fails is logged and the rest
	// still run. At least one.
	Actions []Action
	// FallbackFor, when set, names the service the rule stands in for: the
	// rule runs only while that service's breaker is not closed (open or
	// half_open).
	FallbackFor string
	// Requires names services the rule depends on: the rule is paused
	// while any of their breakers is not closed.
	Requires []string
}

// Trigger is one event that starts a rule. Exactly one field is set.
type Trigger struct {
	State    *StateTrigger
	MQTT     *MQTTTrigger
	Schedule *ScheduleTrigger
	Breaker  *BreakerTrigger
}

// StateTrigger fires when a device's attribute changes value: the reported
// value differs from the last value the engine saw for it. The first value
// seen only sets the baseline. Numbers compare as float64.
type StateTrigger struct {
	Device    string
	Attribute string
	// To, when not nil, is the value the attribute must change to: a
	// string, a number or a bool.
	To any
	// From, when not nil, is the value the attribute must change from.
	From any
}

// MQTTTrigger fires on a message that is not retained on a topic that
// matches Topic, once per event: a repeat of the same event within
// RepeatWindow runs nothing (see EventID).
type MQTTTrigger struct {
	// Topic is an MQTT topic filter: '+' matches one level, '#' (last)
	// any number of levels (topic.Match, MQTT 5.0 §4.7).
	Topic string
	// Payload, when not nil, is the exact payload the message must carry.
	Payload *string
	// Fields, when not empty, are values that fields of the payload, a
	// JSON object, must hold: {"action": "single"} matches Zigbee2MQTT's
	// {"action":"single","linkquality":96}. Numbers compare as float64.
	// A payload that is no JSON object matches no Fields.
	Fields map[string]any
	// EventID names the payload's fields that identify one event, such
	// as ["action", "action_transaction"]: two messages on one topic with
	// equal values there are the same event. Empty: the whole payload
	// identifies it, less the fields that change between copies of one
	// event (VolatileFields), so that a scene notification re-sent with a
	// fresh "time" or "linkquality" is the same event and one re-sent with
	// a new sequence number is a new one.
	EventID []string
	// RepeatWindow is how long a repeat of an event is recognised after
	// its last copy: a sliding window, so a burst of copies each within
	// it of the one before runs the rule once. 0: DefaultRepeatWindow.
	RepeatWindow time.Duration
}

// DefaultRepeatWindow is an MQTT trigger's RepeatWindow when none is set:
// 2 s, longer than a weak Z-Wave or Zigbee link's burst of re-sent
// frames, shorter than a person's second press of a button.
const DefaultRepeatWindow = 2 * time.Second

// MaxRepeatWindow bounds RepeatWindow.
const MaxRepeatWindow = time.Hour

// VolatileFields are the payload fields left out of an event's identity
// when EventID is empty: the bridges' receive times (Z-Wave JS UI's
// "time", Zigbee2MQTT's "last_seen") and link readings, which differ
// between copies of one event.
var VolatileFields = []string{"time", "timestamp", "last_seen", "linkquality", "lqi", "rssi", "elapsed"}

// ScheduleTrigger fires at the times of a cron expression.
type ScheduleTrigger struct {
	// Cron is a standard 5-field cron expression (minute hour day-of-month
	// month day-of-week) or a descriptor such as @hourly or @every 10m, as
	// robfig/cron's ParseStandard reads it, in Options.Location.
	Cron string
}

// BreakerTrigger fires when a service's circuit breaker changes state.
type BreakerTrigger struct {
	Service string
	// To is the new state the change must lead to: "open", "closed",
	// "half_open", or "" for any change.
	To string
}

// Condition must hold for a triggered rule to run. Exactly one field is
// set.
type Condition struct {
	State *StateCondition
	Time  *TimeCondition
}

// Comparison operators of a StateCondition.
const (
	OpEq = "eq"
	OpNe = "ne"
	OpLt = "lt"
	OpLe = "le"
	OpGt = "gt"
	OpGe = "ge"
)

// Ops lists the operators a StateCondition takes.
var Ops = []string{OpEq, OpNe, OpLt, OpLe, OpGt, OpGe}

// StateCondition compares the last value the engine saw of a device's
// attribute with Value. Numbers compare as float64 with any Op; strings
// and bools only with eq and ne. An attribute never seen makes the
// condition false, whatever the Op: unknown state is never assumed.
type StateCondition struct {
	Device    string
	Attribute string
	Op        string
	Value     any
}

// TimeCondition holds between two times of day, in Options.Location.
type TimeCondition struct {
	// After and Before are minutes since midnight, 0–1439: the condition
	// holds from After (included) to Before (excluded). Before 0 means the
	// end of the day, so {After: 0, Before: 0} is the whole day. When After
	// is later than Before the window wraps midnight ({After: 22*60,
	// Before: 7*60} holds from 22:00 to 07:00). After equal to a Before
	// other than 0 is an error: an empty window.
	After, Before int
	// Weekdays are the days on which the condition holds, judged by the
	// current time's day (so 03:00 of a window that began Friday at 22:00
	// is a Saturday). Empty: every day.
	Weekdays []time.Weekday
}

// Action is one thing a rule does. Exactly one field is set.
type Action struct {
	Command *CommandAction
	Publish *PublishAction
	Notify  *NotifyAction
}

// CommandAction commands a device through Commander: the payload is the
// JSON command body of hearth/<device>/set, the Target's attributes plus
// "op_id" and, when TTL is set, "ttl". The op_id is "auto-" and a ULID
// derived from the event, the rule and the action (see Engine), so that
// the same event handed over twice (a broker's redelivery, a restart)
// gives the same op_id, which Hearth's intake refuses the second time.
type CommandAction struct {
	Device string
	// Target holds absolute attributes, such as {"state": "ON",
	// "brightness": 102}. It must not hold the reserved keys op_id, ttl or
	// issued_at; its validity for the device's class is checked by the
	// intake (and by config, which knows the class and writes it in its
	// canonical form, devices.Validate). The engine never changes it.
	Target devices.Target
	// Toggle, instead of Target, names an attribute to flip: "state",
	// ON to OFF and OFF to ON. It is resolved once, when the rule runs,
	// against the device's confirmed state (Options.Confirmed), into an
	// absolute target; nothing is sent while that state is unknown, and
	// no toggle is ever sent downstream, so a retry cannot flip twice.
	Toggle string
	// TTL is the command's TTL, at most devices.MaxTTL; 0: the device's
	// default.
	TTL time.Duration
}

// Toggleable lists the attributes a CommandAction may Toggle.
var Toggleable = []string{"state"}

// PublishAction publishes one MQTT message through Publisher.
type PublishAction struct {
	Topic   string
	Payload string
	Retain  bool
}

// Severities of a notification.
const (
	SeverityInfo     = "info"
	SeverityWarning  = "warning"
	SeverityCritical = "critical"
)

// NotifyAction sends a Notification through Notifier.
type NotifyAction struct {
	Title   string
	Message string
	// Severity is "info", "warning" or "critical". "" means "info".
	Severity string
}

// Breaker states as BreakerState and BreakerTrigger name them, the names
// of package breaker's states.
const (
	Closed   = "closed"
	Open     = "open"
	HalfOpen = "half_open"
)

var ruleName = regexp.MustCompile(`^[a-z0-9_-]+$`)

// validate checks r and returns the parsed cron schedules of its triggers,
// by trigger index, and every problem. Problems do not name the rule; New
// adds it.
func (r *Rule) validate(o *Options) (map[int]cron.Schedule, []error) {
	if !ruleName.MatchString(r.Name) {
		return nil, []error{errors.New("invalid rule name: use lower-case letters, digits, '_' and '-'")}
	}
	var errs []error
	if len(r.Triggers) == 0 {
		errs = append(errs, errors.New("no triggers"))
	}
	if len(r.Actions) == 0 {
		errs = append(errs, errors.New("no actions"))
	}
	if r.FallbackFor != "" && slices.Contains(r.Requires, r.FallbackFor) {
		errs = append(errs, fmt.Errorf("fallback_for %s and requires %s contradict each other: the rule could never run", r.FallbackFor, r.FallbackFor))
	}
	for _, s := range r.Requires {
		if s == "" {
			errs = append(errs, errors.New("requires: empty service name"))
		}
	}
	schedules := map[int]cron.Schedule{}
	for i, t := range r.Triggers {
		sched, err := t.validate()
		if err != nil {
			errs = append(errs, fmt.Errorf("trigger %d: %w", i+1, err))
		}
		if sched != nil {
			schedules[i] = sched
		}
	}
	for i, c := range r.Conditions {
		if err := c.validate(); err != nil {
			errs = append(errs, fmt.Errorf("condition %d: %w", i+1, err))
		}
	}
	for i, a := range r.Actions {
		if err := a.validate(o); err != nil {
			errs = append(errs, fmt.Errorf("action %d: %w", i+1, err))
		}
	}
	return schedules, errs
}

func exactlyOne(kinds string, set ...bool) error {
	n := 0
	for _, s := range set {
		if s {
			n++
		}
	}
	if n != 1 {
		return fmt.Errorf("want exactly one of %s, got %d", kinds, n)
	}
	return nil
}

func (t Trigger) validate() (cron.Schedule, error) {
	if err := exactlyOne("state, mqtt, schedule, breaker", t.State != nil, t.MQTT != nil, t.Schedule != nil, t.Breaker != nil); err != nil {
		return nil, err
	}
	switch {
	case t.State != nil:
		if err := devices.ValidID(t.State.Device); err != nil {
			return nil, err
		}
		if t.State.Attribute == "" {
			return nil, errors.New("state trigger: no attribute")
		}
	case t.MQTT != nil:
		if err := validFilter(t.MQTT.Topic); err != nil {
			return nil, err
		}
		if w := t.MQTT.RepeatWindow; w < 0 || w > MaxRepeatWindow {
			return nil, fmt.Errorf("mqtt trigger: repeat_window %s is not from 0 to %s", w, MaxRepeatWindow)
		}
		for _, f := range t.MQTT.EventID {
			if f == "" {
				return nil, errors.New("mqtt trigger: event_id: empty field name")
			}
		}
		for k, v := range t.MQTT.Fields {
			switch normalize(v).(type) {
			case float64, string, bool:
			default:
				return nil, fmt.Errorf("mqtt trigger: fields: %s must be a number, a string or a bool, got %T", k, v)
			}
		}
	case t.Schedule != nil:
		s, err := cron.ParseStandard(t.Schedule.Cron)
		if err != nil {
			return nil, fmt.Errorf("cron %q: %w", t.Schedule.Cron, err)
		}
		return s, nil
	case t.Breaker != nil:
		if t.Breaker.Service == "" {
			return nil, errors.New("breaker trigger: no service")
		}
		if t.Breaker.To != "" && !validBreakerState(t.Breaker.To) {
			return nil, fmt.Errorf("breaker trigger: unknown state %q (known: closed, open, half_open)", t.Breaker.To)
		}
	}
	return nil, nil
}

func validBreakerState(s string) bool { return s == Closed || s == Open || s == HalfOpen }

func (c Condition) validate() error {
	if err := exactlyOne("state, time", c.State != nil, c.Time != nil); err != nil {
		return err
	}
	if s := c.State; s != nil {
		if err := devices.ValidID(s.Device); err != nil {
			return err
		}
		if s.Attribute == "" {
			return errors.New("state condition: no attribute")
		}
		return checkComparison(s.Op, s.Value)
	}
	t := c.Time
	for _, m := range []int{t.After, t.Before} {
		if m < 0 || m >= 24*60 {
			return fmt.Errorf("time condition: %d minutes is not a time of day (0 to 1439)", m)
		}
	}
	if t.After == t.Before && t.After != 0 {
		return fmt.Errorf("time condition: after and before are both %s, an empty window", formatTimeOfDay(t.After))
	}
	for _, d := range t.Weekdays {
		if d < time.Sunday || d > time.Saturday {
			return fmt.Errorf("time condition: %d is not a weekday", d)
		}
	}
	return nil
}

// checkComparison reports whether op can compare a state with value: op is
// one of Ops; value is a number, a string or a bool; ordering operators
// take numbers only.
func checkComparison(op string, value any) error {
	if !slices.Contains(Ops, op) {
		return fmt.Errorf("unknown op %q (known: %s)", op, strings.Join(Ops, ", "))
	}
	switch v := normalize(value).(type) {
	case float64:
	case string, bool:
		if op != OpEq && op != OpNe {
			return fmt.Errorf("op %s compares numbers; a %T compares only with eq or ne", op, v)
		}
	default:
		return fmt.Errorf("value must be a number, a string or a bool, got %T", value)
	}
	return nil
}

func (a Action) validate(o *Options) error {
	if err := exactlyOne("command, publish, notify", a.Command != nil, a.Publish != nil, a.Notify != nil); err != nil {
		return err
	}
	switch {
	case a.Command != nil:
		c := a.Command
		if o.Commander == nil {
			return errors.New("a command action needs Options.Commander")
		}
		if err := devices.ValidID(c.Device); err != nil {
			return err
		}
		switch {
		case c.Toggle != "" && len(c.Target) > 0:
			return errors.New("command action: target and toggle together; set one")
		case c.Toggle != "":
			if !slices.Contains(Toggleable, c.Toggle) {
				return fmt.Errorf("command action: toggle %q: only %s can be toggled", c.Toggle, strings.Join(Toggleable, ", "))
			}
		case len(c.Target) == 0:
			return errors.New("command action: empty target")
		}
		for _, k := range []string{devices.KeyOpID, devices.KeyTTL, devices.KeyIssuedAt} {
			if _, ok := c.Target[k]; ok {
				return fmt.Errorf("command action: target holds the reserved key %s", k)
			}
		}
		if c.TTL < 0 || c.TTL > devices.MaxTTL {
			return fmt.Errorf("command action: ttl %s is not from 0 to %s", c.TTL, devices.MaxTTL)
		}
	case a.Publish != nil:
		if o.Publisher == nil {
			return errors.New("a publish action needs Options.Publisher")
		}
		if err := validTopic(a.Publish.Topic); err != nil {
			return err
		}
	case a.Notify != nil:
		if o.Notifier == nil {
			return errors.New("a notify action needs Options.Notifier")
		}
		switch a.Notify.Severity {
		case "", SeverityInfo, SeverityWarning, SeverityCritical:
		default:
			return fmt.Errorf("notify action: unknown severity %q (known: info, warning, critical)", a.Notify.Severity)
		}
		if a.Notify.Title == "" && a.Notify.Message == "" {
			return errors.New("notify action: no title and no message")
		}
	}
	return nil
}

// formatTimeOfDay formats minutes since midnight as "HH:MM".
func formatTimeOfDay(m int) string { return fmt.Sprintf("%02d:%02d", m/60, m%60) }
