package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/notify"
	"github.com/hearthd/hearth/simulator"
	"github.com/hearthd/hearth/store"
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
	// The simulated lock is silent (it ignores everything, its availability online); a fake
	// bridge answers the get instead.
	h := newHarness(t, harnessOptions{config: safetyConfig, faults: simulator.Faults{Silent: []string{"Front Door"}}})
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

// Commands in the safe direction to a safety-critical device (LOCK a lock,
// CLOSE a garage door) are read before their first attempt too: a garage
// door reported closed and asked to CLOSE succeeds with nothing sent, and
// so does a LOCK of a locked lock. A cover that is not safety-critical is
// never read.
func TestSafeDirectionAlreadyThereSucceedsWithNothingSent(t *testing.T) {
	h := newHarness(t, harnessOptions{config: safetyConfig})
	h.settle("front_door", "garage", "blinds")

	for _, c := range []struct {
		device, payload string
		attempts        int
		traffic         []string
	}{
		{"garage", `{"state":"CLOSE","op_id":"close"}`, 0, []string{`get garage {"state":""}`}},
		{"front_door", `{"state":"LOCK","op_id":"lock"}`, 0, []string{`get Front Door {"state":""}`}},
		{"blinds", `{"state":"OPEN","op_id":"blinds"}`, 1, []string{`set blinds {"state":"OPEN"}`}},
		{"garage", `{"state":"OPEN","op_id":"open"}`, 1, []string{`get garage {"state":""}`, `set garage {"state":"OPEN"}`}},
		{"garage", `{"state":"CLOSE","op_id":"close2"}`, 1, []string{`get garage {"state":""}`, `set garage {"state":"CLOSE"}`}},
	} {
		h.publish(c.device, c.payload)
		opID := c.payload[strings.Index(c.payload, `"op_id":"`)+len(`"op_id":"`) : len(c.payload)-2]
		if r := h.final(opID); r.Status != devices.Succeeded || r.Attempts != c.attempts {
			t.Errorf("%s: %s/%s after %d attempts (%s); want succeeded after %d", opID, r.Status, r.Reason, r.Attempts, r.Detail, c.attempts)
		}
		h.wantTraffic(c.traffic...)
	}
}

