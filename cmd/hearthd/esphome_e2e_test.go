package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/simulator"
)

// esphomeConfig is four ESPHome nodes, each with topic_prefix
// esphome/<node>: a relay, a dimmable light, a garage door (a cover with
// position, safety-critical) and a front door lock.
const esphomeConfig = `
mqtt:
  listen: 127.0.0.1:0
  reconnect: {base: 10ms, cap: 100ms}
http:
  listen: 127.0.0.1:0
defaults:
  ttl: 60s
services:
  nodes:
    protocol: esphome
devices:
  relay:
    class: switch
    address: kitchen/switch/relay
  ceiling:
    class: light
    address: livingroom/light/ceiling
  garage:
    class: cover
    safety: critical
    address: garage/cover/door
    attempt_timeout: 10s
  front:
    class: lock
    address: frontdoor/lock/front_door
    attempt_timeout: 10s
`

const (
	relayAddr   = "kitchen/switch/relay"
	ceilingAddr = "livingroom/light/ceiling"
	garageDoor  = "garage/cover/door"
	frontLock   = "frontdoor/lock/front_door"
)

// esphomeHarness starts hearthd with the simulated nodes and waits until
// hearthd has mirrored a live state of every device named in live.
func esphomeHarness(t *testing.T, config string, faults simulator.Faults, live ...string) *harness {
	t.Helper()
	h := newHarness(t, harnessOptions{config: config, faults: faults})
	for _, d := range live {
		h.awaitMirror(t, d, func(map[string]any) bool { return true })
	}
	return h
}

// awaitMirror waits until hearth/<device> holds a state ok accepts.
func (h *harness) awaitMirror(t *testing.T, device string, ok func(map[string]any) bool) map[string]any {
	t.Helper()
	mirror := h.watch("hearth/" + device)
	deadline := time.After(eventWait)
	for {
		select {
		case m := <-mirror:
			var s map[string]any
			if json.Unmarshal(m.Payload(), &s) == nil && ok(s) {
				return s
			}
		case <-deadline:
			t.Fatalf("hearth/%s never held the state awaited", device)
		}
	}
}

// advanceLastTimeout moves the clock by d, the timeout of an attempt that
// no retry follows (the last, or one the read-back ends), once the
// attempt's timer is set.
func (h *harness) advanceLastTimeout(d time.Duration) {
	h.t.Helper()
	h.eventually("the attempt's timer", func() bool { return h.clock.dueIn(d) })
	h.advance(d)
}

// A switch command goes out as ESPHome's plain ON on the entity's command
// topic and is confirmed on attempt 1 by the node's state report.
func TestESPHomeSwitchSucceedsOnFirstAttempt(t *testing.T) {
	h := esphomeHarness(t, esphomeConfig, simulator.Faults{}, "relay")
	h.publish("relay", `{"state":"ON","op_id":"e1"}`)
	set := h.nextSet()
	if set.Device != relayAddr || set.Topic != "esphome/kitchen/switch/relay/command" || string(set.Payload) != "ON" || set.Retained {
		t.Fatalf("command %q on %s (retained %v); want ON on esphome/kitchen/switch/relay/command, not retained", set.Payload, set.Topic, set.Retained)
	}
	r := h.final("e1")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["state"] != "ON" {
		t.Fatalf("result %s after %d attempts, state %v (%s); want succeeded after 1, ON", r.Status, r.Attempts, r.State, r.Detail)
	}
	if n := h.sim.Sets(relayAddr); n != 1 {
		t.Errorf("the relay got %d commands; want 1", n)
	}
}

// A command the node never heard is sent again after the attempt timeout
// (and the read-back, which finds the relay still OFF) and the backoff,
// and succeeds on attempt 2.
func TestESPHomeDroppedCommandSucceedsOnSecondAttempt(t *testing.T) {
	h := esphomeHarness(t, esphomeConfig, simulator.Faults{DropFirst: 1}, "relay")
	h.publish("relay", `{"state":"ON","op_id":"e2"}`)
	if first := h.nextSet(); !first.Dropped {
		t.Fatal("the simulator did not drop the first command")
	}
	h.advanceTimeout(5 * time.Second) // attempt timeout
	h.advance(1 * time.Second)        // backoff before retry 1
	if second := h.nextSet(); second.Dropped || string(second.Payload) != "ON" {
		t.Fatalf("second command %q (dropped %v); want ON, applied", second.Payload, second.Dropped)
	}
	r := h.final("e2")
	if r.Status != devices.Succeeded || r.Attempts != 2 {
		t.Fatalf("result %s after %d attempts (%s); want succeeded after 2", r.Status, r.Attempts, r.Detail)
	}
}

