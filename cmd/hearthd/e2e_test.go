package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/simulator"
)

// A command to a device that answers succeeds on the first attempt, with
// the reported state in the result and mirrored, retained, on
// hearth/<device>.
func TestSucceedsOnFirstAttempt(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.publish("hall_light", `{"state":"ON","brightness":128,"op_id":"a1"}`)

	set := h.nextSet()
	if set.Device != "hall_light" || set.Topic != "zigbee2mqtt/hall_light/set" {
		t.Errorf("set went to %s on %s; want hall_light on zigbee2mqtt/hall_light/set", set.Device, set.Topic)
	}
	var sent map[string]any
	if err := json.Unmarshal(set.Payload, &sent); err != nil {
		t.Fatal(err)
	}
	if want := map[string]any{"state": "ON", "brightness": 128.0}; fmt.Sprint(sent) != fmt.Sprint(want) {
		t.Errorf("set payload %s; want the target only, %v", set.Payload, want)
	}

	r := h.final("a1")
	if r.Status != devices.Succeeded || r.Attempts != 1 {
		t.Fatalf("result %s after %d attempts (%s); want succeeded after 1", r.Status, r.Attempts, r.Detail)
	}
	if r.State["state"] != "ON" || r.State["brightness"] != 128.0 {
		t.Errorf("result state %v; want state ON, brightness 128", r.State)
	}
	if r.Device != "hall_light" || r.Target["state"] != "ON" {
		t.Errorf("result names device %q target %v", r.Device, r.Target)
	}

	// The mirror on hearth/hall_light shows the state, retained: a client
	// that subscribes now still gets it.
	got := make(chan paho.Message, 1)
	late := paho.NewClient(paho.NewClientOptions().AddBroker(h.d.brokerURL).SetClientID("late"))
	mustToken(t, late.Connect())
	defer late.Disconnect(0)
	mustToken(t, late.Subscribe("hearth/hall_light", 1, func(_ paho.Client, m paho.Message) {
		select {
		case got <- m:
		default:
		}
	}))
	select {
	case m := <-got:
		var state map[string]any
		json.Unmarshal(m.Payload(), &state)
		if !m.Retained() || state["state"] != "ON" || state["brightness"] != 128.0 {
			t.Errorf("hearth/hall_light: retained=%v %s; want retained state ON brightness 128", m.Retained(), m.Payload())
		}
	case <-time.After(eventWait):
		t.Fatal("no retained state on hearth/hall_light")
	}
}

// When the first set is lost, the second attempt goes out after the
// attempt timeout plus the full-jitter backoff, and succeeds.
func TestFirstSetDroppedSucceedsOnSecondAttempt(t *testing.T) {
	h := newHarness(t, harnessOptions{faults: simulator.Faults{DropFirst: 1}})
	h.publish("hall_light", `{"state":"ON","op_id":"b1"}`)
	if r := h.result("b1"); r.Status != devices.Accepted {
		t.Fatalf("first result %s; want accepted", r.Status)
	}
	if e := h.nextSet(); !e.Dropped {
		t.Fatal("the simulator did not drop the first set")
	}
	h.advanceTimeout(5 * time.Second) // attempt timeout
	h.advance(1 * time.Second)        // backoff before retry 1: ceiling = base
	e := h.nextSet()
	if e.Dropped {
		t.Fatal("second set dropped too")
	}
	if sent := h.clock.Since(t0); sent != 6*time.Second {
		t.Errorf("second attempt after %s; want 6s (5s timeout + 1s backoff)", sent)
	}
	r := h.await(func(r devices.Result) bool { return r.OpID == "b1" && r.Status.Terminal() }, "b1 final")
	if r.Status != devices.Succeeded || r.Attempts != 2 {
		t.Fatalf("result %s after %d attempts; want succeeded after 2", r.Status, r.Attempts)
	}
}

