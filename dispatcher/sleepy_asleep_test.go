package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// Once the bridge says a sleepy node is Asleep, no further attempt is sent
// to it, even when the gateway then publishes a cached "no".
//
// SLEEPY.md: the lease "ends at once when the bridge says the node is
// Asleep", "once a bridge has said a node is asleep, only its next Awake
// begins a lease: the values a gateway publishes from its cache are not
// the device", and "Hearth never hands a write to a bridge's wake-up
// queue". Here the gateway says Asleep while the first attempt waits for
// its verifying read, then publishes the old setpoint (from its cache).
// The fault this pins: verify took that as the device saying no, and
// deliverAwake sent the second attempt to the node the gateway just said is asleep — into
// Z-Wave JS's wake-up queue, because deliverAwake bounded its attempts by
// the lease end it read before the first (until), not by the lease as it
// is now.
func TestNoWriteAfterTheBridgeSaysAsleep(t *testing.T) {
	r := startSleepy(t, sleepyOptions{})
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

// A node the bridge reports Asleep while the worker waits for the link is
// sent nothing when the link comes back.
//
// SLEEPY.md: "Before each attempt the lease is looked at again: once the
// bridge says the node is asleep nothing more is sent" and "Hearth never
// hands a write to a bridge's wake-up queue". The fault this pins:
// deliverAwake read the lease once, at the top of each attempt, then
// could wait a long time — for the breaker (admit), the link (awaitLink),
// the fresh read (revalidate) — and sent without looking at the lease
// again. Here the radiator wakes while the bridge is offline;
// the worker waits for the link; the gateway says the node is Asleep;
// then the bridge comes back: the set goes out to the sleeping node, into
// Z-Wave JS's wake-up queue.
func TestNoSendToANodeThatFellAsleepWhileWaitingForTheLink(t *testing.T) {
	r := startSleepy(t, sleepyOptions{})
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

// asleepOnSendBridge is the rig's bridge on which the node goes back to
// sleep right as a set is handed over: Z-Wave JS UI reports it Asleep
// before the send returns.
type asleepOnSendBridge struct {
	*scriptedBridge
	asleep func()
}

func (b *asleepOnSendBridge) Send(ctx context.Context, dev devices.Device, target devices.Target) error {
	err := b.scriptedBridge.Send(ctx, dev, target)
	b.asleep()
	return err
}

// A node reported Asleep while its set is being handed over gets no
// verifying read, at any of 16 wakes.
//
// SLEEPY.md: "once the bridge says the node is asleep nothing more is
// sent". A node reported Asleep during the send closes `slept`, and verify
// must return silent at once. The fault this pins: with the lease read
// again after the send, endLeaseLocked had set awakeUntil to the zero
// time, so `end` is year 1, verify's first timer is
// negative and fired at once, racing the closed `slept` channel in one
// select. Half the time the timer won and the
// verifying read (a Z-Wave pollValue) goes to the node the bridge just
// said is asleep — into its wake-up queue. Repeated over 16 wakes, the
// read goes out at least once with probability 1-2^-16.
func TestNoVerifyingReadToANodeReportedAsleepDuringTheSend(t *testing.T) {
	var r *sleepyRig
	r = startSleepy(t, sleepyOptions{bridge: func(b *scriptedBridge) Bridge {
		return &asleepOnSendBridge{scriptedBridge: b, asleep: func() { r.d.NodeStatus("radiator", devices.NodeAsleep, false) }}
	}})
	r.submit(`{"current_heating_setpoint":22,"op_id":"z"}`)
	r.status("z", devices.Accepted)
	r.status("z", devices.Queued)

	q := r.d.devices["radiator"]
	gets := 0
	for i := range 16 {
		r.d.NodeStatus("radiator", devices.NodeAwake, false) // the wake
		if m := r.next(); m.verb != "set" {
			t.Fatalf("wake %d: a %s; want the set", i, m.verb)
		}
		// The set made the node report Asleep: the worker puts z back and
		// waits for the next wake (on z's deadline timer). A verifying
		// read, if one went out, was sent (synchronously, by the rig's
		// bridge) before z came back.
		r.eventually("z back in the queue", func() bool {
			q.mu.Lock()
			defer q.mu.Unlock()
			return q.cur == nil && len(q.m.Waiting()) == 1
		})
		for len(r.bridge.msgs) > 0 {
			if m := <-r.bridge.msgs; m.verb == "get" {
				gets++
			}
		}
	}
	if gets > 0 {
		t.Errorf("in 16 wakes where the bridge said the node is asleep during the set, %d verifying reads went to the sleeping node: "+
			"the lease re-read after the send made the wait's end the zero time, so verify's timer fired at once and raced the closed slept channel", gets)
	}
}
