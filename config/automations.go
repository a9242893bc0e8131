package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/robfig/cron/v3"
	"gopkg.in/yaml.v3"

	"github.com/hearthd/hearth/automations"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/topic"
)

// The automations section decodes into the automations engine's own
// types: one automation is an automations.Rule, and the daemon hands
// Config.Automations to the engine as they are. The names below are
// aliases, kept so that the section's YAML keys read as what they fill:
//
//	automations:
//	  <Name>:                  # lower-case letters, digits, '_' and '-'
//	    fallback_for: <service>  # FallbackFor; a service with a breaker
//	    requires: [<service>]    # Requires
//	    triggers:   [{state|mqtt|schedule|breaker: {...}}]  # at least one
//	    conditions: [{state|time: {...}}]
//	    actions:    [{command|publish|notify: {...}}]       # at least one
//
// The keys of each item are the lower-case names of its type's fields
// (state: device, attribute, to, from; mqtt: topic, payload, fields,
// event_id, repeat_window; schedule:
// cron; breaker: service, to; state condition: device, attribute, op,
// value; time: after, before, weekdays; command: device, target or
// toggle, ttl;
// publish: topic, payload, retain; notify: title, message, severity), and
// config checks what the engine cannot know: that devices and services
// exist, that a target suits the device's class, and that no trigger or
// publish reaches Hearth's or a bridge's command topics.
type (
	Automation      = automations.Rule
	Trigger         = automations.Trigger
	StateTrigger    = automations.StateTrigger
	MQTTTrigger     = automations.MQTTTrigger
	ScheduleTrigger = automations.ScheduleTrigger
	BreakerTrigger  = automations.BreakerTrigger
	Condition       = automations.Condition
	StateCondition  = automations.StateCondition
	TimeCondition   = automations.TimeCondition
	Action          = automations.Action
	CommandAction   = automations.CommandAction
	PublishAction   = automations.PublishAction
	NotifyAction    = automations.NotifyAction
)

// The words of a StateCondition's op, a notification's severity and a
// breaker trigger's to, in the order errors list them.
var (
	conditionOps = automations.Ops
	severities   = []string{automations.SeverityInfo, automations.SeverityWarning, automations.SeverityCritical}
	breakerTo    = []string{automations.Open, automations.Closed, automations.HalfOpen}
)

// walkAutomation walks one entry of automations. Its devices and services
// are checked by checkAutomations, once the whole file is read.
func walkAutomation(w *walker, name string, n *yaml.Node, key string) Automation {
	a := Automation{Name: name}
	if !serviceName.MatchString(name) {
		w.reportf(w.lines[key], key, "invalid automation name: use lower-case letters, digits, '_' and '-'")
	}
	w.mapping(n, key,
		value("fallback_for", &a.FallbackFor, notEmpty),
		stringList("requires", &a.Requires, notEmpty),
		field{"triggers", func(w *walker, n *yaml.Node, key string) {
			w.items(n, key, "triggers", func(item *yaml.Node, k string) {
				var t Trigger
				w.oneOf(item, k, triggerFields(&t)...)
				a.Triggers = append(a.Triggers, t)
			})
		}},
		field{"conditions", func(w *walker, n *yaml.Node, key string) {
			w.items(n, key, "conditions", func(item *yaml.Node, k string) {
				var c Condition
				w.oneOf(item, k, conditionFields(&c)...)
				a.Conditions = append(a.Conditions, c)
			})
		}},
		field{"actions", func(w *walker, n *yaml.Node, key string) {
			w.items(n, key, "actions", func(item *yaml.Node, k string) {
				var c Action
				w.oneOf(item, k, actionFields(&c)...)
				a.Actions = append(a.Actions, c)
			})
		}},
	)
	if w.reported[key] {
		return a
	}
	for _, list := range []struct {
		name  string
		empty bool
	}{{"triggers", len(a.Triggers) == 0}, {"actions", len(a.Actions) == 0}} {
		k := join(key, list.name)
		if list.empty && !w.reported[k] {
			w.reportf(w.lines[key], k, "missing; an automation needs at least one of its %s", list.name)
		}
	}
	if a.FallbackFor != "" && slices.Contains(a.Requires, a.FallbackFor) {
		k, line := w.at(join(key, "requires"), key)
		w.reportf(line, k, "names %s, the service of fallback_for: the automation could never run", a.FallbackFor)
	}
	return a
}

