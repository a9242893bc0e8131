// Package notify delivers notifications, messages for people, to the
// notify services (HTTP webhooks such as ntfy, Gotify or Home Assistant):
// one FIFO queue and one worker per service, each notification through
// the service's retry policy, retry budget and circuit breaker, within a
// TTL, and, with an Outbox, stored before it is queued so that what is
// waiting when Hearth stops is sent after the restart.
//
// It owns no broker and no store: the dispatcher publishes the same
// notification on <prefix>/notifications and hands it here (Enqueue);
// the store is behind Outbox, the breaker behind Gate.
package notify

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
)

// Notification is a message for people: the payload of
// <prefix>/notifications, published at QoS 1, never retained, and what
// every notify service is sent, as JSON.
type Notification struct {
	// ID identifies the notification (a ULID; the dispatcher's Notify
	// draws it when empty): the same in every copy of it, on
	// <prefix>/notifications and to every notify service, and when a
	// stored one is sent again after a restart (it may have been
	// delivered just before the crash), so that a receiver can drop a
	// repeat.
	ID      string `json:"id"`
	Title   string `json:"title"`
	Message string `json:"message"`
	// Severity is "info", "warning" or "critical".
	Severity string `json:"severity"`
	// Source says who speaks: "dispatcher", "store" (hearthd, when the
	// store's commits fail), or "automation:<rule>".
	Source string `json:"source"`
	// Device and OpID name the command a notification is about, if any.
	Device string `json:"device,omitempty"`
	OpID   string `json:"op_id,omitempty"`
	// Principal is who sent that command, if known; Reason is the
	// command's reason code (jammed, state_unknown, unauthorized, …).
	Principal string    `json:"principal,omitempty"`
	Reason    string    `json:"reason,omitempty"`
	At        time.Time `json:"at"`
}

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

// Outbox keeps the notify services' outbox durably (the store's
// notifications bucket; *store.Store is one): every notification is
// saved, one entry per notify service, before it is queued for sending,
// and deleted once it is delivered, given up, expired or dropped from a
// full queue, so that Restore can queue again what was waiting when
// Hearth stopped.
type Outbox interface {
	// SaveNotifications stores ns durably (synced), in order, together
	// or not at all; an entry stored already is left as it is.
	SaveNotifications(ns ...devices.OutboxNotification) error
	// DeleteNotifications removes service's entries of ids durably; an
	// id not stored is no error.
	DeleteNotifications(service string, ids ...string) error
	// Notifications returns every stored entry in the order stored.
	Notifications() ([]devices.OutboxNotification, error)
}

// Gate is a notify service's circuit breaker as delivery uses it (the
// dispatcher's breaker of the service).
type Gate interface {
	// Allow admits one send at now, or returns the *breaker.OpenError
	// while the breaker is open.
	Allow(now time.Time) (*breaker.Permit, error)
	// Watch returns a channel closed at the breaker's next transition,
	// or when a probe is admitted or its place freed.
	Watch() <-chan struct{}
	// Signal wakes the watchers: a probe was admitted or its place
	// freed.
	Signal()
}

// DefaultTTL is how long a notification stays worth delivering to a
// notify service when Options.TTL is 0: 10 minutes, long enough to ride
// out a short outage of the service, short enough that a person is not
// told of a door left unlocked an hour ago as if it were news. Waiting
// in the queue counts against it.
const DefaultTTL = 10 * time.Minute

// DefaultQueue bounds the notifications waiting for one notify service
// when Service.Queue is 0. Past it the oldest is dropped, so that a storm
// of notifications cannot eat the hub's memory.
const DefaultQueue = 1000

// The reasons a notification is not delivered besides retry.GiveUp's:
// its TTL passed (queued or held too long), or the service's breaker was
// open and the service does not hold.
const (
	reasonExpired     = string(devices.ReasonTTLElapsed)
	reasonBreakerOpen = string(devices.ReasonBreakerOpen)
)

