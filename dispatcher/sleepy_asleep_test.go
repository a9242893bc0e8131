package dispatcher

import (
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// SLEEPY.md: the lease "ends at once when the bridge says the node is
// Asleep", "once a bridge has said a node is asleep, only its next Awake
// begins a lease: the values a gateway publishes from its cache are not
// the device", and "Hearth never hands a write to a bridge's wake-up
// queue". Here the gateway says Asleep while the first attempt waits for
// its verifying read, then publishes the old setpoint (from its cache):
// verify takes that as the device saying no, and deliverAwake sends the
// second attempt to the node the gateway just said is asleep — into
// Z-Wave JS's wake-up queue. deliverAwake bounds its attempts by the
// lease end it read before the first (until), never by the lease as it
// is now.
func TestReview4NoWriteAfterTheBridgeSaysAsleep(t *testing.T) {
	r := startR4(t, r4Options{})
	r.submit(`{"current_heating_setpoint":22,"op_id":"z"}`)
	r.status("z", devices.Accepted)
	r.status("z", devices.Queued)

	r.d.NodeStatus("radiator", devices.NodeAwake, false) // the wake-up notification
	if m := r.next(); m.verb != "set" {
		t.Fatalf("at the wake: a %s; want the set", m.verb)
	}
	r.advance(1, 2500*time.Millisecond)
	if m := r.next(); m.verb != "get" {
		t.Fatalf("then a %s; want the verifying read", m.verb)
	}
	asleep := r.clock.Now()
	r.d.NodeStatus("radiator", devices.NodeAsleep, false)      // the node went back to sleep
	r.report(map[string]any{"current_heating_setpoint": 16.0}) // the gateway's cached value
	r.settled()
	select {
	case m := <-r.bridge.msgs:
		t.Errorf("a %s %v went out at %s, after the gateway said the node is asleep (at %s)",
			m.verb, m.target, m.at.Format("15:04:05.000"), asleep.Format("15:04:05.000"))
	default:
	}
}
