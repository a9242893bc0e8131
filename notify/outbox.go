package notify

import (
	"context"
	"sync"

	"github.com/hearthd/hearth/devices"
)

// saver holds the notifications Enqueue took until runSaver stores and
// queues them, in order. Each batch is one notification, an item per
// notify service in Options order.
type saver struct {
	mu      sync.Mutex
	batches [][]*notification
	closed  bool          // Close has stored the last batches: add refuses
	wake    chan struct{} // buffered 1: a batch was added
}

// add appends batch; false once close was called (it is not kept).
func (s *saver) add(batch []*notification) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	s.batches = append(s.batches, batch)
	s.mu.Unlock()
	signal(s.wake)
	return true
}

// close returns every batch waiting, oldest first, and makes add refuse
// from then on.
func (s *saver) close() [][]*notification {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.batches
	s.batches, s.closed = nil, true
	return b
}

// take returns every batch waiting, oldest first.
func (s *saver) take() [][]*notification {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.batches
	s.batches = nil
	return b
}

// runSaver stores the notifications Enqueue took, all those waiting in
// one commit, then queues them, until ctx is done; then it stores what
// is left, for the next start (and Close stores those raised
// meanwhile). A failed save is logged, and the notifications are queued
// all the same: sent, but lost if Hearth stops first. It is the one
// goroutine that calls the outbox for Enqueue, so that Enqueue never
// waits on a commit.
func (qs *Queues) runSaver(ctx context.Context) {
	for {
		select {
		case <-qs.saver.wake:
		case <-ctx.Done():
			if batches := qs.saver.take(); len(batches) > 0 {
				qs.save(batches)
			}
			return
		}
		batches := qs.saver.take()
		if len(batches) == 0 {
			continue
		}
		qs.save(batches)
		for _, batch := range batches {
			for i, q := range qs.queues {
				qs.push(q, batch[i])
			}
		}
	}
}

// Close stores the notifications raised while the dispatcher was
// stopping, after Run returned (the intake's last batch, a worker's last
// end, a notifier's unwinding), for the next start; one raised later is
// logged and lost (Enqueue). The dispatcher calls it once every
// goroutine that may raise one has returned.
func (qs *Queues) Close() {
	if qs.outbox == nil || len(qs.queues) == 0 {
		return
	}
	if batches := qs.saver.close(); len(batches) > 0 {
		qs.save(batches)
	}
}

// save stores batches in the outbox in one call, marking each item
// stored when it is.
func (qs *Queues) save(batches [][]*notification) {
	entries := make([]devices.OutboxNotification, 0, len(batches)*len(qs.queues))
	for _, batch := range batches {
		for i, q := range qs.queues {
			n := batch[i]
			entries = append(entries, devices.OutboxNotification{
				ID: n.id, Service: q.svc.Name, Device: n.device, OpID: n.opID,
				QueuedAt: n.queuedAt, Deadline: n.deadline, Payload: n.payload,
			})
		}
	}
	if err := qs.outbox.SaveNotifications(entries...); err != nil {
		qs.log.Warn("notifications not stored: they are sent, but lost if Hearth stops first", "count", len(batches), "err", err)
		return
	}
	for _, batch := range batches {
		for _, n := range batch {
			n.stored = true
		}
	}
}

// forget deletes n's outbox entry, if stored: n was delivered, given up,
// expired or dropped. A failed delete is logged: n is then sent again
// after a restart, which its id lets the receiver recognise.
func (qs *Queues) forget(q *queue, n *notification) {
	if !n.stored {
		return
	}
	if err := qs.outbox.DeleteNotifications(q.svc.Name, n.id); err != nil {
		qs.log.Warn("stored notification not deleted: it is sent again after a restart", "service", q.svc.Name, "id", n.id, "err", err)
	}
}

// Restore queues again, in the order they were stored, the
// notifications the outbox holds from before the start, ahead of any
// new one; the dispatcher calls it once, before Run. One whose deadline
// has passed is not sent: it is logged at ERROR and counted failed and
// expired. One for a notify service no longer configured is dropped with
// a WARN line. Both are deleted from the outbox. A read that fails is
// logged, and Hearth starts all the same.
func (qs *Queues) Restore() {
	if qs.outbox == nil {
		return
	}
	stored, err := qs.outbox.Notifications()
	if err != nil {
		qs.log.Error("notifications stored before the restart not read: they are not sent", "err", err)
		return
	}
	if len(stored) == 0 {
		return
	}
	byName := make(map[string]*queue, len(qs.queues))
	for _, q := range qs.queues {
		byName[q.svc.Name] = q
	}
	now := qs.clock.Now()
	doomed := map[string][]string{} // service → ids to delete
	var resent, expired, orphaned int
	for _, e := range stored {
		q := byName[e.Service]
		switch {
		case q == nil:
			orphaned++
			qs.log.Warn("stored notification dropped: its notify service is no longer configured",
				"service", e.Service, "id", e.ID, "device", e.Device, "op_id", e.OpID, "queued_at", e.QueuedAt)
			doomed[e.Service] = append(doomed[e.Service], e.ID)
		case !now.Before(e.Deadline):
			expired++
			q.failed.Add(1)
			q.expired.Add(1)
			qs.log.Error("notification not delivered", "service", e.Service, "id", e.ID, "device", e.Device, "op_id", e.OpID,
				"reason", reasonExpired, "attempts", 0, "queued_at", e.QueuedAt, "deadline", e.Deadline, "stored_before_restart", true)
			doomed[e.Service] = append(doomed[e.Service], e.ID)
		default:
			resent++
			qs.push(q, &notification{id: e.ID, stored: true, payload: e.Payload, device: e.Device, opID: e.OpID,
				queuedAt: e.QueuedAt, deadline: e.Deadline})
		}
	}
	for service, ids := range doomed {
		if err := qs.outbox.DeleteNotifications(service, ids...); err != nil {
			qs.log.Warn("stored notifications not deleted: they are read again at the next start", "service", service, "count", len(ids), "err", err)
		}
	}
	qs.log.Info("notifications stored before the restart", "queued_again", resent, "expired", expired, "service_gone", orphaned)
}
