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

// shellyConfig is a Wi-Fi half of a house: a Shelly Plus 1PM's relay
// and a Shelly Plus 1 driving a garage door, its reed contact on input:0.
const shellyConfig = `
mqtt:
  listen: 127.0.0.1:0
  reconnect: {base: 10ms, cap: 100ms}
http:
  listen: 127.0.0.1:0
defaults:
  ttl: 60s
services:
  wifi:
    protocol: shelly
devices:
  plug:
    class: switch
    address: shellyplus1pm-a8032ab12345/switch:0
  garage:
    class: cover
    safety: critical
    address: shellyplus1-a8032abe54dc/switch:0/input:0
    # within the risky cap of 30s, room for a second attempt
    attempt_timeout: 10s
  lamp:
    class: light
    address: shellydimmerg3-84fce63ad204/light:0
  blind:
    class: cover
    address: shellyplus2pm-b8d61a85a0e4/cover:0
`

const (
	plugAddr   = "shellyplus1pm-a8032ab12345/switch:0"
	garageAddr = "shellyplus1-a8032abe54dc/switch:0/input:0"
	lampAddr   = "shellydimmerg3-84fce63ad204/light:0"
	blindAddr  = "shellyplus2pm-b8d61a85a0e4/cover:0"
)

// shellyHarness starts hearthd with the simulated Shellys and waits until
// hearthd has heard both online.
func shellyHarness(t *testing.T, faults simulator.Faults) *harness {
	t.Helper()
	h := newHarness(t, harnessOptions{config: shellyConfig, faults: faults})
	h.awaitAvailability(t, "plug", "online")
	h.awaitAvailability(t, "garage", "online")
	return h
}

// awaitAvailability waits for hearth/<device>/availability to read want.
func (h *harness) awaitAvailability(t *testing.T, device, want string) {
	t.Helper()
	avail := h.watch("hearth/" + device + "/availability")
	for {
		select {
		case m := <-avail:
			if string(m.Payload()) == want {
				return
			}
		case <-time.After(eventWait):
			t.Fatalf("hearth/%s/availability never read %s", device, want)
		}
	}
}

// A Switch.Set the device answers succeeds on attempt 1, with one request
// sent, in Shelly's own frame.
func TestShellySwitchSucceedsOnFirstAttempt(t *testing.T) {
	h := shellyHarness(t, simulator.Faults{})
	h.publish("plug", `{"state":"ON","op_id":"sh1"}`)
	set := h.nextSet()
	if set.Device != plugAddr || set.Topic != "shelly/shellyplus1pm-a8032ab12345/rpc" || set.Attrs["method"] != "Switch.Set" || set.Attrs["on"] != true || set.Attrs["id"] != 0.0 {
		t.Fatalf("request %s on %s to %s; want Switch.Set {id:0,on:true} on shelly/shellyplus1pm-a8032ab12345/rpc", set.Payload, set.Topic, set.Device)
	}
	if !strings.Contains(string(set.Payload), `"src":"shelly/hearth/wifi"`) {
		t.Errorf("request %s; want src shelly/hearth/wifi", set.Payload)
	}
	r := h.final("sh1")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["state"] != "ON" {
		t.Fatalf("result %s after %d attempts, state %v (%s); want succeeded after 1, ON", r.Status, r.Attempts, r.State, r.Detail)
	}
	if n := h.sim.Sets(plugAddr); n != 1 {
		t.Errorf("the plug got %d requests; want 1", n)
	}
}

// The response alone confirms: a Shelly that publishes no NotifyStatus
// (Faults.Unreported) still has its Switch.Set succeed on attempt 1, by
// the response with the request's id.
func TestShellyResponseAloneConfirms(t *testing.T) {
	h := shellyHarness(t, simulator.Faults{Unreported: []string{plugAddr}})
	h.publish("plug", `{"state":"ON","op_id":"sh0"}`)
	h.nextSet()
	r := h.final("sh0")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["state"] != "ON" {
		t.Fatalf("result %s after %d attempts, state %v (%s); want succeeded after 1, ON", r.Status, r.Attempts, r.State, r.Detail)
	}
}