func triggerFields(t *Trigger) []field {
	return []field{
		{"state", func(w *walker, n *yaml.Node, key string) {
			s := &StateTrigger{}
			w.mapping(n, key,
				value("device", &s.Device, notEmpty),
				value("attribute", &s.Attribute, notEmpty),
				anyScalar("to", &s.To),
				anyScalar("from", &s.From),
			)
			w.required(key, "device", s.Device == "")
			w.required(key, "attribute", s.Attribute == "")
			t.State = s
		}},
		{"mqtt", func(w *walker, n *yaml.Node, key string) {
			m := &MQTTTrigger{}
			w.mapping(n, key,
				value("topic", &m.Topic, topicFilter),
				optionalString("payload", &m.Payload),
				scalarMap("fields", &m.Fields),
				stringList("event_id", &m.EventID, notEmpty),
				value("repeat_window", &m.RepeatWindow, repeatWindow),
			)
			w.required(key, "topic", m.Topic == "")
			t.MQTT = m
		}},
		{"schedule", func(w *walker, n *yaml.Node, key string) {
			s := &ScheduleTrigger{}
			w.mapping(n, key, value("cron", &s.Cron, cronSpec))
			w.required(key, "cron", s.Cron == "")
			t.Schedule = s
		}},
		{"breaker", func(w *walker, n *yaml.Node, key string) {
			b := &BreakerTrigger{}
			w.mapping(n, key,
				value("service", &b.Service, notEmpty),
				value("to", &b.To, oneOfWords("state", breakerTo)),
			)
			w.required(key, "service", b.Service == "")
			t.Breaker = b
		}},
	}
}

func conditionFields(c *Condition) []field {
	return []field{
		{"state", func(w *walker, n *yaml.Node, key string) {
			s := &StateCondition{Op: automations.OpEq}
			w.mapping(n, key,
				value("device", &s.Device, notEmpty),
				value("attribute", &s.Attribute, notEmpty),
				value("op", &s.Op, oneOfWords("op", conditionOps)),
				anyScalar("value", &s.Value),
			)
			w.required(key, "device", s.Device == "")
			w.required(key, "attribute", s.Attribute == "")
			w.required(key, "value", s.Value == nil)
			if k := join(key, "op"); s.Value != nil && !w.reported[k] && !w.reported[join(key, "value")] {
				if _, isNumber := s.Value.(float64); !isNumber && s.Op != automations.OpEq && s.Op != automations.OpNe {
					w.reportf(w.lines[k], k, "%s compares numbers; a %s value compares only with eq or ne", s.Op, kindOf(s.Value))
				}
			}
			c.State = s
		}},
		{"time", func(w *walker, n *yaml.Node, key string) {
			tc := &TimeCondition{}
			var hasAfter, hasBefore bool
			w.mapping(n, key,
				clockTime("after", &tc.After, &hasAfter),
				clockTime("before", &tc.Before, &hasBefore),
				weekdays("weekdays", &tc.Weekdays),
			)
			switch {
			case w.reported[key] || w.reported[join(key, "after")] || w.reported[join(key, "before")]:
			case !hasAfter && !hasBefore:
				w.reportf(w.lines[key], key, "needs after, before or both")
			case hasAfter && hasBefore && tc.After == tc.Before:
				k := join(key, "before")
				w.reportf(w.lines[k], k, "equals after (%s): an empty window", fmtClock(tc.After))
			}
			c.Time = tc
		}},
	}
}

