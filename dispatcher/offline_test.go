package dispatcher

// The offline path and the half-open probe rules (issue 16, item 2), on
// a fake clock: one Zigbee-like service with a breaker and four devices
// behind a scripted bridge that records every send and read.

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
)

// offMsg is a send or read that reached the bridge.
type offMsg struct {
	verb, device string
	target       devices.Target
}

type offBridge struct{ msgs chan offMsg }

func (b *offBridge) Send(_ context.Context, d devices.Device, target devices.Target) error {
	b.msgs <- offMsg{"set", d.ID, target}
	return nil
}

func (b *offBridge) Read(_ context.Context, d devices.Device, target devices.Target) error {
	b.msgs <- offMsg{"get", d.ID, target}
	return nil
}

// offPublisher records what the outbox publishes on hearth/notifications.
type offPublisher struct {
	mu    sync.Mutex
	notes []string
}

func (p *offPublisher) Publish(_ context.Context, topic string, _ byte, _ bool, payload []byte) error {
	if topic == "hearth/notifications" {
		p.mu.Lock()
		p.notes = append(p.notes, string(payload))
		p.mu.Unlock()
	}
	return nil
}

func (p *offPublisher) notifications() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.notes...)
}

type offRig struct {
	*sleepyRig // its await, eventually and clock helpers; its bridge is unused
	bridge     *offBridge
	pub        *offPublisher
}

// startOffline starts a dispatcher with service "zb" (2 attempts, 5 s
// attempt timeout, a breaker with a 10 s probe timeout and a 30 s open
// period) and devices lamp, lamp2 (lights), door (a lock) and held_lamp
// (a light with offline: queue), TTL 1 min, the bridge online.
func startOffline(t *testing.T) *offRig {
	t.Helper()
	return startOfflineProbe(t, 10*time.Second)
}

// startOfflineProbe is startOffline with the breaker's probe timeout.
func startOfflineProbe(t *testing.T, probeTimeout time.Duration) *offRig {
	t.Helper()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 2, 19, 0, 0, 0, time.UTC))
	r := &offRig{
		sleepyRig: &sleepyRig{t: t, clock: clock, journal: &memJournal{ops: map[string]devices.Op{}}, dead: &memDeadLetters{}, results: make(chan devices.Result, 256)},
		bridge:    &offBridge{msgs: make(chan offMsg, 64)},
		pub:       &offPublisher{},
	}
	dev := func(id string, class devices.Class, off devices.Offline) Device {
		return Device{Device: devices.Device{ID: id, Service: "zb", Class: class, Offline: off}, TTL: time.Minute}
	}
	d, err := New(Options{
		Services: []Service{{
			Name: "zb", Bridge: r.bridge,
			Policy:  retry.Policy{MaxAttempts: 2, AttemptTimeout: 5 * time.Second, Backoff: retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 10 * time.Second}},
			Breaker: &breaker.Options{ProbeTimeout: probeTimeout, OpenFor: func(int) time.Duration { return 30 * time.Second }},
		}},
		Devices: []Device{
			dev("lamp", devices.Light, ""), dev("lamp2", devices.Light, ""),
			dev("door", devices.Lock, ""), dev("held_lamp", devices.Light, devices.OfflineQueue),
		},
		Journal:     r.journal,
		Publisher:   r.pub,
		DeadLetters: r.dead,
		Clock:       clock,
		OnResult:    func(res devices.Result) { r.results <- res },
	})
	if err != nil {
		t.Fatal(err)
	}
	r.d = d
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	d.BridgeState("zb", true, false)
	r.sent("get", "door") // the fresh read of the lock after the start (freshread.go)
	return r
}

func (r *offRig) command(device, opID, payload string) {
	r.t.Helper()
	body := `{"op_id":"` + opID + `",` + strings.TrimPrefix(payload, "{")
	if err := r.d.Submit(context.Background(), Request{Device: device, Payload: []byte(body)}); err != nil {
		r.t.Fatal(err)
	}
	r.status(opID, devices.Accepted)
}

// sent waits for the next message to reach the bridge and checks it.
func (r *offRig) sent(verb, device string) {
	r.t.Helper()
	select {
	case m := <-r.bridge.msgs:
		if m.verb != verb || m.device != device {
			r.t.Fatalf("reached the bridge: %s of %s; want %s of %s", m.verb, m.device, verb, device)
		}
	case <-time.After(rigWait):
		r.t.Fatalf("no %s of %s reached the bridge", verb, device)
	}
}

// nothingSent fails if anything reached the bridge.
func (r *offRig) nothingSent(when string) {
	r.t.Helper()
	select {
	case m := <-r.bridge.msgs:
		r.t.Fatalf("%s: a %s of %s reached the bridge", when, m.verb, m.device)
	default:
	}
}