// A device that never answers, though its bridge says it is online (every
// set lost), gets exactly max_attempts sends, then the command fails with
// reason timeout. (One its bridge reports offline gets none: see
// TestOfflineDevicesCommandsEndDeviceOfflineWithNothingSent.)
func TestSilentDeviceFailsAfterMaxAttempts(t *testing.T) {
	h := newHarness(t, harnessOptions{faults: simulator.Faults{DropRate: 1}})
	h.publish("hall_light", `{"state":"ON","op_id":"c1"}`)
	if r := h.result("c1"); r.Status != devices.Accepted {
		t.Fatalf("first result %s; want accepted", r.Status)
	}
	h.nextSet()
	h.advanceTimeout(5 * time.Second)
	h.advance(1 * time.Second)
	h.nextSet()
	h.advance(5 * time.Second)
	r := h.await(func(r devices.Result) bool { return r.OpID == "c1" && r.Status.Terminal() }, "c1 final")
	if r.Status != devices.Failed || r.Reason != devices.ReasonTimeout || r.Attempts != 2 {
		t.Fatalf("result %s/%s after %d attempts; want failed/timeout after 2", r.Status, r.Reason, r.Attempts)
	}
	if n := h.sim.Sets("hall_light"); n != 2 {
		t.Errorf("the light received %d sets; want exactly 2 (max_attempts)", n)
	}
	stored, _, err := h.d.store.Lookup("c1")
	if err != nil || stored.Status != devices.Failed || stored.Attempts != 2 {
		t.Errorf("stored: %s after %d attempts (%v); want failed after 2", stored.Status, stored.Attempts, err)
	}
}

// Every kind of bad input is rejected with a precise reason, nothing
// reaches a device, and hearthd keeps running.
func TestBadInputIsRejected(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cases := []struct {
		name, device, payload string
		reason                devices.Reason
	}{
		{"malformed JSON", "hall_light", `{"state":"ON",`, devices.ReasonInvalidPayload},
		{"JSON array", "hall_light", `["ON"]`, devices.ReasonInvalidPayload},
		{"only reserved keys", "hall_light", `{"op_id":"x"}`, devices.ReasonInvalidPayload},
		{"unknown device", "ghost", `{"state":"ON"}`, devices.ReasonUnknownDevice},
		{"unknown attribute", "hall_light", `{"state":"ON","colour":"red"}`, devices.ReasonUnknownAttribute},
		{"lock has no brightness", "front_door", `{"brightness":10}`, devices.ReasonUnknownAttribute},
		{"brightness out of range", "hall_light", `{"brightness":256}`, devices.ReasonOutOfRange},
		{"position out of range", "blinds", `{"position":-1}`, devices.ReasonOutOfRange},
		{"brightness of wrong type", "hall_light", `{"brightness":"high"}`, devices.ReasonInvalidValue},
		{"fractional brightness", "hall_light", `{"brightness":12.5}`, devices.ReasonInvalidValue},
		{"ON at brightness 0", "hall_light", `{"state":"ON","brightness":0}`, devices.ReasonInvalidValue},
		{"unknown state value", "front_door", `OPEN`, devices.ReasonInvalidValue},
		{"state of wrong type", "plug", `{"state":true}`, devices.ReasonInvalidValue},
		{"TOGGLE plain", "plug", `TOGGLE`, devices.ReasonRelativeCommand},
		{"TOGGLE JSON", "hall_light", `{"state":"toggle"}`, devices.ReasonRelativeCommand},
		{"brightness_step", "hall_light", `{"brightness_step":40}`, devices.ReasonRelativeCommand},
		{"brightness_move", "hall_light", `{"brightness_move":-20}`, devices.ReasonRelativeCommand},
		{"color_temp_step", "hall_light", `{"color_temp_step":10}`, devices.ReasonRelativeCommand},
		{"brightness_step_onoff", "hall_light", `{"brightness_step_onoff":10}`, devices.ReasonRelativeCommand},
		{"payload over 64 KiB", "hall_light", `{"state":"ON","pad":"` + strings.Repeat("x", 64<<10) + `"}`, devices.ReasonPayloadTooLarge},
		{"op_id over 64 bytes", "hall_light", `{"state":"ON","op_id":"` + strings.Repeat("o", 65) + `"}`, devices.ReasonInvalidOpID},
		{"op_id not a string", "hall_light", `{"state":"ON","op_id":7}`, devices.ReasonInvalidOpID},
		{"ttl that does not parse", "hall_light", `{"state":"ON","ttl":"soon"}`, devices.ReasonInvalidTTL},
		{"negative ttl", "hall_light", `{"state":"ON","ttl":-5}`, devices.ReasonInvalidTTL},
		{"issued_at not RFC 3339", "hall_light", `{"state":"ON","issued_at":"yesterday"}`, devices.ReasonInvalidIssuedAt},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h.t = t
			device := c.device
			h.publish(device, c.payload)
			r := h.await(func(r devices.Result) bool { return r.Device == device }, "a result on hearth/"+device+"/result")
			if r.Status != devices.Rejected || r.Reason != c.reason {
				t.Errorf("case %d: %s/%s (%s); want rejected/%s", i, r.Status, r.Reason, r.Detail, c.reason)
			}
			if r.OpID == "" || r.Detail == "" {
				t.Errorf("case %d: rejection without op_id or detail: %+v", i, r)
			}
		})
	}
	h.t = t

	// The caller's op_id is echoed in a rejection when it can be read.
	h.publish("hall_light", `{"state":"TOGGLE","op_id":"mine"}`)
	if r := h.result("mine"); r.Status != devices.Rejected {
		t.Errorf("op_id mine: %s; want rejected with the caller's op_id", r.Status)
	}

	// A retained command is refused: it would replay on every reconnect.
	mustToken(t, h.client.Publish("hearth/plug/set", 1, true, `{"state":"ON","op_id":"ret"}`))
	if r := h.result("ret"); r.Status != devices.Rejected || r.Reason != devices.ReasonRetainedCommand {
		t.Errorf("retained command: %s/%s; want rejected/retained_command", r.Status, r.Reason)
	}
	mustToken(t, h.client.Publish("hearth/plug/set", 1, true, ""))

	// Nothing reached a device, and hearthd still works: a good command
	// afterwards is the first and only set each device sees.
	h.noSetsYet()
	h.publish("hall_light", `{"state":"ON","op_id":"good"}`)
	if e := h.nextSet(); e.Device != "hall_light" || !strings.Contains(string(e.Payload), `"ON"`) {
		t.Errorf("first set after the rejections: %s %s; want hall_light ON", e.Device, e.Payload)
	}
	if r := h.final("good"); r.Status != devices.Succeeded {
		t.Errorf("good command after rejections: %s", r.Status)
	}
	h.noSetsYet()
}

