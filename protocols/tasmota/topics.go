package tasmota

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// DefaultFullTopic is Tasmota's default FullTopic (its MQTT_FULLTOPIC),
// as "MQTT Topic Definition" of Tasmota's MQTT documentation gives it:
// https://tasmota.github.io/docs/MQTT/#fulltopic.
const DefaultFullTopic = "%prefix%/%topic%/"

// The three prefixes of Tasmota's FullTopic, at their defaults (Prefix1,
// Prefix2, Prefix3). Hearth needs the devices to keep them.
const (
	PrefixCommand   = "cmnd" // commands and queries, to the device
	PrefixStatus    = "stat" // answers and status, from the device
	PrefixTelemetry = "tele" // telemetry and the LWT, from the device
)

// MaxIndex is the highest relay (POWER<n>) or shutter (ShutterPosition<n>)
// index an address may name: 8, Tasmota's relay count on an ESP8266
// (MAX_RELAYS).
const MaxIndex = 8

// maxTopicLength bounds a device's Topic: Tasmota keeps it in a 33-byte
// setting, 32 characters.
const maxTopicLength = 32

// FullTopic is a parsed Tasmota FullTopic: its levels, each "%prefix%",
// "%topic%" or a literal level. The zero value is not valid; use
// ParseFullTopic.
type FullTopic struct {
	levels []string
}

// ParseFullTopic parses a FullTopic as Tasmota's "FullTopic" command takes
// it ("" means DefaultFullTopic): levels separated by '/', a trailing '/'
// optional (Tasmota adds it). Hearth needs %prefix% and %topic% each once,
// each a whole level, and literal levels without '%', '+', '#' or control
// characters: a FullTopic with %hostname% or %id% names topics Hearth
// cannot know from the config, and one without %topic% or %prefix% cannot
// tell devices or commands from reports apart.
func ParseFullTopic(s string) (FullTopic, error) {
	if s == "" {
		s = DefaultFullTopic
	}
	if len(s) > 100 {
		return FullTopic{}, fmt.Errorf("full topic %q is longer than Tasmota's 100 characters", s)
	}
	levels := strings.Split(strings.TrimSuffix(s, "/"), "/")
	var prefix, topic int
	for _, l := range levels {
		switch {
		case l == "%prefix%":
			prefix++
		case l == "%topic%":
			topic++
		case l == "":
			return FullTopic{}, fmt.Errorf("full topic %q has an empty level", s)
		case strings.Contains(l, "%"):
			return FullTopic{}, fmt.Errorf("full topic %q: level %q: Hearth takes only %%prefix%% and %%topic%%, each as a whole level (it cannot know a device's %%hostname%% or %%id%%)", s, l)
		case strings.ContainsAny(l, "+#") || strings.ContainsFunc(l, unicode.IsControl):
			return FullTopic{}, fmt.Errorf("full topic %q: level %q holds a wildcard or a control character", s, l)
		}
	}
	if prefix != 1 || topic != 1 {
		return FullTopic{}, fmt.Errorf("full topic %q must hold %%prefix%% and %%topic%% once each, as whole levels", s)
	}
	return FullTopic{levels: levels}, nil
}

// String returns the FullTopic in Tasmota's form, with its trailing '/'.
func (f FullTopic) String() string { return strings.Join(f.levels, "/") + "/" }

// Topic returns the topic of command (or report) cmd of the device whose
// Topic is topic, under prefix: "cmnd/kitchen/POWER" for the default
// FullTopic.
func (f FullTopic) Topic(prefix, topic, cmd string) string {
	return f.expand(prefix, topic) + "/" + cmd
}

// Filter returns the MQTT filter of every topic under prefix, of any
// device: "stat/+/#" for the default FullTopic.
func (f FullTopic) Filter(prefix string) string { return f.expand(prefix, "+") + "/#" }

func (f FullTopic) expand(prefix, topic string) string {
	out := make([]string, len(f.levels))
	for i, l := range f.levels {
		switch l {
		case "%prefix%":
			out[i] = prefix
		case "%topic%":
			out[i] = topic
		default:
			out[i] = l
		}
	}
	return strings.Join(out, "/")
}

