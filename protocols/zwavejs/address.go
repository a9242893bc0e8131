package zwavejs

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MaxEndpoint is the highest Multi Channel endpoint a Z-Wave node has
// (the Multi Channel CC carries the endpoint in 7 bits); endpoint 0 is the
// node itself, its root device.
const MaxEndpoint = 127

// DriverStatusTopic is the level, below the prefix, on which Z-Wave JS UI
// publishes whether its Z-Wave driver (the controller) is ready: the
// plain JSON true or false, with the MQTT retain setting of the gateway
// (api/lib/Gateway.ts, _onDriverStatus: this._mqtt.publish('driver/status',
// ready); MqttClient.getTopic puts the prefix before it). A node named
// "driver" would publish its status on the same topic, so no address may
// be "driver".
const DriverStatusTopic = "driver/status"

// Address is where a device is in the gateway's topics: the node's levels
// and the Multi Channel endpoint whose values are the device.
type Address struct {
	// Node is the node's topic levels, "<location>/<node>" or "<node>",
	// each as SanitizeTopic writes it: the node's name (with "Use nodes
	// name instead of numeric nodeIDs") or its numeric ID.
	Node string
	// Endpoint is the endpoint, 0 (the root device, the default) to
	// MaxEndpoint: a double switch takes commands and reports on 1 and 2.
	Endpoint int
}

// String returns the address in a form ParseAddress reads back the same
// (with the nodeNames it was read with): "<node>" for endpoint 0 of a node
// without a location, else "<node>/<endpoint>" ("hall/7/0": "hall/7" alone
// could read as node hall's endpoint 7, and "0/0" as node 0's endpoint 0).
func (a Address) String() string {
	if a.Endpoint == 0 && !strings.Contains(a.Node, "/") {
		return a.Node
	}
	return a.Node + "/" + strconv.Itoa(a.Endpoint)
}

// ErrBadAddress is wrapped by every error of ParseAddress.
var ErrBadAddress = errors.New("zwavejs: not a Z-Wave JS UI address")

// ParseAddress reads a device's address: [<location>/]<node>[/<endpoint>],
// each level sanitised as the gateway sanitises the names it puts in topics
// (SanitizeTopic), so that a raw name such as "Living Room/Double Switch"
// reaches the node published as Living_Room/Double_Switch.
//
// One level is a node. Three are a location, a node and an endpoint (a
// number 0–MaxEndpoint). Two levels <a>/<b> with b a number are node a's
// endpoint b when a is a number too ("12/2", node ID 12) or when nodeNames
// says the gateway names its nodes (its "Use nodes name instead of numeric
// nodeIDs"): "kitchen_double/2"; otherwise they are node b at location a
// ("bed/7"), as before endpoints could be addressed. Any other two levels
// are <location>/<node>.
//
// It fails, wrapping ErrBadAddress, for an empty address, more than three
// levels, a level that sanitising empties (it has none of the characters
// the gateway keeps), a third level that is not an endpoint, a first level
// starting with '_' (the gateway's own _CLIENTS topics) and the node
// "driver" (DriverStatusTopic).
func ParseAddress(addr string, nodeNames bool) (Address, error) {
	if addr == "" {
		return Address{}, fmt.Errorf("%w: the address is empty", ErrBadAddress)
	}
	levels := strings.Split(addr, "/")
	if len(levels) > 3 {
		return Address{}, fmt.Errorf("%w: %q has %d levels; write [<location>/]<node>[/<endpoint>]", ErrBadAddress, addr, len(levels))
	}
	for i, l := range levels {
		s := SanitizeTopic(l)
		if s == "" {
			return Address{}, fmt.Errorf("%w: level %q of %q has no character the gateway keeps in a topic (letters, digits, '-', '_', Latin-1 letters)", ErrBadAddress, l, addr)
		}
		levels[i] = s
	}
	if strings.HasPrefix(levels[0], "_") {
		return Address{}, fmt.Errorf("%w: %q starts with '_', the level of the gateway's own topics (_CLIENTS)", ErrBadAddress, addr)
	}
	var a Address
	switch {
	case len(levels) == 3:
		ep, ok := endpointNumber(levels[2])
		if !ok {
			return Address{}, fmt.Errorf("%w: %q: the third level %q is not an endpoint (0–%d); write [<location>/]<node>[/<endpoint>]", ErrBadAddress, addr, levels[2], MaxEndpoint)
		}
		a = Address{Node: levels[0] + "/" + levels[1], Endpoint: ep}
	case len(levels) == 2 && digits(levels[1]) && (digits(levels[0]) || nodeNames):
		ep, ok := endpointNumber(levels[1])
		if !ok {
			return Address{}, fmt.Errorf("%w: %q: endpoint %s is above %d", ErrBadAddress, addr, levels[1], MaxEndpoint)
		}
		a = Address{Node: levels[0], Endpoint: ep}
	default:
		a = Address{Node: strings.Join(levels, "/")}
	}
	if a.Node == "driver" {
		return Address{}, fmt.Errorf("%w: %q: a node named driver would publish its status on the gateway's %s", ErrBadAddress, addr, DriverStatusTopic)
	}
	return a, nil
}

// digits reports whether s is one or more ASCII digits.
func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// endpointNumber reads an endpoint level: digits, 0–MaxEndpoint.
func endpointNumber(s string) (int, bool) {
	if !digits(s) || len(s) > 3 {
		return 0, false
	}
	n, _ := strconv.Atoi(s)
	return n, n <= MaxEndpoint
}

// SanitizeTopic writes a name as Z-Wave JS UI puts it in a topic level: it
// mirrors sanitizeTopic(str) of api/lib/utils.ts (without sanitizeSlash),
// which replaces every whitespace character (JavaScript's \s) with '_' and
// then removes every character outside A–Z, a–z, 0–9, '-', '_', '/' and
// the Latin-1 letters À–Ö, Ø–ö, ø–ÿ (U+00C0–U+00D6, U+00D8–U+00F6,
// U+00F8–U+00FF). So "Living Room" becomes "Living_Room" and "Lamp (2)"
// becomes "Lamp_2". The gateway applies it to the location and to the node
// name of every topic (Gateway.ts, nodeTopic and valueTopic).
func SanitizeTopic(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case jsSpace(r):
			b.WriteByte('_')
		case r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_', r == '/',
			r >= 0xC0 && r <= 0xD6, r >= 0xD8 && r <= 0xF6, r >= 0xF8 && r <= 0xFF:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// jsSpace reports whether r is matched by JavaScript's \s (ECMAScript
// WhiteSpace and LineTerminator): tab, line feed, vertical tab, form feed,
// carriage return, space, U+00A0, U+1680, U+2000–U+200A, U+2028, U+2029,
// U+202F, U+205F, U+3000 and U+FEFF.
func jsSpace(r rune) bool {
	switch {
	case r >= '\t' && r <= '\r', r == ' ', r == 0xA0, r == 0x1680, r >= 0x2000 && r <= 0x200A,
		r == 0x2028, r == 0x2029, r == 0x202F, r == 0x205F, r == 0x3000, r == 0xFEFF:
		return true
	}
	return false
}