// A LOCK of a lock whose state cannot be read is still sent once the read
// times out: unknown state stops only the risky direction.
func TestLockOfAnUnreadableLockIsSentAfterTheRead(t *testing.T) {
	h := newHarness(t, harnessOptions{config: safetyConfig, faults: simulator.Faults{IgnoreGets: []string{"Front Door"}}})
	h.settle("front_door")
	h.publish("front_door", `{"state":"LOCK","op_id":"lock"}`)
	if r := h.result("lock"); r.Status != devices.Accepted {
		t.Fatalf("first result: %s/%s; want accepted", r.Status, r.Reason)
	}
	if got, want := h.nextTraffic(), `get Front Door {"state":""}`; got != want {
		t.Fatalf("device received %s; want %s", got, want)
	}
	h.advance(dispatcher.DefaultReadTimeout)
	r := h.await(func(r devices.Result) bool { return r.OpID == "lock" && r.Status.Terminal() }, "the final result of lock")
	if r.Status != devices.Succeeded || r.Attempts != 1 {
		t.Errorf("lock: %s/%s after %d attempts (%s); want succeeded after 1", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	h.wantTraffic(`set Front Door {"state":"LOCK"}`)
}

// notifications subscribes to hearth/notifications.
func (h *harness) notifications() <-chan paho.Message { return h.watch("hearth/notifications") }

// nextNotification waits for the next notification.
func (h *harness) nextNotification(ch <-chan paho.Message) notify.Notification {
	h.t.Helper()
	select {
	case m := <-ch:
		var n notify.Notification
		if err := json.Unmarshal(m.Payload(), &n); err != nil {
			h.t.Fatalf("notification %s: %v", m.Payload(), err)
		}
		return n
	case <-time.After(eventWait):
		h.t.Fatal("timed out waiting for a notification")
		panic("unreachable")
	}
}

// A lock whose bolt jams: the UNLOCK is read, sent once, and ends
// failed/jammed on the lock's report, with no second attempt though the
// policy allows two; a critical notification names the device, op_id and
// reason.
func TestJammedBoltFailsAfterOneAttemptAndNotifies(t *testing.T) {
	h := newHarness(t, harnessOptions{config: safetyConfig, faults: simulator.Faults{Jam: []string{"Front Door"}}})
	h.settle("front_door")
	notes := h.notifications()

	h.publish("front_door", `{"state":"UNLOCK","op_id":"jam"}`)
	r := h.final("jam")
	if r.Status != devices.Failed || r.Reason != devices.ReasonJammed || r.Attempts != 1 || r.State["lock_state"] != "jammed" {
		t.Errorf("jam: %s/%s after %d attempts, state %v (%s); want failed/jammed after 1 with lock_state jammed", r.Status, r.Reason, r.Attempts, r.State, r.Detail)
	}
	n := h.nextNotification(notes)
	if n.Device != "front_door" || n.OpID != "jam" || n.Reason != string(devices.ReasonJammed) || n.Severity != "critical" {
		t.Errorf("notification %+v; want critical, device front_door, op_id jam, reason jammed", n)
	}
	h.wantTraffic(`get Front Door {"state":""}`, `set Front Door {"state":"UNLOCK"}`)
}

// retry3Config allows three attempts, more than a risky action may take.
var retry3Config = strings.Replace(safetyConfig, "max_attempts: 2", "max_attempts: 3", 1)

// Zigbee2MQTT's optimistic echo of a set (state UNLOCK, no lock_state)
// while the bolt did not move is no confirmation: the UNLOCK is not
// confirmed, read again before its second attempt, and fails after 2
// attempts though the service's policy allows 3.
//
// Without a breaker (whose clock would be a second waiter on the fake
// clock, so that a move of it could come before the attempt's own timer)
// and with no backoff (floorRand), the attempts' timeouts are the only
// timers the clock moves.
func TestAnEchoOfStateNeverConfirmsALock(t *testing.T) {
	h := newHarness(t, harnessOptions{config: withoutBreaker(retry3Config), rand: floorRand{}, faults: simulator.Faults{EchoOnly: []string{"Front Door"}}})
	h.settle("front_door")

	h.publish("front_door", `{"state":"UNLOCK","op_id":"echo"}`)
	if r := h.result("echo"); r.Status != devices.Accepted {
		t.Fatalf("first result: %s/%s; want accepted", r.Status, r.Reason)
	}
	h.wantTraffic(`get Front Door {"state":""}`, `set Front Door {"state":"UNLOCK"}`)
	h.advance(5 * time.Second) // the attempt timeout: the echo did not confirm
	h.wantTraffic(`get Front Door {"state":""}`, `set Front Door {"state":"UNLOCK"}`)
	h.advance(5 * time.Second)
	r := h.await(func(r devices.Result) bool { return r.OpID == "echo" && r.Status.Terminal() }, "the final result of echo")
	if r.Status != devices.Failed || r.Reason != devices.ReasonTimeout || r.Attempts != dispatcher.MaxRiskyAttempts {
		t.Errorf("echo: %s/%s after %d attempts (%s); want failed/timeout after %d", r.Status, r.Reason, r.Attempts, r.Detail, dispatcher.MaxRiskyAttempts)
	}
	h.wantTraffic()
	if got := h.sim.State("Front Door")["lock_state"]; got != "locked" {
		t.Errorf("lock_state %v; want locked (the echo-only lock never moves)", got)
	}
}

// A risky action without a ttl gets 30 s from its issued_at, not the
// device's default of 60 s; a safe one keeps the default.
func TestRiskyActionDefaultTTLIs30sFromIssuedAt(t *testing.T) {
	h := newHarness(t, harnessOptions{config: safetyConfig, faults: simulator.Faults{IgnoreGets: []string{"Front Door"}}})
	h.settle("front_door")
	issued := h.clock.Now().Add(-10 * time.Second)
	h.publish("front_door", `{"state":"UNLOCK","op_id":"risky","issued_at":"`+issued.Format(time.RFC3339)+`"}`)
	h.result("risky")
	op, _, err := h.d.store.Lookup("risky")
	if want := issued.Add(dispatcher.DefaultRiskyTTL); err != nil || !op.Deadline.Equal(want) {
		t.Errorf("deadline of an UNLOCK issued 10 s ago: %v (%v); want %v", op.Deadline, err, want)
	}
	h.publish("front_door", `{"state":"LOCK","op_id":"safe","issued_at":"`+issued.Format(time.RFC3339)+`"}`)
	h.result("safe")
	op, _, err = h.d.store.Lookup("safe")
	if want := issued.Add(60 * time.Second); err != nil || !op.Deadline.Equal(want) {
		t.Errorf("deadline of a LOCK issued 10 s ago: %v (%v); want %v", op.Deadline, err, want)
	}
}

// submitAs hands hearthd a command from principal, as the MQTT intake or
// the HTTP API does once its transport has authenticated the sender.
func (h *harness) submitAs(principal, device, payload string) {
	h.t.Helper()
	err := h.d.disp.Submit(context.Background(), dispatcher.Request{Device: device, Payload: []byte(payload), Principal: principal})
	if err != nil {
		h.t.Fatal(err)
	}
}

// tabletConfig is breakerConfig(true) with a tablet that may command the
// front door (grants is its allow list for front_door), and the simulated
// bridges as a broker user: principals turn on authentication at the
// embedded broker (the harness logs in with bridgeLogin).
func tabletConfig(grants string) string {
	return withBridgeAccount(breakerConfig(true)) + `principals:
  tablet:
    http_token: tablet-token-0123456789
    allow: {front_door: ` + grants + `}
`
}

// A permission revoked (SIGHUP reload) between a command's acceptance and
// its attempt stops it: failed/unauthorized, nothing sent (no get, no
// set), audited, and a critical notification names the principal.
func TestPermissionRevokedBeforeTheAttemptStopsTheCommand(t *testing.T) {
	h := newHarness(t, harnessOptions{simLogin: bridgeLogin, automationLogin: bridgeLogin, config: tabletConfig("[lock, unlock]")})
	h.settle("front_door")
	notes := h.notifications()
	h.openBreaker() // held: the command waits, accepted, for the breaker

	h.submitAs("tablet", "front_door", `{"state":"UNLOCK","op_id":"revoked"}`)
	if r := h.result("revoked"); r.Status != devices.Accepted {
		t.Fatalf("first result: %s/%s (%s); want accepted", r.Status, r.Reason, r.Detail)
	}
	if r := h.result("revoked"); r.Status != devices.Queued || r.Reason != devices.ReasonBreakerOpen {
		t.Fatalf("second result: %s/%s; want queued/breaker_open", r.Status, r.Reason)
	}
	next, err := config.Parse("test.yaml", []byte(tabletConfig("[lock]")))
	if err != nil {
		t.Fatal(err)
	}
	h.d.reload(next)
	h.bridgeState("zigbee2mqtt", true) // half-open: the held command may go

	r := h.await(func(r devices.Result) bool { return r.OpID == "revoked" && r.Status.Terminal() }, "the final result of revoked")
	if r.Status != devices.Failed || r.Reason != devices.ReasonUnauthorized || r.Attempts != 0 {
		t.Errorf("revoked: %s/%s after %d attempts (%s); want failed/unauthorized after 0", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	h.wantTraffic()
	n := h.nextNotification(notes)
	if n.Device != "front_door" || n.OpID != "revoked" || n.Principal != "tablet" || n.Reason != string(devices.ReasonUnauthorized) {
		t.Errorf("notification %+v; want device front_door, op_id revoked, principal tablet, reason unauthorized", n)
	}
	trail, err := h.d.store.Audit(store.AuditQuery{OpID: "revoked"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range trail {
		s := string(e.Event)
		if e.Check != "" {
			s += fmt.Sprintf(" %s=%v", e.Check, e.Passed)
		}
		if e.Reason != "" {
			s += " " + string(e.Status) + "/" + string(e.Reason)
		}
		if e.Principal != "tablet" || e.Action != devices.ActionUnlock {
			t.Errorf("audit entry %+v: want principal tablet, action unlock", e)
		}
		got = append(got, s)
	}
	want := []string{"accepted", "check authorization=false", "ended failed/unauthorized"}
	if !slices.Equal(got, want) {
		t.Errorf("audit trail %q; want %q", got, want)
	}
}

// A principal's command outside its grants is rejected at intake with
// reason unauthorized, and so is an unauthenticated one; both are audited
// and nothing reaches the lock.
func TestUnauthorizedCommandsAreRejected(t *testing.T) {
	h := newHarness(t, harnessOptions{simLogin: bridgeLogin, automationLogin: bridgeLogin, config: tabletConfig("[lock]")})
	h.settle("front_door")
	h.submitAs("tablet", "front_door", `{"state":"UNLOCK","op_id":"not-allowed"}`)
	if r := h.result("not-allowed"); r.Status != devices.Rejected || r.Reason != devices.ReasonUnauthorized {
		t.Errorf("UNLOCK from the tablet: %s/%s; want rejected/unauthorized", r.Status, r.Reason)
	}
	h.submitAs("", "front_door", `{"state":"LOCK","op_id":"anonymous"}`)
	if r := h.result("anonymous"); r.Status != devices.Rejected || r.Reason != devices.ReasonUnauthorized {
		t.Errorf("LOCK from nobody: %s/%s; want rejected/unauthorized", r.Status, r.Reason)
	}
	h.submitAs("tablet", "sw00", `{"state":"ON","op_id":"switch"}`)
	if r := h.result("switch"); r.Status != devices.Rejected || r.Reason != devices.ReasonUnauthorized {
		t.Errorf("a switch the tablet was not granted: %s/%s; want rejected/unauthorized", r.Status, r.Reason)
	}
	for _, op := range []string{"not-allowed", "anonymous", "switch"} {
		trail, err := h.d.store.Audit(store.AuditQuery{OpID: op})
		if err != nil || len(trail) != 1 || trail[0].Event != devices.AuditRejected || trail[0].Reason != devices.ReasonUnauthorized {
			t.Errorf("audit trail of %s: %+v (%v); want one rejected/unauthorized entry", op, trail, err)
		}
	}
	h.submitAs("tablet", "front_door", `{"state":"LOCK","op_id":"allowed"}`)
	if r := h.final("allowed"); r.Status != devices.Succeeded {
		t.Errorf("LOCK from the tablet: %s/%s; want succeeded", r.Status, r.Reason)
	}
	h.wantTraffic(`get front_door {"state":""}`)
}

// An UNLOCK pending across a restart (sent once, its set lost, so its
// outcome unknown) is never resent blind: after the restart the lock is
// read before anything is sent, and again before the second attempt's set.
func TestRestartWithAnUnlockPendingReadsBeforeAnySend(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	h := newHarness(t, harnessOptions{config: safetyConfig, dataDir: dir, brokerURL: b.URL(), faults: simulator.Faults{DropFirst: 1}})
	h.settle("front_door")
	h.publish("front_door", `{"state":"UNLOCK","op_id":"pending","ttl":"1h"}`)
	h.result("pending")
	h.wantTraffic(`get Front Door {"state":""}`, `set Front Door {"state":"UNLOCK"}`) // the set is lost
	clock := h.clock
	h.stopHearth()

	// floorRand: the backoff before the second attempt is 0 (full
	// jitter's floor), so no clock needs moving.
	h2 := newHarness(t, harnessOptions{config: safetyConfig, dataDir: dir, clock: clock, brokerURL: b.URL(), automation: h, rand: floorRand{}})
	if got, want := h2.nextTraffic(), `get Front Door {"state":""}`; got != want {
		t.Fatalf("first message to a device after the restart: %s; want %s", got, want)
	}
	h2.wantTraffic(`get Front Door {"state":""}`, `set Front Door {"state":"UNLOCK"}`)
	r := h2.await(func(r devices.Result) bool { return r.OpID == "pending" && r.Status.Terminal() }, "the final result of pending")
	op, _, _ := h2.d.store.Lookup("pending")
	if r.Status != devices.Succeeded || op.Status != devices.Succeeded || op.Attempts != 2 || op.State["lock_state"] != "unlocked" {
		t.Errorf("pending after restart: %s/%s after %d attempts, state %v (%s); want succeeded after 2", op.Status, op.Reason, op.Attempts, op.State, op.Detail)
	}
}

// A permission revoked before the attempt at a command to a device that is
// not safety-critical is audited too: the failed check and the end.
func TestRevokedCommandToAnyDeviceIsAudited(t *testing.T) {
	h := newHarness(t, harnessOptions{simLogin: bridgeLogin, automationLogin: bridgeLogin, config: tabletConfig("[lock], sw00: [on]")})
	h.settle("sw00")
	h.openBreaker()
	h.submitAs("tablet", "sw00", `{"state":"ON","op_id":"sw-revoked"}`)
	h.result("sw-revoked") // accepted
	h.result("sw-revoked") // queued: the breaker holds it
	next, err := config.Parse("test.yaml", []byte(tabletConfig("[lock]")))
	if err != nil {
		t.Fatal(err)
	}
	h.d.reload(next)
	h.bridgeState("zigbee2mqtt", true)
	if r := h.await(func(r devices.Result) bool { return r.OpID == "sw-revoked" && r.Status.Terminal() }, "sw-revoked's end"); r.Status != devices.Failed || r.Reason != devices.ReasonUnauthorized {
		t.Errorf("sw-revoked: %s/%s; want failed/unauthorized", r.Status, r.Reason)
	}
	trail, err := h.d.store.Audit(store.AuditQuery{OpID: "sw-revoked"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range trail {
		got = append(got, fmt.Sprintf("%s %s %v %s", e.Event, e.Check, e.Passed, e.Reason))
	}
	want := []string{"check authorization false ", "ended  false unauthorized"}
	if !slices.Equal(got, want) {
		t.Errorf("audit trail %q; want %q", got, want)
	}
}

// A second principal repeating the op_id of another's command, in the same
// intake batch or a later one, gets no answer from the first's command:
// rejected/unauthorized.
func TestAnotherPrincipalsOpIDIsUnauthorized(t *testing.T) {
	h := newHarness(t, harnessOptions{simLogin: bridgeLogin, automationLogin: bridgeLogin, config: tabletConfig("[lock]") + `  phone:
    http_token: phone-token-0123456789ab
    allow: {"*": ["*"]}
`})
	h.settle("front_door")
	h.submitAs("tablet", "front_door", `{"state":"LOCK","op_id":"mine"}`)
	h.submitAs("phone", "front_door", `{"state":"LOCK","op_id":"mine"}`)
	first, second := h.result("mine"), h.result("mine")
	if first.Status != devices.Accepted || second.Status != devices.Rejected || second.Reason != devices.ReasonUnauthorized {
		t.Errorf("results of op_id mine: %s/%s then %s/%s; want accepted, then rejected/unauthorized", first.Status, first.Reason, second.Status, second.Reason)
	}
}
