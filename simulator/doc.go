// Package simulator plays the device side of Hearth's bridges so that Hearth
// can be tested end to end against a real MQTT broker.
//
// This package owns the Zigbee2MQTT (Z2M) side and the Z-Wave JS UI side
// (below): a [Sim] acts as one Z2M
// bridge per base topic and as every device behind it. It follows the topic
// layout and payloads documented by Zigbee2MQTT ("MQTT Topics and Messages"
// and the "exposes" of the light, switch, lock and cover classes):
//
//	<base>/bridge/state              {"state":"online"} at start, {"state":"offline"} as will, on clean stop and in an announced outage; retained
//	<base>/<name>/availability       {"state":"online"} or {"state":"offline"}; retained
//	<base>/<name>/set                a JSON object of attributes, or a plain string taken as "state"
//	<base>/<name>/get                any attribute object (e.g. {"state":""}); the device reports its state
//	<base>/<name>                    the device's full state as JSON after every accepted set or get; not retained
//
// <base> defaults to "zigbee2mqtt" and <name> is the device's friendly_name,
// which may contain "/". Every publish and subscription uses QoS 1.
//
// Device classes and their attributes (command values match case-insensitively,
// reported values are upper case as Z2M reports them):
//
//   - light: state ON/OFF/TOGGLE, brightness 0–254, color_temp in mireds
//     (150–500). A brightness above 0 turns the light ON; brightness 0 turns it
//     OFF and keeps the last level, as Z2M reports for most bulbs. Turning ON a
//     light whose level is 0 sets brightness 254. An explicit state in the same
//     set wins over the on/off implied by brightness.
//   - switch: state ON/OFF/TOGGLE.
//   - lock: state LOCK/UNLOCK; reports state LOCK/UNLOCK and lock_state
//     locked/unlocked.
//   - cover: state OPEN/CLOSE/STOP, position 0–100, tilt 0–100. OPEN moves to
//     position 100, CLOSE to 0, a position N reports OPEN if N>0 else CLOSE,
//     STOP keeps the position. A position in the same set wins over a state.
//
// Numbers out of range are clamped. Unknown attributes and invalid values are
// logged and ignored, as Z2M does; a set with at least one valid attribute is
// answered with the full state even if nothing changed, a set with none is
// not answered.
//
// # Faults
//
// Faults are deterministic: time comes from an injected clockwork.Clock and
// randomness from an injected *rand.Rand. A set passes through these stages,
// in order, and the first that applies decides its fate:
//
//  1. a payload that is neither a JSON object nor a plain string is dropped
//     (ReasonMalformed);
//  2. a bridge in an outage ([Sim.SetBridgeOnline]) ignores the sets of all
//     its devices (ReasonBridgeOffline);
//  3. an offline device ignores the set (ReasonOffline), and so does a
//     silent one (Faults.Silent: its availability stays online,
//     ReasonSilent);
//  4. each device drops its first Faults.DropFirst sets that reach this stage
//     (ReasonDropFirst);
//  5. if Faults.DropRate > 0, one Rand.Float64 draw per set: below DropRate,
//     the set is dropped (ReasonDropRate);
//  6. a set with no valid attribute is not answered (ReasonNoValidAttribute).
//
// An accepted set changes the device's state at once; its report is published
// Faults.Latency later (on the injected clock). Reports of one device leave in
// order. A report whose device went offline, or whose bridge began an outage,
// while it waited is not published. Gets are ignored by an offline device, by
// a bridge in an outage, and by a device named in Faults.IgnoreGets (whose
// state cannot be read, though it still applies sets).
//
// A lock named in Faults.Jam does not move on a set and reports
// lock_state jammed with state UNLOCK; a device named in Faults.EchoOnly
// does not move either, and answers a set with an echo of its attributes
// only (Zigbee2MQTT's optimistic echo), never with lock_state. A device
// named in Faults.Dead answers nothing at all while its availability stays
// online: a bulb without power that Zigbee2MQTT has not yet marked offline.
//
// # Z-Wave JS UI
//
// A device with Protocol ProtocolZWaveJS is a Z-Wave node behind a
// simulated Z-Wave JS UI MQTT gateway (ValueID topics with node names,
// JSON time-value payloads {"time":<ms>,"value":…}, values and statuses
// retained), one per prefix and gateway name, as documented in Z-Wave JS
// UI's "Using MQTT" guide and gateway settings:
//
//	<prefix>/_CLIENTS/ZWAVE_GATEWAY-<name>/status          {"time","value":true}; false as will and on stop; retained
//	<prefix>/driver/status                                 the plain true/false: the Z-Wave driver ready; retained
//	<prefix>/<node>/status                                 {"time","value","status":"Alive"|"Awake"|"Asleep"|"Dead","nodeId"}; retained
//	<prefix>/<node>/<cc>/<endpoint>/<property>[/<key>]     a value; retained
//	.../set                                                 a write: {"value":…} or the plain JSON value
//	<prefix>/_CLIENTS/ZWAVE_GATEWAY-<name>/api/<api>/set   pollValue {"args":[<valueId>]}, refreshValues {"args":[<nodeId>]}
//
// Values by class: lock 98/0/targetMode and currentMode (255 secured, 0,
// 1, 16, 17, 32, 33 unsecured; SetLockMode forces any mode, such as
// LockModeUnknown); switch 37/0/targetValue and currentValue (booleans);
// light and cover 38/0/targetValue and currentValue (0–99; a write of 255
// restores the last level); climate 67/0/setpoint/1 (°C, no target). A
// write is echoed on the target value at once, as the gateway does when
// it takes it (for a sleeping node too), and the current value follows
// after Faults.Latency once the node applied it. A jammed lock (Faults.Jam)
// reports 113/0/Access_Control/Lock_state 11 (Lock jammed) and does not
// move; an EchoOnly node echoes the target and never moves. An API call is
// answered on its topic without /set with {"success","message","origin"}.
//
// A node's Name may be written raw: its topics use it as the gateway
// sanitises names (whitespace to '_', only ASCII letters, digits, '-', '_',
// '/' and Latin-1 letters kept), while events and State use Name. A node
// with Endpoints n has its class's values on endpoints 0 to n, each
// written and reported on its own. A Fahrenheit thermostat keeps its
// setpoint in °F and publishes it as the entire ValueId object with unit
// "°F". SetDriverReady(false) takes the gateway's driver away while its
// MQTT client stays connected: driver/status false, writes and API calls
// dropped as ReasonBridgeOffline, pending values lost; true brings it back.
//
// # Sleepy devices
//
// A device with a WakeInterval is asleep from the start, wakes every
// WakeInterval on Options.Clock (Sim.Wake wakes it at once) and stays
// awake for AwakeWindow. A sleeping Z-Wave node's writes and polls wait
// in the gateway's wake-up queue (SetEvent.Queued); at the wake its status
// becomes Awake, the queue is applied in order and reported, and after the
// window it is Asleep. A sleeping Zigbee2MQTT device drops sets and gets
// (ReasonAsleep: a parent buffers for seconds only), checks in with its
// full state at each wake and applies sets while awake.
//
// # Caveats
//
// The sim never does what Hearth must refuse to do, but it does what Z2M does:
// it acts on relative commands (TOGGLE) and on retained set messages (flagged in
// [SetEvent.Retained]), so tests can catch a client that sends them.
// Per-attribute set topics (<name>/set/<attribute>), groups, endpoints and the
// bridge request API are not simulated.
//
// The package never imports Hearth's protocols packages: it is written from
// Z2M's documentation so that it catches their mistakes instead of sharing them.
package simulator