func actionFields(a *Action) []field {
	return []field{
		{"command", func(w *walker, n *yaml.Node, key string) {
			c := &CommandAction{}
			w.mapping(n, key,
				value("device", &c.Device, notEmpty),
				field{"target", func(w *walker, n *yaml.Node, key string) {
					c.Target = w.target(n, key)
				}},
				value("toggle", &c.Toggle, oneOfWords("toggle", automations.Toggleable)),
				value("ttl", &c.TTL, ttl),
			)
			w.required(key, "device", c.Device == "")
			switch {
			case c.Target != nil && c.Toggle != "":
				k := join(key, "toggle")
				w.reportf(w.lines[k], k, "is set beside target; a command has one or the other")
			case c.Toggle == "" && !w.reported[join(key, "toggle")]:
				w.required(key, "target", c.Target == nil)
			}
			a.Command = c
		}},
		{"publish", func(w *walker, n *yaml.Node, key string) {
			p := &PublishAction{}
			w.mapping(n, key,
				value("topic", &p.Topic, topicLevels),
				value("payload", &p.Payload),
				value("retain", &p.Retain),
			)
			w.required(key, "topic", p.Topic == "")
			a.Publish = p
		}},
		{"notify", func(w *walker, n *yaml.Node, key string) {
			m := &NotifyAction{Severity: automations.SeverityInfo}
			w.mapping(n, key,
				value("title", &m.Title),
				value("message", &m.Message),
				value("severity", &m.Severity, oneOfWords("severity", severities)),
			)
			if m.Title == "" && m.Message == "" && !w.reported[key] {
				w.reportf(w.lines[key], key, "needs a title or a message")
			}
			a.Notify = m
		}},
	}
}

// The fields and checks of the automations section.

// anyScalar is a field whose value is a string, a number (stored as
// float64) or a bool, stored in *p. A null value leaves *p nil.
func anyScalar(name string, p *any) field {
	return field{name, func(w *walker, n *yaml.Node, key string) {
		line := n.Line
		n = resolve(n)
		if isNull(n) {
			return
		}
		var err error
		switch tag := n.ShortTag(); {
		case n.Kind != yaml.ScalarNode:
			err = fmt.Errorf("want a string, a number or true/false, got %s", describe(n))
		case tag == "!!bool":
			var b bool
			err = n.Decode(&b)
			*p = b
		case tag == "!!int" || tag == "!!float":
			var f float64
			f, err = decode[float64](n)
			*p = f
		default:
			*p = n.Value
		}
		if err != nil {
			*p = nil
			w.report(line, key, err)
		}
	}}
}

// scalarMap is a field whose value is a mapping of names to strings,
// numbers (stored as float64) or bools, stored in *p.
func scalarMap(name string, p *map[string]any) field {
	return field{name, func(w *walker, n *yaml.Node, key string) {
		m := map[string]any{}
		w.entries(n, key, func(name string, v *yaml.Node, k string) {
			var x any
			anyScalar(name, &x).walk(w, v, k)
			if x == nil && !w.reported[k] {
				w.reportf(w.lines[k], k, "want a string, a number or true/false, got null")
			}
			if x != nil {
				m[name] = x
			}
		})
		if len(m) > 0 {
			*p = m
		}
	}}
}

// repeatWindow checks an MQTT trigger's repeat_window.
func repeatWindow(d time.Duration) error {
	if err := positive(d); err != nil {
		return err
	}
	if d > automations.MaxRepeatWindow {
		return fmt.Errorf("must be at most %s, got %s", fmtDuration(automations.MaxRepeatWindow), fmtDuration(d))
	}
	return nil
}

// optionalString is a field whose value is a string, stored in a new
// *p; a null value (or none) leaves *p nil.
func optionalString(name string, p **string) field {
	var s string
	f := value(name, &s)
	return field{name, func(w *walker, n *yaml.Node, key string) {
		if isNull(resolve(n)) {
			return
		}
		f.walk(w, n, key)
		if !w.reported[key] {
			v := s
			*p = &v
		}
	}}
}

// stringList is a field whose value is a list of strings, each passing
// every check, stored in *p when all do.
func stringList(name string, p *[]string, checks ...func(string) error) field {
	return listOf(name, "strings", p, checks...)
}