// ended waits for opID's terminal result and checks its status and reason.
func (r *offRig) ended(opID string, status devices.Status, reason devices.Reason) devices.Result {
	r.t.Helper()
	res := r.await(opID+" terminal", func(res devices.Result) bool { return res.OpID == opID && res.Status.Terminal() })
	if res.Status != status || res.Reason != reason {
		r.t.Fatalf("%s ended %s/%s (%s); want %s/%s", opID, res.Status, res.Reason, res.Detail, status, reason)
	}
	return res
}

// noResult fails if opID has a result other than accepted waiting.
func (r *offRig) noResult(opID string) {
	r.t.Helper()
	for {
		select {
		case res := <-r.results:
			if res.OpID == opID {
				r.t.Fatalf("%s: unexpected result %s/%s (%s)", opID, res.Status, res.Reason, res.Detail)
			}
		default:
			return
		}
	}
}

// waitsForProbe waits until a command of device waits for the probe.
func (r *offRig) waitsForProbe(device string) {
	r.t.Helper()
	b := r.d.services["zb"].breaker
	r.eventually(device+" waiting for the probe", func() bool { return b.Waiting(device) > 0 })
}

func (r *offRig) breakerState() breaker.Snapshot {
	return r.d.services["zb"].breaker.Snapshot(r.clock.Now())
}

func TestOfflineLightFailsAtOnceWithNothingSent(t *testing.T) {
	r := startOffline(t)
	r.d.Availability("lamp", false)
	r.command("lamp", "on", `{"state":"ON"}`)
	res := r.ended("on", devices.Failed, devices.ReasonDeviceOffline)
	if res.Attempts != 0 || !strings.Contains(res.Detail, "nothing was sent") {
		t.Errorf("attempts %d, detail %q; want 0 attempts and a detail that says nothing was sent", res.Attempts, res.Detail)
	}
	r.nothingSent("after the offline command ended")
	if op, _, _ := r.journal.Lookup("on"); op.Status != devices.Failed || op.Reason != devices.ReasonDeviceOffline || op.Attempts != 0 {
		t.Errorf("stored %s/%s after %d attempts; want failed/device_offline after 0", op.Status, op.Reason, op.Attempts)
	}
	if s := r.breakerState(); s.Counts.Allowed != 0 || s.State != breaker.Closed {
		t.Errorf("breaker %s with %d permits; want closed and never asked", s.State, s.Counts.Allowed)
	}

	// Back online, the next command goes out.
	r.d.Availability("lamp", true)
	r.command("lamp", "on2", `{"state":"ON"}`)
	r.sent("set", "lamp")
}

func TestOfflineLockFailsAtOnceAndNotifies(t *testing.T) {
	r := startOffline(t)
	r.d.Availability("door", false)
	r.command("door", "lock", `{"state":"LOCK"}`)
	r.ended("lock", devices.Failed, devices.ReasonDeviceOffline)
	r.nothingSent("after the lock's command ended") // not even the fresh read
	r.eventually("a critical notification naming device_offline", func() bool {
		for _, n := range r.pub.notifications() {
			if strings.Contains(n, `"device":"door"`) && strings.Contains(n, "device_offline") && strings.Contains(n, `"critical"`) {
				return true
			}
		}
		return false
	})
}

func TestOfflineQueuedCommandRunsWhenTheDeviceReturns(t *testing.T) {
	r := startOffline(t)
	r.d.Availability("held_lamp", false)
	r.command("held_lamp", "on", `{"state":"ON"}`)
	q := r.await("on queued", func(res devices.Result) bool { return res.OpID == "on" })
	if q.Status != devices.Queued || q.Reason != devices.ReasonDeviceOffline {
		t.Fatalf("first result after accepted: %s/%s; want queued/device_offline", q.Status, q.Reason)
	}
	r.advance(1, 30*time.Second) // half the TTL: still waiting, nothing sent
	r.waiting()
	r.nothingSent("while the device is offline")
	r.noResult("on")

	r.d.Availability("held_lamp", true)
	r.sent("set", "held_lamp")
	r.d.Report("held_lamp", map[string]any{"state": "ON"}, false)
	r.ended("on", devices.Succeeded, "")
}

func TestOfflineQueuedCommandExpiresAtItsTTL(t *testing.T) {
	r := startOffline(t)
	r.d.Availability("held_lamp", false)
	r.command("held_lamp", "on", `{"state":"ON"}`)
	r.advance(1, time.Minute)
	res := r.ended("on", devices.Expired, devices.ReasonTTLElapsed)
	if res.Attempts != 0 || !strings.Contains(res.Detail, "offline") {
		t.Errorf("attempts %d, detail %q; want 0 and a detail that says the device was offline", res.Attempts, res.Detail)
	}
	r.nothingSent("after the TTL")
}

