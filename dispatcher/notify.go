package dispatcher

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
)

// Notifier delivers notifications to one notify service, such as an HTTP
// webhook of ntfy, Gotify or Home Assistant (protocols/webhook's Sender).
type Notifier interface {
	// Notify delivers payload, one Notification as JSON. nil means the
	// service took it. An error is judged by retry.Classify from its
	// type, wrapped sentinel or StatusCode() int, and a Retry-After from
	// its RetryAfterValue() string is honoured. It must return once ctx
	// is done.
	Notify(ctx context.Context, payload []byte) error
}

// DefaultNotifyTTL is how long a notification stays worth delivering to
// a notify service when Options.NotifyTTL is 0: 10 minutes, long enough
// to ride out a short outage of the service, short enough that a person
// is not told of a door left unlocked an hour ago as if it were news.
// Waiting in the queue counts against it.
const DefaultNotifyTTL = 10 * time.Minute

// DefaultNotifyQueue bounds the notifications waiting for one notify
// service when Service.NotifyQueue is 0. Past it the oldest is dropped,
// so that a storm of notifications cannot eat the hub's memory.
const DefaultNotifyQueue = 1000

// The reasons a notification is not delivered besides retry.GiveUp's:
// its TTL passed (queued or held too long), or the service's breaker was
// open and the service does not hold.
const (
	notifyExpired     = string(devices.ReasonTTLElapsed)
	notifyBreakerOpen = string(devices.ReasonBreakerOpen)
)

// NotifyStatus counts what happened to the notifications of one notify
// service since Hearth started.
type NotifyStatus struct {
	Service string `json:"service"`
	// Queued is how many wait now, besides the one being delivered.
	Queued int `json:"queued"`
	// Delivered: taken by the service (a nil error from its Notifier).
	Delivered uint64 `json:"delivered"`
	// Failed: given up, each logged at ERROR with its reason.
	Failed uint64 `json:"failed"`
	// Dropped: pushed out of a full queue by a newer one.
	Dropped uint64 `json:"dropped"`
	// Expired: of Failed, those whose TTL passed before they were
	// delivered (queued, held, retried, or stored while Hearth was
	// down).
	Expired uint64 `json:"expired"`
}

// notification is one notification on its way to one notify service.
type notification struct {
	id       string // the Notification's ID, its outbox entry's key
	stored   bool   // its entry is in the NotifyOutbox
	payload  []byte
	device   string
	opID     string
	queuedAt time.Time
	deadline time.Time // queuedAt + the notify TTL
}

// notifyQueue is a notify service's FIFO of notifications waiting for its
// one worker (runNotifier), which delivers them one at a time, in order.
type notifyQueue struct {
	svc   *Service
	limit int

	mu    sync.Mutex
	items []*notification // waiting; the one being delivered is not here
	wake  chan struct{}   // buffered 1: something was pushed

	delivered, failed, dropped, expired atomic.Uint64
}

func newNotifyQueue(s *Service) *notifyQueue {
	limit := s.NotifyQueue
	if limit <= 0 {
		limit = DefaultNotifyQueue
	}
	return &notifyQueue{svc: s, limit: limit, wake: make(chan struct{}, 1)}
}

// push appends n, dropping the oldest waiting notification when limit
// are waiting already; it returns the dropped one, if any. It never
// blocks.
func (q *notifyQueue) push(n *notification) (dropped *notification) {
	q.mu.Lock()
	if len(q.items) >= q.limit {
		dropped = q.items[0]
		q.items[0] = nil
		q.items = q.items[1:]
		q.dropped.Add(1)
	}
	q.items = append(q.items, n)
	q.mu.Unlock()
	signal(q.wake)
	return dropped
}

// next takes the oldest waiting notification, waiting for one; ok is
// false once ctx is done.
func (q *notifyQueue) next(ctx context.Context) (n *notification, ok bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			n = q.items[0]
			q.items[0] = nil
			q.items = q.items[1:]
			q.mu.Unlock()
			return n, true
		}
		q.mu.Unlock()
		select {
		case <-q.wake:
		case <-ctx.Done():
			return nil, false
		}
	}
}