// Split reads a topic name under f: the prefix, the device's Topic and the
// command (the one level after the FullTopic). ok is false for a name that
// is not one level below f.
func (f FullTopic) Split(name string) (prefix, topic, cmd string, ok bool) {
	levels := strings.Split(name, "/")
	if len(levels) != len(f.levels)+1 || len(f.levels) == 0 {
		return "", "", "", false
	}
	for i, l := range f.levels {
		switch l {
		case "%prefix%":
			prefix = levels[i]
		case "%topic%":
			topic = levels[i]
		default:
			if levels[i] != l {
				return "", "", "", false
			}
		}
	}
	cmd = levels[len(levels)-1]
	return prefix, topic, cmd, prefix != "" && topic != "" && cmd != ""
}

// CommandFilters returns the MQTT filters of every topic on which a
// Tasmota device under fullTopic ("" means DefaultFullTopic) takes a
// command, which only Hearth may publish on: the cmnd prefix with any
// Topic (so a device's GroupTopic, "tasmotas" by default, and its
// FallbackTopic, DVES_XXXXXX_fb, are covered too) and any command.
func CommandFilters(fullTopic string) ([]string, error) {
	f, err := ParseFullTopic(fullTopic)
	if err != nil {
		return nil, err
	}
	return []string{f.Filter(PrefixCommand)}, nil
}

// ReportFilters returns the MQTT filters of the topics Tasmota devices
// under fullTopic publish on, stat and tele, which only the service's
// account may publish on.
func ReportFilters(fullTopic string) ([]string, error) {
	f, err := ParseFullTopic(fullTopic)
	if err != nil {
		return nil, err
	}
	return []string{f.Filter(PrefixStatus), f.Filter(PrefixTelemetry)}, nil
}

// Address is a Tasmota device's address: its Topic (%topic%) and, for a
// device with several relays or shutters, the index of the one that is
// the Hearth device (POWER<Index>, ShutterPosition<Index>); 0 for none.
type Address struct {
	Topic string
	Index int
}

// String returns the address as the config writes it: "<topic>" or
// "<topic>/<index>".
func (a Address) String() string {
	if a.Index == 0 {
		return a.Topic
	}
	return a.Topic + "/" + strconv.Itoa(a.Index)
}

// ErrAddress is wrapped by every error of ParseAddress.
var ErrAddress = errors.New("not a Tasmota address")

// ParseAddress reads a device address "<topic>" or "<topic>/<index>":
// topic is the device's Tasmota Topic, one MQTT level of at most 32
// characters without wildcards, '%' or control characters; index, a
// relay or shutter from 1 to MaxIndex, written without a leading zero.
func ParseAddress(addr string) (Address, error) {
	topic, idx, hasIndex := strings.Cut(addr, "/")
	a := Address{Topic: topic}
	switch {
	case topic == "":
		return Address{}, fmt.Errorf("%w: %q has no Topic: write <topic> or <topic>/<relay>", ErrAddress, addr)
	case len(topic) > maxTopicLength:
		return Address{}, fmt.Errorf("%w: Topic %q is longer than Tasmota's %d characters", ErrAddress, topic, maxTopicLength)
	case strings.ContainsAny(topic, "+#%") || strings.ContainsFunc(topic, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }):
		return Address{}, fmt.Errorf("%w: Topic %q holds a wildcard, '%%', a space or a control character", ErrAddress, topic)
	}
	if !hasIndex {
		return a, nil
	}
	n, err := strconv.Atoi(idx)
	if err != nil || n < 1 || n > MaxIndex || strconv.Itoa(n) != idx {
		return Address{}, fmt.Errorf("%w: %q: the relay or shutter %q is not a number from 1 to %d (write <topic> or <topic>/<relay>)", ErrAddress, addr, idx, MaxIndex)
	}
	a.Index = n
	return a, nil
}
