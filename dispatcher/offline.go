package dispatcher

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/machine"
)

// The offline path (issue 16, item 2). A command for a device its bridge
// reports offline (Zigbee2MQTT's availability, a Z-Wave node the driver
// says is dead) is decided before the breaker is asked: it ends at once,
// failed/device_offline, with no attempt sent, or, where the device's
// offline setting says queue, it waits, reported queued/device_offline,
// for the bridge to say the device is back, within its TTL. Either way it
// never takes a half-open breaker's probe: a probe to a device known to
// be away would be lost, and its loss would fail the commands of every
// other device of the service for a whole open period.

// awaitOnline is the offline gate before t's next attempt, which must go
// by deadline (machine.Device.OfflineGate). ok means the device is not
// known to be offline: go on. stop means t ended (failed/device_offline,
// or expired while it stayed offline), or ctx is done. Neither: deadline
// passed before the op's own deadline (a retry's policy deadline), for
// the caller's loop to decide.
func (q *deviceQueue) awaitOnline(ctx context.Context, t *task, deadline time.Time) (ok, stop bool) {
	announced := false
	var timer clockwork.Timer // set once the command waits
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		now := q.d.now()
		q.mu.Lock()
		if t.Ended() {
			q.mu.Unlock()
			return false, true
		}
		g := q.m.OfflineGate(t.Command, now, deadline, q.svc.Name)
		op := t.Op
		if g.Kind == machine.GateWait && announced {
			// Still offline: wait for the next input (an availability
			// report among them) or the deadline.
			if timer == nil {
				timer = q.d.clock.NewTimer(deadline.Sub(now))
			}
			end := q.waitLocked(ctx, t, timer.Chan(), nil)
			q.mu.Unlock()
			if end == waitStop {
				return false, true
			}
			continue
		}
		q.mu.Unlock()
		switch g.Kind {
		case machine.GateOpen:
			if announced {
				q.d.log.Info("device back online: attempting", "op_id", op.OpID, "device", op.Device)
			}
			return true, false
		case machine.GateEnd:
			q.finish(t, g.Status, g.Reason, g.Detail, nil)
			return false, true
		case machine.GatePassed:
			return false, false
		}
		announced = true
		r := op.Result()
		r.Status, r.Reason, r.At, r.Detail = devices.Queued, devices.ReasonDeviceOffline, now, g.Detail
		q.d.publishResult(r)
		q.d.log.Info("command queued for an offline device", "op_id", op.OpID, "device", op.Device, "deadline", op.Deadline)
	}
}

// endOffline ends, for a sleepy device whose offline setting is fail,
// every waiting command that the bridge's offline report stops
// (machine.Device.OfflineEnds). It reports whether it ended any.
func (q *deviceQueue) endOffline(pending []*machine.Command) bool {
	q.mu.Lock()
	ends := q.m.OfflineEnds(pending, q.svc.Name)
	q.mu.Unlock()
	for i, g := range ends {
		q.finish(q.taskOf(pending[i]), g.Status, g.Reason, g.Detail, nil)
	}
	return len(ends) > 0
}
