package devices

import (
	"slices"
	"strings"
)

// Actions are the words in which a principal is granted commands
// (Grants); Action derives one from a command's target.
const (
	ActionLock   = "lock"
	ActionUnlock = "unlock"
	ActionOpen   = "open"
	ActionClose  = "close"
	ActionStop   = "stop"
	ActionOn     = "on"
	ActionOff    = "off"
	ActionArm    = "arm"
	ActionDisarm = "disarm"
	// ActionSet is any command that names no direction: a light's
	// brightness alone, a thermostat's setpoint.
	ActionSet = "set"
	// ActionAny in a grant allows every action.
	ActionAny = "*"
)

// Action returns the action target asks of d, in the words of Grants:
//
//   - a lock: lock or unlock (state LOCK, UNLOCK);
//   - a cover: open (state OPEN, or a position above 0), close (state
//     CLOSE, or position 0), stop;
//   - a valve: open (OPEN or ON), close (CLOSE or OFF);
//   - an alarm: disarm (DISARM, DISARMED), arm (any ARM_* state);
//   - any other class: on or off by its state, else set.
//
// A target with no direction (no state) is set.
func Action(d Device, target Target) string {
	state, _ := target["state"].(string)
	state = strings.ToUpper(state)
	switch d.Class {
	case Lock:
		switch state {
		case "LOCK":
			return ActionLock
		case "UNLOCK":
			return ActionUnlock
		}
	case Cover:
		// A target that names both is named by what it may do at worst:
		// {"state":"CLOSE","position":100} opens the door, as Risky says.
		p, hasPosition := number(target["position"])
		switch {
		case state == "OPEN" || (hasPosition && p > 0):
			return ActionOpen
		case state == "CLOSE" || hasPosition:
			return ActionClose
		case state == "STOP":
			return ActionStop
		}
	case Valve:
		switch state {
		case "OPEN", "ON":
			return ActionOpen
		case "CLOSE", "OFF":
			return ActionClose
		}
	case Alarm:
		switch {
		case state == "DISARM" || state == "DISARMED":
			return ActionDisarm
		case strings.HasPrefix(state, "ARM"):
			return ActionArm
		}
	default:
		switch state {
		case "ON":
			return ActionOn
		case "OFF":
			return ActionOff
		}
	}
	return ActionSet
}

// Grants is what one principal may command: device ID, or "*" for every
// device, → the actions allowed on it (Action's words, or ActionAny). A
// device's own entry, when present, replaces the "*" entry for it, so that
// {"*": ["*"], "front_door": ["lock"]} allows everything except unlocking
// the front door.
type Grants map[string][]string

// Allows reports whether g allows action on the device with that ID.
func (g Grants) Allows(device, action string) bool {
	actions, ok := g[device]
	if !ok {
		actions = g[ActionAny]
	}
	return slices.Contains(actions, ActionAny) || slices.Contains(actions, action)
}