// Status counts what happened to the notifications of one notify
// service since Hearth started.
type Status struct {
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

// Service is one notify service and how to deliver to it.
type Service struct {
	Name     string
	Notifier Notifier
	// Policy is how a notification is retried: at least 1 attempt, and a
	// positive AttemptTimeout, which bounds one send.
	Policy retry.Policy
	// Budget limits the service's retries; nil allows every retry the
	// policy does.
	Budget *retry.Budget
	// Gate is the service's circuit breaker; nil for none.
	Gate Gate
	// Hold makes a notification wait, within its TTL, while Gate is
	// open, instead of failing at once.
	Hold bool
	// Queue bounds the notifications waiting; 0 means DefaultQueue. Past
	// it the oldest is dropped.
	Queue int
}

// Options configure Queues.
type Options struct {
	// Services are the notify services, in the order Status lists them.
	Services []Service
	// TTL is how long a notification stays worth delivering, queued time
	// included; 0 means DefaultTTL.
	TTL time.Duration
	// Outbox, if set, stores every notification before it is queued,
	// until it is delivered, given up, expired or dropped; Restore
	// queues again, in their order, those stored before the restart.
	// nil: the queues are in memory only, and what they hold when
	// Hearth stops is lost.
	Outbox Outbox
	// Clock times TTLs, retries and holds; nil means the real clock.
	Clock clockwork.Clock
	// Rand draws the retries' full jitter; it must be safe for
	// concurrent use (one worker per service draws from it). nil means
	// math/rand/v2's global source.
	Rand retry.Rand
	// Logger logs every attempt and every notification not delivered;
	// nil discards.
	Logger *slog.Logger
	// OnRetryAfter, if set, is told each wait a service asked for with a
	// Retry-After (metrics).
	OnRetryAfter func(service string, wait time.Duration)
}

// Queues are the notify services' queues and their workers. Enqueue
// never blocks; Run delivers.
type Queues struct {
	queues       []*queue // one per service, in Options order
	ttl          time.Duration
	outbox       Outbox
	clock        clockwork.Clock
	rand         retry.Rand
	log          *slog.Logger
	onRetryAfter func(string, time.Duration)
	saver        saver // the notifications waiting to be stored in outbox
}

// New returns the queues of opts.Services, which deliver nothing until
// Run.
func New(opts Options) *Queues {
	qs := &Queues{ttl: opts.TTL, outbox: opts.Outbox, clock: opts.Clock, rand: opts.Rand, log: opts.Logger, onRetryAfter: opts.OnRetryAfter}
	qs.saver.wake = make(chan struct{}, 1)
	if qs.ttl <= 0 {
		qs.ttl = DefaultTTL
	}
	if qs.clock == nil {
		qs.clock = clockwork.NewRealClock()
	}
	if qs.log == nil {
		qs.log = slog.New(slog.DiscardHandler)
	}
	if qs.rand == nil {
		qs.rand = globalRand{}
	}
	for _, s := range opts.Services {
		qs.queues = append(qs.queues, newQueue(s))
	}
	return qs
}

// Enqueue hands payload, n as JSON, to every notify service's queue: at
// once without an Outbox, and through the saver (Run), which stores it
// first, with one. It never blocks: it may be called from the store's
// own writer, when commits fail.
func (qs *Queues) Enqueue(n Notification, payload []byte) {
	if len(qs.queues) == 0 {
		return
	}
	now := qs.clock.Now()
	batch := make([]*notification, len(qs.queues))
	for i := range qs.queues {
		batch[i] = &notification{id: n.ID, payload: payload, device: n.Device, opID: n.OpID, queuedAt: now, deadline: now.Add(qs.ttl)}
	}
	if qs.outbox == nil {
		for i, q := range qs.queues {
			qs.push(q, batch[i])
		}
		return
	}
	if !qs.saver.add(batch) {
		qs.log.Warn("notification raised after the dispatcher stopped: not stored, not sent", "id", n.ID, "device", n.Device, "op_id", n.OpID)
	}
}

// Status returns the counts of every notify service, in Options order;
// nil when there is none.
func (qs *Queues) Status() []Status {
	var out []Status
	for _, q := range qs.queues {
		out = append(out, Status{
			Service: q.svc.Name, Queued: q.len(),
			Delivered: q.delivered.Load(), Failed: q.failed.Load(), Dropped: q.dropped.Load(), Expired: q.expired.Load(),
		})
	}
	return out
}

// notification is one notification on its way to one notify service.
type notification struct {
	id       string // the Notification's ID, its outbox entry's key
	stored   bool   // its entry is in the Outbox
	payload  []byte
	device   string
	opID     string
	queuedAt time.Time
	deadline time.Time // queuedAt + the TTL
}

// queue is a notify service's FIFO of notifications waiting for its one
// worker (Queues.work), which delivers them one at a time, in order.
type queue struct {
	svc   Service
	limit int

	mu    sync.Mutex
	items []*notification // waiting; the one being delivered is not here
	wake  chan struct{}   // buffered 1: something was pushed

	delivered, failed, dropped, expired atomic.Uint64
}

func newQueue(s Service) *queue {
	limit := s.Queue
	if limit <= 0 {
		limit = DefaultQueue
	}
	return &queue{svc: s, limit: limit, wake: make(chan struct{}, 1)}
}

// push appends n, dropping the oldest waiting notification when limit
// are waiting already; it returns the dropped one, if any. It never
// blocks.
func (q *queue) push(n *notification) (dropped *notification) {
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
func (q *queue) next(ctx context.Context) (n *notification, ok bool) {
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
func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// push pushes n on q; the oldest one it drops from a full queue is
// logged and deleted from the outbox.
func (qs *Queues) push(q *queue, n *notification) {
	old := q.push(n)
	if old == nil {
		return
	}
	qs.log.Error("notify queue full: the oldest notification was dropped undelivered",
		"service", q.svc.Name, "id", old.id, "device", old.device, "op_id", old.opID, "queued_at", old.queuedAt, "limit", q.limit, "dropped_total", q.dropped.Load())
	qs.forget(q, old)
}

// signal wakes the one waiting on ch, buffered 1, without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// globalRand draws from math/rand/v2's global source, safe for the
// workers to share.
type globalRand struct{}

func (globalRand) Int64N(n int64) int64 { return rand.Int64N(n) }