// The same op_id sent again, with any payload, returns the stored result
// and never executes again.
func TestDuplicateOpIDReturnsStoredResult(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.publish("hall_light", `{"state":"ON","op_id":"dup"}`)
	first := h.final("dup")
	if first.Status != devices.Succeeded {
		t.Fatalf("first: %s", first.Status)
	}
	h.nextSet()
	for _, payload := range []string{`{"state":"ON","op_id":"dup"}`, `{"state":"OFF","op_id":"dup"}`} {
		h.publish("hall_light", payload)
		again := h.result("dup")
		if again.Status != first.Status || again.Attempts != first.Attempts || !again.At.Equal(first.At) || again.Target["state"] != "ON" {
			t.Errorf("repeat %s: %+v; want the stored result %+v", payload, again, first)
		}
	}
	// Two copies in one burst are answered once each, executed once.
	h.publish("plug", `{"state":"ON","op_id":"burst"}`)
	h.publish("plug", `{"state":"ON","op_id":"burst"}`)
	var statuses []devices.Status
	for range 3 {
		statuses = append(statuses, h.result("burst").Status)
	}
	if statuses[2] != devices.Succeeded {
		t.Errorf("burst results %v; want it to end succeeded", statuses)
	}
	h.nextSet()
	h.noSetsYet()
	if n := h.sim.Sets("hall_light"); n != 1 {
		t.Errorf("hall_light received %d sets; want 1", n)
	}
	if n := h.sim.Sets("plug"); n != 1 {
		t.Errorf("plug received %d sets; want 1", n)
	}
}

