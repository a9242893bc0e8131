package homeassistant

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/hearthd/hearth/devices"
)

// Config is one discovery message: publish Payload retained on Topic, QoS
// 1. An empty Payload removes the entity from Home Assistant.
type Config struct {
	Topic   string
	Payload []byte
}

// Device is what discovery needs to know of one configured device.
type Device struct {
	devices.Device
	// Name is what Home Assistant shows; "" means the device's ID.
	Name string
	// Breaker says the device's service has a circuit breaker, whose
	// retained state (<prefix>/services/<service>/state) then takes part
	// in the entities' availability: an open breaker makes them
	// unavailable.
	Breaker bool
	// Availability says Hearth mirrors the device's availability
	// (<prefix>/<device>/availability) because its bridge reports it:
	// it then takes part in the entities' availability. Zigbee2MQTT
	// reports availability only when its availability feature is on (off
	// by default), so a device whose mirror was never published must not
	// depend on it, or its entities would stay unavailable for ever.
	Availability bool
	// Bridge is the bridge's own description of the device, if known;
	// the zero value leaves Hearth's defaults of the class.
	Bridge Bridge
}

// Bridge is what the device's bridge says of it, for the device block and
// for the entity's features.
type Bridge struct {
	// Identifiers and Connections are those of the device as the bridge
	// announces it to Home Assistant itself (Zigbee2MQTT:
	// "zigbee2mqtt_<ieee_address>", its lib/extension/homeassistant.ts),
	// so that Home Assistant shows one device, with Hearth's entities
	// beside the bridge's, not two.
	Identifiers []string
	Connections [][2]string
	// Manufacturer and Model name the device (Zigbee2MQTT's definition
	// vendor and model).
	Manufacturer, Model string

	// ColorModes are a light's supported color modes in Home Assistant's
	// words ("color_temp", "xy", "hs", "rgb", "brightness", "onoff");
	// nil means "brightness".
	ColorModes []string
	// MinMireds and MaxMireds bound a light's color temperature; zero
	// leaves Home Assistant's defaults.
	MinMireds, MaxMireds int
	// Effects are a light's effects; nil offers none.
	Effects []string

	// Modes are a climate device's system modes ("off", "heat", "auto",
	// …); nil means off, heat and auto.
	Modes []string
	// Presets are its presets; nil offers none.
	Presets []string
	// Setpoint is the attribute of its target temperature; "" means
	// current_heating_setpoint (a radiator valve's, in Zigbee2MQTT).
	Setpoint string
	// MinTemp, MaxTemp and TempStep bound it, in °C; zero means 5, 35 and
	// 0.5.
	MinTemp, MaxTemp, TempStep float64

	// Tilt says a cover takes a tilt (0–100).
	Tilt bool

	// Readings are what a sensor (class sensor) reports and nobody sets:
	// each becomes a sensor or binary_sensor entity.
	Readings []Reading
}

// Reading is one read-only attribute of a sensor.
type Reading struct {
	// Name is the attribute in the device's state ("temperature").
	Name string
	// Binary says it is a binary one, whose On and Off values (true and
	// false, "ON" and "OFF") it reports.
	Binary  bool
	On, Off any
	// Unit is a numeric one's unit ("°C", "%").
	Unit string
}

// EventTypes are the event types of a device's command event entity: the
// terminal statuses of a command (DESIGN.md).
var EventTypes = []string{
	string(devices.Succeeded), string(devices.Failed), string(devices.Expired),
	string(devices.Rejected), string(devices.Superseded),
}

// opIDTemplate renders, in a Home Assistant command template, a fresh
// op_id for each command: "ha-" and the time in microseconds, then a
// random number below 100000 (the largest range Jinja2's sandbox, and so
// Home Assistant, allows), so that two presses never share one (a repeated
// delivery of one MQTT message keeps its op_id, and Hearth runs it once).
const opIDTemplate = `ha-{{ (now().timestamp() * 1000000) | int }}-{{ range(100000) | random }}`

