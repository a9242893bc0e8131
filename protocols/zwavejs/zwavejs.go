// Package zwavejs is Hearth's adapter for the MQTT gateway of Z-Wave JS UI:
// it encodes a target as value writes, decodes the gateway's value, node
// status and gateway status messages into Hearth's normalized state, and
// says what the Z-Wave transport already does (Transport). It never decides
// whether a command succeeded: it passes every report on and the
// dispatcher judges it.
//
// # Topics
//
// Topic layout as documented by Z-Wave JS UI ("Using MQTT" and the gateway
// settings of its setup guide), for the gateway type "ValueID topics":
//
//	<prefix>/<node>/<cc>/<endpoint>/<property>[/<propertyKey>]         gateway → all: a value
//	<prefix>/<node>/<cc>/<endpoint>/<property>[/<propertyKey>]/set     Hearth → gateway: {"value": …}
//	<prefix>/<node>/status                                             gateway → all: the node's status
//	<prefix>/_CLIENTS/ZWAVE_GATEWAY-<gateway_name>/status              gateway → all: the gateway's MQTT status
//	<prefix>/driver/status                                             gateway → all: true|false, its driver ready
//	<prefix>/_CLIENTS/ZWAVE_GATEWAY-<gateway_name>/api/pollValue/set   Hearth → gateway: {"args":[<valueId>]}
//
// <prefix> defaults to "zwave" (DefaultBaseTopic) and <gateway_name> to
// "zwave-js-ui" (DefaultGatewayName). <node> is the node as the gateway
// names it in topics: "<location>/<node>" or "<node>", where the node
// level is the node's name (with "Use nodes name instead of numeric
// nodeIDs") or its numeric node ID, each sanitised (SanitizeTopic: "Living
// Room" is Living_Room). A device's address is [<location>/]<node>[/<endpoint>]
// (ParseAddress): the node, raw names accepted, and the Multi Channel
// endpoint whose values are the device, 0 (the root) by default; the two
// relays of a double switch are kitchen_double/1 and kitchen_double/2.
// Value payloads are accepted in the gateway's JSON
// time-value form ({"time":1548683523859,"value":255}), in its "entire
// ValueId object" form (an object with a "value" key, the same to Hearth)
// and as the plain value ("Just value": 255, true, 21.5).
//
// Reports are decoded from the command class's number (the ValueID topics)
// and also from its name as the "Named topics" gateway type publishes it
// (door_lock, switch_binary, switch_multilevel, thermostat_setpoint,
// notification, with "endpoint_<n>" as the endpoint level); writes always
// use the number form, so the gateway must use ValueID topics for Hearth's
// writes to reach it.
//
// # Classes
//
// Confirmation comes only from a value the device reported (currentMode,
// currentValue, a setpoint), never from targetMode or targetValue, which
// the gateway publishes as soon as it accepts a write: those are ignored.
//
//   - lock: Door Lock CC (98). Writes targetMode 255 (Secured) for LOCK
//     and 0 (Unsecured) for UNLOCK. currentMode 255 reports
//     {"state":"LOCK","lock_state":"locked"}; 0, 1, 16, 17, 32 and 33 (the
//     unsecured modes: with timeout, inside, outside) report
//     {"state":"UNLOCK","lock_state":"unlocked"}; 254 (0xFE, Unknown) and
//     any other value report {"lock_state":"unknown"}, with no state, which
//     Hearth reads as unknown and never as unlocked. The Notification CC
//     (113) "Access Control"/"Lock state" value 11 (Lock jammed) reports
//     {"lock_state":"jammed"}, which ends a command jammed.
//   - switch: Binary Switch CC (37). Writes targetValue true/false for
//     ON/OFF; currentValue reports {"state":"ON"|"OFF"}.
//   - light: Multilevel Switch CC (38), level 0–99. Writes targetValue
//     round(brightness·99/254), at least 1 for a brightness above 0;
//     state OFF writes 0 and state ON without a brightness writes 255
//     (Z-Wave's "restore the last level"); a transition is sent as the
//     option transitionDuration ("<n>s"). currentValue 0 reports
//     {"state":"OFF","brightness":0}; a level L of 1–99 reports
//     {"state":"ON","brightness":B} with B the brightness Hearth last wrote
//     as L, else round(L·254/99). So a level Hearth asked for confirms the
//     exact brightness asked (1 → 1 → 1, 128 → 50 → 128, 254 → 99 → 254),
//     and a level reached otherwise reads at the nearest brightness.
//   - cover: Multilevel Switch CC (38), level 0–99. Writes targetValue
//     round(position·99/100) (100 → 99), OPEN as 99, CLOSE as 0;
//     currentValue L reports {"position":P,"state":"OPEN"|"CLOSE"} with P
//     the position Hearth last wrote as L, else 100 for 99 and
//     round(L·100/99) below. STOP and tilt are not supported.
//   - climate: Thermostat Setpoint CC (67), property setpoint, propertyKey
//     1 (Heating). Writes current_heating_setpoint (or
//     occupied_heating_setpoint, the same setpoint) as the value; the
//     setpoint value reports {"current_heating_setpoint":V,
//     "occupied_heating_setpoint":V}, V in °C. The device's scale is the
//     unit of its setpoint value ("°F" or "°C"), which the gateway sends
//     with the payload type "entire ValueId object" (ZUIValueId.unit of
//     api/lib/ZwaveClient.ts), and is kept until another unit arrives;
//     without a unit ever seen it is °C. In °F a target C is written as
//     round(C·9/5+32), a whole °F (halves away from zero: 21 → 70, 22.5 →
//     73), and a report of F reads as C when Hearth last wrote F for C,
//     else round((F−32)·5/9) to 0.1 °C (71 → 21.7). So a setpoint Hearth
//     asked for confirms the exact °C asked, as levels do. The Multilevel
//     Sensor CC (49) "Air temperature" reports {"local_temperature":T},
//     T in °C, converted (to 0.1 °C) when its unit is °F.
//
// Any other value of a configured node (a battery level, a meter, an
// unreadable value) and its lastActive topic are passed on as an empty
// report: the node spoke, which is news of it (a wake signal of a sleepy
// node), though it says nothing of its state. targetValue and targetMode
// are not passed on at all: the gateway publishes them for a write it
// queued, whether the node heard it or not.
//
// Attributes a class cannot write here (a light's color_temp, a cover's
// tilt or STOP) fail Send with an error whose Permanent method returns
// true: nothing is sent and the command is not retried.
//
// # Reads
//
// Read asks the gateway to poll the confirming value of the device's class
// (its pollValue API, which asks the node itself and publishes the answer
// on the value topic), so that one radio exchange answers it. The API needs
// the node's numeric ID: it is the node level of the address when that is
// a number, else the nodeId of the node's status payload, which the
// gateway publishes (retained) with every status change. Read fails while
// neither is known, which Hearth takes as an unknown state.
//
// # Status
//
// The node status payload is {"time":…,"value":true|false,"status":
// "Alive"|"Awake"|"Asleep"|"Dead","nodeId":N} (JSON) or the plain
// true/false; its status word goes to Sink.NodeStatus (devices.NodeAlive,
// NodeAwake, NodeAsleep, NodeDead). A plain true is alive, false dead; a
// node's status reaches the device of each of its endpoints.
//
// The gateway is online when its MQTT client says so AND its Z-Wave
// driver (the controller) has not said it is gone: Sink.BridgeState gets
// false once either says no, true when the client says yes and the driver
// did not say no. The client's status ({"time":…,"value":true|false}, its
// will {"value":false}; MqttClient.ts, updateClientStatus) is on
// _CLIENTS/ZWAVE_GATEWAY-<name>/status; the driver's is the plain JSON
// true or false on <prefix>/driver/status (DriverStatusTopic; Gateway.ts,
// _onDriverStatus), published when the driver gets ready or closes, not on
// reconnect, retained with the gateway's MQTT "retain" setting (default
// on). A driver never heard from does not hold the service down (with
// retain off Hearth may only hear it at its next change), and a driver's
// true heard before any client status is not passed on: it says nothing
// of the client.
package zwavejs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/mqtt"
)