func TestDeviceGoneOfflineBetweenAttemptsFailsWithoutAnotherSend(t *testing.T) {
	r := startOffline(t)
	r.command("lamp", "on", `{"state":"ON"}`)
	r.sent("set", "lamp")
	r.d.Availability("lamp", false)
	r.advance(1, 5*time.Second) // attempt 1 unconfirmed
	for range 5 {               // the backoff, at most its cap
		select {
		case m := <-r.bridge.msgs:
			t.Fatalf("a %s of %s was sent to an offline device", m.verb, m.device)
		case res := <-r.results:
			if res.OpID == "on" && res.Status.Terminal() {
				if res.Status != devices.Failed || res.Reason != devices.ReasonDeviceOffline || res.Attempts != 1 {
					t.Fatalf("ended %s/%s after %d attempts; want failed/device_offline after 1", res.Status, res.Reason, res.Attempts)
				}
				if s := r.breakerState(); s.Counts.Failures != 0 {
					t.Errorf("breaker counted %d failures; an offline device's silence says nothing of the bridge", s.Counts.Failures)
				}
				return
			}
		case <-time.After(100 * time.Millisecond):
			r.advance(1, 2*time.Second)
		}
	}
	t.Fatal("the command never ended")
}

// restartBridge makes the bridge say offline, then online: the breaker
// is half-open, as after a Zigbee2MQTT restart.
func (r *offRig) restartBridge() {
	r.t.Helper()
	r.d.BridgeState("zb", false, false)
	r.d.BridgeState("zb", true, false)
	if s := r.breakerState(); s.State != breaker.HalfOpen {
		r.t.Fatalf("after the bridge's restart the breaker is %s; want half_open", s.State)
	}
}

func TestOfflineDeviceNeverTakesTheProbe(t *testing.T) {
	r := startOffline(t)
	r.d.Availability("lamp2", false)
	r.restartBridge()
	r.command("lamp2", "away", `{"state":"ON"}`)
	r.ended("away", devices.Failed, devices.ReasonDeviceOffline)
	if s := r.breakerState(); s.State != breaker.HalfOpen || s.Probes != 0 || s.Counts.Failures != 0 {
		t.Fatalf("breaker %s, %d probes out, %d failures; want half_open with its probe place free", s.State, s.Probes, s.Counts.Failures)
	}
	r.command("lamp", "on", `{"state":"ON"}`)
	r.sent("set", "lamp") // the probe
	r.d.Report("lamp", map[string]any{"state": "ON"}, false)
	r.ended("on", devices.Succeeded, "")
	if s := r.breakerState(); s.State != breaker.Closed {
		t.Errorf("breaker %s after the probe's success; want closed", s.State)
	}
}

func TestCommandsWaitForTheOutstandingProbeInsteadOfFailing(t *testing.T) {
	r := startOffline(t)
	r.restartBridge()
	r.command("lamp", "probe", `{"state":"ON"}`)
	r.sent("set", "lamp")
	r.command("lamp2", "other", `{"state":"ON"}`)
	r.waitsForProbe("lamp2")
	r.nothingSent("while the probe is out")
	r.noResult("other") // not failed breaker_open: it waits

	r.d.Report("lamp", map[string]any{"state": "ON"}, false)
	r.ended("probe", devices.Succeeded, "")
	r.sent("set", "lamp2") // the breaker closed: it goes
	r.d.Report("lamp2", map[string]any{"state": "ON"}, false)
	r.ended("other", devices.Succeeded, "")
}

func TestOneLostProbeAfterTheBridgeRestartFailsNoOtherCommand(t *testing.T) {
	r := startOffline(t)
	r.restartBridge()
	r.command("lamp", "lost", `{"state":"ON"}`)
	r.sent("set", "lamp") // the probe, never confirmed
	r.command("lamp2", "other", `{"state":"ON"}`)
	r.waitsForProbe("lamp2")
	r.advance(3, 5*time.Second) // the probe's attempt timeout
	r.sent("set", "lamp2")      // the next probe, to another device
	if s := r.breakerState(); s.State != breaker.HalfOpen || s.Counts.Trips != 0 {
		t.Fatalf("after the lost probe: breaker %s, %d trips; want half_open, not reopened", s.State, s.Counts.Trips)
	}
	r.d.Report("lamp2", map[string]any{"state": "ON"}, false)
	r.ended("other", devices.Succeeded, "")
	if s := r.breakerState(); s.State != breaker.Closed {
		t.Fatalf("breaker %s after the second probe's success; want closed", s.State)
	}
}

