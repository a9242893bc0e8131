package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/simulator"
)

// tasmotaConfig is a Tasmota service with a Sonoff Dual's two relays and a
// plug, and another of one fan, whose breaker its LWT alone drives. Its
// retry policy is the protocol's default: 3 attempts, 5s each, backoff
// from 1s.
const tasmotaConfig = `
mqtt:
  listen: 127.0.0.1:0
  reconnect: {base: 10ms, cap: 100ms}
http:
  listen: 127.0.0.1:0
defaults:
  ttl: 60s
services:
  wifi:
    protocol: tasmota
  attic:
    protocol: tasmota
    full_topic: attic/%topic%/%prefix%/
devices:
  porch:
    service: wifi
    class: switch
    address: dual/1
  garden:
    service: wifi
    class: switch
    address: dual/2
  plug:
    service: wifi
    class: switch
  bulb:
    service: wifi
    class: light
  blind:
    service: wifi
    class: cover
    address: blinds/1
  garage:
    service: wifi
    class: cover
    safety: critical
  fan:
    service: attic
    class: switch
`

var tasmotaDevices = []string{"porch", "garden", "plug", "bulb", "blind", "garage", "fan"}

// A switch on a Tasmota's second relay: POWER2 ON goes out once, on
// cmnd/dual/POWER2, not retained; the relay's stat report confirms it on
// attempt 1.
func TestTasmotaRelayConfirmedOnFirstAttempt(t *testing.T) {
	h := newHarness(t, harnessOptions{config: tasmotaConfig})
	h.settle(tasmotaDevices...)
	h.publish("garden", `{"state":"ON","op_id":"t1"}`)
	set := h.nextSet()
	if set.Device != "dual" || set.Topic != "cmnd/dual/POWER2" || string(set.Payload) != "ON" || set.Retained || set.Dropped {
		t.Errorf("set %s %s %q retained=%v dropped=%v; want dual cmnd/dual/POWER2 ON, not retained", set.Device, set.Topic, set.Payload, set.Retained, set.Dropped)
	}
	r := h.final("t1")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["state"] != "ON" {
		t.Errorf("t1: %s/%s after %d attempts, state %v; want succeeded after 1, ON", r.Status, r.Reason, r.Attempts, r.State)
	}
	if st := h.sim.State("dual"); st["POWER2"] != "ON" || st["POWER1"] != "OFF" {
		t.Errorf("the Dual's relays %v; want POWER1 OFF, POWER2 ON", st)
	}
}

// A set the Tasmota drops (it was reconnecting to Wi-Fi) is sent again
// after the attempt's 5s and a 1s backoff, and confirmed on attempt 2.
func TestTasmotaDroppedSetConfirmedOnSecondAttempt(t *testing.T) {
	h := newHarness(t, harnessOptions{config: tasmotaConfig, faults: simulator.Faults{DropFirst: 1}})
	h.settle(tasmotaDevices...)
	h.publish("plug", `{"state":"ON","op_id":"t2"}`)
	h.result("t2")
	if e := h.nextSet(); !e.Dropped || e.Topic != "cmnd/plug/POWER" {
		t.Fatalf("first set %s dropped=%v; want cmnd/plug/POWER, dropped", e.Topic, e.Dropped)
	}
	h.advanceTimeout(5 * time.Second)
	h.advance(time.Second)
	if e := h.nextSet(); e.Dropped || string(e.Payload) != "ON" {
		t.Fatalf("second set %q dropped=%v; want ON, applied", e.Payload, e.Dropped)
	}
	r := h.await(func(r devices.Result) bool { return r.OpID == "t2" && r.Status.Terminal() }, "t2 final")
	if r.Status != devices.Succeeded || r.Attempts != 2 {
		t.Errorf("t2: %s/%s after %d attempts; want succeeded after 2", r.Status, r.Reason, r.Attempts)
	}
}

