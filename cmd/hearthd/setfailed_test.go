package main

import (
	"strings"
	"testing"
	"time"

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

// With read_back, a device that applies a set but never reports it
// (simulator Faults.Unreported, Zigbee2MQTT's optimistic: false on a
// device that sends no report) is read after its attempt times out, and
// the read's answer ends the command succeeded after one attempt, with one
// set: no blind resend, no failed/timeout.
func TestReadBackConfirmsADeviceThatDoesNotReport(t *testing.T) {
	cfg := strings.Replace(testConfig, "      attempt_timeout: 5s\n", "      attempt_timeout: 5s\n      read_back: true\n", 1)
	h := newHarness(t, harnessOptions{config: cfg, faults: simulator.Faults{Unreported: []string{"hall_light"}}})
	h.settle("hall_light")
	h.publish("hall_light", `{"state":"ON","op_id":"r1"}`)
	if e := h.nextSet(); e.Dropped {
		t.Fatalf("the set was dropped (%s); want it applied", e.Reason)
	}
	h.advance(5 * time.Second) // the attempt's timeout, unconfirmed
	r := h.final("r1")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["state"] != "ON" {
		t.Fatalf("r1: %s/%s after %d attempts, state %v; want succeeded after 1, ON", r.Status, r.Reason, r.Attempts, r.State)
	}
	if got := h.sim.Sets("hall_light"); got != 1 {
		t.Errorf("hall_light received %d sets; want 1", got)
	}
}