// DefaultBaseTopic is Z-Wave JS UI's default MQTT prefix.
const DefaultBaseTopic = "zwave"

// DefaultGatewayName is the MQTT name Z-Wave JS UI's gateway uses by
// default, the <mqtt_name> of its _CLIENTS/ZWAVE_GATEWAY-<mqtt_name> topics.
const DefaultGatewayName = "zwave-js-ui"

// Transport is what Z-Wave already does for Hearth: the controller routes
// and retransmits each frame (radio retries), Z-Wave JS holds commands for
// a sleeping node in its wake-up queue until the node wakes, and the
// gateway publishes every value the node reports. Its DefaultAttempts is 2.
var Transport = devices.Transport{RadioRetries: true, WakeUpQueue: true, ReportsState: true}

// Command classes, by their Z-Wave numbers.
const (
	ccBinarySwitch       = 37
	ccMultilevelSwitch   = 38
	ccMultilevelSensor   = 49
	ccThermostatSetpoint = 67
	ccDoorLock           = 98
	ccNotification       = 113
)

// ccNames are the command class names of the gateway's "Named topics".
var ccNames = map[string]int{
	"switch_binary":       ccBinarySwitch,
	"switch_multilevel":   ccMultilevelSwitch,
	"thermostat_setpoint": ccThermostatSetpoint,
	"door_lock":           ccDoorLock,
	"notification":        ccNotification,
	"alarm":               ccNotification, // older gateways' name of CC 113
}

