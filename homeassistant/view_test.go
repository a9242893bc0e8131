package homeassistant

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hearthd/hearth/devices"
)

// shows feeds v what Hearth publishes on topic (a mirrored state, or a
// result) and returns the ha_state it publishes, "" for none.
func shows(t *testing.T, v *View, topic, payload string) string {
	t.Helper()
	var c *Config
	rest := strings.TrimPrefix(topic, "hearth/")
	if device, ok := strings.CutSuffix(rest, "/result"); ok {
		var r devices.Result
		if err := json.Unmarshal([]byte(payload), &r); err != nil {
			t.Fatal(err)
		}
		r.Device = device
		c = v.Result(r)
	} else {
		var s map[string]any
		if json.Unmarshal([]byte(payload), &s) != nil {
			return "" // the dispatcher mirrors objects only
		}
		c = v.State(rest, s)
	}
	if c == nil {
		return ""
	}
	if want := "hearth/front_door/ha_state"; c.Topic != want && c.Topic != "hearth/garage/ha_state" {
		t.Fatalf("published on %s; want %s", c.Topic, want)
	}
	return string(c.Payload)
}

// A lock shows LOCKING from the command's acceptance until the mirror
// shows lock_state locked, and JAMMED when the bolt jams, whatever is in
// flight; an echo of state without lock_state shows nothing new.
func TestLockShowsTheActionUnderWay(t *testing.T) {
	v := Discovery{}.NewView([]devices.Device{{ID: "front_door", Class: devices.Lock}})
	steps := []struct{ topic, payload, want string }{
		{"hearth/front_door", `{"state":"UNLOCK","lock_state":"unlocked"}`, LockUnlocked},
		{"hearth/front_door/result", `{"op_id":"a","device":"front_door","status":"accepted","target":{"state":"LOCK"}}`, LockLocking},
		{"hearth/front_door", `{"state":"LOCK","lock_state":"unlocked"}`, ""}, // an echo: still locking
		{"hearth/front_door", `{"state":"LOCK","lock_state":"locked"}`, LockLocked},
		{"hearth/front_door/result", `{"op_id":"a","device":"front_door","status":"succeeded","target":{"state":"LOCK"}}`, ""},
		{"hearth/front_door/result", `{"op_id":"b","device":"front_door","status":"accepted","target":{"state":"UNLOCK"}}`, LockUnlocking},
		{"hearth/front_door/result", `{"op_id":"b","device":"front_door","status":"failed","reason":"timeout","target":{"state":"UNLOCK"}}`, LockLocked},
		{"hearth/front_door/result", `{"op_id":"c","device":"front_door","status":"accepted","target":{"state":"LOCK"}}`, ""}, // locked already
		{"hearth/front_door", `{"state":"UNLOCK","lock_state":"jammed"}`, LockJammed},
		{"hearth/front_door/result", `{"op_id":"c","device":"front_door","status":"failed","reason":"jammed","target":{"state":"LOCK"}}`, ""},
		{"hearth/front_door", `not json`, ""},
	}
	for i, s := range steps {
		if got := shows(t, v, s.topic, s.payload); got != s.want {
			t.Fatalf("step %d (%s %s): shows %q; want %q", i, s.topic, s.payload, got, s.want)
		}
	}
}

// An older command's end does not clear a newer one in flight.
func TestLockKeepsTheNewestCommandInFlight(t *testing.T) {
	v := Discovery{}.NewView([]devices.Device{{ID: "front_door", Class: devices.Lock}})
	shows(t, v, "hearth/front_door", `{"lock_state":"locked"}`)
	shows(t, v, "hearth/front_door/result", `{"op_id":"a","status":"accepted","target":{"state":"UNLOCK"}}`)
	shows(t, v, "hearth/front_door/result", `{"op_id":"b","status":"accepted","target":{"state":"UNLOCK"}}`)
	if got := shows(t, v, "hearth/front_door/result", `{"op_id":"a","status":"superseded","target":{"state":"UNLOCK"}}`); got != "" {
		t.Errorf("the superseded command's end shows %q; want UNLOCKING kept (nothing new)", got)
	}
	if got := shows(t, v, "hearth/front_door/result", `{"op_id":"b","status":"failed","target":{"state":"UNLOCK"}}`); got != LockLocked {
		t.Errorf("the newest command's end shows %q; want LOCKED", got)
	}
}

