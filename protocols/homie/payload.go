package homie

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// State is a Homie device's $state (Homie 4.0.0 and 5, "Device
// Lifecycle").
type State string

// The lifecycle states. Homie 5 drops alert (it has $alert topics
// instead); a Homie 5 device that still says it is read as Homie 4 does.
const (
	StateInit         State = "init"
	StateReady        State = "ready"
	StateDisconnected State = "disconnected"
	StateSleeping     State = "sleeping"
	StateLost         State = "lost"
	StateAlert        State = "alert"
	// StateRemoved is an empty $state payload: Homie 5's device removal
	// (the retained $state deleted).
	StateRemoved State = ""
)

// ErrBadState is wrapped by ParseState's errors.
var ErrBadState = errors.New("homie: not a $state")

// ParseState reads a $state payload: one of the lifecycle words, exact
// (Homie payloads are case sensitive), or empty (StateRemoved).
func ParseState(p []byte) (State, error) {
	switch s := State(p); s {
	case StateInit, StateReady, StateDisconnected, StateSleeping, StateLost, StateAlert, StateRemoved:
		return s, nil
	}
	return "", fmt.Errorf("%w: %q", ErrBadState, truncate(p))
}

// Up reports whether a device in s is connected to the broker (init,
// ready, sleeping, alert); lost, disconnected and removed are not.
func (s State) Up() bool {
	switch s {
	case StateInit, StateReady, StateSleeping, StateAlert:
		return true
	}
	return false
}

// Datatypes Hearth writes.
const (
	Boolean = "boolean"
	Integer = "integer"
	Float   = "float"
)

// Meta is what a device says of one property: Homie 4's $datatype,
// $format, $settable and $retained attributes, or the property object of
// Homie 5's $description. Settable defaults to false and Retained to
// true, as the convention says.
type Meta struct {
	Datatype string
	Format   string
	Settable bool
	Retained bool
}

// ParseBool reads a Homie boolean payload: exactly "true" or "false".
func ParseBool(p []byte) (bool, error) {
	switch string(p) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("homie: %q is not a boolean (true or false)", truncate(p))
}

// ParseNumber reads an integer or float payload as the convention writes
// them: an integer is digits with an optional leading '-'; a float adds
// one '.' and an exponent (e/E), no spaces, no NaN or Infinity.
func ParseNumber(p []byte, datatype string) (float64, error) {
	s := string(p)
	if s == "" || s == "-" {
		return 0, fmt.Errorf("homie: %q is not a %s", truncate(p), datatype)
	}
	allowed := "0123456789-"
	if datatype == Float {
		allowed += ".eE+"
	}
	if strings.Trim(s, allowed) != "" {
		return 0, fmt.Errorf("homie: %q is not a %s", truncate(p), datatype)
	}
	if datatype == Integer {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("homie: %q is not a 64-bit integer", truncate(p))
		}
		return float64(n), nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("homie: %q is not a float", truncate(p))
	}
	return f, nil
}

// Range is a numeric property's $format, "[min]:[max][:step]" (Homie 5
// "Formats"; Homie 4 writes min:max).
type Range struct {
	Min, Max float64
}

// ParseRange reads a numeric $format; a missing end takes def's. Empty
// means def. It refuses a min above the max.
func ParseRange(format string, def Range) (Range, error) {
	if format == "" {
		return def, nil
	}
	parts := strings.Split(format, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return Range{}, fmt.Errorf("homie: format %q is not [min]:[max][:step]", truncate([]byte(format)))
	}
	r := def
	for i, dst := range []*float64{&r.Min, &r.Max} {
		if parts[i] == "" {
			continue
		}
		v, err := ParseNumber([]byte(parts[i]), Float)
		if err != nil {
			return Range{}, fmt.Errorf("homie: format %q: %w", truncate([]byte(format)), err)
		}
		*dst = v
	}
	if r.Min >= r.Max {
		return Range{}, fmt.Errorf("homie: format %q: the minimum is not below the maximum", truncate([]byte(format)))
	}
	return r, nil
}

// Description is what Hearth reads of a Homie 5 $description document:
// the version and each node's properties.
type Description struct {
	Homie   string
	Version int64
	// Root is the ID of the device's root device ("" for a root):
	// while the root's $state is lost, so is this device's.
	Root string
	// Props maps "<node-id>/<property-id>" to the property's Meta.
	Props map[string]Meta
}

// ParseDescription reads a Homie 5 $description: a JSON object with
// "homie" (5.x) and "version", and "nodes" → {"properties" → {…}}; each
// property needs a datatype. Unknown fields are ignored, as the
// convention asks of controllers.
func ParseDescription(p []byte) (Description, error) {
	type prop struct {
		Datatype string `json:"datatype"`
		Format   string `json:"format"`
		Settable *bool  `json:"settable"`
		Retained *bool  `json:"retained"`
	}
	var doc struct {
		Homie   *string `json:"homie"`
		Version *int64  `json:"version"`
		Root    string  `json:"root"`
		Nodes   map[string]struct {
			Properties map[string]prop `json:"properties"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(p, &doc); err != nil {
		return Description{}, fmt.Errorf("homie: $description is not a JSON object: %w", err)
	}
	if doc.Homie == nil || !strings.HasPrefix(*doc.Homie, "5.") {
		return Description{}, errors.New("homie: $description has no homie version 5.x")
	}
	if doc.Version == nil {
		return Description{}, errors.New("homie: $description has no version")
	}
	if doc.Root != "" && ValidID(doc.Root) != nil {
		return Description{}, fmt.Errorf("homie: $description: root %q is not a Homie ID", truncate([]byte(doc.Root)))
	}
	d := Description{Homie: *doc.Homie, Version: *doc.Version, Root: doc.Root, Props: map[string]Meta{}}
	for nid, n := range doc.Nodes {
		if ValidID(nid) != nil {
			return Description{}, fmt.Errorf("homie: $description: node ID %q is not a Homie ID", truncate([]byte(nid)))
		}
		for pid, pr := range n.Properties {
			if ValidID(pid) != nil {
				return Description{}, fmt.Errorf("homie: $description: node %s: property ID %q is not a Homie ID", nid, truncate([]byte(pid)))
			}
			if pr.Datatype == "" {
				return Description{}, fmt.Errorf("homie: $description: %s/%s has no datatype", nid, pid)
			}
			m := Meta{Datatype: pr.Datatype, Format: pr.Format, Retained: true}
			if pr.Settable != nil {
				m.Settable = *pr.Settable
			}
			if pr.Retained != nil {
				m.Retained = *pr.Retained
			}
			d.Props[nid+"/"+pid] = m
		}
	}
	return d, nil
}

// truncate shortens p for an error or log line.
func truncate(p []byte) string {
	if len(p) > 64 {
		return string(p[:64]) + "…"
	}
	return string(p)
}