// A newer command for the same attributes supersedes a pending older one,
// and no retry of the older one reaches the device afterwards.
func TestNewerCommandSupersedesOlder(t *testing.T) {
	h := newHarness(t, harnessOptions{faults: simulator.Faults{Silent: []string{"blinds"}}})
	h.publish("blinds", `{"position":20,"op_id":"old"}`)
	if r := h.result("old"); r.Status != devices.Accepted {
		t.Fatalf("old: %s", r.Status)
	}
	if e := h.nextSet(); !strings.Contains(string(e.Payload), "20") {
		t.Fatalf("first set %s; want position 20", e.Payload)
	}
	// The device comes back; the newer command arrives while the older one
	// waits for its confirmation.
	if err := h.sim.SetOnline("blinds", true); err != nil {
		t.Fatal(err)
	}
	h.publish("blinds", `{"position":70,"op_id":"new"}`)
	old := h.await(func(r devices.Result) bool { return r.OpID == "old" && r.Status.Terminal() }, "old final")
	if old.Status != devices.Superseded || old.Reason != devices.ReasonNewerCommand || !strings.Contains(old.Detail, "new") {
		t.Errorf("old: %s/%s %q; want superseded/newer_command naming new", old.Status, old.Reason, old.Detail)
	}
	if r := h.final("new"); r.Status != devices.Succeeded || r.State["position"] != 70.0 {
		t.Fatalf("new: %s %v; want succeeded at position 70", r.Status, r.State)
	}
	if e := h.nextSet(); !strings.Contains(string(e.Payload), "70") {
		t.Fatalf("second set %s; want position 70", e.Payload)
	}
	// Run out every timer the older command could have had: nothing more
	// reaches the device.
	h.clock.Advance(time.Minute)
	h.publish("blinds", `{"position":70,"op_id":"barrier"}`)
	if r := h.final("barrier"); r.Status != devices.Succeeded {
		t.Fatalf("barrier: %s", r.Status)
	}
	if e := h.nextSet(); !strings.Contains(string(e.Payload), "70") {
		t.Errorf("after the newer command the device received %s; want only the barrier (position 70)", e.Payload)
	}
	if n := h.sim.Sets("blinds"); n != 3 {
		t.Errorf("blinds received %d sets; want 3 (old once, new, barrier)", n)
	}
	stored, _, _ := h.d.store.Lookup("old")
	if stored.Status != devices.Superseded {
		t.Errorf("stored old: %s; want superseded", stored.Status)
	}
}

// A command that only partly overlaps a pending one does not supersede it:
// both run, in order.
func TestPartialOverlapRunsBothInOrder(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.publish("hall_light", `{"state":"ON","brightness":50,"op_id":"p1"}`)
	h.publish("hall_light", `{"brightness":200,"op_id":"p2"}`)
	if r := h.final("p1"); r.Status != devices.Succeeded {
		t.Fatalf("p1: %s %s", r.Status, r.Reason)
	}
	if r := h.final("p2"); r.Status != devices.Succeeded {
		t.Fatalf("p2: %s %s", r.Status, r.Reason)
	}
	first, second := h.nextSet(), h.nextSet()
	if !strings.Contains(string(first.Payload), "50") || !strings.Contains(string(second.Payload), "200") {
		t.Errorf("sets in order %s then %s; want brightness 50 then 200", first.Payload, second.Payload)
	}
}