// listOf is stringList whose error for a value that is no list says it
// wants a list of what ("MQTT topic filters, such as [...]").
func listOf(name, what string, p *[]string, checks ...func(string) error) field {
	return field{name, func(w *walker, n *yaml.Node, key string) {
		var list []string
		ok := true
		w.items(n, key, what, func(item *yaml.Node, k string) {
			var s string
			value(name, &s, checks...).walk(w, item, k)
			if w.reported[k] {
				ok = false
				return
			}
			list = append(list, s)
		})
		if ok && !w.reported[key] {
			*p = list
		}
	}}
}

// clockTime is a field whose value is a time of day "HH:MM", stored in *p
// as minutes since midnight; *given records that it was written.
func clockTime(name string, p *int, given *bool) field {
	var s string
	f := value(name, &s, func(s string) error {
		var err error
		*p, err = parseClock(s)
		return err
	})
	return field{name, func(w *walker, n *yaml.Node, key string) {
		if isNull(resolve(n)) {
			return
		}
		f.walk(w, n, key)
		*given = !w.reported[key]
	}}
}

// parseClock parses "HH:MM", 00:00 to 23:59, as minutes since midnight.
func parseClock(s string) (int, error) {
	if len(s) != 5 || s[2] != ':' || strings.Trim(s[:2]+s[3:], "0123456789") != "" {
		return 0, fmt.Errorf("want a time of day as HH:MM, such as \"07:30\", got %q", s)
	}
	h := int(s[0]-'0')*10 + int(s[1]-'0')
	m := int(s[3]-'0')*10 + int(s[4]-'0')
	if h > 23 || m > 59 {
		return 0, fmt.Errorf("%q is not a time of day (00:00 to 23:59)", s)
	}
	return h*60 + m, nil
}

func fmtClock(m int) string { return fmt.Sprintf("%02d:%02d", m/60, m%60) }

// weekdays is a field whose value is a list of days: mon … sun or monday
// … sunday.
func weekdays(name string, p *[]time.Weekday) field {
	return field{name, func(w *walker, n *yaml.Node, key string) {
		var days []time.Weekday
		ok := true
		w.items(n, key, "weekdays", func(item *yaml.Node, k string) {
			var d time.Weekday
			value(name, new(string), func(s string) error {
				var err error
				d, err = parseWeekday(s)
				return err
			}).walk(w, item, k)
			if w.reported[k] {
				ok = false
				return
			}
			days = append(days, d)
		})
		if ok && !w.reported[key] {
			*p = days
		}
	}}
}

func parseWeekday(s string) (time.Weekday, error) {
	for d := time.Sunday; d <= time.Saturday; d++ {
		long := strings.ToLower(d.String())
		if s == long || s == long[:3] {
			return d, nil
		}
	}
	return 0, fmt.Errorf("unknown weekday %q (known: mon, tue, wed, thu, fri, sat, sun, or the whole names)", s)
}

// items calls fn for each item of the list n at key, with the item's
// dotted key: key[0], key[1], … A null n is an empty list.
func (w *walker) items(n *yaml.Node, key, what string, fn func(item *yaml.Node, key string)) {
	line := n.Line
	n = resolve(n)
	if isNull(n) {
		return
	}
	if n.Kind != yaml.SequenceNode {
		w.reportf(line, key, "want a list of %s, got %s", what, describe(n))
		return
	}
	for i, item := range n.Content {
		k := fmt.Sprintf("%s[%d]", key, i)
		w.lines[k] = item.Line
		fn(item, k)
	}
}

// oneOf walks the mapping n at key, which must hold exactly one of the
// fields.
func (w *walker) oneOf(n *yaml.Node, key string, fields ...field) {
	r := resolve(n)
	if r.Kind == yaml.MappingNode && len(r.Content) != 2 {
		known := make([]string, len(fields))
		for i, f := range fields {
			known[i] = f.key
		}
		w.reportf(n.Line, key, "want exactly one of %s, got %d keys", strings.Join(known, ", "), len(r.Content)/2)
		return
	}
	w.mapping(n, key, fields...)
	if isNull(r) {
		w.reportf(n.Line, key, "empty; want one of %s", fieldNames(fields))
	}
}

func fieldNames(fields []field) string {
	known := make([]string, len(fields))
	for i, f := range fields {
		known[i] = f.key
	}
	return strings.Join(known, ", ")
}