// A Tasmota that only echoes (each command comes back on its cmnd topic,
// as a broker loop echoes it, and the relay never moves): the echo
// confirms nothing, and the command fails after its 3 attempts.
func TestTasmotaCommandEchoConfirmsNothing(t *testing.T) {
	h := newHarness(t, harnessOptions{config: tasmotaConfig, faults: simulator.Faults{EchoOnly: []string{"plug"}}})
	h.settle(tasmotaDevices...)
	h.publish("plug", `{"state":"ON","op_id":"t3"}`)
	h.result("t3")
	for attempt := 1; attempt <= 3; attempt++ {
		if e := h.nextSet(); e.Topic != "cmnd/plug/POWER" {
			t.Fatalf("attempt %d: set on %s", attempt, e.Topic)
		}
		if attempt < 3 {
			h.advanceTimeout(5 * time.Second)
			h.advance(time.Second << (attempt - 1)) // full jitter at its ceiling: 1s, 2s
		}
	}
	h.advance(5 * time.Second)
	r := h.await(func(r devices.Result) bool { return r.OpID == "t3" && r.Status.Terminal() }, "t3 final")
	if r.Status != devices.Failed || r.Reason != devices.ReasonTimeout || r.Attempts != 3 {
		t.Errorf("t3: %s/%s after %d attempts; want failed/timeout after 3", r.Status, r.Reason, r.Attempts)
	}
	if st := h.sim.State("plug"); st["POWER"] != "OFF" {
		t.Errorf("plug %v; want still OFF", st)
	}
}

// A Tasmota's LWT Offline (its will, when it drops off Wi-Fi) marks the
// device offline, and, the only device of its service, opens the
// service's breaker; a command for it then ends failed/device_offline
// with nothing sent. Its LWT Online brings both back.
func TestTasmotaLWTOfflineMarksOfflineAndOpensTheBreaker(t *testing.T) {
	h := newHarness(t, harnessOptions{config: tasmotaConfig})
	h.settle(tasmotaDevices...)
	if err := h.sim.SetOnline("fan", false); err != nil {
		t.Fatal(err)
	}
	h.eventually("fan offline, attic's breaker open", func() bool {
		d, _ := h.d.disp.Device("fan")
		return d.Availability == "offline" && breakerState(h, "attic") == "open"
	})
	if s := breakerState(h, "wifi"); s != "closed" {
		t.Errorf("wifi's breaker %s; want closed (the fan is attic's)", s)
	}
	h.publish("fan", `{"state":"ON","op_id":"t4"}`)
	r := h.final("t4")
	if r.Status != devices.Failed || r.Reason != devices.ReasonDeviceOffline || r.Attempts != 0 {
		t.Errorf("t4: %s/%s after %d attempts; want failed/device_offline with nothing sent", r.Status, r.Reason, r.Attempts)
	}
	h.noSetsYet()
	if err := h.sim.SetOnline("fan", true); err != nil {
		t.Fatal(err)
	}
	h.eventually("fan online, attic's breaker no longer open", func() bool {
		d, _ := h.d.disp.Device("fan")
		return d.Availability == "online" && breakerState(h, "attic") != "open"
	})
}

func breakerState(h *harness, service string) string {
	for _, b := range h.d.disp.Breakers() {
		if b.Service == service {
			return b.State
		}
	}
	return ""
}

// A stat/POWER the broker replays from its retained store (PowerRetain)
// when hearthd resubscribes is old news: it never confirms the command
// sent before it.
func TestTasmotaRetainedReportFromBeforeTheSendConfirmsNothing(t *testing.T) {
	url := startMochi(t)
	h := newHarness(t, harnessOptions{brokerURL: url, config: tasmotaConfig, faults: simulator.Faults{Silent: []string{"plug"}}})
	h.publish("plug", `{"state":"ON","op_id":"t5"}`)
	h.result("t5")
	h.nextSet() // the plug is silent

	// Take hearthd's session over; meanwhile a retained stat/plug/POWER ON
	// appears, as a Tasmota with PowerRetain 1 leaves it.
	intruder := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(h.d.conn.ClientID()))
	mustToken(t, intruder.Connect())
	intruder.Disconnect(0)
	other := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID("retainer"))
	mustToken(t, other.Connect())
	defer other.Disconnect(0)
	mustToken(t, other.Publish("stat/plug/POWER", 1, true, "ON"))
	mirror := make(chan map[string]any, 8)
	mustToken(t, other.Subscribe("hearth/plug", 1, func(_ paho.Client, m paho.Message) {
		var s map[string]any
		json.Unmarshal(m.Payload(), &s)
		mirror <- s
	}))
	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	defer cancel()
	if err := h.clock.BlockUntilContext(ctx, 2); err != nil {
		t.Fatal("hearthd is not waiting to reconnect")
	}
	h.clock.Advance(100 * time.Millisecond)
	deadline := time.After(eventWait)
	for seen := false; !seen; {
		select {
		case s := <-mirror:
			seen = s["state"] == "ON"
		case <-deadline:
			t.Fatal("hearthd never mirrored the replayed report")
		}
	}
	op := h.driveUntilEnded("t5", 1)
	if op.Status != devices.Failed || op.Reason != devices.ReasonTimeout || op.Attempts != 3 {
		t.Errorf("after a replayed retained stat/POWER: %s/%s after %d attempts; want failed/timeout after 3", op.Status, op.Reason, op.Attempts)
	}
	mustToken(t, other.Publish("stat/plug/POWER", 1, true, ""))
}