// Pending commands survive a restart: one still within its TTL resumes
// and succeeds, one whose TTL passed while hearthd was down ends expired
// without being sent again.
func TestRestartResumesFreshAndExpiresStale(t *testing.T) {
	dir := t.TempDir()
	// The broker outlives hearthd, as a separate Mosquitto would, so the
	// automation stays subscribed while hearthd restarts.
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	offline := simulator.Faults{Silent: []string{"hall_light", "plug"}}
	h := newHarness(t, harnessOptions{dataDir: dir, faults: offline, brokerURL: b.URL()})
	h.publish("hall_light", `{"state":"ON","op_id":"fresh","ttl":"1h"}`)
	h.publish("plug", `{"state":"ON","op_id":"stale","ttl":"20s"}`)
	h.result("fresh")
	h.result("stale")
	h.nextSet()
	h.nextSet()
	clock := h.clock
	h.stopHearth()

	// Down for 30 s: "stale" is past its TTL, "fresh" is not.
	clock.Advance(30 * time.Second)
	h2 := newHarness(t, harnessOptions{dataDir: dir, clock: clock, brokerURL: b.URL(), automation: h,
		faults: simulator.Faults{Silent: []string{"plug"}}})
	r := h2.await(func(r devices.Result) bool { return r.OpID == "stale" }, "stale's result after restart")
	if r.Status != devices.Expired || r.Reason != devices.ReasonTTLElapsed {
		t.Errorf("stale after restart: %s/%s; want expired/ttl_elapsed", r.Status, r.Reason)
	}
	// "fresh" had one attempt before the restart: it gets its second, and
	// last, after the backoff, and the device (online now) confirms it.
	h2.advance(time.Second)
	e := h2.nextSet()
	if e.Device != "hall_light" {
		t.Fatalf("set after restart went to %s; want hall_light", e.Device)
	}
	r = h2.await(func(r devices.Result) bool { return r.OpID == "fresh" && r.Status.Terminal() }, "fresh final")
	if r.Status != devices.Succeeded || r.Attempts != 2 {
		t.Errorf("fresh after restart: %s after %d attempts; want succeeded after 2", r.Status, r.Attempts)
	}
	h2.noSetsYet()
}

// A second hearthd on the same data directory exits with a clear message
// instead of hanging.
func TestSecondInstanceOnSameDataDirFails(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	cfg := *h.cfg
	_, err := start(&cfg, deps{logger: testLogger(t), lockTimeout: 50 * time.Millisecond})
	if err == nil {
		t.Fatal("second instance started")
	}
	if !strings.Contains(err.Error(), "in use by another hearthd") || !strings.Contains(err.Error(), cfg.DataDir) {
		t.Errorf("error %q; want it to say the data directory is in use and name it", err)
	}
}

