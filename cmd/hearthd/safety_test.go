package main

import (
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/simulator"
)

// safetyConfig is testConfig with a garage door: a cover configured
// safety: critical, whose opening is a risky action.
var safetyConfig = testConfig + `  garage:
    class: cover
    safety: critical
`

// nextTraffic waits for the next set or get a simulated device receives.
func (h *harness) nextTraffic() string {
	h.t.Helper()
	select {
	case m := <-h.traffic:
		return m
	case <-time.After(eventWait):
		h.t.Fatal("timed out waiting for a set or get to reach a device")
		panic("unreachable")
	}
}

// wantTraffic checks that the devices received exactly want, in order,
// and nothing else so far.
func (h *harness) wantTraffic(want ...string) {
	h.t.Helper()
	for i, w := range want {
		if got := h.nextTraffic(); got != w {
			h.t.Fatalf("device message %d: %s; want %s", i+1, got, w)
		}
	}
	select {
	case m := <-h.traffic:
		h.t.Fatalf("after %q the devices also received %s", want, m)
	default:
	}
}

// A lock that is already unlocked (someone used its keypad) and is asked
// to UNLOCK: the fresh read shows the target, so the command succeeds with
// no attempt, and the device receives the get only, no set.
func TestUnlockOfAnUnlockedLockSucceedsWithoutASet(t *testing.T) {
	h := newHarness(t, harnessOptions{config: safetyConfig})
	h.settle("front_door")
	// Unlocked at the door, not through Hearth.
	mustToken(t, h.client.Publish("zigbee2mqtt/Front Door/set", 1, false, `{"state":"UNLOCK"}`))
	h.wantTraffic(`set Front Door {"state":"UNLOCK"}`)
	<-h.sets

	h.publish("front_door", `{"state":"UNLOCK","op_id":"already"}`)
	r := h.final("already")
	if r.Status != devices.Succeeded || r.Reason != "" || r.Attempts != 0 || r.State["lock_state"] != "unlocked" {
		t.Errorf("already: %s/%s after %d attempts, state %v (%s); want succeeded after 0 attempts with lock_state unlocked", r.Status, r.Reason, r.Attempts, r.State, r.Detail)
	}
	h.wantTraffic(`get Front Door {"state":""}`)
	h.noSetsYet()
}