// Door Lock CC modes (Z-Wave specification, Door Lock Operation Report).
const (
	modeSecured = 255
	modeUnknown = 254
)

// unsecuredModes are the Door Lock modes in which the bolt is drawn:
// Unsecured, with timeout, for inside and for outside handles, each with
// and without timeout.
var unsecuredModes = map[int]bool{0: true, 1: true, 16: true, 17: true, 32: true, 33: true}

// lockJammed is the Notification CC Access Control event "Lock jammed".
const lockJammed = 11

// Sink receives what the gateway reports. The dispatcher implements it.
type Sink interface {
	// Report passes a state report of device (Hearth's device ID) in
	// Hearth's normalized attributes; retained is true when the broker
	// replayed it from its retained store on subscribe (old news).
	Report(device string, state map[string]any, retained bool)
	// NodeStatus passes what the gateway says of the device's node;
	// retained is true when the broker replayed it from its retained
	// store (a node "Awake" long ago is asleep by now).
	NodeStatus(device string, status devices.NodeStatus, retained bool)
	// BridgeState passes whether the gateway itself is online; retained is
	// true when the broker replayed it from its retained store.
	BridgeState(service string, online, retained bool)
}

// Conn is the part of the MQTT connection the adapter uses; *mqtt.Conn
// satisfies it.
type Conn interface {
	Publish(ctx context.Context, topic string, qos byte, retained bool, payload []byte) error
	Subscribe(ctx context.Context, filter string, qos byte, h mqtt.Handler) error
}

// Options configures an Adapter.
type Options struct {
	// Service is the service name the adapter serves.
	Service string
	// BaseTopic is the gateway's MQTT prefix; "" means DefaultBaseTopic.
	BaseTopic string
	// GatewayName is the gateway's MQTT name; "" means DefaultGatewayName.
	GatewayName string
	// Devices are the devices this service reaches; their Address is
	// "<location>/<node>" or "<node>" (default: the ID).
	Devices []devices.Device
	Logger  *slog.Logger
	// Publisher, when set, is the only username whose messages count: a
	// value, node status or gateway status whose StampProperty user
	// property is not Publisher is dropped, confirms nothing and is
	// counted (Untrusted), with a warning at most once a minute. For a
	// broker that stamps every message with its publisher's authenticated
	// username (the embedded broker); "" trusts the topic itself (an
	// external broker, whose ACL must keep everyone but the gateway off it).
	Publisher string
	// StampProperty is the key of that user property ("hearth-username");
	// unused without Publisher.
	StampProperty string
	// NodeNames says the gateway names its nodes in topics ("Use nodes
	// name instead of numeric nodeIDs"): a two-level address <node>/<n>
	// with n a number is then endpoint n of that node (see ParseAddress).
	NodeNames bool
}

// Adapter speaks Z-Wave JS UI's MQTT API for one service.
type Adapter struct {
	service string
	base    string
	client  string                            // <base>/_CLIENTS/ZWAVE_GATEWAY-<name>
	nodes   map[string]map[int]devices.Device // node levels → endpoint → device
	names   bool                              // Options.NodeNames
	sink    Sink
	log     *slog.Logger
	conn    Conn
	online  atomic.Bool // the gateway's client connected and its driver not gone
	trust   mqtt.Trust

	mu        sync.Mutex
	nodeIDs   map[string]int     // device ID → node ID learnt from its status
	written   map[string]written // device ID → the last level written to CC 38
	setpoints map[string]written // device ID → the last °F setpoint written and the °C it stood for
	scales    map[string]scale   // device ID → its setpoint's scale, learnt from the unit
	gateway   tristate           // the gateway's MQTT client status
	driver    tristate           // the gateway's driver/status
}

// tristate is what the gateway last said of a yes/no: nothing yet, yes, no.
type tristate int8

const (
	unheard tristate = iota
	yes
	no
)

// scale is a temperature's scale as the gateway's unit gives it.
type scale int8

const (
	celsius scale = iota // also: no unit seen
	fahrenheit
)

// written is a Multilevel Switch level Hearth wrote and the attribute value
// it stood for.
type written struct {
	level int
	value float64
}

