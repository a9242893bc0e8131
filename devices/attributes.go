package devices

import (
	"encoding/json"
	"math"
	"sort"
	"strings"
)

// attr describes one attribute a class takes in a command.
type attr struct {
	enum     []string // allowed values, canonical upper case; nil for numbers
	min, max float64  // inclusive range for numbers
	integer  bool     // numbers must be whole
}

// schemas lists, per class, the attributes a command may name, with the
// values and ranges of Zigbee2MQTT's exposes: light (state, brightness
// 0–254, color_temp in mireds over the ZCL range 0–65279, transition in
// seconds), switch (state), lock (state LOCK/UNLOCK), cover (state, position
// and tilt in percent).
var schemas = map[Class]map[string]attr{
	Light: {
		"state":      {enum: []string{"ON", "OFF"}},
		"brightness": {min: 0, max: 254, integer: true},
		"color_temp": {min: 0, max: 65279, integer: true},
		"transition": {min: 0, max: 3600},
	},
	Switch: {
		"state": {enum: []string{"ON", "OFF"}},
	},
	Lock: {
		"state": {enum: []string{"LOCK", "UNLOCK"}},
	},
	Cover: {
		"state":    {enum: []string{"OPEN", "CLOSE", "STOP"}},
		"position": {min: 0, max: 100, integer: true},
		"tilt":     {min: 0, max: 100, integer: true},
	},
	// A thermostat's heating setpoints in °C, as Zigbee2MQTT's climate
	// exposes name them (a radiator valve reports the one it has).
	Climate: {
		"current_heating_setpoint":  {min: 5, max: 35},
		"occupied_heating_setpoint": {min: 5, max: 35},
	},
}

// isParameter reports whether an attribute says how to reach a state rather
// than which state: it is sent but never confirmed or superseded.
func isParameter(name string) bool { return name == "transition" }

// relativeSuffixes mark Zigbee2MQTT's relative attributes (brightness_step,
// brightness_move, color_temp_step, brightness_step_onoff, …).
var relativeSuffixes = []string{"_step", "_move", "_step_onoff", "_move_onoff"}

// Validate checks the target attributes raw (decoded JSON; numbers may be
// json.Number or float64) for class c and returns them in canonical form.
// Relative commands are refused before anything else is looked at, so the
// caller learns the rule that matters.
func Validate(c Class, raw map[string]any) (Target, error) {
	schema, ok := schemas[c]
	if !ok {
		return nil, reject(ReasonUnsupported, "devices of class %s take no commands", c)
	}
	names := make([]string, 0, len(raw))
	for k := range raw {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, suf := range relativeSuffixes {
			if strings.HasSuffix(k, suf) {
				return nil, reject(ReasonRelativeCommand, "%s is a relative change; send the absolute target instead", k)
			}
		}
		if s, ok := raw[k].(string); ok && strings.EqualFold(strings.TrimSpace(s), "TOGGLE") {
			want := "the absolute target"
			if a, ok := schema[k]; ok && len(a.enum) > 0 {
				want = strings.Join(a.enum, " or ")
			}
			return nil, reject(ReasonRelativeCommand, "%s TOGGLE is a relative change; send %s", k, want)
		}
	}
	if len(names) == 0 {
		return nil, reject(ReasonInvalidPayload, "no target attributes")
	}
	out := make(Target, len(raw))
	for _, k := range names {
		a, ok := schema[k]
		if !ok {
			return nil, reject(ReasonUnknownAttribute, "%s has no attribute %q (known: %s)", c, k, strings.Join(sortedKeys(schema), ", "))
		}
		v, err := a.canonical(k, raw[k])
		if err != nil {
			return nil, err
		}
		out[k] = v
	}
	if len(out.Attributes()) == 0 {
		return nil, reject(ReasonInvalidPayload, "no target state, only parameters")
	}
	if c == Light && out["state"] == "ON" && out["brightness"] == 0.0 {
		return nil, reject(ReasonInvalidValue, "brightness 0 turns a light off, which contradicts state ON; send state OFF, or a brightness of 1 or more")
	}
	return out, nil
}

