package tasmota

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/hearthd/hearth/devices"
)

// Command is one Tasmota command: published on cmnd/<topic>/<Name> with
// Payload as its plain parameter.
type Command struct {
	Name    string
	Payload string
}

// Range of Tasmota's CT command: 153 (cold) to 500 (warm) mireds
// (Commands, "CT": https://tasmota.github.io/docs/Commands/#ct).
const (
	MinCT = 153
	MaxCT = 500
)

// permanentError is a target Tasmota cannot carry out: nothing is sent,
// and the command is not retried.
type permanentError struct{ msg string }

func (e permanentError) Error() string   { return "tasmota: " + e.msg }
func (e permanentError) Permanent() bool { return true }

func permanent(format string, args ...any) error {
	return permanentError{fmt.Sprintf(format, args...)}
}

// Encode returns the commands that carry target to a device of class c at
// addr, in the order they must be sent, each absolute (ON, OFF, a level):
//
//   - switch: state → POWER<n> ON|OFF ("POWER" without an index);
//   - light: state → POWER ON|OFF, brightness B (0–254, 255 taken as 254)
//     → Dimmer round(B·100/254), at least 1 for B above 0, color_temp →
//     CT (153–500 mireds). State ON goes first, so that a Dimmer or CT
//     reaches a light that is on even with SetOption20 (which keeps a
//     Dimmer from turning it on). transition is not sent: Tasmota's Fade
//     and Speed are the device's settings, not a command's;
//   - cover: position P → ShutterPosition<n> P, state OPEN → 100 and
//     CLOSE → 0.
//
// A target Tasmota cannot carry (a light's color or effect, a brightness
// with state OFF, whose Dimmer would turn the light back on, a CT outside
// 153–500, a cover's STOP or tilt, a class other than these) is an error
// whose Permanent method returns true.
func Encode(c devices.Class, addr Address, target devices.Target) ([]Command, error) {
	n := ""
	if addr.Index > 0 {
		n = strconv.Itoa(addr.Index)
	}
	var out []Command
	switch c {
	case devices.Switch:
		s, ok := onOff(target["state"])
		if !ok {
			return nil, permanent("a switch takes state ON or OFF, got %v", target["state"])
		}
		out = append(out, Command{"POWER" + n, s})
	case devices.Light:
		for _, k := range target.Attributes() {
			switch k {
			case "state", "brightness", "color_temp":
			default:
				return nil, permanent("a Tasmota light takes state, brightness and color_temp; not %s", k)
			}
		}
		s, hasState := onOff(target["state"])
		if target["state"] != nil && !hasState {
			return nil, permanent("a light takes state ON or OFF, got %v", target["state"])
		}
		b, hasB := number(target["brightness"])
		if hasState && s == "OFF" && (hasB || target["color_temp"] != nil) {
			return nil, permanent("state OFF with a brightness or color_temp: Tasmota's Dimmer and CT turn the light on again; send state OFF alone")
		}
		if hasState {
			out = append(out, Command{"POWER", s})
		}
		if hasB {
			out = append(out, Command{"Dimmer", strconv.Itoa(DimmerOf(b))})
		}
		if v := target["color_temp"]; v != nil {
			ct, ok := number(v)
			if !ok || ct < MinCT || ct > MaxCT || ct != math.Trunc(ct) {
				return nil, permanent("color_temp %v is outside Tasmota's CT range %d–%d mireds", v, MinCT, MaxCT)
			}
			out = append(out, Command{"CT", strconv.Itoa(int(ct))})
		}
	case devices.Cover:
		if _, ok := target["tilt"]; ok {
			return nil, permanent("Hearth does not carry a shutter's tilt to Tasmota")
		}
		pos, hasPos := number(target["position"])
		switch target["state"] {
		case nil:
		case "OPEN":
			pos, hasPos = 100, true
		case "CLOSE":
			pos, hasPos = 0, true
		default:
			return nil, permanent("a shutter takes a position, OPEN or CLOSE; %v is no absolute state", target["state"])
		}
		if !hasPos || pos < 0 || pos > 100 {
			return nil, permanent("a shutter takes a position from 0 to 100, got %v", target["position"])
		}
		if n == "" {
			n = "1"
		}
		out = append(out, Command{"ShutterPosition" + n, strconv.Itoa(int(math.Round(pos)))})
	default:
		return nil, permanent("Hearth carries switches, lights and covers to Tasmota, not a %s", c)
	}
	if len(out) == 0 {
		return nil, permanent("nothing in the target that Tasmota takes")
	}
	return out, nil
}

// ReadCommand is the query that makes a device of class c at addr publish
// the state that confirms its commands, with an empty payload, Tasmota's
// query form ("an empty message/payload sends a status query", MQTT,
// "Commands over MQTT"): POWER<n> for a switch, State for a light (its
// RESULT carries POWER, Dimmer and CT), and Status 10 for a cover
// (payload "10": its STATUS10 carries StatusSNS with each Shutter<n>).
func ReadCommand(c devices.Class, addr Address) Command {
	switch c {
	case devices.Switch:
		if addr.Index > 0 {
			return Command{"POWER" + strconv.Itoa(addr.Index), ""}
		}
		return Command{"POWER", ""}
	case devices.Cover:
		return Command{"Status", "10"}
	}
	return Command{"State", ""}
}

// DimmerOf is the Dimmer (0–100) of a brightness (0–254, 255 as 254):
// round(B·100/254), at least 1 for a brightness above 0.
func DimmerOf(b float64) int {
	b = math.Min(math.Max(b, 0), 254)
	d := int(math.Round(b * 100 / 254))
	if d == 0 && b > 0 {
		d = 1
	}
	return d
}