// New returns an adapter that speaks over conn.
func New(conn Conn, opts Options) *Adapter {
	a := &Adapter{
		service:   opts.Service,
		base:      opts.BaseTopic,
		nodes:     make(map[string]map[int]devices.Device, len(opts.Devices)),
		names:     opts.NodeNames,
		log:       opts.Logger,
		conn:      conn,
		nodeIDs:   map[string]int{},
		written:   map[string]written{},
		setpoints: map[string]written{},
		scales:    map[string]scale{},
	}
	if a.base == "" {
		a.base = DefaultBaseTopic
	}
	name := opts.GatewayName
	if name == "" {
		name = DefaultGatewayName
	}
	a.client = a.base + "/_CLIENTS/ZWAVE_GATEWAY-" + name
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.trust = mqtt.Trust{Publisher: opts.Publisher, StampProperty: opts.StampProperty, Logger: a.log, What: "zwavejs"}
	for _, d := range opts.Devices {
		addr, err := a.address(d)
		if err != nil {
			a.log.Error("zwavejs: device unreachable", "device", d.ID, "err", err)
			continue
		}
		eps := a.nodes[addr.Node]
		if eps == nil {
			eps = map[int]devices.Device{}
			a.nodes[addr.Node] = eps
		}
		if o, taken := eps[addr.Endpoint]; taken {
			a.log.Error("zwavejs: two devices at one address; the first keeps it", "address", addr.String(), "device", o.ID, "other", d.ID)
			continue
		}
		eps[addr.Endpoint] = d
	}
	return a
}

// Start subscribes to everything under the prefix and passes what the
// gateway reports to sink. Call it once, before the connection runs.
func (a *Adapter) Start(ctx context.Context, sink Sink) error {
	a.sink = sink
	return a.conn.Subscribe(ctx, a.base+"/#", 1, a.handle)
}

// BridgeOnline reports whether the gateway is online as far as Hearth
// heard: its MQTT client said it is connected and its driver did not say it
// is gone (see Status in the package documentation).
func (a *Adapter) BridgeOnline() bool { return a.online.Load() }

// Untrusted returns how many messages on the gateway's topics were
// dropped since New because Options.Publisher did not publish them.
func (a *Adapter) Untrusted() uint64 { return a.trust.Dropped() }

// unsupportedError is a target the adapter cannot write: permanent.
type unsupportedError struct{ msg string }

func (e unsupportedError) Error() string   { return "zwavejs: " + e.msg }
func (e unsupportedError) Permanent() bool { return true }

// ErrNodeIDUnknown is returned by Read while the node's numeric ID is not
// known (see the package documentation).
var ErrNodeIDUnknown = errors.New("zwavejs: the node's ID is not known yet (no status message with nodeId, and the address does not name it)")

// write is one value write: the value (its topic after <node>/ is
// <cc>/<endpoint>/<property>) and the payload.
type write struct {
	cc       int
	property string // <property>[/<propertyKey>]
	payload  map[string]any
}

// Send writes target to the device's values: one publish per value (in a
// fixed order), each QoS 1, not retained, to the value's topic plus /set,
// each waiting for the broker's PUBACK. A nil error means the gateway's
// broker has the writes, not that the node acted on them. An attribute the
// class cannot write fails with a permanent error before anything is sent.
//
// A setpoint goes out in the scale the device last reported it in (the
// unit of its value): in °F as round(°C·9/5+32), a whole degree, halves
// away from zero; Hearth remembers which °C it stood for (see Classes).
func (a *Adapter) Send(ctx context.Context, dev devices.Device, target devices.Target) error {
	addr, err := a.address(dev)
	if err != nil {
		return unsupportedError{err.Error()}
	}
	ws, remember, err := encode(dev.Class, target)
	if err != nil {
		return err
	}
	a.mu.Lock()
	if remember != nil {
		a.written[dev.ID] = *remember
	}
	if dev.Class == devices.Climate && a.scales[dev.ID] == fahrenheit {
		for i, w := range ws {
			c := w.payload["value"].(float64)
			f := int(math.Round(c*9/5 + 32))
			ws[i].payload = map[string]any{"value": f}
			a.setpoints[dev.ID] = written{f, c}
		}
	}
	a.mu.Unlock()
	for _, w := range ws {
		payload, err := json.Marshal(w.payload)
		if err != nil {
			return fmt.Errorf("zwavejs: encode target: %w", err)
		}
		topic := fmt.Sprintf("%s/%s/%d/%d/%s/set", a.base, addr.Node, w.cc, addr.Endpoint, w.property)
		if err := a.conn.Publish(ctx, topic, 1, false, payload); err != nil {
			return err
		}
	}
	return nil
}