// A light's state and brightness go out as POWER ON then Dimmer 50, and
// the light's RESULT confirms brightness 128 as sent; a shutter's
// position goes out as ShutterPosition1 40, and its Shutter1 report (not
// the echo {"ShutterPosition1":40}) confirms it.
func TestTasmotaLightAndShutterConfirmedFromTheirReports(t *testing.T) {
	h := newHarness(t, harnessOptions{config: tasmotaConfig})
	h.settle(tasmotaDevices...)
	h.publish("bulb", `{"state":"ON","brightness":128,"color_temp":370,"op_id":"t6"}`)
	for _, want := range [][2]string{{"cmnd/bulb/POWER", "ON"}, {"cmnd/bulb/Dimmer", "50"}, {"cmnd/bulb/CT", "370"}} {
		if e := h.nextSet(); e.Topic != want[0] || string(e.Payload) != want[1] {
			t.Errorf("set %s %q; want %s %q", e.Topic, e.Payload, want[0], want[1])
		}
	}
	r := h.final("t6")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["brightness"] != 128.0 || r.State["color_temp"] != 370.0 {
		t.Errorf("t6: %s/%s after %d attempts, state %v; want succeeded after 1 at brightness 128, color_temp 370", r.Status, r.Reason, r.Attempts, r.State)
	}
	h.publish("blind", `{"position":40,"op_id":"t7"}`)
	if e := h.nextSet(); e.Topic != "cmnd/blinds/ShutterPosition1" || string(e.Payload) != "40" {
		t.Errorf("set %s %q; want cmnd/blinds/ShutterPosition1 40", e.Topic, e.Payload)
	}
	r = h.final("t7")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["position"] != 40.0 {
		t.Errorf("t7: %s/%s after %d attempts, state %v; want succeeded after 1 at position 40", r.Status, r.Reason, r.Attempts, r.State)
	}
}

// A shutter that only acknowledges ({"ShutterPosition1":40}, Tasmota's
// echo of the parameter) and never moves confirms nothing.
func TestTasmotaShutterEchoConfirmsNothing(t *testing.T) {
	h := newHarness(t, harnessOptions{config: tasmotaConfig, faults: simulator.Faults{EchoOnly: []string{"blinds"}}})
	h.settle(tasmotaDevices...)
	h.publish("blind", `{"position":40,"op_id":"t8","ttl":"120s"}`)
	h.result("t8")
	h.nextSet()
	h.advanceTimeout(30 * time.Second) // a cover's attempt timeout
	h.advance(time.Second)
	h.nextSet()
	h.advanceTimeout(30 * time.Second)
	h.advance(2 * time.Second)
	h.nextSet()
	h.advance(30 * time.Second)
	r := h.await(func(r devices.Result) bool { return r.OpID == "t8" && r.Status.Terminal() }, "t8 final")
	if r.Status != devices.Failed || r.Reason != devices.ReasonTimeout || r.Attempts != 3 {
		t.Errorf("t8: %s/%s after %d attempts; want failed/timeout after 3", r.Status, r.Reason, r.Attempts)
	}
}

// Opening a safety-critical Tasmota shutter (a garage door on a shutter
// driver) reads it fresh first (Status 10, its StatusSNS carries
// Shutter1), then sends ShutterPosition1 100 once, confirmed by its
// Shutter1 report.
func TestTasmotaGarageIsReadFreshBeforeItOpens(t *testing.T) {
	h := newHarness(t, harnessOptions{config: tasmotaConfig})
	h.settle(tasmotaDevices...)
	h.publish("garage", `{"state":"OPEN","op_id":"t9"}`)
	r := h.final("t9")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["position"] != 100.0 {
		t.Errorf("t9: %s/%s after %d attempts, state %v; want succeeded after 1 at position 100", r.Status, r.Reason, r.Attempts, r.State)
	}
	h.wantTraffic("get garage 10", "set garage 100")
}
