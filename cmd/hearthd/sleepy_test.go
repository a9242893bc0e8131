package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/store"
)

// sleepyConfig is testConfig with a sleepy radiator thermostat that wakes
// every 48 h and listens 10 s. No simulated device plays it (its
// harnesses say notSimulated): the test's fakeSleepy does, so that the
// test decides when it wakes and what it answers.
var sleepyConfig = testConfig + `  radiator:
    class: climate
    sleepy: true
    wake_interval: 48h
    awake_window: 10s
`

// deviceMsg is a set or get that reached the fake device, with the fake
// clock's time when it arrived.
type deviceMsg struct {
	verb    string // "set" or "get"
	payload map[string]any
	at      time.Time
}

// fakeSleepy plays a sleepy Zigbee2MQTT radiator on the real broker: it
// reports its state when the test wakes it (a check-in), and answers sets
// and gets only as the test says.
type fakeSleepy struct {
	h      *harness
	c      paho.Client
	msgs   chan deviceMsg
	mu     sync.Mutex
	state  map[string]any
	report bool // a set is applied and reported
	answer bool // a get is answered with the state
}

func newFakeSleepy(h *harness) *fakeSleepy {
	h.t.Helper()
	f := &fakeSleepy{h: h, msgs: make(chan deviceMsg, 16), state: map[string]any{"current_heating_setpoint": 16.0}, report: true, answer: true}
	f.c = paho.NewClient(paho.NewClientOptions().AddBroker(h.d.brokerURL).SetClientID("fake-radiator").SetOrderMatters(true))
	mustToken(h.t, f.c.Connect())
	h.t.Cleanup(func() { f.c.Disconnect(0) })
	mustToken(h.t, f.c.SubscribeMultiple(map[string]byte{"zigbee2mqtt/radiator/set": 1, "zigbee2mqtt/radiator/get": 1}, func(c paho.Client, m paho.Message) {
		var p map[string]any
		json.Unmarshal(m.Payload(), &p)
		verb := "set"
		if m.Topic() == "zigbee2mqtt/radiator/get" {
			verb = "get"
		}
		f.mu.Lock()
		reply := (verb == "set" && f.report) || (verb == "get" && f.answer)
		if verb == "set" && f.report {
			for k, v := range p {
				f.state[k] = v
			}
		}
		state, _ := json.Marshal(f.state)
		f.mu.Unlock()
		f.msgs <- deviceMsg{verb, p, h.clock.Now()}
		if reply {
			c.Publish("zigbee2mqtt/radiator", 1, false, state)
		}
	}))
	return f
}

// wake makes the radiator check in: it reports its whole state.
func (f *fakeSleepy) wake() {
	f.h.t.Helper()
	f.mu.Lock()
	state, _ := json.Marshal(f.state)
	f.mu.Unlock()
	mustToken(f.h.t, f.c.Publish("zigbee2mqtt/radiator", 1, false, state))
}

// next waits for the next set or get to reach the radiator.
func (f *fakeSleepy) next() deviceMsg {
	f.h.t.Helper()
	select {
	case m := <-f.msgs:
		return m
	case <-time.After(eventWait):
		f.h.t.Fatal("timed out waiting for a set or get to reach the radiator")
		panic("unreachable")
	}
}

// none checks that nothing reached the radiator so far.
func (f *fakeSleepy) none() {
	f.h.t.Helper()
	select {
	case m := <-f.msgs:
		f.h.t.Fatalf("the radiator received a %s %v", m.verb, m.payload)
	default:
	}
}

