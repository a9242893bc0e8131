package dispatcher

import (
	"testing"

	"github.com/hearthd/hearth/devices"
)

// SLEEPY.md: "Before each attempt the lease is looked at again: once the
// bridge says the node is asleep nothing more is sent" and "Hearth never
// hands a write to a bridge's wake-up queue". deliverAwake reads the lease
// once, at the top of each attempt (sleepy.go:255), then may wait a long
// time — for the breaker (admit), the link (awaitLink), the fresh read
// (revalidate) — and sends without looking at the lease again
// (sleepy.go:310). Here the radiator wakes while the bridge is offline;
// the worker waits for the link; the gateway says the node is Asleep;
// then the bridge comes back: the set goes out to the sleeping node, into
// Z-Wave JS's wake-up queue.
func TestReview4BNoSendToANodeThatFellAsleepWhileWaitingForTheLink(t *testing.T) {
	r := startR4(t, r4Options{})
	r.submit(`{"current_heating_setpoint":22,"op_id":"w"}`)
	r.status("w", devices.Accepted)
	r.status("w", devices.Queued)

	r.d.BridgeState("zw", false, false) // the bridge goes offline
	q := r.d.devices["radiator"]
	current := func() bool { q.mu.Lock(); defer q.mu.Unlock(); return q.cur != nil }
	r.d.NodeStatus("radiator", devices.NodeAwake, false) // the wake-up notification
	r.eventually("the worker to take the wake", current)
	r.waiting()                                           // deliverAwake waits for the link (awaitLink's timer)
	r.d.NodeStatus("radiator", devices.NodeAsleep, false) // the node goes back to sleep
	r.d.BridgeState("zw", true, false)                    // the bridge is back
	r.eventually("the delivery to end", func() bool { return !current() })
	select {
	case m := <-r.bridge.msgs:
		t.Errorf("a %s %v went out at %s, after the gateway said the node is asleep: the lease is not looked at again after the wait for the link",
			m.verb, m.target, m.at.Format("15:04:05.000"))
	default:
	}
}
