package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// lostPuback is a send error whose delivery is unknown: the connection
// went before the broker's PUBACK.
type lostPuback struct{}

func (lostPuback) Error() string         { return "connection lost before the PUBACK" }
func (lostPuback) DeliveryUnknown() bool { return true }

// losingBridge hands every set to the device, then says its delivery is
// unknown.
type losingBridge struct{ *scriptedBridge }

func (b losingBridge) Send(ctx context.Context, d devices.Device, target devices.Target) error {
	_ = b.scriptedBridge.Send(ctx, d, target)
	return lostPuback{}
}

// A send to a sleepy device whose delivery is unknown may have acted:
// the lease gives the attempt back, but the send stays counted, so a
// risky action (a battery lock asked to unlock) whose PUBACKs are all
// lost still reaches the lock at most MaxRiskyAttempts times.
func TestSleepyRiskySendsOfUnknownDeliveryAreCounted(t *testing.T) {
	r := startSleepy(t, sleepyOptions{class: devices.Lock, bridge: func(b *scriptedBridge) Bridge { return losingBridge{b} }})
	sets, end := r.unlockStillLocked()
	if sets > MaxRiskyAttempts {
		t.Errorf("the unlock reached the lock %d times; want at most %d (MaxRiskyAttempts)", sets, MaxRiskyAttempts)
	}
	if end.Status != devices.Failed {
		t.Errorf("the unlock ended %q/%s; want failed once its sends were spent", end.Status, end.Reason)
	}
}

// A set is never sent to a node its bridge has just said is asleep: the
// bridge's word during the store of the attempt (a synced write) stops
// the send, and the attempt is taken back for the next lease.
func TestNoSendToANodeReportedAsleepWhileItsAttemptIsStored(t *testing.T) {
	r := startSleepy(t, sleepyOptions{})
	r.submit(`{"current_heating_setpoint":22,"op_id":"A","ttl":"1h"}`)
	r.status("A", devices.Queued)
	stored := make(chan struct{}, 1)
	r.journal.mu.Lock()
	r.journal.hold = func(op devices.Op) {
		if op.OpID == "A" && op.Attempts == 1 && !op.Status.Terminal() {
			r.d.NodeStatus("radiator", devices.NodeAsleep, false) // the bridge: asleep
			select {
			case stored <- struct{}{}:
			default:
			}
		}
	}
	r.journal.mu.Unlock()
	r.d.NodeStatus("radiator", devices.NodeAwake, false) // the wake-up notification: lease 1
	select {
	case <-stored:
	case <-time.After(rigWait):
		t.Fatal("the attempt was never stored")
	}
	r.waiting() // the worker is back to waiting for the next lease (or, had it sent, for the report)
	select {
	case m := <-r.bridge.msgs:
		t.Errorf("a %s %v reached the bridge after it said the node is asleep", m.verb, m.target)
	default:
	}
	if op, _, _ := r.journal.Lookup("A"); op.Attempts != 0 {
		t.Errorf("A's record says %d attempts; want 0: the attempt never left", op.Attempts)
	}
}
