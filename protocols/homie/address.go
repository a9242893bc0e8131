package homie

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hearthd/hearth/devices"
)

// DefaultBaseTopic is the root topic of Homie 4 ("homie/"), the default
// base topic of a homie service.
const DefaultBaseTopic = "homie"

// Root is where a service's Homie devices live: the root topic (Homie 4's
// "homie", Homie 5's "<domain>/5") and the convention's major version.
type Root struct {
	Topic   string
	Version int // 4 or 5
}

// ParseBase reads a homie service's base topic: one level (a Homie 4 root
// topic, "homie" by default) or <domain>/5 (a Homie 5 root, "homie/5": the
// convention puts the major version in the second level and forbids
// customising it). Each level is a Homie ID (ValidID). "" means
// DefaultBaseTopic.
func ParseBase(base string) (Root, error) {
	if base == "" {
		base = DefaultBaseTopic
	}
	levels := strings.Split(base, "/")
	for _, l := range levels {
		if err := ValidID(l); err != nil {
			return Root{}, fmt.Errorf("base topic %q: %w", base, err)
		}
	}
	switch {
	case len(levels) == 1:
		return Root{Topic: base, Version: 4}, nil
	case len(levels) == 2 && levels[1] == "5":
		return Root{Topic: base, Version: 5}, nil
	}
	return Root{}, fmt.Errorf("base topic %q is neither a Homie 4 root (one level: homie) nor a Homie 5 root (<domain>/5: homie/5)", base)
}

// ValidID reports whether id is a Homie topic level ID: lowercase letters
// a–z, digits and '-', not empty and not starting or ending with '-'
// (Homie 4.0.0, "Topic IDs"; Homie 5 keeps the character set). IDs that
// begin with '$' are Homie's attributes, never a device, node or property.
func ValidID(id string) error {
	if id == "" {
		return fmt.Errorf("an empty ID")
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("ID %q: a Homie ID has only a-z, 0-9 and '-' (%q at byte %d)", id, c, i)
		}
	}
	if id[0] == '-' || id[len(id)-1] == '-' {
		return fmt.Errorf("ID %q: a Homie ID does not start or end with '-'", id)
	}
	return nil
}

// Address is a device in Homie's own terms: the Homie device, the node,
// and the settable properties that carry the class's attributes:
//
//	switch: <device-id>/<node-id>/<on-property>               (boolean)
//	light:  <device-id>/<node-id>/<on-property>[,<brightness>] (boolean; integer or float)
//
// A light's one property may also be numeric (a dimmer without on/off):
// the device's $datatype says which, at run time.
//
// The properties of one node are written comma-separated, as Homie 4's
// $properties lists them: "kitchen-light/light/power,brightness" is the
// convention's own dimmable light.
type Address struct {
	Device string
	Node   string
	// Power is the boolean property whose true is ON.
	Power string
	// Brightness is a light's dimming property ("" for none): Hearth's
	// brightness 0–254 scaled to its $format's range (0:100 by default).
	Brightness string
}

// String returns the address as ParseAddress reads it back.
func (a Address) String() string {
	s := a.Device + "/" + a.Node + "/" + a.Power
	if a.Brightness != "" {
		s += "," + a.Brightness
	}
	return s
}

// Properties returns the address's property IDs, Power first.
func (a Address) Properties() []string {
	if a.Brightness == "" {
		return []string{a.Power}
	}
	return []string{a.Power, a.Brightness}
}

// ParseAddress reads the address of a device of class c (see Address).
// Classes other than switch and light are refused: Homie has no request
// that reads a device's state fresh, which Hearth needs before every
// attempt at a lock, a garage door or a valve (DESIGN.md principle 6), and
// no standard cover property.
// ErrBadAddress is wrapped by every error of ParseAddress.
var ErrBadAddress = errors.New("homie: not a Homie address")

func badAddress(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadAddress, fmt.Sprintf(format, args...))
}

func ParseAddress(addr string, c devices.Class) (Address, error) {
	switch c {
	case devices.Switch, devices.Light:
	default:
		return Address{}, badAddress("a %s cannot be a Homie device here: Hearth commands Homie switches and lights (Homie has no fresh read for locks, garage doors and valves, and no standard cover)", c)
	}
	parts := strings.Split(addr, "/")
	if len(parts) != 3 {
		return Address{}, badAddress("%q is not a Homie address: write <device-id>/<node-id>/<property-id> (kitchen-light/light/power)", addr)
	}
	props := strings.Split(parts[2], ",")
	want := 1
	if c == devices.Light {
		want = 2
	}
	if len(props) > want {
		if c == devices.Light {
			return Address{}, badAddress("%q: a light names at most two properties, <on-property>,<brightness-property> (power,brightness)", addr)
		}
		return Address{}, badAddress("%q: a switch names one property, its boolean on/off (power)", addr)
	}
	for i, id := range append([]string{parts[0], parts[1]}, props...) {
		what := [...]string{"device", "node", "property", "property"}[i]
		if err := ValidID(id); err != nil {
			return Address{}, badAddress("%q: the %s %v", addr, what, err)
		}
	}
	a := Address{Device: parts[0], Node: parts[1], Power: props[0]}
	if len(props) == 2 {
		if props[1] == props[0] {
			return Address{}, badAddress("%q: the on and brightness properties are one property", addr)
		}
		a.Brightness = props[1]
	}
	return a, nil
}

// CommandFilters returns the filters of the topics on which a Homie
// device under base takes commands, which only Hearth may publish on:
// every property's set topic (<root>/<device>/<node>/<property>/set) and
// the broadcast channel (<root>/$broadcast/#).
func CommandFilters(base string) []string {
	if base == "" {
		base = DefaultBaseTopic
	}
	return []string{base + "/+/+/+/set", base + "/$broadcast/#"}
}
