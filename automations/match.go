package automations

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode"
)

// validFilter checks an MQTT topic filter (MQTT 3.1.1 section 4.7): non-empty,
// '+' only as a whole level, '#' only as the whole last level, no control
// characters.
func validFilter(f string) error {
	if f == "" {
		return errors.New("empty topic filter")
	}
	if strings.ContainsFunc(f, unicode.IsControl) {
		return fmt.Errorf("topic filter %q contains a control character", f)
	}
	levels := strings.Split(f, "/")
	for i, l := range levels {
		if strings.Contains(l, "+") && l != "+" {
			return fmt.Errorf("topic filter %q: '+' must stand for a whole level", f)
		}
		if strings.Contains(l, "#") && (l != "#" || i != len(levels)-1) {
			return fmt.Errorf("topic filter %q: '#' must be the whole last level", f)
		}
	}
	return nil
}

// validTopic checks a topic to publish to: non-empty, without wildcards or
// control characters.
func validTopic(t string) error {
	if t == "" {
		return errors.New("empty topic")
	}
	if i := strings.IndexAny(t, "+#"); i >= 0 {
		return fmt.Errorf("topic %q contains %q, an MQTT wildcard", t, t[i])
	}
	if strings.ContainsFunc(t, unicode.IsControl) {
		return fmt.Errorf("topic %q contains a control character", t)
	}
	return nil
}

// matchTopic reports whether topic matches the filter, as an MQTT broker
// matches a subscription: '+' matches exactly one level, '#' the parent
// level and any number below it. A filter starting with a wildcard does
// not match a topic starting with '$' (MQTT 3.1.1 section 4.7.2).
func matchTopic(filter, topic string) bool {
	if strings.HasPrefix(topic, "$") && (strings.HasPrefix(filter, "+") || strings.HasPrefix(filter, "#")) {
		return false
	}
	fl, tl := strings.Split(filter, "/"), strings.Split(topic, "/")
	for i, f := range fl {
		if f == "#" {
			return true
		}
		if i >= len(tl) {
			return false
		}
		if f != "+" && f != tl[i] {
			return false
		}
	}
	return len(fl) == len(tl)
}

// normalize returns v with every kind of number as float64, so that a
// value decoded from YAML (int), from JSON (float64 or json.Number) and
// written in Go compare equal.
func normalize(v any) any {
	switch n := v.(type) {
	case int:
		return float64(n)
	case int8:
		return float64(n)
	case int16:
		return float64(n)
	case int32:
		return float64(n)
	case int64:
		return float64(n)
	case uint:
		return float64(n)
	case uint8:
		return float64(n)
	case uint16:
		return float64(n)
	case uint32:
		return float64(n)
	case uint64:
		return float64(n)
	case float32:
		return float64(n)
	case json.Number:
		if f, err := n.Float64(); err == nil {
			return f
		}
		return n.String()
	}
	return v
}

// equal reports whether two state values are the same, numbers compared
// as float64.
func equal(a, b any) bool {
	a, b = normalize(a), normalize(b)
	switch a.(type) {
	case float64, string, bool, nil:
		return a == b
	}
	return reflect.DeepEqual(a, b)
}

// compare applies op to the state value got and the condition's want.
// Ordering operators hold only between numbers; a value of another type
// than want makes eq false and ne true.
func compare(op string, got, want any) bool {
	got, want = normalize(got), normalize(want)
	switch op {
	case OpEq:
		return equal(got, want)
	case OpNe:
		return !equal(got, want)
	}
	g, ok1 := got.(float64)
	w, ok2 := want.(float64)
	if !ok1 || !ok2 {
		return false
	}
	switch op {
	case OpLt:
		return g < w
	case OpLe:
		return g <= w
	case OpGt:
		return g > w
	case OpGe:
		return g >= w
	}
	return false
}

// holds reports whether the time condition holds at now, which is in the
// engine's location.
func (t *TimeCondition) holds(now time.Time) bool {
	if len(t.Weekdays) > 0 && !slices.Contains(t.Weekdays, now.Weekday()) {
		return false
	}
	m := now.Hour()*60 + now.Minute()
	before := t.Before
	if before == 0 {
		before = 24 * 60
	}
	if t.After < before {
		return m >= t.After && m < before
	}
	return m >= t.After || m < before
}