// A node that hears the command and does nothing (EchoOnly) publishes no
// state: its live state (OFF) read back after each attempt is not the
// target, so 3 commands go out and the command fails on timeout.
func TestESPHomeCommandHeardButNotActedOnConfirmsNothing(t *testing.T) {
	h := esphomeHarness(t, esphomeConfig, simulator.Faults{EchoOnly: []string{relayAddr}}, "relay")
	h.publish("relay", `{"state":"ON","op_id":"e3"}`)
	for attempt := 1; attempt <= 3; attempt++ {
		if e := h.nextSet(); e.Reason != simulator.ReasonEchoOnly {
			t.Fatalf("attempt %d: %+v; want echo only", attempt, e)
		}
		if attempt < 3 {
			h.advanceTimeout(5 * time.Second)
			h.advance(time.Duration(1<<(attempt-1)) * time.Second)
		}
	}
	h.advanceLastTimeout(5 * time.Second)
	r := h.final("e3")
	if r.Status != devices.Failed || r.Reason != devices.ReasonTimeout || r.Attempts != 3 {
		t.Fatalf("result %s/%s after %d attempts (%s); want failed/timeout after 3", r.Status, r.Reason, r.Attempts, r.Detail)
	}
}

// A command to the state the relay is in already draws no report
// (ESPHome does not publish an unchanged state): the read-back after the
// unconfirmed attempt finds the live state at the target and ends it
// succeeded, with one command sent.
func TestESPHomeCommandToTheCurrentStateSucceedsByTheReadBack(t *testing.T) {
	h := esphomeHarness(t, esphomeConfig, simulator.Faults{}, "relay")
	h.publish("relay", `{"state":"OFF","op_id":"e4"}`)
	if e := h.nextSet(); e.Dropped || string(e.Payload) != "OFF" {
		t.Fatalf("command %+v; want OFF applied", e)
	}
	h.advanceLastTimeout(5 * time.Second)
	r := h.final("e4")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["state"] != "OFF" {
		t.Fatalf("result %s/%s after %d attempts (%s), state %v; want succeeded after 1, OFF", r.Status, r.Reason, r.Attempts, r.Detail, r.State)
	}
	if n := h.sim.Sets(relayAddr); n != 1 {
		t.Errorf("the relay got %d commands; want 1", n)
	}
}

