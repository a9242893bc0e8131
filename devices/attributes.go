package devices

import (
	"encoding/json"
	"math"
	"sort"
	"strings"
)

// attr describes one attribute a class takes in a command.
type attr struct {
	enum     []string // allowed values in the bridge's spelling, matched without regard to case; nil for numbers
	min, max float64  // inclusive range for numbers
	integer  bool     // numbers must be whole
	// clampTop, when not 0, is a value above max that is accepted and
	// sent, and that the bridge clamps to max: a light's brightness 255
	// (see schemas).
	clampTop float64
	color    bool // a light's color object (see canonicalColor)
}

// schemas lists, per class, the attributes a command may name, with the
// values and ranges of Zigbee2MQTT's exposes (zigbee-herdsman-converters
// lib/exposes.ts and lib/modernExtend.ts) where no device's own
// capabilities narrow them:
//
//   - light: state, brightness 0–254 (and 255, Home Assistant's default
//     scale's top, which Zigbee2MQTT takes and sends as 254: toZigbee.ts
//     light_onoff_brightness), color_temp in mireds over the ZCL range
//     0–65279, color (see canonicalColor), and the parameters transition
//     in seconds and effect (the generic effects every Zigbee2MQTT light
//     takes; a device's own list replaces them when known);
//   - switch: state; lock: state LOCK/UNLOCK; cover: state, position and
//     tilt in percent;
//   - climate: the heating setpoints in °C, system_mode (the values of
//     Zigbee2MQTT's climate expose, withSystemMode) and preset (the
//     presets Zigbee2MQTT's climate devices name most; a device's own list
//     replaces them when known).
//
// color_mode is reported by a light, never set.
var schemas = map[Class]map[string]attr{
	Light: {
		"state":      {enum: []string{"ON", "OFF"}},
		"brightness": {min: 0, max: 254, integer: true, clampTop: 255},
		"color_temp": {min: 0, max: 65279, integer: true},
		"color":      {color: true},
		"transition": {min: 0, max: 3600},
		"effect":     {enum: []string{"blink", "breathe", "okay", "channel_change", "finish_effect", "stop_effect"}},
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
		"system_mode":               {enum: []string{"off", "heat", "cool", "auto", "dry", "fan_only", "emergency_heating", "precooling", "sleep"}},
		"preset":                    {enum: []string{"manual", "auto", "schedule", "program", "away", "boost", "comfort", "eco", "holiday", "complex"}},
	},
}

// reportedOnly are attributes a device reports that a command cannot set,
// with what to send instead.
var reportedOnly = map[string]string{
	"color_mode": "color_mode is reported by the light, never set; send color or color_temp",
	"lock_state": "lock_state is reported by the lock, never set; send state LOCK or UNLOCK",
}

// isParameter reports whether an attribute says how to reach a state rather
// than which state: it is sent but never confirmed or superseded (a
// light's transition, and its effect, which a bulb plays and never
// reports).
func isParameter(name string) bool { return name == "transition" || name == "effect" }

// relativeSuffixes mark Zigbee2MQTT's relative attributes (brightness_step,
// brightness_move, color_temp_step, brightness_step_onoff, …).
var relativeSuffixes = []string{"_step", "_move", "_step_onoff", "_move_onoff"}

// Validate checks the target attributes raw (decoded JSON; numbers may be
// json.Number or float64) for class c and returns them in canonical form.
// It is ValidateFor without the device's capabilities.
func Validate(c Class, raw map[string]any) (Target, error) { return ValidateFor(c, nil, raw) }