func TestSecondLostProbeAfterTheBridgeRestartReopens(t *testing.T) {
	r := startOffline(t)
	r.restartBridge()
	r.command("lamp", "lost", `{"state":"ON"}`)
	r.sent("set", "lamp")
	r.command("lamp2", "lost2", `{"state":"ON"}`)
	r.waitsForProbe("lamp2")
	r.advance(3, 5*time.Second)
	r.sent("set", "lamp2")
	r.command("door", "lock", `{"state":"LOCK"}`) // waits for lamp2's probe
	r.waitsForProbe("door")
	r.advance(4, 5*time.Second) // lamp2 unconfirmed too: a dead coordinator
	r.ended("lock", devices.Failed, devices.ReasonBreakerOpen)
	if s := r.breakerState(); s.State != breaker.Open || s.Counts.Trips != 1 {
		t.Fatalf("breaker %s, %d trips after two lost probes; want open after 1 trip", s.State, s.Counts.Trips)
	}
}

func TestLostProbeAfterAnOpenPeriodReopensAtOnce(t *testing.T) {
	// Without the bridge's word, the one probe decides, as it always has.
	r := startOffline(t)
	b := r.d.services["zb"].breaker
	now := r.clock.Now()
	for range breaker.DefaultFailureThreshold {
		p, err := b.Allow(now)
		if err != nil {
			t.Fatal(err)
		}
		p.Done(breaker.Failure, now)
	}
	r.advance(1, 30*time.Second) // the open period ends
	r.eventually("half_open", func() bool { return r.breakerState().State == breaker.HalfOpen })
	r.command("lamp", "lost", `{"state":"ON"}`)
	r.sent("set", "lamp")
	r.command("lamp2", "other", `{"state":"ON"}`)
	r.waitsForProbe("lamp2")
	r.advance(3, 5*time.Second)
	r.ended("other", devices.Failed, devices.ReasonBreakerOpen)
}

func TestSleepyDeviceAsleepIsNotOffline(t *testing.T) {
	// offline: fail, and the node only asleep: its command waits for the
	// wake, as any sleepy device's does.
	r := startSleepy(t, sleepyOptions{offline: devices.OfflineFail})
	r.d.NodeStatus("radiator", devices.NodeAsleep, false)
	r.submit(`{"op_id":"warm","current_heating_setpoint":21}`)
	r.status("warm", devices.Accepted)
	q := r.await("warm's next result", func(res devices.Result) bool { return res.OpID == "warm" })
	if q.Status != devices.Queued || q.Reason != devices.ReasonAsleep {
		t.Fatalf("warm: %s/%s; want queued/asleep", q.Status, q.Reason)
	}
	// Dead is offline: the command waiting for the wake ends now.
	r.d.NodeStatus("radiator", devices.NodeDead, false)
	res := r.await("warm's end", func(res devices.Result) bool { return res.OpID == "warm" && res.Status.Terminal() })
	if res.Status != devices.Failed || res.Reason != devices.ReasonDeviceOffline || res.Attempts != 0 {
		t.Fatalf("warm ended %s/%s after %d attempts; want failed/device_offline after 0", res.Status, res.Reason, res.Attempts)
	}
	r.none("after the node was reported dead")
}

func TestSleepyDeviceReportedDeadWaitsForItsWakeByDefault(t *testing.T) {
	r := startSleepy(t, sleepyOptions{}) // offline: the default, queue for a sleepy device
	r.d.NodeStatus("radiator", devices.NodeDead, false)
	r.submit(`{"op_id":"warm","current_heating_setpoint":21}`)
	if q := r.status("warm", devices.Queued); q.Reason != devices.ReasonDeviceOffline {
		t.Errorf("warm queued with reason %s; want device_offline", q.Reason)
	}
	r.d.NodeStatus("radiator", devices.NodeAwake, false) // back, and awake
	if m := r.next(); m.verb != "set" {
		t.Fatalf("at the wake: a %s; want the set", m.verb)
	}
}

func TestLostProbeIsSparedWhenItsDeadlineIsTheAttemptTimeout(t *testing.T) {
	// probe_timeout equal to the attempt timeout, as config allows: the
	// probe's attempt stops waiting just before the deadline, so that the
	// spare, not the breaker's deadline, decides.
	r := startOfflineProbe(t, 5*time.Second)
	r.restartBridge()
	r.command("lamp", "lost", `{"state":"ON"}`)
	r.sent("set", "lamp")
	r.command("lamp2", "other", `{"state":"ON"}`)
	r.waitsForProbe("lamp2")
	r.advance(3, 5*time.Second-probeVerdictLead) // before the deadline
	r.sent("set", "lamp2")
	if s := r.breakerState(); s.State != breaker.HalfOpen || s.Counts.Trips != 0 {
		t.Fatalf("breaker %s, %d trips; want half_open: the lost probe spared before its deadline", s.State, s.Counts.Trips)
	}
}