// A node's will (status offline) marks its devices offline: a command
// ends failed/device_offline with nothing sent; once every node of the
// service said offline, the service's breaker opens.
func TestESPHomeWillMarksOfflineAndOpensTheBreaker(t *testing.T) {
	relayOnly := esphomeConfig[:strings.Index(esphomeConfig, "  ceiling:\n")]
	h := esphomeHarness(t, relayOnly, simulator.Faults{}, "relay")
	states := h.watch("hearth/services/nodes/state")
	if err := h.sim.SetOnline(relayAddr, false); err != nil {
		t.Fatal(err)
	}
	h.awaitAvailability(t, "relay", "offline")
	if s := nextState(t, states, "open"); s.State != "open" {
		t.Fatalf("breaker %q; want open", s.State)
	}
	h.publish("relay", `{"state":"ON","op_id":"e5"}`)
	r := h.final("e5")
	if r.Status != devices.Failed || r.Attempts != 0 {
		t.Fatalf("result %s/%s after %d attempts (%s); want failed after 0", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	h.noSetsYet()
}

// A state the broker kept retained from before Hearth started (ESPHome
// retains state by default: the relay ON) is replayed on subscribe: old
// news. The node, Silent since, publishes nothing: the replay confirms
// no attempt and answers no read-back, and the command fails after 3.
func TestESPHomeRetainedStateFromBeforeTheSendConfirmsNothing(t *testing.T) {
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	c := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("esphome-before"))
	mustToken(t, c.Connect())
	mustToken(t, c.Publish("esphome/kitchen/switch/relay/state", 1, true, "ON"))
	c.Disconnect(0)

	h := newHarness(t, harnessOptions{config: esphomeConfig, brokerURL: b.URL(), faults: simulator.Faults{Silent: []string{relayAddr}}})
	h.awaitMirror(t, "relay", func(s map[string]any) bool { return s["state"] == "ON" }) // the replay, heard
	h.awaitAvailability(t, "relay", "online")
	h.publish("relay", `{"state":"ON","op_id":"e6"}`)
	for attempt := 1; attempt <= 3; attempt++ {
		if e := h.nextSet(); e.Reason != simulator.ReasonSilent {
			t.Fatalf("attempt %d: %+v; want silent", attempt, e)
		}
		if attempt < 3 {
			h.advanceTimeout(5 * time.Second)
			h.advance(time.Duration(1<<(attempt-1)) * time.Second)
		}
	}
	h.advanceLastTimeout(5 * time.Second)
	r := h.final("e6")
	if r.Status != devices.Failed || r.Reason != devices.ReasonTimeout || r.Attempts != 3 {
		t.Fatalf("result %s/%s after %d attempts (%s); want failed/timeout after 3", r.Status, r.Reason, r.Attempts, r.Detail)
	}
}

// A garage door already closed gets CLOSE: the fresh read (its live
// state) shows it closed, and it succeeds with nothing sent. OPEN is sent
// once and confirmed from the cover's position and state reports.
func TestESPHomeGarageDoorClosedGetsCloseWithNothingSentAndOpenOnce(t *testing.T) {
	h := esphomeHarness(t, esphomeConfig, simulator.Faults{}, "garage")
	h.publish("garage", `{"state":"CLOSE","op_id":"g1"}`)
	r := h.final("g1")
	if r.Status != devices.Succeeded || r.Attempts != 0 {
		t.Fatalf("CLOSE of a closed door: %s/%s after %d attempts (%s); want succeeded after 0", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	h.noSetsYet()

	h.publish("garage", `{"state":"OPEN","op_id":"g2"}`)
	set := h.nextSet()
	if set.Topic != "esphome/garage/cover/door/command" || string(set.Payload) != "OPEN" {
		t.Fatalf("command %q on %s; want OPEN on esphome/garage/cover/door/command", set.Payload, set.Topic)
	}
	r = h.final("g2")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["position"] != 100.0 || r.State["state"] != "OPEN" {
		t.Fatalf("OPEN: %s/%s after %d attempts (%s), state %v; want succeeded after 1, OPEN at 100", r.Status, r.Reason, r.Attempts, r.Detail, r.State)
	}
	if n := h.sim.Sets(garageDoor); n != 1 {
		t.Errorf("the door got %d commands; want 1", n)
	}
}

// An UNLOCK reads the lock's live state first (LOCKED), then sends
// UNLOCK once, confirmed by the node's UNLOCKED.
func TestESPHomeUnlockReadsTheLockFirst(t *testing.T) {
	h := esphomeHarness(t, esphomeConfig, simulator.Faults{}, "front")
	h.publish("front", `{"state":"UNLOCK","op_id":"l1"}`)
	set := h.nextSet()
	if set.Topic != "esphome/frontdoor/lock/front_door/command" || string(set.Payload) != "UNLOCK" {
		t.Fatalf("command %q on %s; want UNLOCK on esphome/frontdoor/lock/front_door/command", set.Payload, set.Topic)
	}
	r := h.final("l1")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["lock_state"] != "unlocked" {
		t.Fatalf("UNLOCK: %s/%s after %d attempts (%s), state %v; want succeeded after 1, lock_state unlocked", r.Status, r.Reason, r.Attempts, r.Detail, r.State)
	}
}

// A lock with no live state (its node published none since its birth:
// Silent) cannot be read, ESPHome having no get: an UNLOCK ends
// failed/state_unknown with nothing sent.
func TestESPHomeUnlockWithoutALiveStateSendsNothing(t *testing.T) {
	h := newHarness(t, harnessOptions{config: esphomeConfig, faults: simulator.Faults{Silent: []string{frontLock}}})
	h.awaitAvailability(t, "front", "online")
	h.publish("front", `{"state":"UNLOCK","op_id":"l2"}`)
	r := h.final("l2")
	if r.Status != devices.Failed || r.Reason != devices.ReasonStateUnknown || r.Attempts != 0 {
		t.Fatalf("UNLOCK: %s/%s after %d attempts (%s); want failed/state_unknown after 0", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	h.noSetsYet()
}

// A light's brightness goes out in ESPHome's 0–255 JSON schema (128 →
// 129) and comes back as the brightness asked.
func TestESPHomeLightBrightness(t *testing.T) {
	h := esphomeHarness(t, esphomeConfig, simulator.Faults{}, "ceiling")
	h.publish("ceiling", `{"state":"ON","brightness":128,"op_id":"b1"}`)
	set := h.nextSet()
	var cmd map[string]any
	if err := json.Unmarshal(set.Payload, &cmd); err != nil || cmd["state"] != "ON" || cmd["brightness"] != 129.0 {
		t.Fatalf("command %s; want {\"state\":\"ON\",\"brightness\":129}", set.Payload)
	}
	r := h.final("b1")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["brightness"] != 128.0 {
		t.Fatalf("result %s/%s after %d attempts (%s), state %v; want succeeded after 1 at 128", r.Status, r.Reason, r.Attempts, r.Detail, r.State)
	}
}

// After Hearth restarts, a node that stayed connected publishes nothing
// new: the broker's retained LOCKED is all Hearth hears, and ESPHome has
// no get, so an UNLOCK ends failed/state_unknown with nothing sent (the
// next birth and live state make it readable again:
// protocols/esphome TestTheWillAndTheNextBirthEndTheLiveState).
func TestESPHomeUnlockAfterARestartWaitsForALiveState(t *testing.T) {
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	dir, clock := t.TempDir(), newDueClock(t0)
	h1 := newHarness(t, harnessOptions{dataDir: dir, brokerURL: b.URL(), config: esphomeConfig, clock: clock})
	h1.awaitMirror(t, "front", func(s map[string]any) bool { return s["lock_state"] == "locked" })
	h1.stopDaemon()

	h2 := newHarness(t, harnessOptions{dataDir: dir, brokerURL: b.URL(), config: esphomeConfig, clock: clock, sim: h1, automation: h1})
	h2.awaitAvailability(t, "front", "online") // the retained birth
	h2.publish("front", `{"state":"UNLOCK","op_id":"r1"}`)
	r := h2.final("r1")
	if r.Status != devices.Failed || r.Reason != devices.ReasonStateUnknown || r.Attempts != 0 {
		t.Fatalf("UNLOCK on the retained state alone: %s/%s after %d attempts (%s); want failed/state_unknown after 0", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	h2.noSetsYet()
}

// A jammed lock (state JAMMED): an UNLOCK's read finds no known bolt
// position and sends nothing (state_unknown); a LOCK (the safe direction)
// is sent, and the JAMMED the node reports after it ends it failed/jammed,
// not retried.
func TestESPHomeJammedLock(t *testing.T) {
	h := esphomeHarness(t, esphomeConfig, simulator.Faults{Jam: []string{frontLock}}, "front")
	h.publish("front", `{"state":"UNLOCK","op_id":"j1"}`)
	if r := h.final("j1"); r.Status != devices.Failed || r.Reason != devices.ReasonStateUnknown || r.Attempts != 0 {
		t.Fatalf("UNLOCK of a jammed lock: %s/%s after %d attempts (%s); want failed/state_unknown after 0", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	h.noSetsYet()
	h.publish("front", `{"state":"LOCK","op_id":"j2"}`)
	if e := h.nextSet(); string(e.Payload) != "LOCK" {
		t.Fatalf("command %s; want LOCK", e.Payload)
	}
	if r := h.final("j2"); r.Status != devices.Failed || r.Reason != devices.ReasonJammed || r.Attempts != 1 {
		t.Fatalf("LOCK of a jammed lock: %s/%s after %d attempts (%s); want failed/jammed after 1", r.Status, r.Reason, r.Attempts, r.Detail)
	}
}
