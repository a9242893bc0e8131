package shelly

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/hearthd/hearth/devices"
)

// MaxComponentID is the highest component instance Hearth addresses:
// Shelly numbers a device's switches, lights, covers and inputs from 0, and
// the Plus Add-on's inputs from 100 (input:100…).
const MaxComponentID = 999

// SrcLevel is the topic level, below the base topic, of Hearth's own RPC
// source: its requests carry src "<base>/hearth/<service>" and the devices
// answer on "<base>/hearth/<service>/rpc". No device may be named so.
const SrcLevel = "hearth"

// Component kinds Hearth commands.
const (
	KindSwitch = "switch"
	KindLight  = "light"
	KindCover  = "cover"
	KindInput  = "input"
)

// Address is where a device is: the Shelly device ID (the <device-id> of
// its topics, as Shelly.GetDeviceInfo's "id" gives it:
// shellyplus1pm-a8032ab12345) and the component instance that is the
// device, "switch:0", "light:0" or "cover:0". A garage door opener is a
// switch (its relay, pulsed) with an input (its door contact): Input is
// the contact's instance, -1 for any other device.
type Address struct {
	Device string
	Kind   string
	ID     int
	Input  int
}

// Key is the component's key in Shelly's status objects: "switch:0".
func (a Address) Key() string { return a.Kind + ":" + strconv.Itoa(a.ID) }

// InputKey is the contact input's key, "input:0"; "" without one.
func (a Address) InputKey() string {
	if a.Input < 0 {
		return ""
	}
	return KindInput + ":" + strconv.Itoa(a.Input)
}

// String returns the address as ParseAddress reads it back.
func (a Address) String() string {
	s := a.Device + "/" + a.Key()
	if a.Input >= 0 && a.Input != a.ID {
		s += "/" + a.InputKey()
	}
	return s
}

// Garage reports whether the address is a garage door opener: a relay
// pulsed and a contact input read.
func (a Address) Garage() bool { return a.Input >= 0 }

// ErrBadAddress is wrapped by every error of ParseAddress.
var ErrBadAddress = errors.New("shelly: not a Shelly address")

// ParseAddress reads the address of a device of class c:
//
//	<device-id>                           the class's component 0
//	<device-id>/<component>:<n>           switch:<n>, light:<n>, cover:<n>
//	<device-id>/switch:<n>/input:<m>      a garage door (cover) on a relay and a contact
//
// The component must fit the class: a switch is a switch:<n>; a light a
// light:<n> (dimmable) or a switch:<n> (on/off only); a cover a cover:<n>
// (a roller shutter) or, a garage door opener, a switch:<n> whose contact
// is input:<n> unless /input:<m> names another. <device-id> is one MQTT
// topic level without wildcards, not "hearth" (SrcLevel); n and m are
// 0–MaxComponentID. Any other class, component or shape fails, wrapping
// ErrBadAddress, with what to write instead.
func ParseAddress(addr string, c devices.Class) (Address, error) {
	parts := strings.Split(addr, "/")
	if len(parts) > 3 {
		return Address{}, fmt.Errorf("%w: %q has %d levels; write <device-id>[/<component>:<n>]", ErrBadAddress, addr, len(parts))
	}
	a := Address{Device: parts[0], Input: -1}
	if err := deviceID(a.Device); err != nil {
		return Address{}, fmt.Errorf("%w: %q: %v", ErrBadAddress, addr, err)
	}
	if len(parts) == 1 {
		switch c {
		case devices.Switch:
			a.Kind = KindSwitch
		case devices.Light:
			a.Kind = KindLight
		case devices.Cover:
			a.Kind = KindCover
		default:
			return Address{}, fmt.Errorf("%w: a %s is not a Shelly switch, light or cover", ErrBadAddress, c)
		}
		return a, nil
	}
	kind, id, err := component(parts[1])
	if err != nil {
		return Address{}, fmt.Errorf("%w: %q: %v", ErrBadAddress, addr, err)
	}
	a.Kind, a.ID = kind, id
	switch {
	case c == devices.Switch && kind == KindSwitch,
		c == devices.Light && (kind == KindLight || kind == KindSwitch),
		c == devices.Cover && kind == KindCover:
	case c == devices.Cover && kind == KindSwitch:
		a.Input = id // a garage door opener
	default:
		return Address{}, fmt.Errorf("%w: %q: a %s cannot be a Shelly %s (a switch is switch:<n>; a light light:<n> or switch:<n>; a cover cover:<n>, or switch:<n> for a garage door opener)", ErrBadAddress, addr, c, kind)
	}
	if len(parts) == 3 {
		ik, in, err := component(parts[2])
		if err != nil {
			return Address{}, fmt.Errorf("%w: %q: %v", ErrBadAddress, addr, err)
		}
		if ik != KindInput || !a.Garage() {
			return Address{}, fmt.Errorf("%w: %q: only a garage door opener (a cover on switch:<n>) takes a third level, its contact input:<m>", ErrBadAddress, addr)
		}
		a.Input = in
	}
	return a, nil
}

// deviceID checks a Shelly device ID: one topic level.
func deviceID(s string) error {
	switch {
	case s == "":
		return errors.New("the device ID is empty")
	case s == SrcLevel:
		return fmt.Errorf("%q is the level of Hearth's own RPC source", SrcLevel)
	case strings.ContainsAny(s, "+#\x00"):
		return fmt.Errorf("device ID %q holds an MQTT wildcard or NUL", s)
	}
	return nil
}

// component reads "<kind>:<n>".
func component(s string) (string, int, error) {
	kind, n, ok := strings.Cut(s, ":")
	if !ok {
		return "", 0, fmt.Errorf("component %q is not <component>:<n> (switch:0)", s)
	}
	switch kind {
	case KindSwitch, KindLight, KindCover, KindInput:
	default:
		return "", 0, fmt.Errorf("component %q: Hearth commands switch, light and cover components (and reads input)", kind)
	}
	if n == "" || len(n) > 3 || strings.Trim(n, "0123456789") != "" {
		return "", 0, fmt.Errorf("component %q: the instance is not a number 0–%d", s, MaxComponentID)
	}
	id, _ := strconv.Atoi(n)
	return kind, id, nil
}