// len returns how many notifications wait.
func (q *notifyQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// enqueueNotification hands payload, n as JSON, to every notify
// service's queue: at once without a NotifyOutbox, and through the
// notify saver (runNotifySaver), which stores it first, with one. It
// never blocks.
func (d *Dispatcher) enqueueNotification(n Notification, payload []byte) {
	if len(d.notifiers) == 0 {
		return
	}
	now := d.now()
	batch := make([]*notification, len(d.notifiers))
	for i := range d.notifiers {
		batch[i] = &notification{id: n.ID, payload: payload, device: n.Device, opID: n.OpID, queuedAt: now, deadline: now.Add(d.notifyTTL)}
	}
	if d.notifyOutbox == nil {
		for i, q := range d.notifiers {
			d.queueNotification(q, batch[i])
		}
		return
	}
	if !d.notes.add(batch) {
		d.log.Warn("notification raised after the dispatcher stopped: not stored, not sent", "id", n.ID, "device", n.Device, "op_id", n.OpID)
	}
}

// queueNotification pushes n on q; the oldest one it drops from a full
// queue is logged and deleted from the outbox.
func (d *Dispatcher) queueNotification(q *notifyQueue, n *notification) {
	old := q.push(n)
	if old == nil {
		return
	}
	d.log.Error("notify queue full: the oldest notification was dropped undelivered",
		"service", q.svc.Name, "id", old.id, "device", old.device, "op_id", old.opID, "queued_at", old.queuedAt, "limit", q.limit, "dropped_total", q.dropped.Load())
	d.forgetNotification(q, old)
}

// forgetNotification deletes n's outbox entry, if stored: n was
// delivered, given up, expired or dropped. A failed delete is logged:
// n is then sent again after a restart, which its id lets the receiver
// recognise.
func (d *Dispatcher) forgetNotification(q *notifyQueue, n *notification) {
	if !n.stored {
		return
	}
	if err := d.notifyOutbox.DeleteNotifications(q.svc.Name, n.id); err != nil {
		d.log.Warn("stored notification not deleted: it is sent again after a restart", "service", q.svc.Name, "id", n.id, "err", err)
	}
}

// notifySaver holds the notifications Notify took until runNotifySaver
// stores and queues them, in order. Each batch is one notification, an
// item per notify service in Options order.
type notifySaver struct {
	mu      sync.Mutex
	batches [][]*notification
	closed  bool          // Run has stored the last batches: add refuses
	wake    chan struct{} // buffered 1: a batch was added
}

// add appends batch; false once close was called (it is not kept).
func (s *notifySaver) add(batch []*notification) bool {
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
func (s *notifySaver) close() [][]*notification {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.batches
	s.batches, s.closed = nil, true
	return b
}

// take returns every batch waiting, oldest first.
func (s *notifySaver) take() [][]*notification {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.batches
	s.batches = nil
	return b
}

// runNotifySaver stores the notifications Notify took, all those waiting
// in one commit, then queues them, until ctx is done; then it stores
// what is left, for the next start (and Run, once everything it started
// has stopped, stores those raised meanwhile: storeLastNotifications). A failed save is logged, and the
// notifications are queued all the same: sent, but lost if Hearth stops
// first. It is the one goroutine that calls the outbox for Notify, so
// that Notify never waits on a commit (it is called from the store's own
// writer, when commits fail).
func (d *Dispatcher) runNotifySaver(ctx context.Context) {
	for {
		select {
		case <-d.notes.wake:
		case <-ctx.Done():
			if batches := d.notes.take(); len(batches) > 0 {
				d.saveNotifications(batches)
			}
			return
		}
		batches := d.notes.take()
		if len(batches) == 0 {
			continue
		}
		d.saveNotifications(batches)
		for _, batch := range batches {
			for i, q := range d.notifiers {
				d.queueNotification(q, batch[i])
			}
		}
	}
}

// storeLastNotifications stores the notifications raised while Run was
// stopping, after runNotifySaver returned (the intake's last batch, a
// worker's last end, a notifier's unwinding), for the next start; one
// raised later is logged and lost (enqueueNotification). Run calls it
// once every goroutine it started has returned.
func (d *Dispatcher) storeLastNotifications() {
	if d.notifyOutbox == nil || len(d.notifiers) == 0 {
		return
	}
	if batches := d.notes.close(); len(batches) > 0 {
		d.saveNotifications(batches)
	}
}

// saveNotifications stores batches in the outbox in one call, marking
// each item stored when it is.
func (d *Dispatcher) saveNotifications(batches [][]*notification) {
	entries := make([]devices.OutboxNotification, 0, len(batches)*len(d.notifiers))
	for _, batch := range batches {
		for i, q := range d.notifiers {
			n := batch[i]
			entries = append(entries, devices.OutboxNotification{
				ID: n.id, Service: q.svc.Name, Device: n.device, OpID: n.opID,
				QueuedAt: n.queuedAt, Deadline: n.deadline, Payload: n.payload,
			})
		}
	}
	if err := d.notifyOutbox.SaveNotifications(entries...); err != nil {
		d.log.Warn("notifications not stored: they are sent, but lost if Hearth stops first", "count", len(batches), "err", err)
		return
	}
	for _, batch := range batches {
		for _, n := range batch {
			n.stored = true
		}
	}
}

// restoreNotifications queues again, in the order they were stored, the
// notifications the outbox holds from before the start, ahead of any
// new one. One whose deadline has passed is not sent: it is logged at
// ERROR and counted failed and expired. One for a notify service no
// longer configured is dropped with a WARN line. Both are deleted from
// the outbox. A read that fails is logged, and Hearth starts all the
// same.
func (d *Dispatcher) restoreNotifications() {
	if d.notifyOutbox == nil {
		return
	}
	stored, err := d.notifyOutbox.Notifications()
	if err != nil {
		d.log.Error("notifications stored before the restart not read: they are not sent", "err", err)
		return
	}
	if len(stored) == 0 {
		return
	}
	queues := make(map[string]*notifyQueue, len(d.notifiers))
	for _, q := range d.notifiers {
		queues[q.svc.Name] = q
	}
	now := d.now()
	doomed := map[string][]string{} // service → ids to delete
	var resent, expired, orphaned int
	for _, e := range stored {
		q := queues[e.Service]
		switch {
		case q == nil:
			orphaned++
			d.log.Warn("stored notification dropped: its notify service is no longer configured",
				"service", e.Service, "id", e.ID, "device", e.Device, "op_id", e.OpID, "queued_at", e.QueuedAt)
			doomed[e.Service] = append(doomed[e.Service], e.ID)
		case !now.Before(e.Deadline):
			expired++
			q.failed.Add(1)
			q.expired.Add(1)
			d.log.Error("notification not delivered", "service", e.Service, "id", e.ID, "device", e.Device, "op_id", e.OpID,
				"reason", notifyExpired, "attempts", 0, "queued_at", e.QueuedAt, "deadline", e.Deadline, "stored_before_restart", true)
			doomed[e.Service] = append(doomed[e.Service], e.ID)
		default:
			resent++
			d.queueNotification(q, &notification{id: e.ID, stored: true, payload: e.Payload, device: e.Device, opID: e.OpID,
				queuedAt: e.QueuedAt, deadline: e.Deadline})
		}
	}
	for service, ids := range doomed {
		if err := d.notifyOutbox.DeleteNotifications(service, ids...); err != nil {
			d.log.Warn("stored notifications not deleted: they are read again at the next start", "service", service, "count", len(ids), "err", err)
		}
	}
	d.log.Info("notifications stored before the restart", "queued_again", resent, "expired", expired, "service_gone", orphaned)
}

// stoppingNote says, in a log line at shutdown, what becomes of a
// notification not yet delivered.
func (d *Dispatcher) stoppingNote() string {
	if d.notifyOutbox == nil {
		return "stopping: notification dropped undelivered (notifications are not stored)"
	}
	return "stopping: notification not delivered yet; it stays stored and is sent after the restart"
}

// runNotifier delivers q's notifications one at a time, oldest first,
// until ctx is done, deleting each from the outbox once it ends. What is
// still queued then stays in the outbox, for the next start; without an
// outbox it is lost.
func (d *Dispatcher) runNotifier(ctx context.Context, q *notifyQueue) {
	for {
		n, ok := q.next(ctx)
		if !ok {
			if left := q.len(); left > 0 {
				if d.notifyOutbox == nil {
					d.log.Warn("stopping: queued notifications are dropped (notifications are not stored)", "service", q.svc.Name, "count", left)
				} else {
					d.log.Info("stopping: queued notifications stay stored and are sent after the restart", "service", q.svc.Name, "count", left)
				}
			}
			return
		}
		if d.deliver(ctx, q, n) {
			d.forgetNotification(q, n)
		}
	}
}

// deliver sends n to q's service through its breaker and retry policy, as
// a device's attempts go: admit through the breaker (failing fast while it
// is open, or waiting for it with Hold), send within the attempt timeout,
// report the outcome to the breaker, and on a failure ask the policy
// (which honours Retry-After, permanent errors, max attempts, the retry
// budget and n's deadline) whether and when to try again, waiting on the
// injected clock. It returns true when n is delivered or given up
// (logged at ERROR), false when ctx is done first.
func (d *Dispatcher) deliver(ctx context.Context, q *notifyQueue, n *notification) (ended bool) {
	s := q.svc
	p := s.Policy
	retryBy := p.DeadlineFor(n.queuedAt, n.deadline)
	log := d.log.With("service", s.Name, "id", n.id, "device", n.device, "op_id", n.opID)
	var (
		attempts int
		last     error
		delay    time.Duration
	)
	fail := func(reason string, class retry.Class) {
		q.failed.Add(1)
		if reason == notifyExpired {
			q.expired.Add(1)
		}
		log.Error("notification not delivered", "reason", reason, "class", class, "attempts", attempts, "queued_at", n.queuedAt, "err", last)
	}
	for {
		if attempts > 0 {
			dec := p.Next(retry.Failure{Attempt: attempts, Err: last, Delay: delay, Now: d.now(), Deadline: retryBy}, d.rand, s.Budget)
			if !dec.Retry {
				if dec.Reason == retry.GiveUpCanceled {
					log.Warn(d.stoppingNote(), "attempts", attempts)
					return false
				}
				fail(string(dec.Reason), dec.Class)
				return true
			}
			delay = dec.Wait
			if dec.RetryAfter {
				d.retryAfter(s.Name, delay)
			}
			log.Info("notification retry", "attempt", attempts+1, "delay", delay, "class", dec.Class, "retry_after", dec.RetryAfter)
			if !d.sleepFor(ctx, delay) {
				log.Warn(d.stoppingNote(), "attempts", attempts)
				return false
			}
		}
		if !d.now().Before(n.deadline) {
			fail(notifyExpired, retry.Classify(last))
			return true
		}
		permit, err := d.admitNotification(ctx, s, n.deadline)
		switch {
		case ctx.Err() != nil:
			log.Warn(d.stoppingNote(), "attempts", attempts)
			return false
		case errors.Is(err, breaker.ErrOpen):
			last = err
			fail(notifyBreakerOpen, "")
			return true
		case err != nil: // held until the deadline
			last = err
			fail(notifyExpired, "")
			return true
		}
		timeout := p.AttemptTimeout
		if permit.Probe() {
			// A probe has no outcome after its deadline.
			timeout = min(timeout, permit.Deadline().Sub(d.now()))
		}
		sentAt := d.now()
		sendCtx, cancel := context.WithTimeout(ctx, timeout)
		err = s.Notifier.Notify(sendCtx, n.payload)
		cancel()
		attempts++
		if attempts == 1 {
			s.Budget.FirstAttempt(sentAt)
		}
		d.releaseNotification(s, permit, notifyOutcome(err))
		outcome := "delivered"
		if err != nil {
			outcome = "failed"
		}
		log.Info("notification attempt", "attempt", attempts, "max_attempts", p.MaxAttempts, "delay", delay,
			"probe", permit.Probe(), "outcome", outcome, "class", retry.Classify(err), "err", err)
		if err == nil {
			q.delivered.Add(1)
			return true
		}
		last = err
	}
}

// errHeldTooLong says a held notification's deadline passed while its
// service's breaker stayed open.
var errHeldTooLong = errors.New("the circuit breaker stayed open until the notification's deadline")

// admitNotification asks s's breaker for a permit (nil without a
// breaker). While the breaker is open it returns the *breaker.OpenError
// at once or, when s holds, waits until the breaker lets it through
// before deadline (errHeldTooLong after) or ctx is done (ctx's error).
func (d *Dispatcher) admitNotification(ctx context.Context, s *Service, deadline time.Time) (*breaker.Permit, error) {
	b := s.breaker
	if b == nil {
		return nil, nil
	}
	for {
		changed := b.watch()
		now := d.now()
		p, err := b.Allow(now)
		if err == nil {
			if p.Probe() {
				b.signal() // the clock goroutine must watch the probe's deadline
			}
			if !now.Before(deadline) {
				// Let through as the hold's timer fired: too late.
				d.releaseNotification(s, p, breaker.Canceled)
				return nil, errHeldTooLong
			}
			return p, nil
		}
		if !s.Hold {
			return nil, err
		}
		if !now.Before(deadline) {
			return nil, errHeldTooLong
		}
		timer := d.clock.NewTimer(deadline.Sub(now))
		select {
		case <-changed:
		case <-timer.Chan():
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		}
		timer.Stop()
	}
}

// releaseNotification reports the outcome of p (nil without a breaker); a
// probe's end frees a place, so waiters are woken.
func (d *Dispatcher) releaseNotification(s *Service, p *breaker.Permit, o breaker.Outcome) {
	if p == nil {
		return
	}
	p.Done(o, d.now())
	if p.Probe() {
		s.breaker.signal()
	}
}

// notifyOutcome is how a send's end counts for the breaker: delivered is
// a success; Hearth's own cancellation (shutting down) neither way; a
// permanent error (401, 404: the request, not the service's health) or a
// status that is no failure (a 3xx) is ignored; anything else (timeouts,
// refused connections, 429, 5xx) is a failure.
func notifyOutcome(err error) breaker.Outcome {
	if err == nil {
		return breaker.Success
	}
	switch c := retry.Classify(err); {
	case c == retry.Canceled:
		return breaker.Canceled
	case c.Permanent() || !c.Transient():
		return breaker.Ignored
	}
	return breaker.Failure
}

// sleepFor waits d on the injected clock; false if ctx ended first.
func (d *Dispatcher) sleepFor(ctx context.Context, wait time.Duration) bool {
	if wait <= 0 {
		return ctx.Err() == nil
	}
	timer := d.clock.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.Chan():
		return true
	case <-ctx.Done():
		return false
	}
}

// NotifyStatus returns the counts of every notify service, in Options
// order; nil when there is none.
func (d *Dispatcher) NotifyStatus() []NotifyStatus {
	var out []NotifyStatus
	for _, q := range d.notifiers {
		out = append(out, NotifyStatus{
			Service: q.svc.Name, Queued: q.len(),
			Delivered: q.delivered.Load(), Failed: q.failed.Load(), Dropped: q.dropped.Load(), Expired: q.expired.Load(),
		})
	}
	return out
}