// ValidateFor checks the target attributes raw for a device of class c
// whose capabilities are caps (nil: unknown) and returns them in canonical
// form. Relative commands are refused before anything else is looked at, so
// the caller learns the rule that matters.
//
// The class decides which attributes a command may name at all (schemas);
// known capabilities narrow that to the device: an attribute the device
// does not have, or has without the set access bit, is rejected
// (unknown_attribute); a number outside the device's value_min–value_max
// is rejected (out_of_range) with the device's range; an enum value not in
// the device's list is rejected (invalid_value) with the list; and an
// endpoint's property ("state_l1", with endpoint "l1") is taken under the
// rules of its base attribute. Parameters the bridge takes for any device
// (transition) need no capability. The device's description wins over the
// class's ranges, even where it is wider (a TRV whose setpoint goes down to
// 4 °C). Config sets no ranges today; should it ever, config's would win
// over the bridge's, as an operator's override of a device's own word.
func ValidateFor(c Class, caps *Capabilities, raw map[string]any) (Target, error) {
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
		a, err := attrFor(c, schema, caps, k)
		if err != nil {
			return nil, err
		}
		v, err := a.canonical(k, raw[k])
		if err != nil {
			if caps != nil {
				err.Detail += " (" + caps.name() + ", as its bridge describes it)"
			}
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

// Coherent checks that the attributes of a valid target t of class c do
// not contradict each other, and returns an *Error (invalid_value) when
// they do: a cover's state with a position. Zigbee2MQTT runs those as two
// cover commands, the later overriding the earlier, and a state OPEN is
// confirmed only at position 100, so the pair could never be confirmed and
// would always time out. It is separate from ValidateFor so that the
// intake asks it after the sender's permission: a principal that may not
// send the target learns that first.
func Coherent(c Class, t Target) error {
	if _, both := t["position"]; both && c == Cover && t["state"] != nil {
		return reject(ReasonInvalidValue, "state %s and position %s both say where the cover goes and contradict each other; send one of them", show(t["state"]), show(t["position"]))
	}
	return nil
}

// attrFor returns the rules for attribute k of a device of class c: the
// class's, narrowed by the device's property when caps are known.
func attrFor(c Class, schema map[string]attr, caps *Capabilities, k string) (attr, *Error) {
	if caps == nil || k == "transition" { // the bridge takes transition for every light, exposed or not
		a, ok := schema[k]
		if !ok {
			if why, ok := reportedOnly[k]; ok {
				return attr{}, reject(ReasonUnknownAttribute, "%s", why)
			}
			return attr{}, reject(ReasonUnknownAttribute, "%s has no attribute %q (known: %s)", c, k, strings.Join(sortedKeys(schema), ", "))
		}
		return a, nil
	}
	p, ok := caps.Property(k)
	if !ok {
		if why, ok := reportedOnly[k]; ok {
			return attr{}, reject(ReasonUnknownAttribute, "%s", why)
		}
		return attr{}, reject(ReasonUnknownAttribute, "%s has no attribute %q that a %s command can set (settable: %s)", caps.name(), k, c, strings.Join(caps.Settable(c), ", "))
	}
	a, ok := schema[p.Base]
	if !ok {
		return attr{}, reject(ReasonUnknownAttribute, "%s has %q, but Hearth does not carry it in %s commands (known: %s)", caps.name(), k, c, strings.Join(sortedKeys(schema), ", "))
	}
	if !p.Access.Has(AccessSet) {
		return attr{}, reject(ReasonUnknownAttribute, "%s cannot set %q (its access is %s)", caps.name(), k, p.Access)
	}
	return a.narrow(p), nil
}

// narrow returns a with the device's range or values.
func (a attr) narrow(p Property) attr {
	switch {
	case a.color:
	case a.enum != nil && p.Kind == KindEnum && len(p.Values) > 0:
		a.enum = p.Values
	case a.enum != nil && p.Kind == KindBinary:
		on, ok1 := p.ValueOn.(string)
		off, ok2 := p.ValueOff.(string)
		if ok1 && ok2 {
			a.enum = []string{on, off}
		}
	case a.enum == nil && p.Kind == KindNumeric:
		if p.HasMin {
			a.min = p.Min
		}
		if p.HasMax {
			a.max = p.Max
		}
		if a.clampTop != 0 && a.max != 254 {
			a.clampTop = 0 // 255 is Home Assistant's top only on the 0–254 scale
		}
	}
	return a
}

func (a attr) canonical(name string, v any) (any, *Error) {
	if a.color {
		m, err := canonicalColor(v)
		if err != nil {
			return nil, err
		}
		return m, nil
	}
	if a.enum != nil {
		s, ok := v.(string)
		if !ok {
			return nil, reject(ReasonInvalidValue, "%s must be one of %s, got %s", name, strings.Join(a.enum, ", "), show(v))
		}
		u := strings.TrimSpace(s)
		for _, e := range a.enum {
			if strings.EqualFold(u, e) {
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
	if (f < a.min || f > a.max) && (a.clampTop == 0 || f != a.clampTop) {
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

// Satisfied reports whether a reported state shows every state attribute
// of target, for a device of class c whose capabilities are unknown: it is
// SatisfiedBy with nil capabilities.
func Satisfied(c Class, target Target, state map[string]any) bool {
	return SatisfiedBy(c, nil, target, state)
}

// SatisfiedBy reports whether a reported state shows every state attribute
// of target, for a device of class c whose capabilities are caps (nil:
// unknown). Parameters (transition, effect) are not compared. Strings
// compare without regard to case, numbers by value, a light's color in
// CIE 1931 xy within ColorTolerance (see ColorXY).
//
// A number is compared after the device's own clamping and rounding:
// the target is clamped to the attribute's range (the device's
// value_min–value_max when known, else the class's: brightness 255 is
// confirmed by 254), and, when the device's capabilities are known, a
// report within one value_step of it confirms it; a numeric property
// without value_step whose class attribute is whole (brightness,
// color_temp, position) has step 1, so brightness 1 reported as 2 confirms.
// Without capabilities the match is exact.
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
func SatisfiedBy(c Class, caps *Capabilities, target Target, state map[string]any) bool {
	for _, k := range target.Attributes() {
		if !attributeSatisfied(c, caps, k, target[k], state) {
			return false
		}
	}
	return true
}

func attributeSatisfied(c Class, caps *Capabilities, name string, want any, state map[string]any) bool {
	base := name
	p, known := caps.Property(name)
	if known {
		base = p.Base
	}
	switch {
	case c == Lock && base == "state":
		s, ok := state["lock_state"].(string) // anything but a known word is unknown: never locked, never unlocked
		return ok && ((want == "LOCK" && strings.EqualFold(s, "locked")) || (want == "UNLOCK" && strings.EqualFold(s, "unlocked")))
	case c == Light && base == "brightness":
		// Zigbee2MQTT turns a light off for brightness 0, and many bulbs
		// then report state OFF with their last level kept.
		if w, ok := number(want); ok && w == 0 {
			if s, ok := state["state"].(string); ok && strings.EqualFold(s, "OFF") {
				return true
			}
		}
	case c == Light && base == "color":
		return colorSatisfied(want, state[name])
	case c == Cover && base == "state":
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
	if !ok {
		return false
	}
	w, isNum := number(want)
	if !isNum {
		return equal(got, want)
	}
	g, ok := number(got)
	if !ok {
		return false
	}
	a := schemas[c][base]
	if known {
		a = a.narrow(p)
	}
	if a.enum == nil && !a.color && a.max > a.min {
		w = min(max(w, a.min), a.max)
	}
	// The device rounds to its value_step: a report within half a step
	// is the target rounded (a whole step away is the neighbouring value,
	// such as a valve's old setpoint). Whole numbers without a step are
	// off by one where a dimmer's lowest levels round (brightness 1
	// reported as 2), never at the ends of the range: a cover at 1 % is
	// not closed.
	tolerance := 0.0
	if known && p.Kind == KindNumeric {
		switch {
		case p.Step > 0:
			tolerance = p.Step / 2
		case a.integer && w != a.min && w != a.max:
			tolerance = 1
		}
	}
	return math.Abs(g-w) <= tolerance*(1+1e-9)
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
