package automations

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/hearthd/hearth/topic"
)

// validFilter checks the topic filter of an MQTT trigger: a topic filter
// by MQTT's rules (topic.ValidFilter), without control characters, which
// MQTT 5.0 §1.5.4 says a topic should not hold.
func validFilter(f string) error {
	if strings.ContainsFunc(f, unicode.IsControl) {
		return fmt.Errorf("topic filter %q contains a control character", f)
	}
	return topic.ValidFilter(f)
}

// validTopic checks the topic of a publish action: a topic name by MQTT's
// rules (topic.ValidName, so no wildcards), without control characters.
func validTopic(t string) error {
	if err := topic.ValidName(t); err != nil {
		return err
	}
	if strings.ContainsFunc(t, unicode.IsControl) {
		return fmt.Errorf("topic %q contains a control character", t)
	}
	return nil
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
