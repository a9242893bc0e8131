package dispatcher

import (
	"testing"
	"time"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/devices"
)

// A breaker that opens while a sleepy device's attempt is being stored (a
// synced write) stops the set, as it does for a device that listens: the
// set must not reach a service the breaker has just found broken. The
// attempt is taken back and the command fails breaker_open, nothing sent.
func TestSleepySetIsNotSentWhenTheBreakerOpensWhileItsAttemptIsStored(t *testing.T) {
	r := startSleepy(t, sleepyOptions{breaker: &breaker.Options{FailureThreshold: 5, OpenFor: func(int) time.Duration { return time.Minute }}})
	entered, release := r.holdFirstAttempt("warm")

	r.submit(`{"current_heating_setpoint":21,"op_id":"warm"}`)
	r.status("warm", devices.Queued)
	r.report(map[string]any{"current_heating_setpoint": 16.0}) // the wake
	waitClosed(t, entered, "the attempt of warm to be stored")
	r.d.BridgeState("zw", false, false) // the bridge goes: the breaker opens
	close(release)
	end := r.await("warm's end", func(res devices.Result) bool { return res.OpID == "warm" && res.Status.Terminal() })
	if end.Status != devices.Failed || end.Reason != devices.ReasonBreakerOpen || end.Attempts != 0 {
		t.Errorf("warm: %s/%s after %d attempts (%s); want failed/breaker_open after 0", end.Status, end.Reason, end.Attempts, end.Detail)
	}
	r.none("after the breaker opened")
}

// A half-open breaker's probe taken by a sleepy device's delivery is given
// back while the bridge's state is unknown (just after a reconnect), as a
// listening device's is: its deadline runs from its admission, and spent
// waiting for the link it would count as a failure and open the breaker
// again. Once the bridge says it is up, the set goes out as the probe, and
// its confirmation closes the breaker.
func TestSleepyDeliveryGivesTheProbeBackWhileTheLinkIsUnknown(t *testing.T) {
	r := startSleepy(t, sleepyOptions{breaker: &breaker.Options{FailureThreshold: 1, OpenFor: func(int) time.Duration { return time.Minute }, ProbeTimeout: 2 * time.Second}})
	r.d.BridgeState("zw", false, false) // offline: open
	r.d.BridgeState("zw", true, false)  // back: half-open, a probe decides
	r.d.Session()                       // a new MQTT session: the bridge's state is unknown again
	b := r.d.services["zw"].breaker
	r.submit(`{"current_heating_setpoint":21,"op_id":"warm"}`)
	r.status("warm", devices.Queued)
	// The wake: a node status (a live report would be the bridge talking,
	// which closes a half-open breaker by itself).
	r.d.NodeStatus("radiator", devices.NodeAwake, false)
	r.eventually("the probe given back while the link is unknown", func() bool {
		s := b.Snapshot(r.clock.Now())
		return s.Counts.Allowed >= 1 && s.Counts.Canceled >= 1 && s.Probes == 0
	})
	r.clock.Advance(3 * time.Second) // past a probe's deadline: none is out
	r.d.BridgeState("zw", true, false)
	if m := r.next(); m.verb != "set" {
		t.Fatalf("once the bridge is up: a %s %v; want the set", m.verb, m.target)
	}
	r.report(map[string]any{"current_heating_setpoint": 21.0})
	r.status("warm", devices.Succeeded)
	if s := b.Snapshot(r.clock.Now()); s.State != breaker.Closed || s.Counts.Expired != 0 {
		t.Errorf("breaker %s with %d probes expired; want closed by the set's confirmation, none expired", s.State, s.Counts.Expired)
	}
}

// A sleepy device's set sent as a half-open breaker's probe waits for its
// confirmation no later than just before the probe's deadline, as a
// listening device's does: the breaker hears the delivery's verdict (here
// a silent device, which says nothing of the service) before its own
// deadline would count the probe failed and open it again.
func TestSleepyProbeVerdictComesBeforeTheProbesDeadline(t *testing.T) {
	r := startSleepy(t, sleepyOptions{breaker: &breaker.Options{FailureThreshold: 1, OpenFor: func(int) time.Duration { return time.Minute }, ProbeTimeout: 6 * time.Second}})
	r.d.BridgeState("zw", false, false) // offline: open
	r.d.BridgeState("zw", true, false)  // back: half-open, a probe decides
	b := r.d.services["zw"].breaker
	entered, release := r.holdFirstAttempt("warm")
	r.submit(`{"current_heating_setpoint":21,"op_id":"warm"}`)
	r.status("warm", devices.Queued)
	admitted := r.clock.Now()
	r.d.NodeStatus("radiator", devices.NodeAwake, false) // the wake; the probe is admitted now
	waitClosed(t, entered, "the attempt of warm to be stored")
	r.clock.Advance(3 * time.Second) // a slow synced write: half the probe's time is gone
	close(release)
	if m := r.next(); m.verb != "set" {
		t.Fatalf("after the store: a %s %v; want the set", m.verb, m.target)
	}
	// The device stays silent. Time moves to just before the probe's
	// deadline: the delivery's wait must be over by then.
	r.waiting()
	r.clock.Advance(admitted.Add(6 * time.Second).Add(-time.Nanosecond).Sub(r.clock.Now()))
	r.eventually("the probe's verdict before its deadline", func() bool {
		s := b.Snapshot(r.clock.Now())
		return s.Probes == 0 && s.Counts.Ignored >= 1
	})
	r.clock.Advance(time.Second) // past the deadline: nothing is left to expire
	if s := b.Snapshot(r.clock.Now()); s.Counts.Expired != 0 || s.State == breaker.Open {
		t.Errorf("breaker %s with %d probes expired; want none expired, not open again", s.State, s.Counts.Expired)
	}
}