// encode maps target to value writes for class c, and the level to
// remember for a Multilevel Switch write (nil if none).
func encode(c devices.Class, target devices.Target) ([]write, *written, error) {
	state, _ := target["state"].(string)
	switch c {
	case devices.Lock:
		for k := range target {
			if k != "state" {
				return nil, nil, unsupportedError{fmt.Sprintf("a lock has no attribute %q here", k)}
			}
		}
		switch state {
		case "LOCK":
			return []write{{ccDoorLock, "targetMode", map[string]any{"value": modeSecured}}}, nil, nil
		case "UNLOCK":
			return []write{{ccDoorLock, "targetMode", map[string]any{"value": 0}}}, nil, nil
		}
		return nil, nil, unsupportedError{fmt.Sprintf("lock state %q", target["state"])}
	case devices.Switch:
		for k := range target {
			if k != "state" {
				return nil, nil, unsupportedError{fmt.Sprintf("a switch has no attribute %q here", k)}
			}
		}
		switch state {
		case "ON", "OFF":
			return []write{{ccBinarySwitch, "targetValue", map[string]any{"value": state == "ON"}}}, nil, nil
		}
		return nil, nil, unsupportedError{fmt.Sprintf("switch state %q", target["state"])}
	case devices.Light:
		var level int
		var remember *written
		b, hasB := number(target["brightness"])
		switch {
		case state == "OFF":
			level = 0
		case hasB:
			level = brightnessLevel(b)
			if level > 0 {
				remember = &written{level, b}
			}
		case state == "ON":
			level = 255 // restore the last level
		default:
			return nil, nil, unsupportedError{"a light target needs state or brightness"}
		}
		for k := range target {
			switch k {
			case "state", "brightness", "transition":
			default:
				return nil, nil, unsupportedError{fmt.Sprintf("a Z-Wave light has no attribute %q here", k)}
			}
		}
		p := map[string]any{"value": level}
		if t, ok := number(target["transition"]); ok {
			p["options"] = map[string]any{"transitionDuration": strconv.FormatFloat(t, 'f', -1, 64) + "s"}
		}
		return []write{{ccMultilevelSwitch, "targetValue", p}}, remember, nil
	case devices.Cover:
		var level int
		var remember *written
		p, hasP := number(target["position"])
		switch {
		case hasP:
			level = positionLevel(p)
			remember = &written{level, p}
		case state == "OPEN":
			level = 99
		case state == "CLOSE":
			level = 0
		default:
			return nil, nil, unsupportedError{fmt.Sprintf("cover target %v (STOP and tilt are not supported)", map[string]any(target))}
		}
		for k := range target {
			if k != "state" && k != "position" {
				return nil, nil, unsupportedError{fmt.Sprintf("a Z-Wave cover has no attribute %q here", k)}
			}
		}
		return []write{{ccMultilevelSwitch, "targetValue", map[string]any{"value": level}}}, remember, nil
	case devices.Climate:
		v, ok := number(target["current_heating_setpoint"])
		if w, both := number(target["occupied_heating_setpoint"]); both && ok && w != v {
			return nil, nil, unsupportedError{fmt.Sprintf("climate target %v: Z-Wave has one heating setpoint, and these differ", map[string]any(target))}
		} else if !ok {
			v, ok = number(target["occupied_heating_setpoint"])
		}
		if !ok || len(target) > 2 {
			return nil, nil, unsupportedError{fmt.Sprintf("climate target %v: only the heating setpoint is supported", map[string]any(target))}
		}
		return []write{{ccThermostatSetpoint, "setpoint/1", map[string]any{"value": v}}}, nil, nil
	}
	return nil, nil, unsupportedError{fmt.Sprintf("devices of class %s are not supported", c)}
}

// brightnessLevel maps a brightness 0–254 to a Multilevel Switch level
// 0–99, rounding to nearest; a brightness above 0 is at least level 1.
func brightnessLevel(b float64) int {
	if b <= 0 {
		return 0
	}
	return max(1, min(99, int(math.Round(b*99/254))))
}

// positionLevel maps a position 0–100 to a level 0–99, rounding to nearest.
func positionLevel(p float64) int {
	return max(0, min(99, int(math.Round(p*99/100))))
}

// Read publishes a pollValue API call, QoS 1, not retained, for the value
// that confirms the device's class, and waits for the broker's PUBACK. The
// answer, if any, arrives as an ordinary value report. It fails with
// ErrNodeIDUnknown while the node's ID is not known.
func (a *Adapter) Read(ctx context.Context, dev devices.Device, _ devices.Target) error {
	addr, err := a.address(dev)
	if err != nil {
		return unsupportedError{err.Error()}
	}
	id, ok := a.nodeID(dev)
	if !ok {
		return ErrNodeIDUnknown
	}
	vid := map[string]any{"nodeId": id, "endpoint": addr.Endpoint}
	switch dev.Class {
	case devices.Lock:
		vid["commandClass"], vid["property"] = ccDoorLock, "currentMode"
	case devices.Switch:
		vid["commandClass"], vid["property"] = ccBinarySwitch, "currentValue"
	case devices.Light, devices.Cover:
		vid["commandClass"], vid["property"] = ccMultilevelSwitch, "currentValue"
	case devices.Climate:
		vid["commandClass"], vid["property"], vid["propertyKey"] = ccThermostatSetpoint, "setpoint", 1
	default:
		return unsupportedError{fmt.Sprintf("devices of class %s cannot be read", dev.Class)}
	}
	payload, err := json.Marshal(map[string]any{"args": []any{vid}})
	if err != nil {
		return fmt.Errorf("zwavejs: encode poll: %w", err)
	}
	return a.conn.Publish(ctx, a.client+"/api/pollValue/set", 1, false, payload)
}

