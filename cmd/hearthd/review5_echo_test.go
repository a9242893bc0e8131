package main

import (
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/simulator"
)

// Pins guarantee 3 without a race: TestAnEchoOfStateNeverConfirmsALock and
// TestLockIsConfirmedByLockStateOnly move the fake clock past the attempt
// timeout as soon as hearthd waits on it, often before the echo has even
// reached hearthd, so with devices.Satisfied sabotaged to accept an echo of
// state they still pass most runs (25/30 and 5/30 in review). Here the
// test waits until hearthd has taken the echo (its mirror on
// hearth/front_door shows state UNLOCK) and only then looks: the UNLOCK
// must still be unconfirmed.
func TestReviewEchoTakenByHearthDoesNotConfirmALock(t *testing.T) {
	h := newHarness(t, harnessOptions{config: safetyConfig, faults: simulator.Faults{EchoOnly: []string{"Front Door"}}})
	h.settle("front_door")
	mirror := h.watch("hearth/front_door")
	h.publish("front_door", `{"state":"UNLOCK","op_id":"echo-pinned"}`)
	h.result("echo-pinned")
	h.wantTraffic(`get Front Door {"state":""}`, `set Front Door {"state":"UNLOCK"}`)
	deadline := time.After(eventWait)
	for echoed := false; !echoed; {
		select {
		case m := <-mirror:
			echoed = strings.Contains(string(m.Payload()), `"state":"UNLOCK"`)
		case <-deadline:
			t.Fatal("hearthd never mirrored the echo")
		}
	}
	time.Sleep(200 * time.Millisecond) // the worker acts on a confirmation at once
	if op, _, _ := h.d.store.Lookup("echo-pinned"); op.Status != devices.Accepted {
		t.Fatalf("echo-pinned: %s/%s after an echo of state without lock_state; want still accepted (unconfirmed)", op.Status, op.Reason)
	}
}
