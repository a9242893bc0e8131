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
	entered, release := make(chan struct{}), make(chan struct{})
	r.journal.mu.Lock()
	r.journal.hold = func(op devices.Op) {
		if op.OpID == "warm" && op.Attempts == 1 && op.Status == devices.Accepted {
			close(entered)
			<-release
		}
	}
	r.journal.mu.Unlock()

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