// DeviceConfigs returns the discovery configs of dev: the entity of its
// class, when Home Assistant has one and the class takes commands, and
// its command event entity; for a sensor, a sensor or binary_sensor per
// reading its bridge describes (none while it describes none). An alarm
// or valve, which take no commands yet, gets none.
func (d Discovery) DeviceConfigs(dev Device) []Config {
	if dev.Class == devices.Sensor {
		var out []Config
		for _, r := range dev.Bridge.Readings {
			out = append(out, d.encode(dev, d.readingEntity(dev, r)))
		}
		return out
	}
	main := d.classEntity(dev)
	if main == nil {
		return nil
	}
	return []Config{d.encode(dev, main), d.encode(dev, d.eventEntity(dev))}
}

// entity is one entity's config: the component it is, its object ID and
// its keys, before the keys every entity shares.
type entity struct {
	component string
	object    string
	keys      map[string]any
}

func (d Discovery) classEntity(dev Device) *entity {
	set := d.topic(dev.ID, "set")
	mirror := d.topic(dev.ID, "")
	b := dev.Bridge
	switch dev.Class {
	case devices.Light:
		modes := b.ColorModes
		if len(modes) == 0 {
			modes = []string{"brightness"}
		}
		keys := map[string]any{
			"schema":                "json",
			"command_topic":         set,
			"state_topic":           mirror,
			"supported_color_modes": modes,
			// Zigbee2MQTT's brightness runs 0–254: Home Assistant
			// scales its own 0–255 to it.
			"brightness":       hasBrightness(modes),
			"brightness_scale": 254,
			"flash":            false,
		}
		if b.MinMireds > 0 && b.MaxMireds > b.MinMireds {
			keys["min_mireds"], keys["max_mireds"] = b.MinMireds, b.MaxMireds
		}
		if len(b.Effects) > 0 {
			keys["effect"], keys["effect_list"] = true, b.Effects
		}
		return &entity{"light", "light", keys}
	case devices.Switch:
		return &entity{"switch", "switch", map[string]any{
			"command_topic":    set,
			"command_template": commandTemplate(`"state":"{{ value }}"`),
			"payload_on":       "ON",
			"payload_off":      "OFF",
			"state_topic":      mirror,
			"value_template":   "{{ value_json.state }}",
			"state_on":         "ON",
			"state_off":        "OFF",
		}}
	case devices.Lock:
		return &entity{"lock", "lock", map[string]any{
			"command_topic":    set,
			"command_template": commandTemplate(`"state":"{{ value }}"`),
			"payload_lock":     "LOCK",
			"payload_unlock":   "UNLOCK",
			// The state a lock shows, the action under way included:
			// see View.
			"state_topic":     d.topic(dev.ID, "ha_state"),
			"state_locked":    LockLocked,
			"state_unlocked":  LockUnlocked,
			"state_locking":   LockLocking,
			"state_unlocking": LockUnlocking,
			"state_jammed":    LockJammed,
		}}
	case devices.Cover:
		keys := map[string]any{
			// Home Assistant's cover sends these payloads as they are:
			// Hearth gives each its op_id.
			"command_topic":         set,
			"payload_open":          `{"state":"OPEN"}`,
			"payload_close":         `{"state":"CLOSE"}`,
			"payload_stop":          `{"state":"STOP"}`,
			"state_topic":           d.topic(dev.ID, "ha_state"),
			"state_open":            CoverOpen,
			"state_opening":         CoverOpening,
			"state_closed":          CoverClosed,
			"state_closing":         CoverClosing,
			"state_stopped":         CoverStopped,
			"set_position_topic":    set,
			"set_position_template": commandTemplate(`"position":{{ position }}`),
			"position_topic":        mirror,
			"position_template":     "{{ value_json.position }}",
			"position_open":         100,
			"position_closed":       0,
		}
		if dev.SafetyCritical() {
			keys["device_class"] = "garage"
		}
		if b.Tilt {
			keys["tilt_command_topic"] = set
			keys["tilt_command_template"] = commandTemplate(`"tilt":{{ tilt_position }}`)
			keys["tilt_status_topic"] = mirror
			keys["tilt_status_template"] = "{{ value_json.tilt }}"
		}
		return &entity{"cover", "cover", keys}
	case devices.Climate:
		modes := b.Modes
		if len(modes) == 0 {
			modes = []string{"off", "heat", "auto"}
		}
		setpoint := or(b.Setpoint, "current_heating_setpoint")
		minT, maxT, step := b.MinTemp, b.MaxTemp, b.TempStep
		if minT == 0 && maxT == 0 {
			minT, maxT = 5, 35
		}
		if step == 0 {
			step = 0.5
		}
		keys := map[string]any{
			"modes":                        modes,
			"mode_command_topic":           set,
			"mode_command_template":        commandTemplate(`"system_mode":"{{ value }}"`),
			"mode_state_topic":             mirror,
			"mode_state_template":          "{{ value_json.system_mode }}",
			"temperature_command_topic":    set,
			"temperature_command_template": commandTemplate(`"` + setpoint + `":{{ value }}`),
			"temperature_state_topic":      mirror,
			"temperature_state_template":   "{{ value_json." + setpoint + " }}",
			"current_temperature_topic":    mirror,
			"current_temperature_template": "{{ value_json.local_temperature }}",
			"min_temp":                     minT,
			"max_temp":                     maxT,
			"temp_step":                    step,
			"precision":                    precision(step),
			"temperature_unit":             "C",
		}
		if len(b.Presets) > 0 {
			keys["preset_modes"] = b.Presets
			keys["preset_mode_command_topic"] = set
			keys["preset_mode_command_template"] = commandTemplate(`"preset":"{{ value }}"`)
			keys["preset_mode_state_topic"] = mirror
			keys["preset_mode_value_template"] = "{{ value_json.preset }}"
		}
		return &entity{"climate", "climate", keys}
	}
	return nil
}