// required reports the key name of the mapping at key as missing when
// isZero, unless a problem was reported for it or the mapping already.
func (w *walker) required(key, name string, isZero bool) {
	k := join(key, name)
	if isZero && !w.reported[k] && !w.reported[key] {
		w.reportf(w.lines[key], k, "missing")
	}
}

// target decodes a command target: a mapping of attribute names to
// strings, numbers or bools. It is validated for the device's class by
// checkAutomations.
func (w *walker) target(n *yaml.Node, key string) devices.Target {
	t := devices.Target{}
	w.entries(n, key, func(name string, v *yaml.Node, k string) {
		var x any
		anyScalar(name, &x).walk(w, v, k)
		if x != nil {
			t[name] = x
		}
	})
	if len(t) == 0 && !w.reported[key] {
		w.reportf(w.lines[key], key, "empty; name the target attributes, such as {state: \"ON\"}")
	}
	if w.reported[key] {
		return nil
	}
	return t
}

func kindOf(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case bool:
		return "true/false"
	}
	return fmt.Sprintf("%T", v)
}

// topicFilter checks an MQTT topic filter: a filter by MQTT's rules
// (topic.ValidFilter: '+' only as a whole level, '#' only as the whole
// last level), without control characters.
func topicFilter(s string) error {
	if s == "" {
		return errEmpty
	}
	if strings.ContainsFunc(s, unicode.IsControl) {
		return fmt.Errorf("%q contains a control character", s)
	}
	var e *topic.Error
	if errors.As(topic.ValidFilter(s), &e) {
		// The key already says it is a topic filter.
		return fmt.Errorf("%q: %s", s, e.Reason)
	}
	return nil
}

// cronSpec checks a cron expression as the automations engine reads it.
func cronSpec(s string) error {
	if _, err := cron.ParseStandard(s); err != nil {
		return fmt.Errorf("invalid cron expression %q: %v (want 5 fields, minute hour day-of-month month day-of-week, or a descriptor such as @hourly)", s, err)
	}
	return nil
}

func oneOfWords(what string, known []string) func(string) error {
	return func(s string) error {
		if !slices.Contains(known, s) {
			return fmt.Errorf("unknown %s %q (known: %s)", what, s, strings.Join(known, ", "))
		}
		return nil
	}
}

// checkAutomations reports devices and services that automations name but
// the file does not configure, and validates each command's target for
// its device's class.
func (c *Config) checkAutomations(w *walker) {
	for ai := range c.Automations {
		a := &c.Automations[ai]
		key := join("automations", a.Name)
		if a.FallbackFor != "" {
			c.checkService(w, join(key, "fallback_for"), a.FallbackFor)
		}
		for i, s := range a.Requires {
			c.checkService(w, fmt.Sprintf("%s[%d]", join(key, "requires"), i), s)
		}
		for i, t := range a.Triggers {
			k := fmt.Sprintf("%s[%d]", join(key, "triggers"), i)
			switch {
			case t.State != nil:
				c.checkDevice(w, join(join(k, "state"), "device"), t.State.Device)
			case t.Breaker != nil:
				c.checkService(w, join(join(k, "breaker"), "service"), t.Breaker.Service)
			case t.MQTT != nil:
				c.checkTriggerTopic(w, join(join(k, "mqtt"), "topic"), t.MQTT.Topic)
			}
		}
		for i, cond := range a.Conditions {
			k := fmt.Sprintf("%s[%d]", join(key, "conditions"), i)
			if cond.State != nil {
				c.checkDevice(w, join(join(k, "state"), "device"), cond.State.Device)
			}
		}
		for i, act := range a.Actions {
			if act.Publish != nil {
				c.checkPublishTopic(w, join(join(fmt.Sprintf("%s[%d]", join(key, "actions"), i), "publish"), "topic"), act.Publish.Topic)
			}
			k := join(fmt.Sprintf("%s[%d]", join(key, "actions"), i), "command")
			cmd := act.Command
			if cmd == nil {
				continue
			}
			d, ok := c.checkDevice(w, join(k, "device"), cmd.Device)
			if tg := join(k, "toggle"); ok && cmd.Toggle != "" && d.Class != devices.Light && d.Class != devices.Switch && !w.reported[tg] {
				// A toggle flips ON and OFF: a lock, a cover or a valve
				// is moved to a state named, never flipped.
				w.reportf(w.lines[tg], tg, "%s is a %s; only a light or a switch can be toggled", d.ID, d.Class)
			}
			tkey := join(k, "target")
			if !ok || d.Class == "" || cmd.Target == nil || w.reported[tkey] {
				continue // an unknown class is reported at the device
			}
			t, err := devices.Validate(d.Class, cmd.Target)
			if err == nil {
				err = devices.Coherent(d.Class, t)
			}
			if err != nil {
				var de *devices.Error
				if errors.As(err, &de) {
					err = errors.New(de.Detail)
				}
				w.reportf(w.lines[tkey], tkey, "not a command %s %s takes: %v", d.ID, aOrAn(string(d.Class)), err)
				continue
			}
			cmd.Target = t
		}
	}
}

