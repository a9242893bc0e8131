package esphome

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/hearthd/hearth/devices"
)

// Message is one command to publish: a topic below the node's prefix
// ("light/ceiling/command") and its payload.
type Message struct {
	Topic   string
	Payload string
}

// unsupportedError is a target ESPHome cannot carry: permanent.
type unsupportedError struct{ msg string }

func (e unsupportedError) Error() string   { return "esphome: " + e.msg }
func (e unsupportedError) Permanent() bool { return true }

// Encode maps target to the commands of the entity at a, as ESPHome's
// MQTT components read them (esphome/components/mqtt/mqtt_*.cpp):
//
//   - switch: "ON" or "OFF" on <component>/<id>/command;
//   - light (the JSON schema, light_json_schema.cpp): {"state":"ON",
//     "brightness":0–255,"transition":seconds}; Hearth's brightness 0–254
//     goes out as round(b·255/254), 0 as {"state":"OFF"};
//   - cover: "OPEN", "CLOSE" or "STOP" on command, a position 0–100 on
//     <id>/position/command;
//   - lock: "LOCK" or "UNLOCK".
//
// It never encodes TOGGLE, which ESPHome also takes. A target the class
// cannot carry is an error whose Permanent method returns true.
func Encode(a Address, t devices.Target) ([]Message, error) {
	allow := func(keys ...string) error {
		for k := range t {
			if !contains(keys, k) {
				return unsupportedError{fmt.Sprintf("an ESPHome %s has no attribute %q here", a.Component, k)}
			}
		}
		return nil
	}
	base := a.Component + "/" + a.ObjectID + "/"
	state, _ := t["state"].(string)
	state = strings.ToUpper(state)
	switch a.Component {
	case ComponentSwitch:
		if err := allow("state"); err != nil {
			return nil, err
		}
		if state != "ON" && state != "OFF" {
			return nil, unsupportedError{fmt.Sprintf("switch state %v: ON or OFF", t["state"])}
		}
		return []Message{{base + "command", state}}, nil
	case ComponentLight:
		if err := allow("state", "brightness", "transition"); err != nil {
			return nil, err
		}
		cmd := map[string]any{}
		b, hasB := number(t["brightness"])
		switch {
		case state == "OFF" || (hasB && b <= 0):
			cmd["state"] = "OFF"
		case hasB:
			cmd["state"], cmd["brightness"] = "ON", ToESPHome(b)
		case state == "ON":
			cmd["state"] = "ON"
		default:
			return nil, unsupportedError{"a light target needs state ON or OFF, or a brightness"}
		}
		if tr, ok := number(t["transition"]); ok && tr >= 0 {
			cmd["transition"] = tr
		}
		p, _ := json.Marshal(cmd)
		return []Message{{base + "command", string(p)}}, nil
	case ComponentCover:
		if err := allow("state", "position"); err != nil {
			return nil, err
		}
		if p, ok := number(t["position"]); ok {
			return []Message{{base + "position/command", strconv.Itoa(int(math.Round(max(0, min(100, p)))))}}, nil
		}
		switch state {
		case "OPEN", "CLOSE", "STOP":
			return []Message{{base + "command", state}}, nil
		}
		return nil, unsupportedError{fmt.Sprintf("cover target %v: state OPEN, CLOSE or STOP, or a position 0–100", map[string]any(t))}
	case ComponentLock:
		if err := allow("state"); err != nil {
			return nil, err
		}
		if state != "LOCK" && state != "UNLOCK" {
			return nil, unsupportedError{fmt.Sprintf("lock state %v: LOCK or UNLOCK", t["state"])}
		}
		return []Message{{base + "command", state}}, nil
	}
	return nil, unsupportedError{fmt.Sprintf("component %s takes no commands from Hearth", a.Component)}
}

// ToESPHome maps Hearth's brightness 0–254 to ESPHome's 0–255.
func ToESPHome(b float64) int {
	return int(math.Round(max(0, min(254, b)) * 255 / 254))
}

// FromESPHome maps ESPHome's brightness 0–255 to Hearth's 0–254.
func FromESPHome(e float64) float64 {
	return math.Round(max(0, min(255, e)) * 254 / 255)
}

// Topic kinds below an entity, as Split returns them.
const (
	SubState         = "state"
	SubCommand       = "command"
	SubPositionState = "position/state"
)

// Split reads a topic below the base topic: <node>/status (entity ""), or
// <node>/<component>/<object_id>/<sub>. ok is false for anything else.
func Split(rest string) (node string, entity Address, sub string, ok bool) {
	parts := strings.SplitN(rest, "/", 4)
	switch {
	case len(parts) == 2 && parts[1] == "status":
		return parts[0], Address{}, "status", true
	case len(parts) == 4:
		return parts[0], Address{Node: parts[0], Component: parts[1], ObjectID: parts[2]}, parts[3], true
	}
	return "", Address{}, "", false
}