// readingDeviceClasses are the Home Assistant device classes of common
// Zigbee2MQTT readings, by attribute name.
var readingDeviceClasses = map[string]string{
	"temperature": "temperature", "local_temperature": "temperature", "humidity": "humidity",
	"battery": "battery", "illuminance": "illuminance", "illuminance_lux": "illuminance",
	"pressure": "pressure", "power": "power", "energy": "energy", "voltage": "voltage", "current": "current",
	"co2": "carbon_dioxide", "pm25": "pm25",
	"occupancy": "occupancy", "presence": "presence", "contact": "door", "water_leak": "moisture",
	"smoke": "smoke", "vibration": "vibration", "tamper": "tamper", "battery_low": "battery",
}

// readingEntity is a sensor's reading r as a sensor or binary_sensor on
// the mirror.
func (d Discovery) readingEntity(dev Device, r Reading) *entity {
	keys := map[string]any{
		"name":           readingName(r.Name),
		"state_topic":    d.topic(dev.ID, ""),
		"value_template": "{{ value_json['" + r.Name + "'] }}", // any property name
	}
	if dc, ok := readingDeviceClasses[r.Name]; ok {
		keys["device_class"] = dc
	}
	if !r.Binary {
		if r.Unit != "" {
			keys["unit_of_measurement"] = r.Unit
		}
		keys["state_class"] = "measurement"
		return &entity{"sensor", objectID(r.Name), keys}
	}
	// Zigbee2MQTT's value_on is the state Home Assistant calls on: a
	// contact's is false (open), as its door device class wants.
	on, off := r.On, r.Off
	// The template renders the value as Home Assistant compares it: a
	// JSON true or false becomes True or False, a string stays.
	keys["payload_on"], keys["payload_off"] = jinjaWord(on), jinjaWord(off)
	return &entity{"binary_sensor", objectID(r.Name), keys}
}

