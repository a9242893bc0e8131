package main

import (
	"strings"
	"testing"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/simulator"
)

// A set Zigbee2MQTT takes but cannot deliver, and logs failed on
// <base>/bridge/logging (simulator Faults.FailSets, as
// lib/extension/publish.ts logs it), ends its attempt at once as a send
// failure: with one attempt allowed the command ends failed/send_failed,
// naming the bridge's error, with the fake clock never moved, not after
// the 5 s attempt timeout.
func TestBridgeLoggedSetFailureEndsTheAttemptAtOnce(t *testing.T) {
	cfg := strings.Replace(testConfig, "max_attempts: 2", "max_attempts: 1", 1)
	h := newHarness(t, harnessOptions{config: cfg, faults: simulator.Faults{FailSets: []string{"hall_light"}}})
	h.settle("hall_light")
	h.publish("hall_light", `{"state":"ON","op_id":"f1"}`)
	if e := h.nextSet(); e.Reason != simulator.ReasonSetFailed {
		t.Fatalf("the set: reason %q; want %q", e.Reason, simulator.ReasonSetFailed)
	}
	r := h.final("f1")
	if r.Status != devices.Failed || r.Reason != devices.ReasonSendFailed || r.Attempts != 1 || !strings.Contains(r.Detail, "Delivery failed") {
		t.Fatalf("f1: %s/%s after %d attempts (%s); want failed/send_failed after 1, naming the bridge's error", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	if waited := h.clock.Since(t0); waited != 0 {
		t.Errorf("f1 ended %s after the start; want at once (the clock never moved)", waited)
	}
}
