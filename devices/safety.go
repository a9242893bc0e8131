package devices

import "strings"

// Safety is a device's safety level, as configured (the device's safety
// key): Critical marks a device whose class is not safety-critical by
// itself, such as a garage door on a cover, as one.
type Safety string

// Safety levels.
const (
	// SafetyNormal is the default: the class decides (Class.SafetyCritical).
	SafetyNormal Safety = ""
	// SafetyCritical makes every command to the device safety-critical.
	SafetyCritical Safety = "critical"
)

// SafetyCritical reports whether commands to d guard people or property:
// its class is safety-critical (lock, alarm, valve) or it is configured
// safety: critical (a garage door on a cover).
func (d Device) SafetyCritical() bool {
	return d.Safety == SafetyCritical || d.Class.SafetyCritical()
}

// Risky reports whether target asks d to move in its risky direction
// (DESIGN.md principle 6, issue 5 item 1), the direction whose every
// attempt is preceded by a fresh read of the device's state:
//
//   - a lock: state UNLOCK;
//   - a safety-critical cover (a garage door): state OPEN, or a position
//     above 0 (any opening);
//   - a valve: state OPEN or ON (opening it);
//   - an alarm: state DISARM (or DISARMED).
//
// Commands in the safe direction (LOCK, CLOSE, position 0, closing a valve,
// arming an alarm), and every command to a device that is not
// safety-critical, are not risky. Valves and alarms take no commands yet;
// their rule is defined so that it holds when they do.
func Risky(d Device, target Target) bool {
	if !d.SafetyCritical() {
		return false
	}
	state, _ := target["state"].(string)
	state = strings.ToUpper(state)
	switch d.Class {
	case Lock:
		return state == "UNLOCK"
	case Cover:
		if state == "OPEN" {
			return true
		}
		p, ok := number(target["position"])
		return ok && p > 0
	case Valve:
		return state == "OPEN" || state == "ON"
	case Alarm:
		return state == "DISARM" || state == "DISARMED"
	}
	return false
}

// Reading is what a fresh state report says about the attributes of a
// target, before a risky attempt (see Assess).
type Reading int

// Readings, from least to most informative.
const (
	// ReadingNone: the report names none of the target's attributes, or
	// not all of them; it neither allows nor forbids an attempt.
	ReadingNone Reading = iota
	// ReadingInvalid: the report names one of them with a value that is
	// no known state (a lock_state of jammed, not_fully_locked or null;
	// a null or malformed position): the state is unknown, which is
	// never taken as unlocked or open.
	ReadingInvalid
	// ReadingKnown: the report shows a valid value for every attribute
	// of the target.
	ReadingKnown
)

// String returns "none", "invalid" or "known".
func (r Reading) String() string {
	switch r {
	case ReadingInvalid:
		return "invalid"
	case ReadingKnown:
		return "known"
	}
	return "none"
}

// Assess says what state, a device's reported state, shows about the
// attributes of target for a device of class c: whether it knows their
// current values. A lock is read by Zigbee2MQTT's lock_state only (locked
// and unlocked are the known states); its state alone reads nothing. A cover's OPEN/CLOSE is read by its position (a
// number) when reported, else by its state (OPEN or CLOSE). Any other
// attribute is known when it is reported as a string or a number.
func Assess(c Class, target Target, state map[string]any) Reading {
	known := 0
	attrs := target.Attributes()
	for _, k := range attrs {
		switch r := assessAttribute(c, k, state); r {
		case ReadingInvalid:
			return ReadingInvalid
		case ReadingKnown:
			known++
		}
	}
	if len(attrs) > 0 && known == len(attrs) {
		return ReadingKnown
	}
	return ReadingNone
}

func assessAttribute(c Class, name string, state map[string]any) Reading {
	word := func(v any, words ...string) Reading {
		s, ok := v.(string)
		if !ok {
			return ReadingInvalid
		}
		for _, w := range words {
			if strings.EqualFold(s, w) {
				return ReadingKnown
			}
		}
		return ReadingInvalid
	}
	switch {
	case c == Lock && name == "state":
		if ls, ok := state["lock_state"]; ok {
			return word(ls, "locked", "unlocked")
		}
		return ReadingNone // state alone is an echo, not a reading
	case c == Cover && name == "state":
		if p, ok := state["position"]; ok {
			if _, isNumber := number(p); isNumber {
				return ReadingKnown
			}
			return ReadingInvalid
		}
		if s, ok := state["state"]; ok {
			return word(s, "OPEN", "CLOSE")
		}
		return ReadingNone
	}
	v, ok := state[name]
	if !ok {
		return ReadingNone
	}
	if _, isNumber := number(v); isNumber {
		return ReadingKnown
	}
	if s, isString := v.(string); isString && s != "" {
		return ReadingKnown
	}
	return ReadingInvalid
}

// Fault returns what a report of a device of class c says went wrong, and
// true, when it shows the device unable to reach any target: a lock whose
// lock_state is jammed, not_fully_locked or error. A command that meets a
// fault after its send ends failed/jammed with no automatic retry: trying
// a jammed bolt again does not free it, and a person must look.
func Fault(c Class, state map[string]any) (string, bool) {
	if c != Lock {
		return "", false
	}
	ls, _ := state["lock_state"].(string)
	switch strings.ToLower(ls) {
	case "jammed", "not_fully_locked", "error":
		return "lock_state " + ls, true
	}
	return "", false
}

// SafeEndpoints returns an *Error (unsupported) when target names an
// endpoint's property ("state_l1", "position_left", as the device's
// capabilities describe them) of a safety-critical device d, nil
// otherwise. Hearth's safety rules (Risky, Action, the lock_state
// confirmation, the fresh read) read a device's own state and position;
// an endpoint's moves past them, so a safety-critical device's endpoints
// are not addressable: configure each as a device of its own where its
// bridge allows it.
func SafeEndpoints(d Device, caps *Capabilities, target Target) error {
	if !d.SafetyCritical() || caps == nil {
		return nil
	}
	for _, k := range target.Attributes() {
		if p, ok := caps.Property(k); ok && p.Endpoint != "" {
			return reject(ReasonUnsupported, "%s is endpoint %s's %s: a safety-critical device's endpoints are not addressable, since its safety checks read its own state and position", k, p.Endpoint, p.Base)
		}
	}
	return nil
}

// NotCarriedOut reports whether op, a command to d that ended, is a
// safety-critical command not carried out, which a person must be told
// of: d is safety-critical, and op failed or expired, or was rejected
// unauthorized or stale_command.
func NotCarriedOut(d Device, op Op) bool {
	if !d.SafetyCritical() {
		return false
	}
	switch {
	case op.Status == Failed, op.Status == Expired:
		return true
	case op.Status == Rejected && (op.Reason == ReasonUnauthorized || op.Reason == ReasonStaleCommand):
		return true
	}
	return false
}
