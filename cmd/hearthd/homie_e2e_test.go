package main

import (
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/simulator"
)

// homieConfig is a house's Homie devices: a relay's on property and the
// convention's own kitchen light (power and brightness).
const homieConfig = `
mqtt:
  listen: 127.0.0.1:0
  reconnect: {base: 10ms, cap: 100ms}
http:
  listen: 127.0.0.1:0
defaults:
  ttl: 60s
services:
  home:
    protocol: homie
devices:
  plug:
    class: switch
    address: plug-1/relay/on
  lamp:
    class: light
    address: kitchen-light/light/power,brightness
`

const (
	homiePlug = "plug-1/relay/on"
	homieLamp = "kitchen-light/light/power,brightness"
)

// homieHarness starts hearthd with the simulated Homie devices of config
// and waits until hearthd has heard both ready.
func homieHarness(t *testing.T, config string, faults simulator.Faults) *harness {
	t.Helper()
	h := newHarness(t, harnessOptions{config: config, faults: faults})
	h.awaitAvailability(t, "plug", "online")
	h.awaitAvailability(t, "lamp", "online")
	return h
}

// A set the device reflects on its property topic succeeds on attempt 1,
// one non-retained "true" on the property's set topic.
func TestHomieSwitchSucceedsOnFirstAttempt(t *testing.T) {
	h := homieHarness(t, homieConfig, simulator.Faults{})
	h.publish("plug", `{"state":"ON","op_id":"hm1"}`)
	set := h.nextSet()
	if set.Device != homiePlug || set.Topic != "homie/plug-1/relay/on/set" || string(set.Payload) != "true" || set.Retained {
		t.Fatalf("set %q on %s to %s (retained %v); want \"true\" on homie/plug-1/relay/on/set, not retained", set.Payload, set.Topic, set.Device, set.Retained)
	}
	r := h.final("hm1")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["state"] != "ON" {
		t.Fatalf("result %s after %d attempts, state %v (%s); want succeeded after 1, ON", r.Status, r.Attempts, r.State, r.Detail)
	}
	if n := h.sim.Sets(homiePlug); n != 1 {
		t.Errorf("the plug got %d sets; want 1", n)
	}
}

// A light's brightness 128 goes out as 50 of the property's 0:100 after
// power true, and is confirmed as 128.
func TestHomieLightBrightness(t *testing.T) {
	h := homieHarness(t, homieConfig, simulator.Faults{})
	h.publish("lamp", `{"state":"ON","brightness":128,"op_id":"hl1"}`)
	for _, want := range [][2]string{{"homie/kitchen-light/light/power/set", "true"}, {"homie/kitchen-light/light/brightness/set", "50"}} {
		if set := h.nextSet(); set.Topic != want[0] || string(set.Payload) != want[1] {
			t.Fatalf("set %q on %s; want %q on %s", set.Payload, set.Topic, want[1], want[0])
		}
	}
	r := h.final("hl1")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["brightness"] != 128.0 || r.State["state"] != "ON" {
		t.Fatalf("result %s/%s after %d attempts (%s), state %v; want succeeded after 1, ON at 128", r.Status, r.Reason, r.Attempts, r.Detail, r.State)
	}
}

// A set the device never heard is sent again after the attempt timeout
// and the backoff, and succeeds on attempt 2.
func TestHomieDroppedSetSucceedsOnSecondAttempt(t *testing.T) {
	h := homieHarness(t, homieConfig, simulator.Faults{DropFirst: 1})
	h.publish("plug", `{"state":"ON","op_id":"hm2"}`)
	if first := h.nextSet(); !first.Dropped {
		t.Fatal("the simulator did not drop the first set")
	}
	h.advanceTimeout(5 * time.Second) // attempt timeout
	h.advance(1 * time.Second)        // backoff before retry 1: ceiling = base
	if second := h.nextSet(); second.Dropped || string(second.Payload) != "true" {
		t.Fatalf("second set %+v; want \"true\", heard", second)
	}
	r := h.final("hm2")
	if r.Status != devices.Succeeded || r.Attempts != 2 {
		t.Fatalf("result %s after %d attempts (%s); want succeeded after 2", r.Status, r.Attempts, r.Detail)
	}
}

