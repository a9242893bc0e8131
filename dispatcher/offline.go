package dispatcher

import (
	"context"
	"fmt"
	"time"

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

// availabilityLocked returns whether the bridge says the device is
// offline, since when, and a channel closed at its next availability
// report. Called with q.mu held.
func (q *deviceQueue) availabilityLocked() (offline bool, since time.Time, changed <-chan struct{}) {
	offline, since = q.m.Offline()
	return offline, since, q.availChanged
}

// awaitOnline is the offline gate before t's next attempt, which must go
// by deadline. ok means the device is not known to be offline: go on.
// stop means t ended (failed/device_offline, or expired while it stayed
// offline), or ctx is done. Neither: deadline passed before the op's own
// deadline (a retry's policy deadline), for the caller's loop to decide.
func (q *deviceQueue) awaitOnline(ctx context.Context, t *task, deadline time.Time) (ok, stop bool) {
	announced := false
	for {
		q.mu.Lock()
		offline, since, changed := q.availabilityLocked()
		op := t.Op
		q.mu.Unlock()
		if !offline {
			if announced {
				q.d.log.Info("device back online: attempting", "op_id", op.OpID, "device", op.Device)
			}
			return true, false
		}
		now := q.d.now()
		away := fmt.Sprintf("the bridge of service %s reports %s offline since %s", q.svc.Name, q.dev.ID, since.UTC().Format(time.RFC3339))
		if q.dev.OnOffline() == devices.OfflineFail {
			q.finish(t, devices.Failed, devices.ReasonDeviceOffline, away+"; "+nothingMore(op.Attempts), nil)
			return false, true
		}
		if !now.Before(op.Deadline) {
			q.finish(t, devices.Expired, devices.ReasonTTLElapsed, fmt.Sprintf("the TTL passed while %s; %s", away, nothingMore(op.Attempts)), nil)
			return false, true
		}
		if !now.Before(deadline) {
			return false, false
		}
		if !announced {
			announced = true
			r := op.Result()
			r.Status, r.Reason, r.At = devices.Queued, devices.ReasonDeviceOffline, now
			r.Detail = fmt.Sprintf("%s; the command waits for it until %s", away, op.Deadline.UTC().Format(time.RFC3339))
			q.d.publishResult(r)
			q.d.log.Info("command queued for an offline device", "op_id", op.OpID, "device", op.Device, "deadline", op.Deadline)
		}
		timer := q.d.clock.NewTimer(deadline.Sub(now))
		select {
		case <-changed:
		case <-timer.Chan():
		case <-t.cancel:
			timer.Stop()
			return false, true
		case <-ctx.Done():
			timer.Stop()
			return false, true
		}
		timer.Stop()
	}
}

// nothingMore says what was sent of a command that ends without its next
// attempt.
func nothingMore(sent int) string {
	if sent == 0 {
		return "nothing was sent"
	}
	return fmt.Sprintf("no attempt after attempt %d was sent", sent)
}

// endOffline ends, for a sleepy device whose offline setting is fail,
// every waiting command that the bridge's offline report stops: failed,
// device_offline, nothing more sent. It reports whether it ended any.
func (q *deviceQueue) endOffline(pending []*machine.Command) bool {
	if q.dev.OnOffline() != devices.OfflineFail {
		return false
	}
	q.mu.Lock()
	offline, since, _ := q.availabilityLocked()
	q.mu.Unlock()
	if !offline {
		return false
	}
	away := fmt.Sprintf("the bridge of service %s reports %s offline since %s", q.svc.Name, q.dev.ID, since.UTC().Format(time.RFC3339))
	for _, c := range pending {
		t := q.taskOf(c)
		q.mu.Lock()
		sent := t.Op.Attempts
		q.mu.Unlock()
		q.finish(t, devices.Failed, devices.ReasonDeviceOffline, away+"; "+nothingMore(sent), nil)
	}
	return len(pending) > 0
}