// A request the device never heard is sent again after the attempt
// timeout and the backoff, with a new id, and succeeds on attempt 2.
func TestShellyDroppedRequestSucceedsOnSecondAttempt(t *testing.T) {
	h := shellyHarness(t, simulator.Faults{DropFirst: 1})
	h.publish("plug", `{"state":"ON","op_id":"sh2"}`)
	first := h.nextSet()
	if !first.Dropped {
		t.Fatal("the simulator did not drop the first request")
	}
	h.advanceTimeout(5 * time.Second) // attempt timeout
	h.advance(1 * time.Second)        // backoff before retry 1: ceiling = base
	second := h.nextSet()
	if second.Dropped || string(second.Payload) == string(first.Payload) {
		t.Fatalf("second request %s (dropped %v); want a new one, with its own id", second.Payload, second.Dropped)
	}
	r := h.final("sh2")
	if r.Status != devices.Succeeded || r.Attempts != 2 {
		t.Fatalf("result %s after %d attempts (%s); want succeeded after 2", r.Status, r.Attempts, r.Detail)
	}
}

// An RPC error -103 (invalid argument) ends the command at once,
// failed/permanent_error, with no retry.
func TestShellyInvalidArgumentFailsPermanentlyWithoutRetry(t *testing.T) {
	h := shellyHarness(t, simulator.Faults{FailSets: []string{plugAddr}})
	h.publish("plug", `{"state":"ON","op_id":"sh3"}`)
	if e := h.nextSet(); e.Reason != simulator.ReasonSetFailed {
		t.Fatalf("request %+v; want the simulator's failure", e)
	}
	r := h.final("sh3")
	if r.Status != devices.Failed || r.Reason != devices.ReasonPermanentError || r.Attempts != 1 || !strings.Contains(r.Detail, "-103") {
		t.Fatalf("result %s/%s after %d attempts (%s); want failed/permanent_error after 1, naming -103", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	if n := h.sim.Sets(plugAddr); n != 1 {
		t.Errorf("the plug got %d requests; want 1, no retry", n)
	}
}

// A Shelly whose online topic says false (its will) marks its device
// offline: a command ends failed/device_offline with nothing sent.
func TestShellyOfflineMarksTheDeviceOffline(t *testing.T) {
	h := shellyHarness(t, simulator.Faults{})
	if err := h.sim.SetOnline(plugAddr, false); err != nil {
		t.Fatal(err)
	}
	h.awaitAvailability(t, "plug", "offline")
	h.publish("plug", `{"state":"ON","op_id":"sh4"}`)
	r := h.final("sh4")
	if r.Status != devices.Failed || r.Reason != devices.ReasonDeviceOffline || r.Attempts != 0 {
		t.Fatalf("result %s/%s after %d attempts (%s); want failed/device_offline after 0", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	h.noSetsYet()
}

// A status published before the send, and the echo of Hearth's own
// request on <device-id>/rpc, confirm nothing: a Shelly that answers
// nothing (EchoOnly) gets exactly 3 requests, and the command fails.
func TestShellyReportBeforeTheSendAndTheEchoConfirmNothing(t *testing.T) {
	h := shellyHarness(t, simulator.Faults{EchoOnly: []string{plugAddr}})
	l := bridgeLogins(h.cfg)["shelly"]
	c := paho.NewClient(paho.NewClientOptions().AddBroker(h.d.brokerURL).SetClientID("old-news").
		SetUsername(l.Username).SetPassword(l.Password))
	mustToken(t, c.Connect())
	defer c.Disconnect(0)
	mustToken(t, c.Publish("shelly/shellyplus1pm-a8032ab12345/status/switch:0", 1, true, `{"id":0,"output":true}`))
	defer mustToken(t, c.Publish("shelly/shellyplus1pm-a8032ab12345/status/switch:0", 1, true, ""))
	mirror := h.watch("hearth/plug")
	select {
	case m := <-mirror:
		if !strings.Contains(string(m.Payload()), `"ON"`) {
			t.Fatalf("hearth/plug = %s; want the old status ON heard", m.Payload())
		}
	case <-time.After(eventWait):
		t.Fatal("hearthd never heard the old status")
	}
	h.publish("plug", `{"state":"ON","op_id":"sh5"}`)
	for attempt := 1; attempt <= 3; attempt++ {
		if e := h.nextSet(); e.Reason != simulator.ReasonEchoOnly {
			t.Fatalf("attempt %d: %+v; want echo only", attempt, e)
		}
		if attempt < 3 {
			h.advanceTimeout(5 * time.Second)
			h.advance(time.Duration(1<<(attempt-1)) * time.Second)
		}
	}
	h.advance(5 * time.Second)
	r := h.final("sh5")
	if r.Status != devices.Failed || r.Reason != devices.ReasonTimeout || r.Attempts != 3 {
		t.Fatalf("result %s/%s after %d attempts (%s); want failed/timeout after 3", r.Status, r.Reason, r.Attempts, r.Detail)
	}
}

// A garage door already closed gets CLOSE → succeeded with no pulse: the
// adapter read the contact and sent nothing more.
func TestShellyGarageCloseOfAClosedDoorSendsNoPulse(t *testing.T) {
	h := shellyHarness(t, simulator.Faults{})
	h.publish("garage", `{"state":"CLOSE","op_id":"g1"}`)
	r := h.final("g1")
	if r.Status != devices.Succeeded || r.State["state"] != "CLOSE" {
		t.Fatalf("result %s/%s (%s), state %v; want succeeded, CLOSE", r.Status, r.Reason, r.Detail, r.State)
	}
	if n, p := h.sim.Sets(garageAddr), h.sim.Pulses(garageAddr); n != 0 || p != 0 {
		t.Errorf("the garage got %d requests that move it, %d pulses; want none", n, p)
	}
}

// An OPEN is read fresh, pulsed once (Switch.Set on with toggle_after,
// never a toggle) and confirmed by the contact input.
func TestShellyGarageOpenIsPulsedOnceAndConfirmedByTheContact(t *testing.T) {
	h := shellyHarness(t, simulator.Faults{})
	h.publish("garage", `{"state":"OPEN","op_id":"g2"}`)
	set := h.nextSet()
	if set.Device != garageAddr || set.Attrs["method"] != "Switch.Set" || set.Attrs["on"] != true || set.Attrs["toggle_after"] == nil {
		t.Fatalf("request %s; want Switch.Set on with toggle_after", set.Payload)
	}
	r := h.final("g2")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["state"] != "OPEN" {
		t.Fatalf("result %s/%s after %d attempts (%s), state %v; want succeeded after 1, OPEN", r.Status, r.Reason, r.Attempts, r.Detail, r.State)
	}
	if p := h.sim.Pulses(garageAddr); p != 1 {
		t.Errorf("%d pulses; want 1", p)
	}
	if st := h.sim.State(garageAddr); st["state"] != "OPEN" {
		t.Errorf("the door is %v; want open", st)
	}
}

// A pulse the Shelly never heard (DropFirst: no answer) is sent again on
// attempt 2, read fresh first; the door opens once.
func TestShellyGarageLostPulseIsSentAgain(t *testing.T) {
	h := shellyHarness(t, simulator.Faults{DropFirst: 1})
	h.publish("garage", `{"state":"OPEN","op_id":"g3"}`)
	if e := h.nextSet(); !e.Dropped {
		t.Fatalf("first pulse %+v; want it dropped", e)
	}
	h.advanceTimeout(10 * time.Second) // the garage's attempt timeout
	h.advance(1 * time.Second)
	if e := h.nextSet(); e.Dropped || e.Attrs["method"] != "Switch.Set" {
		t.Fatalf("second pulse %+v; want it delivered", e)
	}
	r := h.final("g3")
	if r.Status != devices.Succeeded || r.Attempts != 2 || r.State["state"] != "OPEN" {
		t.Fatalf("result %s/%s after %d attempts (%s); want succeeded after 2, OPEN", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	if p := h.sim.Pulses(garageAddr); p != 1 {
		t.Errorf("the door moved %d times; want once", p)
	}
}

// Once every Shelly of the service has said online false (their wills: the
// access point is gone), the service's breaker opens; one back online
// makes it half-open, and a command's success closes it.
func TestShellyAllOfflineOpensTheServicesBreaker(t *testing.T) {
	h := shellyHarness(t, simulator.Faults{})
	state := h.watch("hearth/services/wifi/state")
	awaitState := func(want string) {
		t.Helper()
		for {
			select {
			case m := <-state:
				if strings.Contains(string(m.Payload()), `"state":"`+want+`"`) {
					return
				}
			case <-time.After(eventWait):
				t.Fatalf("hearth/services/wifi/state never read %s", want)
			}
		}
	}
	awaitState("closed")
	if err := h.sim.SetOnline(plugAddr, false); err != nil {
		t.Fatal(err)
	}
	h.awaitAvailability(t, "plug", "offline")
	for _, a := range []string{lampAddr, blindAddr, garageAddr} {
		if err := h.sim.SetOnline(a, false); err != nil {
			t.Fatal(err)
		}
	}
	awaitState("open")
	if err := h.sim.SetOnline(plugAddr, true); err != nil {
		t.Fatal(err)
	}
	h.awaitAvailability(t, "plug", "online")
	awaitState("half_open") // the Shelly's word; a command's success closes it
	h.publish("plug", `{"state":"ON","op_id":"sh6"}`)
	if r := h.final("sh6"); r.Status != devices.Succeeded {
		t.Fatalf("the probe: %s/%s (%s); want succeeded", r.Status, r.Reason, r.Detail)
	}
	awaitState("closed")
}

// A status the broker kept retained from before Hearth started (a Shelly's
// status_ntf, the plug ON) is replayed on subscribe: old news, which
// confirms nothing. The plug, in EchoOnly, answers no request: the
// command fails after 3 attempts though the replay said ON.
func TestShellyRetainedStatusFromBeforeTheSendConfirmsNothing(t *testing.T) {
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	c := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("shelly-before"))
	mustToken(t, c.Connect())
	mustToken(t, c.Publish("shelly/shellyplus1pm-a8032ab12345/status/switch:0", 1, true, `{"id":0,"output":true}`))
	c.Disconnect(0)

	h := newHarness(t, harnessOptions{config: shellyConfig, brokerURL: b.URL(), faults: simulator.Faults{EchoOnly: []string{plugAddr}}})
	h.awaitAvailability(t, "plug", "online")
	mirror := h.watch("hearth/plug")
	select {
	case m := <-mirror: // hearthd heard the replay: the state it knows
		if !strings.Contains(string(m.Payload()), `"ON"`) {
			t.Fatalf("hearth/plug = %s; want the replayed ON", m.Payload())
		}
	case <-time.After(eventWait):
		t.Fatal("hearthd never heard the replayed status")
	}
	h.publish("plug", `{"state":"ON","op_id":"sh7"}`)
	for attempt := 1; attempt <= 3; attempt++ {
		if e := h.nextSet(); e.Reason != simulator.ReasonEchoOnly {
			t.Fatalf("attempt %d: %+v; want echo only", attempt, e)
		}
		if attempt < 3 {
			h.advanceTimeout(5 * time.Second)
			h.advance(time.Duration(1<<(attempt-1)) * time.Second)
		}
	}
	h.advance(5 * time.Second)
	r := h.final("sh7")
	if r.Status != devices.Failed || r.Reason != devices.ReasonTimeout || r.Attempts != 3 {
		t.Fatalf("result %s/%s after %d attempts (%s); want failed/timeout after 3", r.Status, r.Reason, r.Attempts, r.Detail)
	}
}

// An RPC error -114 (unavailable: a busy device) is transient: each
// attempt ends at once and the next follows after the backoff alone, not
// the attempt timeout; all 3 attempts are made.
func TestShellyUnavailableIsRetried(t *testing.T) {
	// The plug alone: an attempt that failed in the service's silence
	// asks the other devices as witnesses, whose read timer would race the
	// backoffs this test moves the clock by.
	plugOnly := shellyConfig[:strings.Index(shellyConfig, "  garage:\n")]
	h := newHarness(t, harnessOptions{config: plugOnly, faults: simulator.Faults{FailSets: []string{plugAddr}, ShellyErrorCode: -114}})
	h.awaitAvailability(t, "plug", "online")
	h.publish("plug", `{"state":"ON","op_id":"sh8"}`)
	if e := h.nextSet(); e.Reason != simulator.ReasonSetFailed {
		t.Fatalf("first request %+v; want the simulator's failure", e)
	}
	h.advance(1 * time.Second) // the backoff before retry 1; no attempt timeout waited
	h.nextSet()
	if sent := h.clock.Since(t0); sent != time.Second {
		t.Errorf("second attempt after %s; want 1s (the backoff alone)", sent)
	}
	h.advance(2 * time.Second) // the backoff before retry 2
	h.nextSet()
	r := h.final("sh8")
	if r.Status != devices.Failed || r.Attempts != 3 || r.Reason == devices.ReasonPermanentError {
		t.Fatalf("result %s/%s after %d attempts (%s); want failed after 3, not permanent", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	if n := h.sim.Sets(plugAddr); n != 3 {
		t.Errorf("the plug got %d requests; want 3", n)
	}
}

// A light's brightness goes out as Shelly's percent (128 → 50) and comes
// back as the brightness asked: succeeded on attempt 1 with 128.
func TestShellyLightBrightness(t *testing.T) {
	h := shellyHarness(t, simulator.Faults{})
	h.publish("lamp", `{"state":"ON","brightness":128,"op_id":"l1"}`)
	set := h.nextSet()
	if set.Attrs["method"] != "Light.Set" || set.Attrs["brightness"] != 50.0 || set.Attrs["on"] != true {
		t.Fatalf("request %s; want Light.Set on, brightness 50", set.Payload)
	}
	r := h.final("l1")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["brightness"] != 128.0 || r.State["state"] != "ON" {
		t.Fatalf("result %s/%s after %d attempts (%s), state %v; want succeeded after 1, ON at 128", r.Status, r.Reason, r.Attempts, r.Detail, r.State)
	}
}

// A cover's Cover.GoToPosition is confirmed by its NotifyStatus at the
// position; its response (the motor started) confirms nothing: a Shelly
// that answers but never notifies (Unreported) leaves it unconfirmed.
func TestShellyCoverConfirmedByItsStatusNotItsResponse(t *testing.T) {
	h := shellyHarness(t, simulator.Faults{})
	h.publish("blind", `{"position":40,"op_id":"c1"}`)
	if set := h.nextSet(); set.Attrs["method"] != "Cover.GoToPosition" || set.Attrs["pos"] != 40.0 {
		t.Fatalf("request %s; want Cover.GoToPosition pos 40", set.Payload)
	}
	if r := h.final("c1"); r.Status != devices.Succeeded || r.Attempts != 1 || r.State["position"] != 40.0 {
		t.Fatalf("result %s/%s after %d attempts (%s), state %v; want succeeded after 1 at 40", r.Status, r.Reason, r.Attempts, r.Detail, r.State)
	}

	q := shellyHarness(t, simulator.Faults{Unreported: []string{blindAddr}})
	q.publish("blind", `{"position":40,"op_id":"c2"}`)
	q.nextSet()
	if r := q.result("c2"); r.Status != devices.Accepted {
		t.Fatalf("c2: %s/%s; want accepted", r.Status, r.Reason)
	}
	q.advanceTimeout(30 * time.Second) // a cover's attempt timeout: the response came, no status
	q.advance(1 * time.Second)
	if set := q.nextSet(); set.Attrs["method"] != "Cover.GoToPosition" {
		t.Fatalf("attempt 2: %s; want the request again, the first unconfirmed", set.Payload)
	}
}

// An RPC error -103 to a second attempt (the first lost on Wi-Fi) ends the
// command too: the answer carries the request's id, so it is the waiting
// attempt's, whichever it is (Dispatcher.AnswerFailed), and no third
// attempt follows.
func TestShellyInvalidArgumentOnTheSecondAttemptIsNotRetried(t *testing.T) {
	h := shellyHarness(t, simulator.Faults{DropFirst: 1, FailSets: []string{plugAddr}})
	h.publish("plug", `{"state":"ON","op_id":"sh9"}`)
	if e := h.nextSet(); e.Reason != simulator.ReasonDropFirst {
		t.Fatalf("first request %+v; want it lost", e)
	}
	h.advanceTimeout(5 * time.Second)
	h.advance(1 * time.Second)
	if e := h.nextSet(); e.Reason != simulator.ReasonSetFailed {
		t.Fatalf("second request %+v; want the device's -103", e)
	}
	r := h.final("sh9")
	if r.Status != devices.Failed || r.Reason != devices.ReasonPermanentError || r.Attempts != 2 {
		t.Fatalf("result %s/%s after %d attempts (%s); want failed/permanent_error after 2", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	if n := h.sim.Sets(plugAddr); n != 2 {
		t.Errorf("the plug got %d requests; want 2", n)
	}
}