// awaitEchoOnlyFailure sends ON to a plug that never reflects a set and
// wants exactly 3 sets and failed/timeout. echo, if not nil, publishes an
// echo of each set on the set topic, which the plug hears too.
func awaitEchoOnlyFailure(t *testing.T, h *harness, opID string, echo paho.Client) {
	t.Helper()
	h.publish("plug", `{"state":"ON","op_id":"`+opID+`"}`)
	for attempt := 1; attempt <= 3; attempt++ {
		e := h.nextSet()
		if e.Reason != simulator.ReasonEchoOnly {
			t.Fatalf("attempt %d: %+v; want echo only", attempt, e)
		}
		if echo != nil {
			mustToken(t, echo.Publish(e.Topic, 1, false, e.Payload))
			if e := h.nextSet(); e.Reason != simulator.ReasonEchoOnly || string(e.Payload) != "true" {
				t.Fatalf("attempt %d: the echo reached the plug as %+v", attempt, e)
			}
		}
		if attempt < 3 {
			h.advanceTimeout(5 * time.Second)
			h.advance(time.Duration(1<<(attempt-1)) * time.Second)
		}
	}
	h.advance(5 * time.Second)
	r := h.final(opID)
	if r.Status != devices.Failed || r.Reason != devices.ReasonTimeout || r.Attempts != 3 {
		t.Fatalf("result %s/%s after %d attempts (%s); want failed/timeout after 3", r.Status, r.Reason, r.Attempts, r.Detail)
	}
}

// An echo of Hearth's set on the set topic (another controller or bridge
// repeating it; hearthd's own subscription is No Local, so it never hears
// its own) and a value published before the send confirm nothing: a plug
// that hears sets and does nothing (EchoOnly) gets exactly Hearth's 3 and
// the echoes, and the command fails, though hearthd knew the plug ON from
// before.
func TestHomieEchoAndValueBeforeTheSendConfirmNothing(t *testing.T) {
	h := homieHarness(t, homieConfig, simulator.Faults{EchoOnly: []string{homiePlug}})
	mirror := h.watch("hearth/plug")
	c := paho.NewClient(paho.NewClientOptions().AddBroker(h.d.brokerURL).SetClientID("old-news"))
	mustToken(t, c.Connect())
	defer c.Disconnect(0)
	mustToken(t, c.Publish("homie/plug-1/relay/on", 1, true, "true"))
	for seen := false; !seen; {
		select {
		case m := <-mirror:
			seen = strings.Contains(string(m.Payload()), `"ON"`)
		case <-time.After(eventWait):
			t.Fatal("hearthd never heard the value from before")
		}
	}
	awaitEchoOnlyFailure(t, h, "hm3", c)
}

// Homie 5: the $target a device publishes for a set (accepted, on its
// way) is in progress, not the value: a plug that publishes only $target
// (EchoOnly) gets 3 sets under homie/5 and the command fails.
func TestHomie5TargetConfirmsNothing(t *testing.T) {
	cfg := strings.Replace(homieConfig, "    protocol: homie\n", "    protocol: homie\n    base_topic: homie/5\n", 1)
	h := homieHarness(t, cfg, simulator.Faults{EchoOnly: []string{homiePlug}})
	awaitEchoOnlyFailure(t, h, "hm5", nil)
}