// BrightnessOf is the brightness (0–254) of a Dimmer (0–100):
// round(D·254/100).
func BrightnessOf(d int) int { return int(math.Round(float64(d) * 254 / 100)) }

// Decode reads one message a Tasmota device published, on the topic whose
// prefix is stat or tele and whose last level is cmd, for the Hearth
// device of class c at index (0 as 1) of that device, into Hearth's
// normalized state:
//
//   - a JSON object (stat/RESULT, stat/<COMMAND> with SetOption4,
//     stat/STATE, tele/STATE, tele/SENSOR, stat/STATUS10's StatusSNS and
//     STATUS11's StatusSTS): "POWER<n>" (and "POWER" for index 1) ON|OFF
//     → state; for a light "POWER" → state, "Dimmer" → brightness
//     (BrightnessOf), "CT" → color_temp; for a cover "Shutter<n>"'s
//     "Position" P → {"position":P,"state":"OPEN"|"CLOSE"} (OPEN above
//     0, as Zigbee2MQTT reports a cover);
//   - a plain payload on stat/POWER<n> (ON|OFF) → state, on
//     stat/SHUTTER<n> (a number) → position.
//
// Keys that echo a command's own parameter ({"ShutterPosition1":50},
// {"ShutterOpen1":100}) say what the device was told, not where it is,
// and are never read. ok is false for a payload that is neither an
// object nor one of those plain forms; a readable message with nothing of
// this device decodes to an empty state with ok true (the device spoke).
func Decode(c devices.Class, index int, cmd string, payload []byte) (state map[string]any, ok bool) {
	if index == 0 {
		index = 1
	}
	n := strconv.Itoa(index)
	p := bytes.TrimSpace(payload)
	state = map[string]any{}
	if len(p) > 0 && p[0] == '{' {
		var obj map[string]json.RawMessage
		if json.Unmarshal(p, &obj) != nil || obj == nil {
			return nil, false
		}
		for _, nested := range []string{"StatusSTS", "StatusSNS"} {
			if raw, ok := lookup(obj, nested); ok {
				var inner map[string]json.RawMessage
				if json.Unmarshal(raw, &inner) == nil {
					decodeObject(c, n, inner, state)
				}
			}
		}
		decodeObject(c, n, obj, state)
		return state, true
	}
	word := strings.ToUpper(cmd)
	switch {
	case word == "POWER"+n || (index == 1 && word == "POWER"):
		if c == devices.Cover {
			return state, true // a shutter's relay, not its position
		}
		s, ok := onOff(string(p))
		if !ok {
			return nil, false
		}
		state["state"] = s
	case word == "SHUTTER"+n && c == devices.Cover:
		pos, err := strconv.ParseFloat(string(p), 64)
		if err != nil || pos < 0 || pos > 100 || pos != math.Trunc(pos) {
			return nil, false
		}
		coverState(state, pos)
	case strings.HasPrefix(word, "POWER") || strings.HasPrefix(word, "SHUTTER"):
		// Another relay's or shutter's plain report.
	default:
		return nil, false
	}
	return state, true
}

func decodeObject(c devices.Class, n string, obj map[string]json.RawMessage, state map[string]any) {
	switch c {
	case devices.Switch, devices.Light:
		keys := []string{"POWER" + n}
		if n == "1" {
			keys = append(keys, "POWER")
		}
		for _, k := range keys {
			if raw, ok := obj[k]; ok {
				var s string
				if json.Unmarshal(raw, &s) == nil {
					if v, ok := onOff(s); ok {
						state["state"] = v
					}
				}
			}
		}
		if c != devices.Light {
			return
		}
		if d, ok := intIn(obj, "Dimmer", 0, 100); ok {
			state["brightness"] = float64(BrightnessOf(d))
		}
		if ct, ok := intIn(obj, "CT", MinCT, MaxCT); ok {
			state["color_temp"] = float64(ct)
		}
	case devices.Cover:
		raw, ok := lookup(obj, "Shutter"+n)
		if !ok {
			return
		}
		var sh map[string]json.RawMessage
		if json.Unmarshal(raw, &sh) != nil {
			return
		}
		if p, ok := intIn(sh, "Position", 0, 100); ok {
			coverState(state, float64(p))
		}
	}
}

func coverState(state map[string]any, pos float64) {
	state["position"] = pos
	if pos > 0 {
		state["state"] = "OPEN"
	} else {
		state["state"] = "CLOSE"
	}
}

// lookup finds key in obj, exactly or else without regard to case.
func lookup(obj map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	if v, ok := obj[key]; ok {
		return v, true
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys) // one answer for a payload with two spellings
	for _, k := range keys {
		if strings.EqualFold(k, key) {
			return obj[k], true
		}
	}
	return nil, false
}

// intIn reads obj[key] as a whole number within lo–hi.
func intIn(obj map[string]json.RawMessage, key string, lo, hi int) (int, bool) {
	raw, ok := lookup(obj, key)
	if !ok {
		return 0, false
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil || f != math.Trunc(f) || f < float64(lo) || f > float64(hi) {
		return 0, false
	}
	return int(f), true
}

// onOff reads Tasmota's power words ON and OFF, in any case.
func onOff(v any) (string, bool) {
	s, ok := v.(string)
	if !ok {
		return "", false
	}
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "ON":
		return "ON", true
	case "OFF":
		return "OFF", true
	}
	return "", false
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// parseLWT reads the payload of tele/<topic>/LWT: Online or Offline
// (Tasmota's MQTT_LWT_ONLINE and MQTT_LWT_OFFLINE), in any case.
func parseLWT(p []byte) (online, ok bool) {
	switch strings.ToLower(strings.TrimSpace(string(p))) {
	case "online":
		return true, true
	case "offline":
		return false, true
	}
	return false, false
}