// A cover shows opening or closing toward the target in flight, by its
// position, and Zigbee2MQTT's moving when it reports one.
func TestCoverShowsTravel(t *testing.T) {
	v := Discovery{}.NewView([]devices.Device{{ID: "garage", Class: devices.Cover}})
	steps := []struct{ topic, payload, want string }{
		{"hearth/garage", `{"position":0,"state":"CLOSE"}`, CoverClosed},
		{"hearth/garage/result", `{"op_id":"a","status":"accepted","target":{"position":50}}`, CoverOpening},
		{"hearth/garage", `{"position":20}`, ""},
		{"hearth/garage", `{"position":50}`, CoverOpen},
		{"hearth/garage/result", `{"op_id":"a","status":"succeeded","target":{"position":50}}`, ""},
		{"hearth/garage/result", `{"op_id":"b","status":"accepted","target":{"state":"CLOSE"}}`, CoverClosing},
		{"hearth/garage/result", `{"op_id":"c","status":"accepted","target":{"state":"STOP"}}`, CoverStopped},
		{"hearth/garage", `{"position":30,"moving":"UP"}`, CoverOpening},
		{"hearth/garage/result", `{"op_id":"c","status":"succeeded","target":{"state":"STOP"}}`, ""},
		{"hearth/garage", `{"position":30,"moving":"STOP"}`, CoverOpen},
	}
	for i, s := range steps {
		if got := shows(t, v, s.topic, s.payload); got != s.want {
			t.Fatalf("step %d (%s %s): shows %q; want %q", i, s.topic, s.payload, got, s.want)
		}
	}
}

// The first availability report of a device asks for its configs again;
// unknown devices change nothing, and no class but lock and cover has an
// ha_state.
func TestViewNotesBridgeAvailability(t *testing.T) {
	v := Discovery{}.NewView([]devices.Device{{ID: "lamp", Class: devices.Switch}})
	if !v.Availability("lamp") {
		t.Error("first availability: want an announcement")
	}
	if v.Availability("lamp") {
		t.Error("second availability asks for an announcement again; want once")
	}
	if !v.Available("lamp") {
		t.Error("Available(lamp) false after its availability")
	}
	if v.Availability("other") || v.Available("other") {
		t.Error("an unknown device's availability counted")
	}
	if c := v.State("lamp", map[string]any{"state": "ON"}); c != nil {
		t.Errorf("a switch's state publishes %s; want nothing", c.Payload)
	}
}

// A lock whose bridge reports its bolt neither locked nor unlocked
// (Z-Wave's unknown mode) stops showing LOCKED: it shows unknown.
func TestLockWhoseStateTurnsUnknownNoLongerShowsLocked(t *testing.T) {
	v := Discovery{}.NewView([]devices.Device{{ID: "front_door", Class: devices.Lock}})
	if got := shows(t, v, "hearth/front_door", `{"state":"LOCK","lock_state":"locked"}`); got != LockLocked {
		t.Fatalf("locked: shows %q; want %q", got, LockLocked)
	}
	if got := shows(t, v, "hearth/front_door", `{"state":"LOCK","lock_state":"unknown"}`); got != StateUnknown {
		t.Fatalf("lock_state unknown after locked: shows %q; want %q", got, StateUnknown)
	}
	if got := shows(t, v, "hearth/front_door", `{"state":"LOCK","lock_state":"locked"}`); got != LockLocked {
		t.Fatalf("locked again: shows %q; want %q", got, LockLocked)
	}
}