func (a attr) canonical(name string, v any) (any, error) {
	if a.enum != nil {
		s, ok := v.(string)
		if !ok {
			return nil, reject(ReasonInvalidValue, "%s must be one of %s, got %s", name, strings.Join(a.enum, ", "), show(v))
		}
		u := strings.ToUpper(strings.TrimSpace(s))
		for _, e := range a.enum {
			if u == e {
				return e, nil
			}
		}
		return nil, reject(ReasonInvalidValue, "%s must be one of %s, got %s", name, strings.Join(a.enum, ", "), show(v))
	}
	f, ok := number(v)
	if !ok {
		return nil, reject(ReasonInvalidValue, "%s must be a number, got %s", name, show(v))
	}
	if a.integer && f != math.Trunc(f) {
		return nil, reject(ReasonInvalidValue, "%s must be a whole number, got %s", name, show(v))
	}
	if f < a.min || f > a.max {
		return nil, reject(ReasonOutOfRange, "%s must be within %g–%g, got %s", name, a.min, a.max, show(v))
	}
	if f == 0 {
		f = 0 // -0 is sent as 0
	}
	return f, nil
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case json.Number:
		f, err := n.Float64()
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return 0, false
		}
		return f, true
	case float64:
		return n, !math.IsNaN(n) && !math.IsInf(n, 0)
	case int:
		return float64(n), true
	}
	return 0, false
}

func sortedKeys(m map[string]attr) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Satisfied reports whether a reported state shows every state attribute of
// target, for a device of class c. Parameters (transition) are not
// compared. Strings compare without regard to case, numbers by value.
//
// A lock is judged by Zigbee2MQTT's lock_state ("locked"/"unlocked") only,
// never by state, which reads UNLOCK for a half-thrown bolt and is what
// Zigbee2MQTT echoes of a set whether or not the bolt moved; a lock_state
// that is not one of those words (not_fully_locked, jammed, null)
// satisfies neither, and a report without lock_state satisfies nothing.
// (Other bridges' adapters report a lock's mode as lock_state.) A cover asked to OPEN or CLOSE is judged by its position (100
// or 0) when it reports one, else by state, since Zigbee2MQTT reports OPEN
// at any position above 0; STOP is shown by any report in which it is not
// moving.
// A light asked for brightness 0 is satisfied by state OFF, since
// Zigbee2MQTT turns it off and many bulbs keep reporting their last level.
func Satisfied(c Class, target Target, state map[string]any) bool {
	for _, k := range target.Attributes() {
		want := target[k]
		if !attributeSatisfied(c, k, want, state) {
			return false
		}
	}
	return true
}

func attributeSatisfied(c Class, name string, want any, state map[string]any) bool {
	switch {
	case c == Lock && name == "state":
		s, ok := state["lock_state"].(string) // anything but a known word is unknown: never locked, never unlocked
		return ok && ((want == "LOCK" && strings.EqualFold(s, "locked")) || (want == "UNLOCK" && strings.EqualFold(s, "unlocked")))
	case c == Light && name == "brightness":
		// Zigbee2MQTT turns a light off for brightness 0, and many bulbs
		// then report state OFF with their last level kept.
		if w, ok := number(want); ok && w == 0 {
			if s, ok := state["state"].(string); ok && strings.EqualFold(s, "OFF") {
				return true
			}
		}
	case c == Cover && name == "state":
		switch want {
		case "STOP":
			m, ok := state["moving"]
			return !ok || equal(m, "STOP")
		case "OPEN", "CLOSE":
			// Zigbee2MQTT reports state OPEN at any position above 0, so a
			// reported position is the better witness: fully open is 100.
			if p, ok := number(state["position"]); ok {
				return (want == "OPEN" && p == 100) || (want == "CLOSE" && p == 0)
			}
		}
	}
	got, ok := state[name]
	return ok && equal(got, want)
}

func equal(got, want any) bool {
	if ws, ok := want.(string); ok {
		gs, ok := got.(string)
		return ok && strings.EqualFold(gs, ws)
	}
	wf, ok1 := number(want)
	gf, ok2 := number(got)
	return ok1 && ok2 && wf == gf
}