// A lock whose state cannot be read (it never answers a get): the UNLOCK
// fails with state_unknown when the read times out, and nothing is sent.
func TestUnlockOfAnUnreadableLockFailsStateUnknown(t *testing.T) {
	h := newHarness(t, harnessOptions{config: safetyConfig, faults: simulator.Faults{IgnoreGets: []string{"Front Door"}}})
	h.settle("front_door")

	h.publish("front_door", `{"state":"UNLOCK","op_id":"unreadable"}`)
	if r := h.result("unreadable"); r.Status != devices.Accepted {
		t.Fatalf("first result: %s/%s; want accepted", r.Status, r.Reason)
	}
	if got, want := h.nextTraffic(), `get Front Door {"state":""}`; got != want {
		t.Fatalf("device received %s; want %s", got, want)
	}
	h.advance(dispatcher.DefaultReadTimeout)
	r := h.await(func(r devices.Result) bool { return r.OpID == "unreadable" && r.Status.Terminal() }, "the final result of unreadable")
	if r.Status != devices.Failed || r.Reason != devices.ReasonStateUnknown || r.Attempts != 0 {
		t.Errorf("unreadable: %s/%s after %d attempts (%s); want failed/state_unknown after 0", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	h.wantTraffic()
	h.noSetsYet()
	if got := h.sim.State("Front Door")["lock_state"]; got != "locked" {
		t.Errorf("lock_state %v after the command; want locked", got)
	}
}

// A lock that answers the read with a state that is not locked or
// unlocked (a half-thrown bolt): unknown is never unlocked, so the UNLOCK
// fails with state_unknown at once, and nothing is sent.
func TestUnlockOfALockInAnInvalidStateFailsStateUnknown(t *testing.T) {
	// The simulated lock is offline (it ignores everything); a fake
	// bridge answers the get instead.
	h := newHarness(t, harnessOptions{config: safetyConfig, faults: simulator.Faults{Offline: []string{"Front Door"}}})
	bridge := paho.NewClient(paho.NewClientOptions().AddBroker(h.d.brokerURL).SetClientID("fake-z2m"))
	mustToken(t, bridge.Connect())
	defer bridge.Disconnect(0)
	mustToken(t, bridge.Subscribe("zigbee2mqtt/Front Door/get", 1, func(c paho.Client, _ paho.Message) {
		c.Publish("zigbee2mqtt/Front Door", 1, false, `{"state":"UNLOCK","lock_state":"not_fully_locked"}`)
	}))

	h.publish("front_door", `{"state":"UNLOCK","op_id":"half"}`)
	r := h.final("half")
	if r.Status != devices.Failed || r.Reason != devices.ReasonStateUnknown || r.Attempts != 0 || r.State["lock_state"] != "not_fully_locked" {
		t.Errorf("half: %s/%s after %d attempts, state %v (%s); want failed/state_unknown after 0 with lock_state not_fully_locked", r.Status, r.Reason, r.Attempts, r.State, r.Detail)
	}
	h.wantTraffic(`get Front Door {"state":""}`)
	h.noSetsYet()
}

// A normal unlock of a locked lock: a get first, then the set, then
// succeeded on the lock's report.
func TestUnlockReadsTheLockBeforeTheSet(t *testing.T) {
	h := newHarness(t, harnessOptions{config: safetyConfig})
	h.settle("front_door")

	h.publish("front_door", `{"state":"UNLOCK","op_id":"unlock"}`)
	r := h.final("unlock")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["lock_state"] != "unlocked" {
		t.Errorf("unlock: %s/%s after %d attempts, state %v (%s); want succeeded after 1 with lock_state unlocked", r.Status, r.Reason, r.Attempts, r.State, r.Detail)
	}
	h.wantTraffic(`get Front Door {"state":""}`, `set Front Door {"state":"UNLOCK"}`)
}

// A garage door (a cover configured safety: critical) reported closed and
// asked to OPEN: read first, then opened.
func TestGarageDoorOpenReadsBeforeTheSet(t *testing.T) {
	h := newHarness(t, harnessOptions{config: safetyConfig})
	h.settle("garage")

	h.publish("garage", `{"state":"OPEN","op_id":"open"}`)
	r := h.final("open")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["position"] != 100.0 {
		t.Errorf("open: %s/%s after %d attempts, state %v (%s); want succeeded after 1 at position 100", r.Status, r.Reason, r.Attempts, r.State, r.Detail)
	}
	h.wantTraffic(`get garage {"state":""}`, `set garage {"state":"OPEN"}`)
}

// Commands in the safe direction (LOCK a lock, CLOSE a garage door) are
// sent without a read, and a cover that is not safety-critical is never
// read.
func TestSafeDirectionIsSentWithoutARead(t *testing.T) {
	h := newHarness(t, harnessOptions{config: safetyConfig})
	h.settle("front_door", "garage", "blinds")

	for _, c := range []struct{ device, payload, want string }{
		{"front_door", `{"state":"LOCK","op_id":"lock"}`, `set Front Door {"state":"LOCK"}`},
		{"garage", `{"state":"CLOSE","op_id":"close"}`, `set garage {"state":"CLOSE"}`},
		{"blinds", `{"state":"OPEN","op_id":"blinds"}`, `set blinds {"state":"OPEN"}`},
	} {
		h.publish(c.device, c.payload)
		opID := c.payload[strings.Index(c.payload, `"op_id":"`)+len(`"op_id":"`) : len(c.payload)-2]
		if r := h.final(opID); r.Status != devices.Succeeded || r.Attempts != 1 {
			t.Errorf("%s: %s/%s after %d attempts (%s); want succeeded after 1", opID, r.Status, r.Reason, r.Attempts, r.Detail)
		}
		h.wantTraffic(c.want)
	}
}
