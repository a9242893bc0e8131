package main

import (
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/simulator"
)

// A light and a lock that Zigbee2MQTT reports offline (their availability
// topic): each command ends at once failed/device_offline, with no set
// sent and no fake time gone by; the lock's failure is notified.
func TestOfflineDevicesCommandsEndDeviceOfflineWithNothingSent(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.settle("hall_light", "front_door")
	avail := h.watch("hearth/hall_light/availability", "hearth/front_door/availability")
	notes := h.watch("hearth/notifications")
	for _, d := range []string{"hall_light", "Front Door"} {
		if err := h.sim.SetOnline(d, false); err != nil {
			t.Fatal(err)
		}
	}
	for offline := 0; offline < 2; {
		select {
		case m := <-avail:
			if string(m.Payload()) == "offline" {
				offline++
			}
		case <-time.After(eventWait):
			t.Fatal("hearthd never mirrored both devices offline")
		}
	}

	h.publish("hall_light", `{"state":"ON","op_id":"light-on"}`)
	h.publish("front_door", `{"state":"LOCK","op_id":"door-lock"}`)
	for _, id := range []string{"light-on", "door-lock"} {
		r := h.final(id)
		if r.Status != devices.Failed || r.Reason != devices.ReasonDeviceOffline || r.Attempts != 0 {
			t.Errorf("%s: %s/%s after %d attempts (%s); want failed/device_offline after 0", id, r.Status, r.Reason, r.Attempts, r.Detail)
		}
		if !r.At.Equal(t0) {
			t.Errorf("%s ended at %v; want at once (%v)", id, r.At, t0)
		}
	}
	select {
	case m := <-notes:
		if s := string(m.Payload()); !strings.Contains(s, `"device":"front_door"`) || !strings.Contains(s, "device_offline") {
			t.Errorf("notification %s; want front_door's, with reason device_offline", s)
		}
	case <-time.After(eventWait):
		t.Error("no notification for the lock that could not be locked")
	}
	h.noSetsYet()
	if n := h.sim.Sets("hall_light") + h.sim.Sets("Front Door"); n != 0 {
		t.Errorf("the offline devices received %d sets; want 0", n)
	}
	if s := h.d.disp.Breakers()[0]; s.State != "closed" {
		t.Errorf("breaker %s; offline devices say nothing of the bridge", s.State)
	}
}

// After a Zigbee2MQTT restart the breaker is half-open; the first command
// is the probe, and its device drops it. Another device's command, sent
// while the probe is out, waits for it instead of failing, becomes the
// next probe when the first is lost, and succeeds: no command fails
// breaker_open, and the breaker closes long before a cooldown (30 s).
func TestLostProbeAfterABridgeRestartFailsNoUnrelatedCommand(t *testing.T) {
	h := newHarness(t, harnessOptions{faults: simulator.Faults{DropFirst: 1}})
	h.settle("hall_light", "plug")
	states := h.watch("hearth/services/zigbee/state")
	nextState(t, states, "closed")

	// The plug drops its first set before the restart, so that it
	// answers the one after it.
	h.publish("plug", `{"state":"ON","op_id":"warm-up"}`)
	h.result("warm-up")
	h.nextSet()
	h.advanceTimeout(5 * time.Second) // unconfirmed; then the backoff and the witness read are set
	h.advance(time.Second)            // the backoff
	h.nextSet()
	if r := h.final2("warm-up"); r.Status != devices.Succeeded {
		t.Fatalf("warm-up: %s/%s", r.Status, r.Reason)
	}
	start := h.clock.Now()

	if err := h.sim.SetBridgeOnline("zigbee2mqtt", false, true); err != nil {
		t.Fatal(err)
	}
	nextState(t, states, "open")
	if err := h.sim.SetBridgeOnline("zigbee2mqtt", true, true); err != nil {
		t.Fatal(err)
	}
	nextState(t, states, "half_open")

	h.publish("hall_light", `{"state":"ON","op_id":"lost-probe"}`)
	h.result("lost-probe")
	if s := h.nextSet(); s.Device != "hall_light" || !s.Dropped {
		t.Fatalf("first set after the restart: %s (dropped %v); want hall_light's, dropped", s.Device, s.Dropped)
	}
	h.publish("plug", `{"state":"OFF","op_id":"unrelated"}`)
	h.result("unrelated") // accepted; it waits for the probe
	// The probe's attempt, the plug's wait for the probe, the breaker's
	// watch of the probe's deadline.
	h.advanceAfter(3, 5*time.Second)
	if s := h.nextSet(); s.Device != "plug" || s.Dropped {
		t.Fatalf("after the lost probe: a set of %s (dropped %v); want the plug's, the next probe", s.Device, s.Dropped)
	}
	r := h.final2("unrelated")
	if r.Status != devices.Succeeded || r.Attempts != 1 {
		t.Fatalf("unrelated: %s/%s after %d attempts (%s); want succeeded after 1", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	closed := nextState(t, states, "closed")
	if limit := start.Add(30 * time.Second); !closed.Since.Before(limit) {
		t.Errorf("closed at %v; want before a cooldown had passed (%v)", closed.Since, limit)
	}
	// The lost probe's own command is retried once the breaker closed.
	h.advance(time.Second)
	if r := h.final2("lost-probe"); r.Status != devices.Succeeded || r.Attempts != 2 {
		t.Errorf("lost-probe: %s/%s after %d attempts; want succeeded after 2", r.Status, r.Reason, r.Attempts)
	}
}
