package dispatcher

import (
	"context"
	"time"

	"github.com/hearthd/hearth/service"
)

// BridgeStateGrace is how long, after each (re)connect, a service's bridge
// state may stay unknown before Hearth assumes the bridge is up
// (service.BridgeStateGrace).
const BridgeStateGrace = service.BridgeStateGrace

// awaitLink waits until the service's link is ready (see service.Link.Ready).
// ready is false when op's deadline passed first, or when the breaker
// changed (the caller asks it again); stop means t ended or
// ctx is done.
func (q *deviceQueue) awaitLink(ctx context.Context, t *task, deadline time.Time) (ready, stop bool) {
	for {
		now := q.d.now()
		if !now.Before(deadline) {
			return false, false // never send after the deadline, even if the link is up
		}
		var breakerChanged <-chan struct{}
		if q.svc.breaker != nil {
			// Transitions only: a probe's place freed by another command
			// changes nothing here (and would wake waiters in turn).
			breakerChanged = q.svc.breaker.WatchMoves()
		}
		ok, changed, retryAt := q.svc.link.Ready(now)
		if ok {
			return true, false
		}
		until := deadline
		if !retryAt.IsZero() && retryAt.Before(until) {
			until = retryAt
		}
		q.d.log.Info("waiting for the bridge", "op_id", t.opID, "device", q.dev.ID, "service", q.svc.Name, "until", until)
		switch q.pause(ctx, t, until, changed, breakerChanged) {
		case waitChanged:
			// The breaker may have opened (a replayed offline that
			// held): the caller asks it again.
			return false, false
		case waitStop:
			return false, true
		}
	}
}
