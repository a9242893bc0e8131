package homeassistant

import (
	"strings"
	"sync"

	"github.com/hearthd/hearth/devices"
)

// The states a lock entity shows (Home Assistant's MQTT lock defaults).
const (
	LockLocked    = "LOCKED"
	LockUnlocked  = "UNLOCKED"
	LockLocking   = "LOCKING"
	LockUnlocking = "UNLOCKING"
	LockJammed    = "JAMMED"
)

// StateUnknown is the payload Home Assistant's MQTT entities take as
// "unknown" (its PAYLOAD_NONE).
const StateUnknown = "None"

// The states a cover entity shows (Home Assistant's MQTT cover defaults).
const (
	CoverOpen    = "open"
	CoverOpening = "opening"
	CoverClosed  = "closed"
	CoverClosing = "closing"
	CoverStopped = "stopped"
)

// View derives the state a lock or cover entity shows, the action under
// way included (LOCKING, opening), from what Hearth publishes on its own
// topics: the device's mirrored state (<prefix>/<device>, retained) and
// its command results (<prefix>/<device>/result). The caller hands it
// both as the dispatcher produces them. It is published retained on
// <prefix>/<device>/ha_state, which those entities read, because Home
// Assistant's lock and cover take their state from one topic and neither
// of Hearth's says it all: the mirror has no command, the results are not
// retained.
//
// A command in flight is the newest one accepted or queued and not yet
// ended. While it is, the entity shows it moving (LOCKING, UNLOCKING,
// opening, closing) until the mirror shows its target; a jammed bolt
// shows JAMMED whatever is in flight. With none in flight the mirror
// alone decides; with nothing known, nothing is published.
//
// View also notes which devices' bridges report their availability, so
// that the caller can announce those devices again with it (see
// Device.Availability).
//
// It is safe for concurrent use.
type View struct {
	d       Discovery
	classes map[string]devices.Class // the devices whose entities read ha_state

	mu        sync.Mutex
	state     map[string]map[string]any
	pending   map[string]pending
	shown     map[string]string
	available map[string]bool
}

type pending struct {
	opID   string
	target devices.Target
}

// NewView returns the view of devs: their locks and covers, and every
// device's availability.
func (d Discovery) NewView(devs []devices.Device) *View {
	v := &View{
		d: d, classes: map[string]devices.Class{},
		state: map[string]map[string]any{}, pending: map[string]pending{},
		shown: map[string]string{}, available: map[string]bool{},
	}
	for _, dev := range devs {
		v.classes[dev.ID] = dev.Class
	}
	return v
}

// showsState reports whether device's entity shows an ha_state: a lock
// or a cover.
func (v *View) showsState(device string) bool {
	c := v.classes[device]
	return c == devices.Lock || c == devices.Cover
}

// Availability takes an availability report of device from its bridge
// (as Hearth mirrors it on <prefix>/<device>/availability). It reports
// whether it is the first: the device's configs must then be published
// again, with its availability (see Device.Availability).
func (v *View) Availability(device string) (first bool) {
	if _, known := v.classes[device]; !known {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.available[device] {
		return false
	}
	v.available[device] = true
	return true
}

// Available reports whether device's bridge has reported its availability.
func (v *View) Available(device string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.available[device]
}

// Result takes a result Hearth published on <prefix>/<device>/result and
// returns the ha_state to publish (retained) if the state the device's
// lock or cover entity shows changed, else nil.
func (v *View) Result(r devices.Result) *Config {
	if !v.showsState(r.Device) {
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	switch {
	case r.Status == devices.Accepted || r.Status == devices.Queued:
		v.pending[r.Device] = pending{opID: r.OpID, target: r.Target}
	case r.Status.Terminal() && r.Status != devices.Rejected && v.pending[r.Device].opID == r.OpID:
		// (A rejection never ends a command in flight: one naming its
		// op_id is another principal's, refused.)
		delete(v.pending, r.Device)
	default:
		return nil
	}
	return v.showLocked(r.Device)
}

// State takes device's state as Hearth mirrors it (<prefix>/<device>,
// from its bridge's reports or restored from the store at start) and
// returns the ha_state to publish, as Result does.
func (v *View) State(device string, state map[string]any) *Config {
	if !v.showsState(device) {
		return nil // kept by nobody
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.state[device] = state
	return v.showLocked(device)
}

// Shown returns the ha_state of every device that shows one, for the
// caller to publish again (after a reconnect: one that failed to go out is
// not sent again otherwise).
func (v *View) Shown() []Config {
	v.mu.Lock()
	defer v.mu.Unlock()
	var out []Config
	for device, word := range v.shown {
		out = append(out, Config{Topic: v.d.topic(device, "ha_state"), Payload: []byte(word)})
	}
	return out
}

func (v *View) showLocked(device string) *Config {
	var word string
	switch v.classes[device] {
	case devices.Lock:
		word = lockShows(v.state[device], v.pending[device].target)
	case devices.Cover:
		word = coverShows(v.state[device], v.pending[device].target)
	default:
		return nil
	}
	if word == "" || word == v.shown[device] {
		return nil
	}
	if word == StateUnknown && v.shown[device] == "" {
		return nil // nothing shown yet: nothing to take back
	}
	v.shown[device] = word
	return &Config{Topic: v.d.topic(device, "ha_state"), Payload: []byte(word)}
}

// lockShows is the state a lock entity shows, from the lock's mirrored
// state and the target of its command in flight (nil: none). Its
// lock_state decides, never its state (see devices.Satisfied).
func lockShows(state map[string]any, target devices.Target) string {
	ls, _ := state["lock_state"].(string)
	ls = strings.ToLower(ls)
	switch {
	case ls == "jammed" || ls == "not_fully_locked":
		return LockJammed
	case target["state"] == "LOCK" && ls != "locked":
		return LockLocking
	case target["state"] == "UNLOCK" && ls != "unlocked":
		return LockUnlocking
	case ls == "locked":
		return LockLocked
	case ls == "unlocked":
		return LockUnlocked
	case state != nil:
		// Reported, but neither locked nor unlocked (Z-Wave's unknown
		// mode, a null): never left showing LOCKED.
		return StateUnknown
	}
	return ""
}

// coverShows is the state a cover entity shows, from the cover's mirrored
// state (position 0–100, state OPEN/CLOSE/STOP, Zigbee2MQTT's moving
// UP/DOWN/STOP) and the target of its command in flight (nil: none).
func coverShows(state map[string]any, target devices.Target) string {
	pos, hasPos := state["position"].(float64)
	if m, _ := state["moving"].(string); strings.EqualFold(m, "UP") {
		return CoverOpening
	} else if strings.EqualFold(m, "DOWN") {
		return CoverClosing
	}
	if target != nil {
		want, ok := target["position"].(float64)
		switch target["state"] {
		case "OPEN":
			want, ok = 100, true
		case "CLOSE":
			want, ok = 0, true
		case "STOP":
			return CoverStopped
		}
		if ok && (!hasPos || pos != want) {
			if (hasPos && want > pos) || (!hasPos && want > 0) {
				return CoverOpening
			}
			return CoverClosing
		}
	}
	if hasPos {
		if pos == 0 {
			return CoverClosed
		}
		return CoverOpen
	}
	switch s, _ := state["state"].(string); strings.ToUpper(s) {
	case "OPEN":
		return CoverOpen
	case "CLOSE", "CLOSED":
		return CoverClosed
	case "STOP":
		return CoverStopped
	}
	return ""
}
