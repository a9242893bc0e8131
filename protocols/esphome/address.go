package esphome

import (
	"errors"
	"fmt"
	"strings"

	"github.com/hearthd/hearth/devices"
)

// Components Hearth commands, as ESPHome names them in its topics
// (MQTTComponent::component_type).
const (
	ComponentSwitch = "switch"
	ComponentLight  = "light"
	ComponentCover  = "cover"
	ComponentLock   = "lock"
)

// Address is one ESPHome entity: the node (the level below the service's
// base topic, the node's topic_prefix being <base>/<node>), the component
// type and the entity's object_id (its name in snake case, as ESPHome
// derives it: "Front Door" → front_door).
type Address struct {
	Node, Component, ObjectID string
}

// String returns the address as ParseAddress reads it back.
func (a Address) String() string { return a.Node + "/" + a.Component + "/" + a.ObjectID }

// ErrBadAddress is wrapped by every error of ParseAddress.
var ErrBadAddress = errors.New("esphome: not an ESPHome address")

// componentOf is the component a device of each class is.
var componentOf = map[devices.Class]string{
	devices.Switch: ComponentSwitch,
	devices.Light:  ComponentLight,
	devices.Cover:  ComponentCover,
	devices.Lock:   ComponentLock,
}

// ParseAddress reads the address of a device of class c:
//
//	<node>/<component>/<object_id>    livingroom/light/ceiling, garage/cover/door
//
// node is one topic level, without wildcards or NUL; component is the
// class's (a switch is switch, a light light, a cover cover, a lock
// lock); object_id is what ESPHome makes of the entity's name: lower-case
// letters, digits, '_' and '-'. Any other class or shape fails, wrapping
// ErrBadAddress, saying what to write.
func ParseAddress(addr string, c devices.Class) (Address, error) {
	want, ok := componentOf[c]
	if !ok {
		return Address{}, fmt.Errorf("%w: a %s is not an ESPHome switch, light, cover or lock", ErrBadAddress, c)
	}
	parts := strings.Split(addr, "/")
	if len(parts) != 3 {
		return Address{}, fmt.Errorf("%w: %q has %d levels; write <node>/%s/<object_id> (the node's topic_prefix is <base_topic>/<node>)", ErrBadAddress, addr, len(parts), want)
	}
	a := Address{Node: parts[0], Component: parts[1], ObjectID: parts[2]}
	switch {
	case a.Node == "":
		return Address{}, fmt.Errorf("%w: %q: the node is empty", ErrBadAddress, addr)
	case strings.ContainsAny(a.Node, "+#\x00"):
		return Address{}, fmt.Errorf("%w: %q: node %q holds an MQTT wildcard or NUL", ErrBadAddress, addr, a.Node)
	case a.Component != want:
		return Address{}, fmt.Errorf("%w: %q: a %s is ESPHome component %s, not %q", ErrBadAddress, addr, c, want, a.Component)
	case !objectID(a.ObjectID):
		return Address{}, fmt.Errorf("%w: %q: object_id %q is not ESPHome's (lower-case letters, digits, '_' and '-': the name in snake case)", ErrBadAddress, addr, a.ObjectID)
	}
	return a, nil
}

func objectID(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// CommandFilters returns the filters of the topics on which an ESPHome
// node under base takes commands, which only Hearth may publish on: every
// component's <base>/<node>/<component>/<object_id>/command, and every
// command topic one level below it (a cover's position/command and
// tilt/command, a fan's oscillation/command, a climate's mode/command),
// whether Hearth commands that component or not.
func CommandFilters(base string) []string {
	if base == "" {
		base = DefaultBaseTopic
	}
	return []string{base + "/+/+/+/command", base + "/+/+/+/+/command"}
}