// ParseStatus reads a node's <prefix>/status: "online" (its birth) or
// "offline" (its will, or its shutdown_message), ESPHome's defaults.
func ParseStatus(p []byte) (online, ok bool) {
	switch strings.TrimSpace(string(p)) {
	case "online":
		return true, true
	case "offline":
		return false, true
	}
	return false, false
}

// DecodeState maps a state payload of the component to Hearth's state:
//
//   - switch: ON/OFF → {"state":"ON"|"OFF"};
//   - light: the JSON schema's state and brightness (0–255, FromESPHome);
//   - cover: open/closed/opening/closing → {"state":"OPEN"|"CLOSE",
//     "moving":"STOP"|"UP"|"DOWN"}; closed is position 0; "unknown" says
//     nothing;
//   - lock: LOCKED/UNLOCKED → {"state":"LOCK"|"UNLOCK","lock_state":
//     "locked"|"unlocked"}; JAMMED, LOCKING, UNLOCKING, UNKNOWN →
//     {"lock_state":"jammed"|…} alone (no known bolt position).
//
// It returns an error for a payload the component does not publish.
func DecodeState(component string, p []byte) (map[string]any, error) {
	s := strings.TrimSpace(string(p))
	switch component {
	case ComponentSwitch:
		switch strings.ToUpper(s) {
		case "ON", "OFF":
			return map[string]any{"state": strings.ToUpper(s)}, nil
		}
	case ComponentLight:
		var v struct {
			State      *string  `json:"state"`
			Brightness *float64 `json:"brightness"`
		}
		if err := json.Unmarshal(p, &v); err != nil {
			return nil, fmt.Errorf("esphome: light state %q is not the JSON schema: %w", truncate(p), err)
		}
		out := map[string]any{}
		if v.State != nil {
			st := strings.ToUpper(*v.State)
			if st != "ON" && st != "OFF" {
				return nil, fmt.Errorf("esphome: light state %q: state %q is neither ON nor OFF", truncate(p), *v.State)
			}
			out["state"] = st
		}
		if v.Brightness != nil {
			if *v.Brightness < 0 || *v.Brightness > 255 {
				return nil, fmt.Errorf("esphome: light state %q: brightness outside 0–255", truncate(p))
			}
			out["brightness"] = FromESPHome(*v.Brightness)
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("esphome: light state %q has neither state nor brightness", truncate(p))
		}
		return out, nil
	case ComponentCover:
		switch s {
		case "open":
			return map[string]any{"state": "OPEN", "moving": "STOP"}, nil
		case "closed":
			return map[string]any{"state": "CLOSE", "moving": "STOP", "position": 0.0}, nil
		case "opening":
			return map[string]any{"moving": "UP"}, nil
		case "closing":
			return map[string]any{"moving": "DOWN"}, nil
		case "unknown":
			return map[string]any{}, nil
		}
	case ComponentLock:
		switch s {
		case "LOCKED":
			return map[string]any{"state": "LOCK", "lock_state": "locked"}, nil
		case "UNLOCKED":
			return map[string]any{"state": "UNLOCK", "lock_state": "unlocked"}, nil
		case "JAMMED", "LOCKING", "UNLOCKING", "UNKNOWN":
			return map[string]any{"lock_state": strings.ToLower(s)}, nil
		}
	default:
		return nil, fmt.Errorf("esphome: component %s is not read", component)
	}
	return nil, fmt.Errorf("esphome: %s state %q is not one ESPHome publishes", component, truncate(p))
}

// DecodePosition reads a cover's position/state: a whole percent 0–100
// (ESPHome rounds it), reported as {"position":p,"state":"OPEN"|"CLOSE"}
// (OPEN above 0).
func DecodePosition(p []byte) (map[string]any, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(string(p)), 64)
	if err != nil || math.IsNaN(v) || v < 0 || v > 100 {
		return nil, fmt.Errorf("esphome: cover position %q is not a number 0–100", truncate(p))
	}
	st := "CLOSE"
	if v > 0 {
		st = "OPEN"
	}
	return map[string]any{"position": v, "state": st}, nil
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, !math.IsNaN(n) && !math.IsInf(n, 0)
	case int:
		return float64(n), true
	}
	return 0, false
}

func truncate(p []byte) string {
	if len(p) > 120 {
		return string(p[:117]) + "..."
	}
	return string(p)
}