// The first test: a thermostat asleep for 48 h gets setpoint 21,
// then 18 (an hour later, within 21's TTL of 1 h): 21 ends superseded,
// 18 expired at its TTL, and at the wake 48 h later neither is delivered:
// the first set the radiator ever receives is a later command's.
func TestSleepyStaleCommandsAreNeverDelivered(t *testing.T) {
	h := newHarness(t, harnessOptions{config: sleepyConfig, notSimulated: []string{"radiator"}})
	dev := newFakeSleepy(h)

	h.publish("radiator", `{"current_heating_setpoint":21,"op_id":"t21","ttl":"1h"}`)
	if r := h.result("t21"); r.Status != devices.Accepted {
		t.Fatalf("t21: %s/%s; want accepted", r.Status, r.Reason)
	}
	if r := h.result("t21"); r.Status != devices.Queued || r.Reason != devices.ReasonAsleep {
		t.Fatalf("t21: %s/%s; want queued/asleep", r.Status, r.Reason)
	}
	h.elapse(59 * time.Minute)
	h.publish("radiator", `{"current_heating_setpoint":18,"op_id":"t18","ttl":"1h"}`)
	if r := h.await(func(r devices.Result) bool { return r.OpID == "t21" && r.Status.Terminal() }, "t21's end"); r.Status != devices.Superseded {
		t.Errorf("t21: %s/%s; want superseded", r.Status, r.Reason)
	}
	if r := h.result("t18"); r.Status != devices.Accepted {
		t.Fatalf("t18: %s/%s; want accepted", r.Status, r.Reason)
	}
	if r := h.result("t18"); r.Status != devices.Queued {
		t.Fatalf("t18: %s/%s; want queued", r.Status, r.Reason)
	}
	h.advance(time.Hour)
	if r := h.await(func(r devices.Result) bool { return r.OpID == "t18" && r.Status.Terminal() }, "t18's end"); r.Status != devices.Expired || r.Reason != devices.ReasonTTLElapsed || r.Attempts != 0 {
		t.Errorf("t18: %s/%s after %d attempts; want expired/ttl_elapsed after 0", r.Status, r.Reason, r.Attempts)
	}
	h.clock.Advance(47 * time.Hour)
	dev.wake()
	h.publish("radiator", `{"current_heating_setpoint":20,"op_id":"t20"}`)
	if m := dev.next(); m.verb != "set" || m.payload["current_heating_setpoint"] != 20.0 {
		t.Errorf("first message to the radiator: %s %v; want the set of 20 (21 and 18 are dead)", m.verb, m.payload)
	}
	if r := h.final("t20"); r.Status != devices.Succeeded || r.Attempts != 1 {
		t.Errorf("t20: %s/%s after %d attempts; want succeeded after 1", r.Status, r.Reason, r.Attempts)
	}
	dead, err := h.d.store.DeadLetters(store.DeadLetterQuery{Device: "radiator"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, dl := range dead {
		got = append(got, fmt.Sprintf("%s %s %d", dl.OpID, dl.Status, dl.Attempts))
	}
	if want := []string{"t21 superseded 0", "t18 expired 0"}; !slices.Equal(got, want) {
		t.Errorf("dead letters %q; want %q", got, want)
	}
}

// Within the TTL only the newest setpoint is delivered: once, at the next
// wake, and confirmed by the radiator's report.
func TestSleepyOnlyTheNewestIsDeliveredAtTheWake(t *testing.T) {
	h := newHarness(t, harnessOptions{config: sleepyConfig, notSimulated: []string{"radiator"}})
	dev := newFakeSleepy(h)

	h.publish("radiator", `{"current_heating_setpoint":21,"op_id":"t21","ttl":"1h"}`)
	h.result("t21")
	h.elapse(10 * time.Minute)
	h.publish("radiator", `{"current_heating_setpoint":18,"op_id":"t18","ttl":"1h"}`)
	if r := h.await(func(r devices.Result) bool { return r.OpID == "t21" && r.Status.Terminal() }, "t21's end"); r.Status != devices.Superseded {
		t.Errorf("t21: %s/%s; want superseded", r.Status, r.Reason)
	}
	if r := h.result("t18"); r.Status != devices.Accepted {
		t.Fatalf("t18: %s; want accepted", r.Status)
	}
	if r := h.result("t18"); r.Status != devices.Queued {
		t.Fatalf("t18: %s; want queued", r.Status)
	}
	dev.none()
	h.elapse(20 * time.Minute)
	woke := h.clock.Now()
	dev.wake()
	if m := dev.next(); m.verb != "set" || m.payload["current_heating_setpoint"] != 18.0 || m.at.Before(woke) {
		t.Errorf("at the wake the radiator received %s %v at %v; want the set of 18", m.verb, m.payload, m.at)
	}
	r := h.await(func(r devices.Result) bool { return r.OpID == "t18" && r.Status.Terminal() }, "t18's end")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["current_heating_setpoint"] != 18.0 {
		t.Errorf("t18: %s/%s after %d attempts, state %v; want succeeded after 1 at 18", r.Status, r.Reason, r.Attempts, r.State)
	}
	dev.none()
}

// A set that the radiator applies without reporting is verified by a read
// within the same awake window: the set, then the get, both before the
// window ends, and the answer confirms.
func TestSleepySetAndItsVerifyingReadFitOneAwakeWindow(t *testing.T) {
	h := newHarness(t, harnessOptions{config: sleepyConfig, notSimulated: []string{"radiator"}})
	dev := newFakeSleepy(h)
	dev.report = false // applies, says nothing until asked
	dev.mu.Lock()
	dev.state["current_heating_setpoint"] = 19.0 // what it will have applied
	dev.mu.Unlock()

	h.publish("radiator", `{"current_heating_setpoint":19,"op_id":"cfg"}`)
	h.result("cfg")
	h.result("cfg") // queued
	woke := h.clock.Now()
	dev.wake()
	set := dev.next()
	// Half of the attempt timeout (5 s) for a report of its own, then the
	// verifying read.
	h.advance(2500 * time.Millisecond)
	get := dev.next()
	window := woke.Add(10 * time.Second)
	if set.verb != "set" || get.verb != "get" || set.at.Before(woke) || !get.at.Before(window) {
		t.Errorf("the radiator received %s at %v and %s at %v; want the set, then the get, both within the window [%v, %v)",
			set.verb, set.at, get.verb, get.at, woke, window)
	}
	r := h.await(func(r devices.Result) bool { return r.OpID == "cfg" && r.Status.Terminal() }, "cfg's end")
	if r.Status != devices.Succeeded || r.Attempts != 1 {
		t.Errorf("cfg: %s/%s after %d attempts; want succeeded after 1", r.Status, r.Reason, r.Attempts)
	}
}

// A radiator that falls asleep again before answering: the unanswered
// request ends its lease, so no further attempt goes out in that window
// (no application retry stacked on the radio's); the next wake delivers
// it, and it is confirmed.
func TestSleepyUnansweredRequestWaitsForTheNextWake(t *testing.T) {
	h := newHarness(t, harnessOptions{config: sleepyConfig, notSimulated: []string{"radiator"}})
	dev := newFakeSleepy(h)
	dev.report, dev.answer = false, false

	h.publish("radiator", `{"current_heating_setpoint":22,"op_id":"late"}`)
	h.result("late")
	h.result("late") // queued
	dev.wake()
	if m := dev.next(); m.verb != "set" {
		t.Fatalf("at the wake: %s; want the set", m.verb)
	}
	h.advance(2500 * time.Millisecond)
	if m := dev.next(); m.verb != "get" {
		t.Fatalf("then: %s; want the verifying get", m.verb)
	}
	h.advance(2500 * time.Millisecond) // the rest of the attempt timeout: no answer
	if r := h.result("late"); r.Status != devices.Queued || r.Reason != devices.ReasonAsleep || r.Attempts != 1 {
		t.Errorf("late after the silent wake: %s/%s after %d attempts; want queued/asleep after 1", r.Status, r.Reason, r.Attempts)
	}
	h.elapse(10 * time.Second) // past the awake window: nothing more
	dev.none()

	dev.mu.Lock()
	dev.report, dev.answer = true, true
	dev.mu.Unlock()
	h.elapse(time.Hour)
	dev.wake()
	if m := dev.next(); m.verb != "set" || m.payload["current_heating_setpoint"] != 22.0 {
		t.Fatalf("at the next wake: %s %v; want the set of 22", m.verb, m.payload)
	}
	r := h.await(func(r devices.Result) bool { return r.OpID == "late" && r.Status.Terminal() }, "late's end")
	if r.Status != devices.Succeeded || r.Attempts != 2 {
		t.Errorf("late: %s/%s after %d attempts; want succeeded after 2", r.Status, r.Reason, r.Attempts)
	}
}

// After a restart, a command still waiting for a sleeping device is not
// announced as queued a second time: its sender heard accepted and queued
// before the restart, and with many such commands the repeats would go out
// ahead of live traffic. A command accepted after the restart is announced.
func TestSleepyResumedCommandIsNotAnnouncedQueuedAgain(t *testing.T) {
	dir := t.TempDir()
	// The broker outlives hearthd, so the automation hears whatever the
	// restarted hearthd publishes from its first moment.
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	h := newHarness(t, harnessOptions{dataDir: dir, config: sleepyConfig, notSimulated: []string{"radiator"}, brokerURL: b.URL()})
	h.publish("radiator", `{"current_heating_setpoint":21,"op_id":"t21","ttl":"1h"}`)
	if r := h.result("t21"); r.Status != devices.Accepted {
		t.Fatalf("t21: %s/%s; want accepted", r.Status, r.Reason)
	}
	if r := h.result("t21"); r.Status != devices.Queued {
		t.Fatalf("t21: %s/%s; want queued", r.Status, r.Reason)
	}
	clock := h.clock
	h.stopHearth()

	h2 := newHarness(t, harnessOptions{dataDir: dir, clock: clock, config: sleepyConfig, notSimulated: []string{"radiator"}, brokerURL: b.URL(), automation: h})
	// Another attribute, so that t21 is not superseded. Its queued result
	// comes from the same device worker, after any of t21's.
	h2.publish("radiator", `{"occupied_heating_setpoint":19,"op_id":"o19","ttl":"1h"}`)
	if r := h2.result("o19"); r.Status != devices.Accepted {
		t.Fatalf("o19: %s/%s; want accepted", r.Status, r.Reason)
	}
	if r := h2.result("o19"); r.Status != devices.Queued {
		t.Fatalf("o19: %s/%s; want queued", r.Status, r.Reason)
	}
	for _, r := range h2.backlog {
		if r.OpID == "t21" {
			t.Errorf("after the restart t21 was announced again: %s/%s", r.Status, r.Reason)
		}
	}
}