// nodeID returns the node ID of dev: the address's node level if it is a
// number, else the one learnt from its status.
func (a *Adapter) nodeID(dev devices.Device) (int, bool) {
	addr, err := a.address(dev)
	if err != nil {
		return 0, false
	}
	node := addr.Node[strings.LastIndexByte(addr.Node, '/')+1:]
	if n, err := strconv.Atoi(node); err == nil && n > 0 {
		return n, true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	n, ok := a.nodeIDs[dev.ID]
	return n, ok
}

// address reads d's address (its ID when it has none) with ParseAddress.
func (a *Adapter) address(d devices.Device) (Address, error) {
	if d.Address != "" {
		return ParseAddress(d.Address, a.names)
	}
	return ParseAddress(d.ID, a.names)
}

func (a *Adapter) handle(m mqtt.Message) {
	rest, ok := strings.CutPrefix(m.Topic, a.base+"/")
	if !ok {
		return
	}
	if rest == DriverStatusTopic || m.Topic == a.client+"/status" {
		if !a.trust.Trusted(m) {
			return
		}
		up, ok := parseOnline(m.Payload)
		if !ok {
			a.log.Warn("zwavejs: unreadable gateway status", "topic", m.Topic, "payload", truncate(m.Payload))
			return
		}
		a.gatewayStatus(rest == DriverStatusTopic, up, m.Retained)
		return
	}
	if strings.HasPrefix(rest, "_CLIENTS/") {
		return // API calls and answers, other gateways
	}
	levels := strings.Split(rest, "/")
	// An address has one or two levels: try location/node first, then
	// the node alone, so that a node named like another's location
	// ("hall" beside "hall/back_door") does not take that node's topics.
	for n := min(2, len(levels)-1); n >= 1; n-- {
		eps, known := a.nodes[strings.Join(levels[:n], "/")]
		if !known {
			continue
		}
		value := levels[n:]
		if value[len(value)-1] == "set" {
			return // writes, ours or anyone's
		}
		if !a.trust.Trusted(m) {
			return
		}
		if len(value) == 1 && value[0] == "status" {
			a.nodeStatus(eps, m)
			return
		}
		if len(value) == 1 && value[0] == "lastActive" {
			// The controller heard the node: news, but no value, for
			// every endpoint's device.
			for _, ep := range slices.Sorted(maps.Keys(eps)) {
				a.sink.Report(eps[ep].ID, map[string]any{}, m.Retained)
			}
			return
		}
		a.value(eps, value, m)
		return
	}
}

// gatewayStatus takes the gateway's MQTT client status (driver false) or
// its driver's status (driver true) and passes on what the two say
// together: online while the client is connected and the driver has not
// said it is gone, offline once either says no. A driver status heard
// before any client status says nothing of the client: passed on only
// when it is a no.
func (a *Adapter) gatewayStatus(driver, up bool, retained bool) {
	word := no
	if up {
		word = yes
	}
	a.mu.Lock()
	if driver {
		a.driver = word
	} else {
		a.gateway = word
	}
	online := a.gateway == yes && a.driver != no
	known := a.gateway != unheard || a.driver == no
	a.mu.Unlock()
	a.online.Store(online)
	if known {
		a.sink.BridgeState(a.service, online, retained)
	}
}

// nodeStatus passes a node's status to the device of each of its endpoints.
func (a *Adapter) nodeStatus(eps map[int]devices.Device, m mqtt.Message) {
	status, nodeID, ok := parseNodeStatus(m.Payload)
	if !ok {
		a.log.Warn("zwavejs: unreadable node status", "topic", m.Topic, "payload", truncate(m.Payload))
		return
	}
	for _, ep := range slices.Sorted(maps.Keys(eps)) {
		dev := eps[ep]
		if nodeID > 0 {
			a.mu.Lock()
			a.nodeIDs[dev.ID] = nodeID
			a.mu.Unlock()
		}
		a.sink.NodeStatus(dev.ID, status, m.Retained)
	}
}

// value decodes one value message of a node whose endpoints' devices are
// eps; levels are the topic's levels after the node's.
func (a *Adapter) value(eps map[int]devices.Device, levels []string, m mqtt.Message) {
	if len(levels) < 3 || len(levels) > 4 {
		return
	}
	cc, ok := commandClass(levels[0])
	if !ok {
		return
	}
	ep, ok := endpoint(levels[1])
	if !ok {
		return
	}
	dev, ok := eps[ep]
	if !ok {
		return // another endpoint is another switch, lock or sensor: not a device here
	}
	prop := levels[2]
	key := ""
	if len(levels) == 4 {
		key = levels[3]
	}
	v, unit, ok := parseValueUnit(m.Payload)
	if !ok {
		a.log.Warn("zwavejs: unreadable value", "topic", m.Topic, "payload", truncate(m.Payload))
		return
	}
	if strings.HasPrefix(prop, "target") {
		return // the gateway's echo of a write it accepted, not the node's report
	}
	state := a.decodeUnit(dev, cc, prop, key, v, unit)
	if state == nil {
		// A value Hearth does not read (a battery level, a meter): the
		// node spoke all the same, which tells that it is awake.
		state = map[string]any{}
	}
	a.sink.Report(dev.ID, state, m.Retained)
}

// decode maps one value of a node to Hearth's state for dev's class, or nil
// for a value that says nothing Hearth reads.
func (a *Adapter) decode(dev devices.Device, cc int, prop, key string, v any) map[string]any {
	return a.decodeUnit(dev, cc, prop, key, v, "")
}

// decodeUnit is decode of a value whose payload gave its unit ("" for
// none): a temperature in °F is converted to °C.
func (a *Adapter) decodeUnit(dev devices.Device, cc int, prop, key string, v any, unit string) map[string]any {
	switch {
	case dev.Class == devices.Lock && cc == ccDoorLock && prop == "currentMode" && key == "":
		mode, ok := number(v)
		switch {
		case ok && mode == modeSecured:
			return map[string]any{"state": "LOCK", "lock_state": "locked"}
		case ok && mode == math.Trunc(mode) && unsecuredModes[int(mode)]:
			return map[string]any{"state": "UNLOCK", "lock_state": "unlocked"}
		}
		return map[string]any{"lock_state": "unknown"} // 0xFE, unmapped, null, not a number
	case dev.Class == devices.Lock && cc == ccNotification && sameName(prop, "Access Control") && sameName(key, "Lock state"):
		if n, ok := number(v); ok && n == lockJammed {
			return map[string]any{"lock_state": "jammed"}
		}
		return nil
	case dev.Class == devices.Switch && cc == ccBinarySwitch && prop == "currentValue" && key == "":
		on, ok := v.(bool)
		if !ok {
			a.log.Warn("zwavejs: binary switch value is not a boolean", "device", dev.ID, "value", v)
			return nil
		}
		if on {
			return map[string]any{"state": "ON"}
		}
		return map[string]any{"state": "OFF"}
	case (dev.Class == devices.Light || dev.Class == devices.Cover) && cc == ccMultilevelSwitch && prop == "currentValue" && key == "":
		f, ok := number(v)
		if !ok || f < 0 || f > 99 || f != math.Trunc(f) {
			a.log.Warn("zwavejs: multilevel switch level is not 0–99", "device", dev.ID, "value", v)
			return nil
		}
		level := int(f)
		a.mu.Lock()
		w, remembered := a.written[dev.ID]
		a.mu.Unlock()
		if dev.Class == devices.Light {
			if level == 0 {
				return map[string]any{"state": "OFF", "brightness": 0.0}
			}
			b := math.Round(float64(level) * 254 / 99)
			if remembered && w.level == level {
				b = w.value
			}
			return map[string]any{"state": "ON", "brightness": b}
		}
		p := math.Round(float64(level) * 100 / 99)
		if level == 99 {
			p = 100
		}
		if remembered && w.level == level {
			p = w.value
		}
		st := "CLOSE"
		if p > 0 {
			st = "OPEN"
		}
		return map[string]any{"state": st, "position": p}
	case dev.Class == devices.Climate && cc == ccThermostatSetpoint && prop == "setpoint" && key == "1":
		f, ok := number(v)
		if !ok {
			a.log.Warn("zwavejs: setpoint is not a number", "device", dev.ID, "value", v)
			return nil
		}
		a.mu.Lock()
		sc, known := temperatureScale(unit)
		if known {
			a.scales[dev.ID] = sc
		} else {
			sc = a.scales[dev.ID]
		}
		w, remembered := a.setpoints[dev.ID]
		a.mu.Unlock()
		if sc == fahrenheit {
			if remembered && float64(w.level) == f {
				f = w.value
			} else {
				f = fahrenheitToCelsius(f)
			}
		}
		return map[string]any{"current_heating_setpoint": f, "occupied_heating_setpoint": f}
	case dev.Class == devices.Climate && cc == ccMultilevelSensor && sameName(prop, "Air temperature") && key == "":
		f, ok := number(v)
		if !ok {
			a.log.Warn("zwavejs: air temperature is not a number", "device", dev.ID, "value", v)
			return nil
		}
		if sc, _ := temperatureScale(unit); sc == fahrenheit {
			f = fahrenheitToCelsius(f)
		}
		return map[string]any{"local_temperature": f}
	}
	return nil
}

// temperatureScale reads a value's unit as a temperature scale: "°F" (or
// "F", "℉") is Fahrenheit, "°C" (or "C", "℃") Celsius, case and spaces
// aside; known is false for any other unit and for none.
func temperatureScale(unit string) (sc scale, known bool) {
	switch strings.ToUpper(strings.TrimSpace(unit)) {
	case "°F", "F", "℉":
		return fahrenheit, true
	case "°C", "C", "℃":
		return celsius, true
	}
	return celsius, false
}

// fahrenheitToCelsius converts °F to °C, (f−32)·5/9, rounded to the
// nearest 0.1 °C (halves away from zero).
func fahrenheitToCelsius(f float64) float64 {
	return math.Round((f-32)*5/9*10) / 10
}

// commandClass reads a topic level as a command class: its number, or its
// name in the gateway's named topics.
func commandClass(s string) (int, bool) {
	if n, err := strconv.Atoi(s); err == nil {
		return n, true
	}
	n, ok := ccNames[s]
	return n, ok
}

// endpoint reads an endpoint level: "0", or "endpoint_0" in named topics.
func endpoint(s string) (int, bool) {
	n, err := strconv.Atoi(strings.TrimPrefix(s, "endpoint_"))
	return n, err == nil && n >= 0
}

// sameName compares a topic level with a Z-Wave JS property name, which the
// gateway may publish with its spaces replaced by underscores.
func sameName(level, name string) bool {
	return strings.EqualFold(strings.ReplaceAll(level, "_", " "), name)
}

// parseValueUnit is parseValue and the payload's "unit", the unit of the
// value's metadata that the entire ValueId object form carries (ZUIValueId.unit
// of api/lib/ZwaveClient.ts, from Z-Wave JS's ValueMetadataNumeric.unit:
// "°C", "°F", "%"); "" when the payload has none.
func parseValueUnit(p []byte) (v any, unit string, ok bool) {
	v, ok = parseValue(p)
	if !ok {
		return nil, "", false
	}
	var obj struct {
		Unit any `json:"unit"`
	}
	if bytes.HasPrefix(bytes.TrimSpace(p), []byte("{")) && json.Unmarshal(p, &obj) == nil {
		unit, _ = obj.Unit.(string)
	}
	return v, unit, true
}

// parseValue reads a value payload: an object with a "value" key (the
// time-value form, or the entire ValueId object), or a plain JSON value.
// A bare word that is not JSON is taken as a string.
func parseValue(p []byte) (any, bool) {
	s := strings.TrimSpace(string(p))
	if s == "" {
		return nil, false
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		if strings.ContainsAny(s[:1], "{[\"") {
			return nil, false
		}
		return s, true
	}
	if obj, ok := v.(map[string]any); ok {
		val, ok := obj["value"]
		return val, ok
	}
	return v, true
}

// parseNodeStatus reads a node status payload: JSON with a status word
// (and the nodeId), or a plain or JSON true/false (alive or dead).
func parseNodeStatus(p []byte) (devices.NodeStatus, int, bool) {
	v, ok := parseValue(p)
	var word string
	var nodeID int
	if obj := map[string]any{}; json.Unmarshal(p, &obj) == nil {
		word, _ = obj["status"].(string)
		if n, isNumber := number(obj["nodeId"]); isNumber && n > 0 && n == math.Trunc(n) {
			nodeID = int(n)
		}
	}
	switch strings.ToLower(word) {
	case "alive":
		return devices.NodeAlive, nodeID, true
	case "awake":
		return devices.NodeAwake, nodeID, true
	case "asleep":
		return devices.NodeAsleep, nodeID, true
	case "dead":
		return devices.NodeDead, nodeID, true
	}
	if !ok {
		return "", 0, false
	}
	switch v {
	case true, "true":
		return devices.NodeAlive, nodeID, true
	case false, "false":
		return devices.NodeDead, nodeID, true
	}
	return "", 0, false
}

// parseOnline reads the gateway's status: {"value":true|false} or the
// plain true/false.
func parseOnline(p []byte) (online, ok bool) {
	v, ok := parseValue(p)
	if !ok {
		return false, false
	}
	switch v {
	case true, "true":
		return true, true
	case false, "false":
		return false, true
	}
	return false, false
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, !math.IsNaN(n) && !math.IsInf(n, 0)
	case int:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

func truncate(p []byte) string {
	if len(p) > 120 {
		return string(p[:117]) + "..."
	}
	return string(p)
}
