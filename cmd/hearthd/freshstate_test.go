package main

import (
	"encoding/json"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/simulator"
)

// freshStateConfig is testConfig with a rule that acts while the front
// door is unlocked.
var freshStateConfig = testConfig + `automations:
  door_left_open:
    triggers:
      - mqtt: {topic: hearth-test/ping}
    conditions:
      - state: {device: front_door, attribute: lock_state, op: eq, value: unlocked}
    actions:
      - publish: {topic: hearth-test/door-unlocked, payload: "yes"}
`

// A retained lock_state "unlocked" on the broker, while the lock is
// really locked (turned by hand while Hearth was down, a stale retained
// message), satisfies no automation's condition after a restart: hearthd
// reads the lock as soon as its bridge is up, and until the answer comes
// the rule is skipped; the answer (locked) is then what the state says,
// on the retained mirror too. Before the restart the same rule ran on a
// live report of "unlocked": the condition itself holds when it should.
func TestRetainedStateOfALockSatisfiesNoAutomationUntilTheFreshRead(t *testing.T) {
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	clock := newDueClock(t0)
	const latency = 2 * time.Second // the lock's answers, on the fake clock
	dir := t.TempDir()
	h1 := newHarness(t, harnessOptions{dataDir: dir, brokerURL: b.URL(), config: freshStateConfig, clock: clock,
		simOnFakeClock: true, faults: simulator.Faults{Latency: latency}})
	// The lock's answer to the fresh read after the start is held by its
	// latency: let it through.
	h1.eventually("the first fresh read received", func() bool { return h1.fresh.received("Front Door") == 1 })
	clock.Advance(latency)
	h1.settle("front_door")
	mirror1 := h1.watch("hearth/front_door")
	// A stale retained "unlocked" (Zigbee2MQTT retains device states):
	// live for the hearthd that runs now.
	mustToken(t, h1.client.Publish("zigbee2mqtt/Front Door", 1, true, `{"lock_state":"unlocked","state":"UNLOCK"}`))
	awaitLockState(t, mirror1, "unlocked")
	acted := h1.watch("hearth-test/door-unlocked")
	mustToken(t, h1.client.Publish("hearth-test/ping", 1, false, "1"))
	select {
	case <-acted: // the rule ran on the live report
	case <-time.After(eventWait):
		t.Fatal("the rule did not run on a live report of unlocked")
	}
	h1.stopDaemon()

	h2 := newHarness(t, harnessOptions{dataDir: dir, brokerURL: b.URL(), config: freshStateConfig, clock: clock, sim: h1, automation: h1})
	h2.eventually("the fresh read of the front door received", func() bool { return h2.fresh.received("Front Door") == 2 })
	mirror2 := h2.watch("hearth/front_door")
	awaitLockState(t, mirror2, "unlocked") // the replay, mirrored: the read's answer is held
	mustToken(t, h2.client.Publish("hearth-test/ping", 1, false, "2"))
	h2.eventually("the rule skipped", func() bool { _, skipped := h2.ruleStatus("door_left_open"); return skipped == 1 })

	clock.Advance(latency) // the lock answers the read: locked
	awaitLockState(t, mirror2, "locked")
	mustToken(t, h2.client.Publish("hearth-test/ping", 1, false, "3"))
	h2.eventually("the rule skipped again", func() bool { _, skipped := h2.ruleStatus("door_left_open"); return skipped == 2 })
	if runs, _ := h2.ruleStatus("door_left_open"); runs != 0 {
		t.Errorf("after the restart the rule ran %d times; want 0: the door is locked, and the replay said otherwise", runs)
	}
	if m := awaitLockState(t, h2.watch("hearth/front_door"), "locked"); !m.Retained() {
		t.Error("the mirror hearth/front_door is not retained")
	}
}

// awaitLockState waits for a state message on ch whose lock_state is
// want, skipping others.
func awaitLockState(t *testing.T, ch <-chan paho.Message, want string) paho.Message {
	t.Helper()
	deadline := time.After(eventWait)
	for {
		select {
		case m := <-ch:
			var st map[string]any
			if err := json.Unmarshal(m.Payload(), &st); err != nil {
				t.Fatalf("%s is not JSON: %s", m.Topic(), m.Payload())
			}
			if st["lock_state"] == want {
				return m
			}
		case <-deadline:
			t.Fatalf("timed out waiting for lock_state %s", want)
		}
	}
}
