package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/simulator"
)

// A lock is confirmed only by lock_state: a report of state LOCK alone (a
// half-thrown bolt reads the same) confirms nothing.
func TestLockIsConfirmedByLockStateOnly(t *testing.T) {
	h := newHarness(t, harnessOptions{faults: simulator.Faults{Silent: []string{"Front Door"}}})
	bridge := paho.NewClient(paho.NewClientOptions().AddBroker(h.d.brokerURL).SetClientID("fake-z2m"))
	mustToken(t, bridge.Connect())
	defer bridge.Disconnect(0)
	// The lock has reported lock_state before.
	mustToken(t, bridge.Publish("zigbee2mqtt/Front Door", 1, false, `{"state":"UNLOCK","lock_state":"unlocked"}`))
	h.publish("front_door", `{"state":"LOCK","op_id":"bolt"}`)
	h.result("bolt")
	// The fake bridge does not answer the read before the first LOCK;
	// locking proceeds when the read times out.
	h.advance(dispatcher.DefaultReadTimeout)
	h.nextSet()
	// An echo of state alone (no lock_state; a not_fully_locked one
	// would end the command jammed: see TestJammedBoltFailsAfterOneAttemptAndNotifies).
	mustToken(t, bridge.Publish("zigbee2mqtt/Front Door", 1, false, `{"state":"LOCK"}`))
	h.advanceTimeout(5 * time.Second) // unconfirmed; the backoff set before it moves
	h.advance(time.Second)
	h.nextSet()
	mustToken(t, bridge.Publish("zigbee2mqtt/Front Door", 1, false, `{"state":"LOCK","lock_state":"locked"}`))
	r := h.await(func(r devices.Result) bool { return r.OpID == "bolt" && r.Status.Terminal() }, "bolt final")
	if r.Status != devices.Succeeded || r.Attempts != 2 || r.State["lock_state"] != "locked" {
		t.Errorf("bolt: %s after %d attempts, state %v; want succeeded after 2 with lock_state locked", r.Status, r.Attempts, r.State)
	}
}

// A report the broker replays from its retained store when hearthd
// resubscribes is old news: it never confirms a command.
func TestRetainedReportReplayedOnReconnectDoesNotConfirm(t *testing.T) {
	url := startMochi(t)
	h := newHarness(t, harnessOptions{brokerURL: url, faults: simulator.Faults{Silent: []string{"plug"}}})
	h.publish("plug", `{"state":"ON","op_id":"stale-confirm"}`)
	h.result("stale-confirm")
	h.nextSet() // the plug is silent: nothing answers

	// Take hearthd's session over: the broker drops it, and it waits (on the
	// fake clock) to reconnect. Meanwhile a retained report appears.
	intruder := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(h.d.conn.ClientID()))
	mustToken(t, intruder.Connect())
	intruder.Disconnect(0)
	other := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID("retainer"))
	mustToken(t, other.Connect())
	defer other.Disconnect(0)
	mustToken(t, other.Publish("zigbee2mqtt/plug", 1, true, `{"state":"ON","linkquality":77}`))
	mirror := make(chan map[string]any, 8)
	mustToken(t, other.Subscribe("hearth/plug", 1, func(_ paho.Client, m paho.Message) {
		var s map[string]any
		json.Unmarshal(m.Payload(), &s)
		mirror <- s
	}))

	// Two waits on the clock: the attempt's timeout and the reconnect.
	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	defer cancel()
	if err := h.clock.BlockUntilContext(ctx, 2); err != nil {
		t.Fatal("hearthd is not waiting to reconnect")
	}
	h.clock.Advance(100 * time.Millisecond)
	// hearthd saw the replayed report: its mirror shows linkquality 77.
	deadline := time.After(eventWait)
	for seen := false; !seen; {
		select {
		case s := <-mirror:
			seen = s["linkquality"] == 77.0
		case <-deadline:
			t.Fatal("hearthd never mirrored the replayed report")
		}
	}
	// The attempt still times out, and so does the second: the plug never
	// reported after a send. (The clock is driven in steps: the attempt
	// was sent again when the link came back, so which timer is set when
	// varies; each step waits for one.)
	op := h.driveUntilEnded("stale-confirm", 1)
	if op.Status != devices.Failed || op.Reason != devices.ReasonTimeout || op.Attempts != 2 {
		t.Errorf("after a replayed retained report: %s/%s after %d attempts; want failed/timeout after 2", op.Status, op.Reason, op.Attempts)
	}
	mustToken(t, other.Publish("zigbee2mqtt/plug", 1, true, ""))
}
