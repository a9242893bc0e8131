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
	issued := r.clock.Now().UTC().Format(time.RFC3339)
	r.submit(`{"state":"UNLOCK","op_id":"unlock","ttl":"10m","issued_at":"` + issued + `"}`)
	locked := map[string]any{"state": "LOCK", "lock_state": "locked"}
	start := r.clock.Now()
	sets := 0
	var end devices.Result
	for end.OpID == "" && r.clock.Since(start) < 10*time.Minute {
		select {
		case m := <-r.bridge.msgs:
			if m.verb == "set" {
				sets++
			}
			r.report(locked) // every set and read is answered: still locked
		case res := <-r.results:
			if res.OpID == "unlock" && res.Status.Terminal() {
				end = res
			}
		case <-time.After(30 * time.Millisecond): // idle: time moves on
			r.clock.Advance(time.Second)
			if r.clock.Since(start)%time.Minute == 0 {
				r.report(locked) // the lock's check-in: a lease begins
			}
		}
	}
	if sets > MaxRiskyAttempts {
		t.Errorf("the unlock reached the lock %d times; want at most %d (MaxRiskyAttempts)", sets, MaxRiskyAttempts)
	}
	if end.Status != devices.Failed {
		t.Errorf("the unlock ended %q/%s by +%s; want failed once its sends were spent", end.Status, end.Reason, r.clock.Since(start))
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
