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
	// climateMin and climateMax bound a simulated TRV's setpoint, °C.
	climateMin, climateMax = 5.0, 30.0
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
	case ClassLight, ClassSwitch, ClassLock, ClassCover, ClassClimate:
		return true
	}
	return false
}

// initialState is a device's state when the simulator starts: lights and
// switches off, locks locked, covers closed, thermostats (a radiator
// valve, TRV) off at 20 °C.
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
	case ClassClimate:
		return map[string]any{"system_mode": "off", "current_heating_setpoint": 20.0, "local_temperature": 19.5, "preset": "manual"}
	}
	return map[string]any{}
}

// apply applies the attributes of a set to st, a device state of the given
// class, with Zigbee2MQTT's semantics. It returns how many attributes were
// valid and a sorted list of problems (unknown attributes, invalid values),
// which Z2M would log as errors and otherwise ignore. attrs is not modified.
func apply(class string, st, attrs map[string]any) (valid int, problems []string) {
	return applyWith(class, 0, st, attrs)
}

// applyWith is apply for a light whose lowest level above off is minLevel
// (0 means 1; see Device.MinLevel).
func applyWith(class string, minLevel int, st, attrs map[string]any) (valid int, problems []string) {
	a := applier{st: st, attrs: attrs, seen: map[string]bool{}, minLevel: max(minLevel, 1)}
	switch class {
	case ClassLight:
		a.light()
	case ClassSwitch:
		a.onOff(nil)
	case ClassLock:
		a.lock()
	case ClassCover:
		a.cover()
	case ClassClimate:
		a.climate()
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
	minLevel  int // a light's lowest level above off
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
			a.st["brightness"] = max(n, a.minLevel) // its dimmer goes no lower
			a.st["state"] = "ON"
		}
	}
	if n, ok := a.num("color_temp", minColorTemp, maxColorTemp); ok {
		a.valid++
		a.st["color_temp"] = n
	}
	if v, ok := a.attrs["color"]; ok {
		a.seen["color"] = true
		c, _ := v.(map[string]any)
		x, okx := c["x"].(float64)
		y, oky := c["y"].(float64)
		if okx && oky && x >= 0 && x <= 1 && y >= 0 && y <= 1 {
			// The bulb takes CIE xy and reports it as it stores it:
			// to 4 decimals (ZCL CurrentX/CurrentY are x·65536).
			a.st["color"] = map[string]any{"x": math.Round(x*10000) / 10000, "y": math.Round(y*10000) / 10000}
			a.st["color_mode"] = "xy"
			a.valid++
		} else {
			a.invalid("color", v) // this simulated bulb takes xy only
		}
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

// climate applies a radiator valve's (TRV's) system_mode, preset and
// heating setpoint, which it rounds to its 0.5 °C step and clamps to
// 5–30 °C as real ones do.
func (a *applier) climate() {
	if s, ok := a.str("system_mode"); ok {
		switch strings.ToLower(s) {
		case "off", "heat", "auto":
			a.st["system_mode"] = strings.ToLower(s)
			a.valid++
		default:
			a.invalid("system_mode", a.attrs["system_mode"])
		}
	}
	if s, ok := a.str("preset"); ok {
		switch strings.ToLower(s) {
		case "manual", "eco", "comfort", "boost":
			a.st["preset"] = strings.ToLower(s)
			a.valid++
		default:
			a.invalid("preset", a.attrs["preset"])
		}
	}
	if v, ok := a.attrs["current_heating_setpoint"]; ok {
		a.seen["current_heating_setpoint"] = true
		f, ok := v.(float64)
		if !ok {
			a.invalid("current_heating_setpoint", v)
			return
		}
		a.st["current_heating_setpoint"] = min(max(math.Round(f*2)/2, climateMin), climateMax)
		a.valid++
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

// bridgeDevices encodes the retained <base>/bridge/devices message of a
// bridge's devices, as Zigbee2MQTT publishes it at start ("MQTT Topics and
// Messages", zigbee2mqtt/bridge/devices): one entry per device with its
// definition's exposes, as zigbee-herdsman-converters writes a light
// (state, brightness 0–254, color_temp 150–500 mired), a switch (state), a
// lock (state LOCK/UNLOCK, lock_state published only) and a cover (state
// OPEN/CLOSE/STOP, position and tilt 0–100 %). Access bits: 1 published,
// 2 set, 4 get. Exposes give no value_step for brightness: a device whose
// dimmer rounds (Device.MinLevel) says nothing of it, as real ones do not.
func bridgeDevices(devs []*device) []byte {
	type entry struct {
		IEEEAddress  string         `json:"ieee_address"`
		FriendlyName string         `json:"friendly_name"`
		Type         string         `json:"type"`
		Supported    bool           `json:"supported"`
		Definition   map[string]any `json:"definition"`
	}
	binary := func(prop, on, off string) map[string]any {
		return map[string]any{"type": "binary", "name": prop, "property": prop, "access": 7, "value_on": on, "value_off": off}
	}
	numeric := func(prop string, lo, hi int, unit string) map[string]any {
		e := map[string]any{"type": "numeric", "name": prop, "property": prop, "access": 7, "value_min": lo, "value_max": hi}
		if unit != "" {
			e["unit"] = unit
		}
		return e
	}
	list := []entry{{IEEEAddress: "0x00124b0000000000", FriendlyName: "Coordinator", Type: "Coordinator"}}
	for i, d := range devs {
		var features []map[string]any
		typ := d.Class
		switch d.Class {
		case ClassLight:
			features = []map[string]any{binary("state", "ON", "OFF"), numeric("brightness", 0, maxBrightness, ""), numeric("color_temp", minColorTemp, maxColorTemp, "mired"),
				{"type": "composite", "name": "color_xy", "property": "color", "access": 7, "features": []map[string]any{
					{"type": "numeric", "name": "x", "property": "x", "access": 7}, {"type": "numeric", "name": "y", "property": "y", "access": 7}}}}
		case ClassSwitch:
			features = []map[string]any{binary("state", "ON", "OFF")}
		case ClassLock:
			features = []map[string]any{binary("state", "LOCK", "UNLOCK"),
				{"type": "enum", "name": "lock_state", "property": "lock_state", "access": 1, "values": []string{"not_fully_locked", "locked", "unlocked"}}}
		case ClassCover:
			features = []map[string]any{{"type": "enum", "name": "state", "property": "state", "access": 3, "values": []string{"OPEN", "CLOSE", "STOP"}},
				numeric("position", 0, maxPercent, "%"), numeric("tilt", 0, maxPercent, "%")}
		case ClassClimate:
			setpoint := numeric("current_heating_setpoint", int(climateMin), int(climateMax), "°C")
			setpoint["value_step"] = 0.5
			features = []map[string]any{setpoint,
				{"type": "numeric", "name": "local_temperature", "property": "local_temperature", "access": 5, "unit": "°C"},
				{"type": "enum", "name": "system_mode", "property": "system_mode", "access": 7, "values": []string{"off", "heat", "auto"}},
				{"type": "enum", "name": "preset", "property": "preset", "access": 7, "values": []string{"manual", "eco", "comfort", "boost"}}}
		}
		zigbeeType := "Router"
		if d.WakeInterval > 0 {
			zigbeeType = "EndDevice"
		}
		list = append(list, entry{
			IEEEAddress:  fmt.Sprintf("0x00158d00%08x", i+1),
			FriendlyName: d.Name,
			Type:         zigbeeType,
			Supported:    true,
			Definition: map[string]any{
				"model":       "SIM-" + strings.ToUpper(d.Class),
				"vendor":      "Hearth simulator",
				"description": "Simulated " + d.Class,
				"exposes":     []map[string]any{{"type": typ, "features": features}},
			},
		})
	}
	b, err := json.Marshal(list)
	if err != nil {
		panic(err) // maps of strings and numbers always encode
	}
	return b
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
