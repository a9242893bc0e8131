package devices

import (
	"sort"
	"strings"
)

// Access is the access bit field of one property of a device, as
// Zigbee2MQTT's exposes define it (https://www.zigbee2mqtt.io/guide/usage/exposes.html,
// "access"): AccessPublished, AccessSet and AccessGet, or'ed.
type Access uint8

// The access bits of Zigbee2MQTT's exposes.
const (
	// AccessPublished: the property appears in the device's state reports.
	AccessPublished Access = 1
	// AccessSet: the property can be set with a /set command.
	AccessSet Access = 2
	// AccessGet: the property can be read with a /get command.
	AccessGet Access = 4
)

// Has reports whether every bit of b is set in a.
func (a Access) Has(b Access) bool { return a&b == b }

// String names the bits, "published+set+get", or "none".
func (a Access) String() string {
	var parts []string
	for _, b := range []struct {
		bit  Access
		name string
	}{{AccessPublished, "published"}, {AccessSet, "set"}, {AccessGet, "get"}} {
		if a.Has(b.bit) {
			parts = append(parts, b.name)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "+")
}

// Kind is the type of a property in Zigbee2MQTT's exposes.
type Kind string

// The generic expose types of Zigbee2MQTT (lib/exposes.ts in
// zigbee-herdsman-converters).
const (
	KindBinary    Kind = "binary"
	KindNumeric   Kind = "numeric"
	KindEnum      Kind = "enum"
	KindComposite Kind = "composite"
	KindText      Kind = "text"
	KindList      Kind = "list"
)

// Property is one property of a device as its bridge describes it: for
// Zigbee2MQTT, one generic expose (a feature of a light, switch, lock,
// cover or climate expose, or a top-level one).
type Property struct {
	// Name is the key in set payloads and state reports ("brightness",
	// "state_l1", "color").
	Name string
	// Base is Name without its endpoint suffix ("state" for "state_l1"
	// with Endpoint "l1"): the attribute whose class rules apply.
	Base string
	// Endpoint is the expose's endpoint ("l1", "left"), "" for none.
	Endpoint string
	Kind     Kind
	Access   Access
	// Min and Max are value_min and value_max of a numeric property, when
	// HasMin and HasMax say they were given.
	Min, Max       float64
	HasMin, HasMax bool
	// Step is value_step of a numeric property, 0 when not given.
	Step float64
	// Values are an enum's values, in the bridge's spelling.
	Values []string
	// ValueOn and ValueOff are a binary's two values ("ON"/"OFF",
	// "LOCK"/"UNLOCK", true/false).
	ValueOn, ValueOff any
	// Unit is the unit of a numeric property ("mired", "°C", "%").
	Unit string
	// Features are the property names of a composite's features ("x",
	// "y", "hue", "saturation" for a light's color), sorted.
	Features []string
}

// Capabilities are what one device can do, from its bridge's own
// description of it (Zigbee2MQTT's bridge/devices definition exposes).
// Property lookups are O(1). A nil *Capabilities means unknown: the class
// schema alone applies. Capabilities are immutable once made.
type Capabilities struct {
	// Model, Vendor and Description name the device's definition.
	Model, Vendor, Description string
	// IEEEAddress is the device's IEEE (EUI-64) address as its bridge
	// writes it ("0x00158d0001a2b3c4"), "" when not known.
	IEEEAddress string
	props       map[string]Property
	names       []string
}

// NewCapabilities returns the capabilities made of props. Two properties
// of one name (a light's color_xy and color_hs composites, both "color")
// become one: access bits or'ed, features joined.
func NewCapabilities(model, vendor, description string, props []Property) *Capabilities {
	c := &Capabilities{Model: model, Vendor: vendor, Description: description, props: make(map[string]Property, len(props))}
	for _, p := range props {
		if p.Base == "" {
			p.Base = p.Name
		}
		if old, ok := c.props[p.Name]; ok {
			old.Access |= p.Access
			old.Features = joinSorted(old.Features, p.Features)
			if len(old.Values) == 0 {
				old.Values = p.Values
			}
			p = old
		} else {
			c.names = append(c.names, p.Name)
			p.Features = joinSorted(nil, p.Features)
		}
		c.props[p.Name] = p
	}
	sort.Strings(c.names)
	return c
}

// Property returns the property called name (its full name, "state_l1").
func (c *Capabilities) Property(name string) (Property, bool) {
	if c == nil {
		return Property{}, false
	}
	p, ok := c.props[name]
	return p, ok
}

// Names returns every property name, sorted.
func (c *Capabilities) Names() []string {
	if c == nil {
		return nil
	}
	return append([]string(nil), c.names...)
}

// Settable returns the names of the properties with the set bit whose base
// is an attribute class c takes in commands, sorted: what a command to this
// device may name.
func (c *Capabilities) Settable(class Class) []string {
	var out []string
	for _, n := range c.Names() {
		p := c.props[n]
		if _, ok := schemas[class][p.Base]; ok && p.Access.Has(AccessSet) {
			out = append(out, n)
		}
	}
	return out
}

// Name says which device these are, for an error's detail: "Philips
// 9290022166", or "this device" when unnamed.
func (c *Capabilities) name() string {
	s := strings.TrimSpace(c.Vendor + " " + c.Model)
	if s == "" {
		return "this device"
	}
	return s
}

func joinSorted(a, b []string) []string {
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	seen := make(map[string]bool, len(a)+len(b))
	var out []string
	for _, s := range append(append([]string(nil), a...), b...) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}
