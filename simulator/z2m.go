package simulator

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Device classes the simulator plays, named as in Hearth's configuration.
const (
	ClassLight  = "light"
	ClassSwitch = "switch"
	ClassLock   = "lock"
	ClassCover  = "cover"
)

// DefaultBaseTopic is Zigbee2MQTT's default base topic.
const DefaultBaseTopic = "zigbee2mqtt"

// Attribute ranges from Zigbee2MQTT's exposes.
const (
	maxBrightness = 254
	minColorTemp  = 150
	maxColorTemp  = 500
	maxPercent    = 100
	// initialColorTemp is a neutral white, reported until a set changes it.
	initialColorTemp = 250
)

// Payloads of the bridge and availability topics.
var (
	payloadOnline  = []byte(`{"state":"online"}`)
	payloadOffline = []byte(`{"state":"offline"}`)
)

func availabilityPayload(online bool) []byte {
	if online {
		return payloadOnline
	}
	return payloadOffline
}

// errMalformed reports a payload that is neither a JSON object nor a plain string.
var errMalformed = errors.New("payload is neither a JSON object nor a plain string")

// parsePayload decodes a set or get payload as Zigbee2MQTT accepts it: a JSON
// object of attributes, or a plain string that is taken as the "state"
// attribute ("ON", "lock"). Anything that looks like JSON but is not an
// object, and an empty payload, is malformed.
func parsePayload(p []byte) (map[string]any, error) {
	p = bytes.TrimSpace(p)
	if len(p) == 0 {
		return nil, fmt.Errorf("%w: empty", errMalformed)
	}
	switch p[0] {
	case '"':
		// A JSON string ("ON" with its quotes) is a plain string too.
		var state string
		if err := json.Unmarshal(p, &state); err != nil {
			return nil, fmt.Errorf("%w: %v", errMalformed, err)
		}
		return map[string]any{"state": state}, nil
	case '{', '[':
		var attrs map[string]any
		if err := json.Unmarshal(p, &attrs); err != nil {
			return nil, fmt.Errorf("%w: %v", errMalformed, err)
		}
		if attrs == nil {
			return nil, fmt.Errorf("%w: not an object", errMalformed)
		}
		return attrs, nil
	}
	if json.Valid(p) {
		// A bare number, true, false or null: JSON, but not an object.
		return nil, fmt.Errorf("%w: not an object", errMalformed)
	}
	return map[string]any{"state": string(p)}, nil
}

// knownClass reports whether class is one the simulator plays.
func knownClass(class string) bool {
	switch class {
	case ClassLight, ClassSwitch, ClassLock, ClassCover:
		return true
	}
	return false
}

// initialState is a device's state when the simulator starts: lights and
// switches off, locks locked, covers closed.
func initialState(class string) map[string]any {
	switch class {
	case ClassLight:
		return map[string]any{"state": "OFF", "brightness": 0, "color_temp": initialColorTemp}
	case ClassSwitch:
		return map[string]any{"state": "OFF"}
	case ClassLock:
		return map[string]any{"state": "LOCK", "lock_state": "locked"}
	case ClassCover:
		return map[string]any{"state": "CLOSE", "position": 0, "tilt": 0}
	}
	return map[string]any{}
}

// apply applies the attributes of a set to st, a device state of the given
// class, with Zigbee2MQTT's semantics. It returns how many attributes were
// valid and a sorted list of problems (unknown attributes, invalid values),
// which Z2M would log as errors and otherwise ignore. attrs is not modified.
func apply(class string, st, attrs map[string]any) (valid int, problems []string) {
	a := applier{st: st, attrs: attrs, seen: map[string]bool{}}
	switch class {
	case ClassLight:
		a.light()
	case ClassSwitch:
		a.onOff(nil)
	case ClassLock:
		a.lock()
	case ClassCover:
		a.cover()
	}
	for k := range attrs {
		if !a.seen[k] {
			a.problems = append(a.problems, fmt.Sprintf("unknown attribute %q for a %s", k, class))
		}
	}
	sort.Strings(a.problems)
	return a.valid, a.problems
}

// applier holds one set being applied.
type applier struct {
	st, attrs map[string]any
	seen      map[string]bool
	valid     int
	problems  []string
}

// str returns attribute k as an upper-case string.
func (a *applier) str(k string) (string, bool) {
	v, ok := a.attrs[k]
	if !ok {
		return "", false
	}
	a.seen[k] = true
	s, ok := v.(string)
	if !ok {
		a.invalid(k, v)
		return "", false
	}
	return strings.ToUpper(strings.TrimSpace(s)), true
}

// num returns attribute k as an integer clamped to [lo, hi].
func (a *applier) num(k string, lo, hi int) (int, bool) {
	v, ok := a.attrs[k]
	if !ok {
		return 0, false
	}
	a.seen[k] = true
	f, ok := v.(float64)
	if !ok {
		a.invalid(k, v)
		return 0, false
	}
	f = math.Round(f)
	switch {
	case f < float64(lo):
		return lo, true
	case f > float64(hi):
		return hi, true
	}
	return int(f), true
}

