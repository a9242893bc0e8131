// Package devices is Hearth's domain: devices and their classes, target
// attributes, commands, statuses and reasons, and the rules that decide
// whether a command is valid for a class and whether a reported state
// satisfies it.
//
// It owns the external contract's vocabulary (the statuses and reason codes
// published on hearth/<device>/result) and the parsing of a command payload
// as DESIGN.md describes it. It never does I/O, never reads a clock (callers
// pass "now"), and imports nothing of Hearth's.
//
// Attribute names and ranges follow Zigbee2MQTT's documented "exposes" for
// each class (https://www.zigbee2mqtt.io/guide/usage/exposes.html): a light's
// state is ON/OFF and its brightness 0–254, a lock's state is LOCK/UNLOCK, a
// cover's state is OPEN/CLOSE/STOP and its position 0–100.
package devices
