package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/store"
)

// backlogConfig is safetyConfig with two more locks, so that each command
// kept while hearthd is away has a lock of its own (two to one lock would
// supersede each other).
var backlogConfig = safetyConfig + `  back_door:
    class: lock
  side_door:
    class: lock
`

// Commands published while hearthd is stopped wait in the external
// broker's session and arrive as its backlog when hearthd is back. An
// UNLOCK among them without issued_at, as Home Assistant's MQTT lock sends
// it (a plain "UNLOCK"), may have been pressed minutes ago: it is rejected
// stale_command, audited and notified, and never reaches the lock. An
// UNLOCK with a fresh issued_at is carried out (its TTL decides), and so
// are a LOCK and a light's ON without one (not risky). Once the backlog is
// delivered, a plain UNLOCK sent live is carried out. The simulated locks
// run on throughout, so the LOCK moves a bolt that was unlocked before the
// stop.
func TestUnlockSentWhileHearthdIsAwayIsRejectedStale(t *testing.T) {
	m := startRestartableMochi(t)
	dir := t.TempDir()
	h := newHarness(t, harnessOptions{dataDir: dir, brokerURL: m.url(), config: backlogConfig})
	h.settle("front_door", "back_door", "side_door")
	notes := h.notifications()
	h.publish("back_door", `{"state":"UNLOCK","op_id":"before"}`)
	if r := h.final("before"); r.Status != devices.Succeeded {
		t.Fatalf("the UNLOCK before the stop (live, no session to resume): %s/%s (%s); want succeeded", r.Status, r.Reason, r.Detail)
	}
	h.wantTraffic(`get back_door {"state":""}`, `set back_door {"state":"UNLOCK"}`)
	h.stopDaemon() // a clean stop: the session stays; the bridge and its locks go on

	issued := h.clock.Now().UTC().Format(time.RFC3339)
	h.publish("front_door", "UNLOCK")
	h.publish("back_door", "LOCK")
	h.publish("side_door", `{"state":"UNLOCK","op_id":"fresh","issued_at":"`+issued+`"}`)
	h.publish("hall_light", "ON")

	logs := newLogTap(t)
	h2 := newHarness(t, harnessOptions{dataDir: dir, clock: h.clock, brokerURL: m.url(), automation: h, sim: h, config: backlogConfig, logger: logs.logger()})
	ended := func(device string) devices.Result {
		t.Helper()
		return h2.await(func(r devices.Result) bool { return r.Device == device && r.Status.Terminal() }, "the end of the command to "+device)
	}
	stale := ended("front_door")
	if stale.Status != devices.Rejected || stale.Reason != devices.ReasonStaleCommand || !strings.Contains(stale.Detail, "issued_at") {
		t.Errorf("the plain UNLOCK sent while hearthd was away: %s/%s (%s); want rejected/stale_command, saying to send issued_at", stale.Status, stale.Reason, stale.Detail)
	}
	if r := ended("side_door"); r.OpID != "fresh" || r.Status != devices.Succeeded || r.Attempts != 1 {
		t.Errorf("the UNLOCK with a fresh issued_at: %s %s/%s after %d attempts (%s); want fresh succeeded after 1", r.OpID, r.Status, r.Reason, r.Attempts, r.Detail)
	}
	if r := ended("back_door"); r.Status != devices.Succeeded || r.Attempts != 1 {
		t.Errorf("the plain LOCK sent while hearthd was away: %s/%s after %d attempts (%s); want succeeded after 1", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	if r := ended("hall_light"); r.Status != devices.Succeeded {
		t.Errorf("the light's ON sent while hearthd was away: %s/%s (%s); want succeeded", r.Status, r.Reason, r.Detail)
	}

	n := h2.nextNotification(notes)
	if n.Device != "front_door" || n.OpID != stale.OpID || n.Reason != string(devices.ReasonStaleCommand) || n.Severity != "critical" {
		t.Errorf("notification %+v; want critical, device front_door, op_id %s, reason stale_command", n, stale.OpID)
	}
	trail, err := h2.d.store.Audit(store.AuditQuery{OpID: stale.OpID})
	if err != nil || len(trail) != 1 || trail[0].Event != devices.AuditRejected || trail[0].Reason != devices.ReasonStaleCommand || trail[0].Action != devices.ActionUnlock {
		t.Errorf("audit trail of the stale UNLOCK: %+v (%v); want one rejected/stale_command entry for unlock", trail, err)
	}
	for _, dev := range []struct{ name, lockState string }{{"Front Door", "locked"}, {"back_door", "locked"}, {"side_door", "unlocked"}} {
		if got := h2.sim.State(dev.name)["lock_state"]; got != dev.lockState {
			t.Errorf("%s: lock_state %v; want %s", dev.name, got, dev.lockState)
		}
	}
	if n := h2.sim.Sets("Front Door"); n != 0 {
		t.Errorf("the front door received %d sets; want none: the stale UNLOCK must not reach it", n)
	}
	for drained := false; !drained; {
		select {
		case m := <-h2.traffic:
			if strings.Contains(m, "Front Door") {
				t.Errorf("the front door received %s; want nothing", m)
			}
		default:
			drained = true
		}
	}

	h2.eventually("the session's backlog delivered", func() bool { return len(logs.find("the session's backlog is delivered")) > 0 })
	if d := logs.find("the session's backlog is delivered"); d[0].attrs["messages"] != "4" {
		t.Errorf("hearthd logged the backlog as %v; want messages=4", d[0].attrs)
	}
	h2.publish("front_door", "UNLOCK")
	if r := h2.await(func(r devices.Result) bool { return r.Device == "front_door" }, "the live UNLOCK's first result"); r.Status != devices.Accepted {
		t.Fatalf("the plain UNLOCK sent live after the backlog: %s/%s (%s); want accepted", r.Status, r.Reason, r.Detail)
	}
	if r := ended("front_door"); r.Status != devices.Succeeded {
		t.Errorf("the plain UNLOCK sent live after the backlog: %s/%s (%s); want succeeded", r.Status, r.Reason, r.Detail)
	}
	if got := h2.sim.State("Front Door")["lock_state"]; got != "unlocked" {
		t.Errorf("Front Door after the live UNLOCK: lock_state %v; want unlocked", got)
	}
}

// What the dispatcher does with a request from a transport's backlog: a
// risky action without issued_at is rejected stale_command, whatever its
// ttl; with issued_at, a safe action, a device that is not
// safety-critical, or a known op_id, it is taken as any request.
func TestBacklogRejectsOnlyRiskyActionsWithoutIssuedAt(t *testing.T) {
	h := newHarness(t, harnessOptions{config: safetyConfig})
	h.settle("front_door", "garage")
	h.submitAs("", "front_door", `{"state":"LOCK","op_id":"known","ttl":"1h"}`)
	if r := h.result("known"); r.Status != devices.Accepted {
		t.Fatalf("known: %s/%s; want accepted", r.Status, r.Reason)
	}
	issued := h.clock.Now().UTC().Format(time.RFC3339)
	tests := []struct {
		name, device, payload string
		rejected              bool
	}{
		{"an UNLOCK", "front_door", `{"state":"UNLOCK","op_id":"b-unlock"}`, true},
		{"an UNLOCK with a ttl", "front_door", `{"state":"UNLOCK","op_id":"b-unlock-ttl","ttl":"10s"}`, true},
		{"a garage door's OPEN", "garage", `{"state":"OPEN","op_id":"b-open"}`, true},
		{"a garage door's opening position", "garage", `{"position":40,"op_id":"b-position"}`, true},
		{"an UNLOCK with issued_at", "front_door", `{"state":"UNLOCK","op_id":"b-issued","issued_at":"` + issued + `"}`, false},
		{"a garage door's CLOSE", "garage", `{"state":"CLOSE","op_id":"b-close"}`, false},
		{"a light's ON", "hall_light", `{"state":"ON","op_id":"b-light"}`, false},
		{"a cover that is not safety-critical", "blinds", `{"state":"OPEN","op_id":"b-blinds"}`, false},
		{"a known op_id", "front_door", `{"state":"LOCK","op_id":"known","ttl":"1h"}`, false},
	}
	for _, tt := range tests {
		opID := peekOpIDForTest(tt.payload)
		err := h.d.disp.Submit(context.Background(), dispatcher.Request{Device: tt.device, Payload: []byte(tt.payload), Backlog: true})
		if err != nil {
			t.Fatal(err)
		}
		r := h.result(opID)
		if got := r.Status == devices.Rejected && r.Reason == devices.ReasonStaleCommand; got != tt.rejected {
			t.Errorf("%s from the backlog: %s/%s (%s); want rejected/stale_command %v", tt.name, r.Status, r.Reason, r.Detail, tt.rejected)
		}
	}
}

// peekOpIDForTest returns the op_id of a test payload.
func peekOpIDForTest(payload string) string {
	_, rest, _ := strings.Cut(payload, `"op_id":"`)
	id, _, _ := strings.Cut(rest, `"`)
	return id
}