// A Homie device's $state lost (its will) marks its devices offline: a
// command ends failed/device_offline with nothing sent. Once every Homie
// device of the service is lost the service's breaker opens; one back
// ready makes it half-open and a command's success closes it.
func TestHomieLostMarksOfflineAndAllLostOpensTheBreaker(t *testing.T) {
	h := homieHarness(t, homieConfig, simulator.Faults{})
	states := h.watch("hearth/services/home/state")
	nextState(t, states, "closed")
	if err := h.sim.SetOnline(homiePlug, false); err != nil {
		t.Fatal(err)
	}
	h.awaitAvailability(t, "plug", "offline")
	h.publish("plug", `{"state":"ON","op_id":"hm4"}`)
	r := h.final("hm4")
	if r.Status != devices.Failed || r.Reason != devices.ReasonDeviceOffline || r.Attempts != 0 {
		t.Fatalf("result %s/%s after %d attempts (%s); want failed/device_offline after 0", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	h.noSetsYet()
	if err := h.sim.SetOnline(homieLamp, false); err != nil {
		t.Fatal(err)
	}
	nextState(t, states, "open")
	if err := h.sim.SetOnline(homiePlug, true); err != nil {
		t.Fatal(err)
	}
	h.awaitAvailability(t, "plug", "online")
	nextState(t, states, "half_open")
	h.publish("plug", `{"state":"ON","op_id":"hm6"}`)
	if r := h.final("hm6"); r.Status != devices.Succeeded {
		t.Fatalf("the probe: %s/%s (%s); want succeeded", r.Status, r.Reason, r.Detail)
	}
	nextState(t, states, "closed")
}

// A value the broker kept retained from before Hearth started (a plug that
// said ready and on, then went quiet with its will not yet fired) is
// replayed on subscribe: old news, which confirms nothing. Nobody answers
// the sets: the command fails after 3 attempts though the replay said ON.
func TestHomieRetainedValueFromBeforeTheSendConfirmsNothing(t *testing.T) {
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	c := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("homie-before"))
	mustToken(t, c.Connect())
	for _, m := range [][2]string{
		{"homie/plug-1/relay/on/$datatype", "boolean"}, {"homie/plug-1/relay/on/$settable", "true"},
		{"homie/plug-1/relay/on", "true"}, {"homie/plug-1/$state", "ready"},
	} {
		mustToken(t, c.Publish(m[0], 1, true, m[1]))
	}
	c.Disconnect(0)

	h := newHarness(t, harnessOptions{config: homieConfig, brokerURL: b.URL(), notSimulated: []string{homiePlug}})
	h.awaitAvailability(t, "plug", "online")
	mirror := h.watch("hearth/plug")
	select {
	case m := <-mirror: // hearthd heard the replay: the state it knows
		if !strings.Contains(string(m.Payload()), `"ON"`) {
			t.Fatalf("hearth/plug = %s; want the replayed ON", m.Payload())
		}
	case <-time.After(eventWait):
		t.Fatal("hearthd never heard the replayed value")
	}
	sets := h.watch("homie/plug-1/relay/on/set")
	h.publish("plug", `{"state":"ON","op_id":"hm7"}`)
	for attempt := 1; attempt <= 3; attempt++ {
		select {
		case m := <-sets:
			if string(m.Payload()) != "true" {
				t.Fatalf("attempt %d: set %q; want true", attempt, m.Payload())
			}
		case <-time.After(eventWait):
			t.Fatalf("attempt %d: no set", attempt)
		}
		if attempt < 3 {
			h.advanceTimeout(5 * time.Second)
			h.advance(time.Duration(1<<(attempt-1)) * time.Second)
		}
	}
	h.advance(5 * time.Second)
	r := h.final("hm7")
	if r.Status != devices.Failed || r.Reason != devices.ReasonTimeout || r.Attempts != 3 {
		t.Fatalf("result %s/%s after %d attempts (%s); want failed/timeout after 3", r.Status, r.Reason, r.Attempts, r.Detail)
	}
}

// sleepyHomieConfig adds a battery valve controller that says sleeping
// between its wakes (every 10 minutes, listening 10 s).
const sleepyHomieConfig = homieConfig + `  valve:
    class: switch
    address: garden/valve/open
    sleepy: true
    wake_interval: 10m
    awake_window: 10s
`

// A Homie device that says $state sleeping gets nothing while it sleeps:
// the command waits queued/asleep, no set on any timer, and is delivered
// once when the device says ready, and confirmed by its value.
func TestHomieSleepingDeviceCommandWaitsForReady(t *testing.T) {
	h := newHarness(t, harnessOptions{config: sleepyHomieConfig, simOnFakeClock: true})
	h.awaitAvailability(t, "valve", "online") // after its sleeping: asleep is not offline
	h.publish("valve", `{"state":"ON","op_id":"hv1","ttl":"10m"}`)
	if r := h.result("hv1"); r.Status != devices.Accepted {
		t.Fatalf("hv1: %s/%s; want accepted", r.Status, r.Reason)
	}
	if r := h.result("hv1"); r.Status != devices.Queued || r.Reason != devices.ReasonAsleep {
		t.Fatalf("hv1: %s/%s; want queued/asleep", r.Status, r.Reason)
	}
	for range 6 { // a minute of sleep, in steps: nothing is sent
		h.clock.Advance(10 * time.Second)
		h.noSetsYet()
	}
	if err := h.sim.Wake("garden/valve/open"); err != nil {
		t.Fatal(err)
	}
	if e := h.nextSet(); e.Device != "garden/valve/open" || e.Dropped || string(e.Payload) != "true" {
		t.Fatalf("at the wake: %+v; want one set \"true\", heard", e)
	}
	r := h.await(func(r devices.Result) bool { return r.OpID == "hv1" && r.Status.Terminal() }, "hv1's end")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["state"] != "ON" {
		t.Fatalf("hv1: %s/%s after %d attempts (%s), state %v; want succeeded after 1, ON", r.Status, r.Reason, r.Attempts, r.Detail, r.State)
	}
	h.noSetsYet()
	if n := h.sim.Sets("garden/valve/open"); n != 1 {
		t.Errorf("the valve got %d sets; want 1", n)
	}
}