// jinjaWord is how a template renders v.
func jinjaWord(v any) string {
	switch x := v.(type) {
	case bool:
		if x {
			return "True"
		}
		return "False"
	case string:
		return x
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// readingName is a reading's name as Home Assistant shows it: "local
// temperature" for local_temperature.
func readingName(attr string) string {
	s := strings.ReplaceAll(attr, "_", " ")
	return strings.ToUpper(s[:1]) + s[1:]
}

// precision is the climate precision Home Assistant takes (0.1, 0.5 or 1,
// its climate.py; any other refuses the entity) nearest a setpoint's step.
func precision(step float64) float64 {
	switch {
	case step >= 1:
		return 1
	case step >= 0.5:
		return 0.5
	}
	return 0.1
}

// commandTemplate returns a command template that publishes the JSON
// object with fields, and a fresh op_id.
func commandTemplate(fields string) string {
	return `{` + fields + `,"op_id":"` + opIDTemplate + `"}`
}

func hasBrightness(modes []string) bool {
	for _, m := range modes {
		if m != "onoff" {
			return true
		}
	}
	return false
}

// eventEntity is dev's command event entity: it fires on each terminal
// result on <prefix>/<device>/result, with the result's fields (op_id,
// status, reason, detail, attempts, target, state, at) as its attributes.
// Interim results (accepted, queued) render empty, which Home Assistant's
// event entity ignores.
func (d Discovery) eventEntity(dev Device) *entity {
	return &entity{"event", "command", map[string]any{
		"name":        "Command",
		"state_topic": d.topic(dev.ID, "result"),
		"event_types": EventTypes,
		"value_template": "{% if value_json.status in " + jinjaList(EventTypes) + " %}" +
			"{{ dict(value_json, event_type=value_json.status) | tojson }}{% endif %}",
	}}
}

func jinjaList(words []string) string {
	return "['" + strings.Join(words, "','") + "']"
}

// encode completes e with what every entity of dev shares (its ids,
// availability, device and origin) and encodes it.
func (d Discovery) encode(dev Device, e *entity) Config {
	node := d.node()
	id := deviceObject(dev.ID)
	keys := e.keys
	keys["unique_id"] = "hearth_" + node + "_" + id + "_" + e.object
	keys["default_entity_id"] = e.component + "." + entityID(dev.ID)
	if e.object != e.component { // the command event entity, a sensor's reading
		keys["default_entity_id"] = e.component + "." + entityID(dev.ID+"_"+e.object)
	}
	if _, named := keys["name"]; !named {
		keys["name"] = nil // the entity takes the device's name
	}
	keys["qos"] = 1
	keys["availability"] = d.availability(dev)
	keys["availability_mode"] = "all"
	keys["device"] = d.deviceBlock(dev)
	keys["origin"] = d.origin()
	b, err := json.Marshal(keys)
	if err != nil {
		panic("homeassistant: encoding a discovery config: " + err.Error()) // strings, numbers and lists: cannot fail
	}
	return Config{Topic: d.configTopic(e.component, id+"_"+e.object), Payload: b}
}

// availability lists what makes dev's entities available, all of them
// at once (availability_mode all): Hearth is online; the device's service
// has no open breaker, if it has one; the bridge says the device is
// online, if it says so at all (see Device.Availability).
func (d Discovery) availability(dev Device) []availability {
	// Every topic says online or offline, Home Assistant's default
	// payloads, which are left out: a config per entity of every device
	// stays retained in the broker.
	out := []availability{{Topic: d.BridgeStateTopic()}}
	if dev.Breaker {
		out = append(out, availability{
			Topic:         d.ServiceStateTopic(dev.Service),
			ValueTemplate: "{{ 'offline' if value_json.state == 'open' else 'online' }}",
		})
	}
	if dev.Availability {
		out = append(out, availability{Topic: d.topic(dev.ID, "availability")})
	}
	return out
}

// deviceBlock is dev's device in Home Assistant: the bridge's own
// identifiers when known (one device in Home Assistant, the bridge's
// entities and Hearth's together), else Hearth's.
func (d Discovery) deviceBlock(dev Device) device {
	b := dev.Bridge
	out := device{
		Identifiers:  b.Identifiers,
		Connections:  b.Connections,
		Name:         or(dev.Name, dev.ID),
		Manufacturer: b.Manufacturer,
		Model:        b.Model,
	}
	if len(out.Identifiers) == 0 && len(out.Connections) == 0 {
		out.Identifiers = []string{"hearth_" + d.node() + "_" + deviceObject(dev.ID)}
	}
	return out
}

// topic is <TopicPrefix>/<device>[/<suffix>].
func (d Discovery) topic(device, suffix string) string {
	if suffix == "" {
		return d.topics() + "/" + device
	}
	return d.topics() + "/" + device + "/" + suffix
}

// configTopic is <Prefix>/<component>/<NodeID>/<object>/config.
func (d Discovery) configTopic(component, object string) string {
	return d.prefix() + "/" + component + "/" + d.node() + "/" + object + "/config"
}

// BridgeOf returns what Zigbee2MQTT's description of a device (its
// bridge/devices entry, as devices.Capabilities) gives its entities: the
// device block Zigbee2MQTT itself announces to Home Assistant
// (identifiers "zigbee2mqtt_<ieee_address>", model "<description>
// (<model>)", manufacturer the vendor, as its
// lib/extension/homeassistant.ts writes them), a light's color modes,
// color temperature range and effects, a climate device's modes, presets
// and setpoint range, and a cover's tilt. nil gives the zero Bridge.
func BridgeOf(class devices.Class, caps *devices.Capabilities) Bridge {
	var b Bridge
	if caps == nil {
		return b
	}
	if caps.IEEEAddress != "" {
		b.Identifiers = []string{"zigbee2mqtt_" + caps.IEEEAddress}
	}
	b.Manufacturer = caps.Vendor
	if caps.Model != "" {
		b.Model = caps.Model
		if caps.Description != "" {
			b.Model = caps.Description + " (" + caps.Model + ")"
		}
	}
	settable := func(name string) (devices.Property, bool) {
		p, ok := caps.Property(name)
		return p, ok && p.Access&devices.AccessSet != 0
	}
	switch class {
	case devices.Light:
		if p, ok := settable("color_temp"); ok {
			b.ColorModes = append(b.ColorModes, "color_temp")
			if p.HasMin && p.HasMax {
				b.MinMireds, b.MaxMireds = int(p.Min), int(p.Max)
			}
		}
		if p, ok := settable("color"); ok {
			if slices.Contains(p.Features, "hue") || slices.Contains(p.Features, "h") {
				b.ColorModes = append(b.ColorModes, "hs")
			}
			if slices.Contains(p.Features, "x") {
				b.ColorModes = append(b.ColorModes, "xy")
			}
		}
		if len(b.ColorModes) == 0 {
			if _, ok := settable("brightness"); ok {
				b.ColorModes = []string{"brightness"}
			} else {
				b.ColorModes = []string{"onoff"}
			}
		}
		if p, ok := settable("effect"); ok {
			b.Effects = p.Values
		}
	case devices.Climate:
		if p, ok := settable("system_mode"); ok {
			b.Modes = p.Values
		}
		if p, ok := settable("preset"); ok {
			b.Presets = p.Values
		}
		for _, name := range []string{"current_heating_setpoint", "occupied_heating_setpoint"} {
			if p, ok := settable(name); ok {
				b.Setpoint = name
				if p.HasMin && p.HasMax {
					b.MinTemp, b.MaxTemp = p.Min, p.Max
				}
				b.TempStep = p.Step
				break
			}
		}
	case devices.Cover:
		_, b.Tilt = settable("tilt")
	case devices.Sensor:
		for _, name := range caps.Names() {
			p, _ := caps.Property(name)
			if p.Access&devices.AccessSet != 0 || p.Access&devices.AccessPublished == 0 {
				continue
			}
			switch p.Kind {
			case devices.KindNumeric:
				b.Readings = append(b.Readings, Reading{Name: name, Unit: p.Unit})
			case devices.KindBinary:
				b.Readings = append(b.Readings, Reading{Name: name, Binary: true, On: p.ValueOn, Off: p.ValueOff})
			}
		}
	}
	return b
}