func aOrAn(class string) string {
	if strings.ContainsRune("aeiou", rune(class[0])) {
		return "(an " + class + ")"
	}
	return "(a " + class + ")"
}

// checkDevice reports, at key, a device that is not configured.
func (c *Config) checkDevice(w *walker, key, id string) (Device, bool) {
	if id == "" || w.reported[key] {
		return Device{}, false
	}
	d, ok := c.Device(id)
	if !ok {
		w.reportf(w.lines[key], key, "no device %q in devices", id)
	}
	return d, ok
}

// checkTriggerTopic refuses an MQTT trigger whose filter can match
// Hearth's command intake, <prefix>/<device>/set: Hearth subscribes to
// that with Retain As Published to refuse replayed commands, and a second,
// overlapping subscription could take the flag away (a broker may merge
// them).
func (c *Config) checkTriggerTopic(w *walker, key, filter string) {
	if filter == "" || w.reported[key] {
		return
	}
	if topic.Overlap(filter, c.Prefix+"/+/set") {
		w.reportf(w.lines[key], key, "%q can match Hearth's command topics (%s/<device>/set); watch the results (%s/<device>/result) or the state (%s/<device>) instead", filter, c.Prefix, c.Prefix, c.Prefix)
	}
}

// checkPublishTopic refuses a publish action into Hearth's own topics or
// to a bridge's command topics: a command goes through a command action,
// which is stored, confirmed and guarded; a raw publish skips all of that,
// and, retained, would replay at every bridge restart. Hearth never
// receives its own publishes, so one to <prefix>/... would be lost.
func (c *Config) checkPublishTopic(w *walker, key, name string) {
	if name == "" || w.reported[key] {
		return
	}
	if topic.Overlap(c.Prefix+"/#", name) {
		w.reportf(w.lines[key], key, "%q is under Hearth's prefix %s/: Hearth does not receive its own publishes; use a command action for a device", name, c.Prefix)
		return
	}
	for _, s := range c.Services {
		if s.Protocol != ProtocolZigbee2MQTT {
			continue
		}
		if topic.Overlap(s.BaseTopic+"/+/set", name) || topic.Overlap(s.BaseTopic+"/+/set/#", name) {
			w.reportf(w.lines[key], key, "%q is a command topic of service %s: a raw publish skips Hearth's op_id, confirmation and safety checks; use a command action", name, s.Name)
			return
		}
	}
}

// checkService reports, at key, a service that is not configured, or
// one without a breaker (automations follow breakers).
func (c *Config) checkService(w *walker, key, name string) {
	if name == "" || w.reported[key] {
		return
	}
	if _, ok := c.Service(name); !ok {
		names := make([]string, len(c.Services))
		for i, s := range c.Services {
			names[i] = s.Name
		}
		known := "no services are configured"
		if len(names) > 0 {
			known = "services: " + strings.Join(names, ", ")
		}
		w.reportf(w.lines[key], key, "no service %q (%s)", name, known)
		return
	}
	if svc, _ := c.Service(name); !svc.Breaker.Enabled {
		w.reportf(w.lines[key], key, "service %q has its breaker disabled (breaker.enabled: false), so this never changes", name)
	}
}
