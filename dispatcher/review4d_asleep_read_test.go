package dispatcher

import (
	"context"
	"testing"

	"github.com/hearthd/hearth/devices"
)

// r4dAsleepBridge is the rig's bridge on which the node goes back to
// sleep right as a set is handed over: Z-Wave JS UI reports it Asleep
// before the send returns.
type r4dAsleepBridge struct {
	*r4Bridge
	asleep func()
}

func (b *r4dAsleepBridge) Send(ctx context.Context, dev devices.Device, target devices.Target) error {
	err := b.r4Bridge.Send(ctx, dev, target)
	b.asleep()
	return err
}

// SLEEPY.md: "once the bridge says the node is asleep nothing more is
// sent". Before the third review's fix, deliverAwake's wait was bounded by
// the lease as read before the send, and a node reported Asleep during
// the send closed `slept`: verify returned silent at once. Now the lease
// is read again after the send (sleepy.go:378-382): endLeaseLocked has set
// awakeUntil to the zero time, so `end` is year 1, verify's first timer is
// negative and fires at once, racing the closed `slept` channel in one
// select (sleepy.go:436-500). Half the time the timer wins and the
// verifying read (a Z-Wave pollValue) goes to the node the bridge just
// said is asleep — into its wake-up queue. Repeated over 16 wakes, the
// read goes out at least once with probability 1-2^-16.
func TestReview4DNoVerifyingReadToANodeReportedAsleepDuringTheSend(t *testing.T) {
	var r *r4Rig
	r = startR4(t, r4Options{bridge: func(b *r4Bridge) Bridge {
		return &r4dAsleepBridge{r4Bridge: b, asleep: func() { r.d.NodeStatus("radiator", devices.NodeAsleep, false) }}
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