// After a power cut the hub may come back before its broker. A resumed
// command whose send cannot leave (no connection) spends no attempt: it
// waits for the connection and is then delivered and confirmed, instead of
// failing with its attempts burned on a dead connection.
func TestResumedCommandWaitsForTheBroker(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	addr := b.Addr()
	h := newHarness(t, harnessOptions{dataDir: dir, brokerURL: b.URL(), rand: floorRand{},
		faults: simulator.Faults{DropFirst: 1}})
	h.publish("hall_light", `{"state":"ON","op_id":"k1","ttl":"1h"}`)
	h.result("k1")
	if e := h.nextSet(); !e.Dropped {
		t.Fatal("the first set was not dropped")
	}
	clock := h.clock
	h.stop()
	b.Close()

	// hearthd starts while the broker is still down: its connection waits
	// on the fake clock between tries, and the resumed command waits out
	// the rest of its attempt's window (5 s), then tries its second attempt
	// at once (no backoff with floorRand): nothing can leave.
	cfg := *h.cfg
	d, err := start(&cfg, deps{clock: clock, rand: floorRand{}, connRand: ceilingRand{}, logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.stop()
	// Two waits on the clock: the command waiting for its window, then
	// for the connection (until its TTL), and hearthd's reconnect backoff
	// (at most the 100 ms cap).
	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, 2); err != nil {
		t.Fatal("hearthd is not waiting for the window and the broker")
	}
	clock.Advance(5 * time.Second) // the window ends; the broker is still down
	if err := clock.BlockUntilContext(ctx, 2); err != nil {
		t.Fatal("hearthd is not waiting for the broker")
	}
	if op, _, _ := d.store.Lookup("k1"); op.Attempts != 1 || op.Status != devices.Accepted {
		t.Errorf("while the broker is down: k1 %s after %d attempts; want still accepted after 1", op.Status, op.Attempts)
	}

	// The broker and the devices come back; hearthd is still waiting.
	b2, err := broker.Start(broker.Options{Listen: addr})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	defer d.stop() // before the broker closes, so that its offline goes out
	results := make(chan devices.Result, 16)
	automation := paho.NewClient(paho.NewClientOptions().AddBroker(b2.URL()).SetClientID("automation-2"))
	mustToken(t, automation.Connect())
	defer automation.Disconnect(0)
	mustToken(t, automation.Subscribe("hearth/+/result", 1, func(_ paho.Client, m paho.Message) {
		var r devices.Result
		json.Unmarshal(m.Payload(), &r)
		results <- r
	}))
	sim, err := simulator.New(simulator.Options{Broker: b2.URL(), Devices: simDevices(&cfg)})
	if err != nil {
		t.Fatal(err)
	}
	simCtx, stopSim := context.WithCancel(context.Background())
	simDone := make(chan struct{})
	go func() { defer close(simDone); sim.Run(simCtx) }()
	defer func() { stopSim(); <-simDone }()
	waitClosed(t, sim.Ready(), "simulator ready")
	clock.Advance(100 * time.Millisecond) // hearthd's reconnect backoff runs out
	deadline := time.After(eventWait)
	for {
		select {
		case r := <-results:
			if r.OpID != "k1" || !r.Status.Terminal() {
				continue
			}
			if r.Status != devices.Succeeded || r.Attempts != 2 {
				t.Fatalf("k1: %s/%s after %d attempts (%s); want succeeded after 2", r.Status, r.Reason, r.Attempts, r.Detail)
			}
			if n := sim.Sets("hall_light"); n != 1 {
				t.Errorf("the new simulator received %d sets; want 1", n)
			}
			return
		case <-deadline:
			t.Fatal("k1 never ended after the broker came back")
		}
	}
}

// Brightness 0 turns a Zigbee light off; the bulb reports state OFF and
// keeps its last level, which confirms the command.
func TestBrightnessZeroConfirmedByOff(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.publish("hall_light", `{"brightness":120,"op_id":"z1"}`)
	if r := h.final("z1"); r.Status != devices.Succeeded {
		t.Fatalf("z1: %s", r.Status)
	}
	h.publish("hall_light", `{"brightness":0,"op_id":"z2"}`)
	r := h.final("z2")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["state"] != "OFF" {
		t.Fatalf("z2: %s after %d attempts, state %v; want succeeded after 1 with state OFF", r.Status, r.Attempts, r.State)
	}
}

// Ended commands are kept seven days for op_id deduplication, then pruned
// at the next start (and hourly): an op_id older than that runs again.
func TestEndedCommandsArePrunedAfterRetention(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, harnessOptions{dataDir: dir})
	h.publish("plug", `{"state":"ON","op_id":"week-old"}`)
	if r := h.final("week-old"); r.Status != devices.Succeeded {
		t.Fatalf("week-old: %s", r.Status)
	}
	clock := h.clock
	h.stop()

	clock.Advance(opRetention - time.Minute)
	h2 := newHarness(t, harnessOptions{dataDir: dir, clock: clock})
	h2.publish("plug", `{"state":"ON","op_id":"week-old"}`)
	if r := h2.result("week-old"); r.Status != devices.Succeeded || !r.At.Equal(t0) {
		t.Fatalf("within retention: %s at %s; want the stored succeeded at %s", r.Status, r.At, t0)
	}
	h2.stop()

	clock.Advance(2 * time.Minute)
	h3 := newHarness(t, harnessOptions{dataDir: dir, clock: clock})
	h3.publish("plug", `{"state":"ON","op_id":"week-old"}`)
	if r := h3.final("week-old"); r.Status != devices.Succeeded || r.At.Equal(t0) {
		t.Fatalf("after retention: %s at %s; want a new execution", r.Status, r.At)
	}
	if n := h3.sim.Sets("plug"); n != 1 {
		t.Errorf("plug received %d sets after retention; want 1", n)
	}
}
