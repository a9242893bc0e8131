package main

import (
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/simulator"
	"strings"
	"testing"
	"time"
)

// A bridge that flaps while an UNLOCK waits for its confirmation gets the
// risky action at most dispatcher.MaxRiskyAttempts times in all, resends
// after each reconnect included.
//
// Guarantee 7 ("a risky action gets at most 2 attempts"; "attempts counts
// sends") and the question "can a risky action be sent more than 2
// times". The fault this pins: a bridge that flapped while an UNLOCK
// waited for its confirmation got the same attempt again, up to
// maxResends (2) per attempt, and an unbounded number of times when the
// send's own PUBACK was lost (deliveryUnknown), each resend not counted as
// an attempt: one attempt at an UNLOCK reached the lock three times.
func TestFlappingBridgeSendsARiskyActionAtMostTwice(t *testing.T) {
	cfg := strings.Replace(safetyConfig, "    protocol: zigbee2mqtt\n", "    protocol: zigbee2mqtt\n    breaker: {enabled: false}\n", 1)
	h := newHarness(t, harnessOptions{config: cfg, faults: simulator.Faults{DropRate: 1}})
	h.settle("front_door")
	h.publish("front_door", `{"state":"UNLOCK","op_id":"flap"}`)
	h.result("flap")
	h.nextSet() // the attempt (after its read)
	flap := func() {
		for _, st := range []string{"offline", "online"} {
			mustToken(t, h.client.Publish("zigbee2mqtt/bridge/state", 1, false, st))
		}
	}
	var unlocks int
	deadline := time.After(3 * time.Second)
	unlocks = 1
loop:
	for range 2 {
		flap()
		select {
		case e := <-h.sets:
			if strings.Contains(string(e.Payload), "UNLOCK") {
				unlocks++
			}
		case <-deadline:
			break loop
		}
	}
	if unlocks > dispatcher.MaxRiskyAttempts {
		op, _, _ := h.d.store.Lookup("flap")
		t.Errorf("one UNLOCK reached the lock %d times while op.Attempts is %d; a risky action is sent at most %d times",
			unlocks, op.Attempts, dispatcher.MaxRiskyAttempts)
	}
}