func (a *applier) invalid(k string, v any) {
	a.problems = append(a.problems, fmt.Sprintf("invalid value %v for %q", v, k))
}

// onOff applies state ON/OFF/TOGGLE; turnedOn, if not nil, runs when the
// state becomes ON.
func (a *applier) onOff(turnedOn func()) {
	s, ok := a.str("state")
	if !ok {
		return
	}
	if s == "TOGGLE" {
		s = "ON"
		if a.st["state"] == "ON" {
			s = "OFF"
		}
	}
	switch s {
	case "ON":
		a.st["state"] = "ON"
		if turnedOn != nil {
			turnedOn()
		}
	case "OFF":
		a.st["state"] = "OFF"
	default:
		a.invalid("state", a.attrs["state"])
		return
	}
	a.valid++
}

func (a *applier) light() {
	if n, ok := a.num("brightness", 0, maxBrightness); ok {
		a.valid++
		if n == 0 {
			a.st["state"] = "OFF" // the bulb keeps its last level
		} else {
			a.st["brightness"] = n
			a.st["state"] = "ON"
		}
	}
	if n, ok := a.num("color_temp", minColorTemp, maxColorTemp); ok {
		a.valid++
		a.st["color_temp"] = n
	}
	a.onOff(func() {
		if a.st["brightness"] == 0 {
			a.st["brightness"] = maxBrightness
		}
	})
}

func (a *applier) lock() {
	s, ok := a.str("state")
	if !ok {
		return
	}
	switch s {
	case "LOCK":
		a.st["state"], a.st["lock_state"] = "LOCK", "locked"
	case "UNLOCK":
		a.st["state"], a.st["lock_state"] = "UNLOCK", "unlocked"
	default:
		a.invalid("state", a.attrs["state"])
		return
	}
	a.valid++
}

func (a *applier) cover() {
	if s, ok := a.str("state"); ok {
		switch s {
		case "OPEN":
			a.st["state"], a.st["position"] = "OPEN", maxPercent
			a.valid++
		case "CLOSE":
			a.st["state"], a.st["position"] = "CLOSE", 0
			a.valid++
		case "STOP":
			a.valid++ // the cover is not moving in the sim: nothing changes
		default:
			a.invalid("state", a.attrs["state"])
		}
	}
	if n, ok := a.num("position", 0, maxPercent); ok {
		a.valid++
		a.st["position"] = n
		if n > 0 {
			a.st["state"] = "OPEN"
		} else {
			a.st["state"] = "CLOSE"
		}
	}
	if n, ok := a.num("tilt", 0, maxPercent); ok {
		a.valid++
		a.st["tilt"] = n
	}
}

// commandTopic splits a topic under base into a friendly name and a verb,
// "set" or "get". Friendly names may contain "/", so the verb is the last
// segment and the name everything between base and the verb.
func commandTopic(base, topic string) (name, verb string, ok bool) {
	rest, ok := strings.CutPrefix(topic, base+"/")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 {
		return "", "", false
	}
	name, verb = rest[:i], rest[i+1:]
	if verb != "set" && verb != "get" {
		return "", "", false
	}
	return name, verb, true
}

// checkTopicName checks a base topic or friendly name: not empty, no MQTT
// wildcards, no empty level.
func checkTopicName(s string) error {
	switch {
	case s == "":
		return errors.New("is empty")
	case strings.ContainsAny(s, "+#\x00"):
		return errors.New("contains an MQTT wildcard or NUL")
	case strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") || strings.Contains(s, "//"):
		return errors.New("has an empty topic level")
	}
	return nil
}

// checkFriendlyName adds Zigbee2MQTT's reserved names to checkTopicName: a
// friendly name must not start with "bridge" as a level nor end with a level
// that the sim reads as a command or availability topic.
func checkFriendlyName(s string) error {
	if err := checkTopicName(s); err != nil {
		return err
	}
	levels := strings.Split(s, "/")
	if levels[0] == "bridge" {
		return errors.New(`"bridge" is reserved for the bridge's own topics`)
	}
	switch levels[len(levels)-1] {
	case "set", "get", "availability":
		return fmt.Errorf("must not end with %q", "/"+levels[len(levels)-1])
	}
	return nil
}

// loggingTopic is where Zigbee2MQTT publishes its log lines, under its
// base topic (lib/extension/bridge.ts).
const loggingTopic = "bridge/logging"

// publishFailure is the bridge/logging payload of a failed publish, as
// Zigbee2MQTT's lib/extension/publish.ts logs it at level error:
// {"level":"error","message":"Publish '<type>' '<key>' to '<name>'
// failed: '<error>'","namespace":"z2m"}.
func publishFailure(typ, key, name, reason string) []byte {
	p, err := json.Marshal(map[string]string{
		"level":     "error",
		"message":   "Publish '" + typ + "' '" + key + "' to '" + name + "' failed: '" + reason + "'",
		"namespace": "z2m",
	})
	if err != nil {
		panic("simulator: log line does not encode: " + err.Error()) // strings only
	}
	return p
}
