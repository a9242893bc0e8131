// Package dispatcher turns accepted commands into observed device state.
//
// Data flows one way: intake → validate → store → per-device queue →
// attempt → confirm → result. The dispatcher owns every step after the raw
// message arrives: it validates the payload for the device's class, stores
// the command (group-committed) before it says "accepted", keeps one
// ordered queue per device in which a newer command supersedes an older one
// for the same attributes, spaces a few attempts with full-jitter backoff
// inside the command's TTL, and declares success only when a report that
// arrived after the send shows the target.
//
// The rules of each device's commands — the queue, supersede, the awake
// lease of a sleepy device, the retry loop of an attempt — are a pure
// state machine per device (package machine); the dispatcher is its
// runner: it turns bridge callbacks, timers and store completions into the
// machine's inputs and carries out what the machine decides (store, send,
// read, publish). It declares the small interfaces it consumes (ports.go:
// Journal, Bridge, Authorizer, …; publish.Publisher for its own messages)
// and never imports a concrete store, protocol or broker. Time and randomness are injected, so every TTL,
// timeout and backoff path is tested exactly with a fake clock.
package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/oklog/ulid/v2"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/notify"
	"github.com/hearthd/hearth/publish"
	"github.com/hearthd/hearth/retry"
	"github.com/hearthd/hearth/service"
)

// Service is one bridge and how to attempt commands through it.
type Service struct {
	Name string
	// Bridge sends the service's commands. It is nil for a service Hearth
	// only watches (a cloud service that automations depend on): such a
	// service has a Breaker, driven by BridgeState, and no devices.
	Bridge Bridge
	// Notifier, set instead of Bridge, makes the service a notify service
	// (an HTTP webhook): every Notify is delivered to it too, through its
	// Policy (with AttemptTimeout bounding one send), Budget and Breaker,
	// as commands are (package notify). It has no devices.
	Notifier notify.Notifier
	// NotifyQueue bounds a notify service's waiting notifications; 0
	// means notify.DefaultQueue. Past it the oldest is dropped.
	NotifyQueue int
	// Policy is how commands through the service are retried: at least 1
	// attempt, and a positive AttemptTimeout, how long one attempt waits
	// for a confirming report (from the broker's acknowledgement of the
	// send).
	Policy retry.Policy
	// Budget limits the service's retries; nil allows every retry the
	// policy does.
	Budget *retry.Budget

	// Breaker, if not nil, is the service's circuit breaker; New builds
	// it. Its OnStateChange runs before the dispatcher publishes the new
	// state.
	Breaker *breaker.Options
	// ReadTimeout is how long the fresh read before a risky attempt
	// waits for a report; 0 means DefaultReadTimeout.
	ReadTimeout time.Duration
	// Hold makes commands wait, reported queued, while the breaker is
	// open, instead of ending failed/breaker_open at once.
	Hold bool
	// Direct says the Bridge reaches its devices without Hearth's MQTT
	// connection (an HTTP service, protocols/httpdev): its link is always
	// up, whatever the MQTT session does, and no bridge state is awaited.
	Direct bool

	link    *service.Link                  // set by New
	breaker *service.Breaker               // set by New when Breaker is set
	silence *service.Silence[*deviceQueue] // set by New when Breaker is set
	bound   time.Duration                  // one Send or Read's bound (requestBound); set by New
}

// Device is a device the dispatcher commands.
type Device struct {
	devices.Device
	// TTL is the default TTL of the device's commands.
	TTL time.Duration
	// AttemptTimeout, when positive, is how long one attempt at the
	// device waits for its confirming report, in place of its service's
	// Policy.AttemptTimeout: a cover's travel, a lock's motor (config
	// resolves the device's key, its class's default and the service's).
	// 0 means the service's. The command's TTL still bounds every wait.
	AttemptTimeout time.Duration
	// ReadBack makes an attempt that went unconfirmed read the device's
	// state (the bridge's Read: a /get for Zigbee2MQTT) before the retry
	// policy decides on a resend: the target ends the command succeeded
	// with nothing resent. For a device, or a bridge, that does not
	// report after a set. The read is bounded by the read timeout, the
	// policy's deadline and the TTL, and costs no attempt. Always-listening
	// devices only; a sleepy device's delivery reads back already.
	ReadBack bool
}

// policy returns the retry policy of q's commands: its service's, with
// the device's attempt timeout when it has one.
func (q *deviceQueue) policy() retry.Policy {
	p := q.svc.Policy
	if q.dev.AttemptTimeout > 0 {
		p.AttemptTimeout = q.dev.AttemptTimeout
	}
	return p
}

// Options configures a Dispatcher. Zero values take the documented defaults.
type Options struct {
	// Prefix is the topic prefix of results and mirrored state; "" means
	// "hearth".
	Prefix   string
	Services []Service
	Devices  []Device
	// Journal stores commands; a failed write is logged at WARN per
	// call (with its op_id): the outage itself is the owner's to log at
	// ERROR once and to notify (hearthd follows the store's commits).
	Journal   Journal
	Publisher publish.Publisher
	// Clock is the time source of every TTL, timeout and backoff; nil
	// means the real clock.
	Clock clockwork.Clock
	// Rand draws backoff jitter; nil means a randomly seeded source.
	Rand   retry.Rand
	Logger *slog.Logger
	// IntakeQueue bounds the commands waiting to be stored; 0 means 4096.
	// Submit blocks while it is full.
	IntakeQueue int
	// OnBreakerChange, if set, is called at every transition of every
	// service's breaker, before the new state is published. It runs on
	// whichever goroutine caused the transition and must not block.
	OnBreakerChange func(BreakerChange)
	// OnResult, if set, is called with every result the dispatcher
	// publishes on <prefix>/<device>/result (accepted, queued, terminal,
	// rejections and repeats), when it is queued for publishing: a
	// terminal result's op is stored by then (unless storing failed,
	// which is logged). It runs on whichever goroutine produced the
	// result and must not block.
	OnResult func(devices.Result)
	// OnEnd, if set, is called once for every command that ends, just
	// before its terminal result is published (a metric read by whoever
	// heard the result counts the end already): succeeded, failed, expired,
	// superseded, or rejected at the intake (a rejection of each request,
	// a repeat of a rejected op_id included). Never for a repeat of a
	// stored result, nor for the results republished at Run. It runs on
	// whichever goroutine ended the command and must not block.
	OnEnd func(End)
	// OnAttempt, if set, is called with every attempt that left Hearth
	// (the bridge took it, or refused it), as it was sent; not for one
	// taken back because the connection was down. It runs on the
	// device's worker and must not block.
	OnAttempt func(Attempt)
	// OnRetryAfter, if set, is called with each wait a service asked for
	// with a Retry-After that the retry policy honours, before the wait,
	// for a command's attempts or a notification's. It runs on the
	// waiting goroutine and must not block.
	OnRetryAfter func(service string, wait time.Duration)
	// OnState, if set, is called with a device's state each time the
	// dispatcher mirrors it on <prefix>/<device> (a report, retained or
	// live, merged into what was known), after it is queued for
	// publishing, and before the result of a command the report
	// confirms is published (it is called under the device's lock). It
	// runs on the reporting goroutine, must not block and must not call
	// the dispatcher.
	OnState func(device string, state map[string]any)
	// OnAvailability, if set, is called with each availability of a
	// device its bridge reports, as the dispatcher mirrors it on
	// <prefix>/<device>/availability. It runs on the reporting goroutine
	// and must not block.
	OnAvailability func(device string, online bool)
	// OnFreshRead, if set, is called with each device just before its
	// fresh read after the start is sent (see FreshReadBurst), and before
	// a live report may count as its answer (OnFreshState). It runs on
	// the reading goroutine and must not block.
	OnFreshRead func(devices.Device)
	// OnFreshState, if set, is called with a device when the first live
	// report after its fresh read arrives (the answer, or any report
	// that came first). It runs on the reporting goroutine and must not
	// block.
	OnFreshState func(devices.Device)
	// Authorizer, if set, decides which principal may command what; nil
	// lets everyone command everything (no principals configured).
	Authorizer Authorizer
	// Audit, if set, receives the audit trail of every safety-critical
	// command (devices.AuditEntry).
	Audit AuditLog
	// DeadLetters, if set, receives every command that ended expired or
	// failed, and every command to a sleepy device superseded before it
	// was sent.
	DeadLetters DeadLetters
	// RepublishRate is how many retained mirrors (a device's state or
	// availability) per second are published again after each
	// (re)connect; 0 means DefaultRepublishRate.
	RepublishRate int
	// NotifyTTL is how long a notification stays worth delivering to a
	// notify service, queued time included; 0 means notify.DefaultTTL.
	NotifyTTL time.Duration
	// NotifyOutbox, if set, stores every notification for a notify
	// service before it is queued, until it is delivered, given up,
	// expired or dropped; Run queues again, in their order, those stored
	// before the restart (package notify). nil: the queues are in memory
	// only, and what they hold when Hearth stops is lost.
	NotifyOutbox notify.Outbox
	// LostDedup, if its At is set, says the journal lost its record of
	// op_ids at At (hearthd: the store was quarantined then), so a command
	// sent before At may have run under an op_id the journal no longer
	// knows. Until LostDedup.Until, a command whose issued_at is before At
	// is rejected stale_command; a command without issued_at is taken, as
	// its age is unknown.
	LostDedup LostDedup
}

// LostDedup is the window in which the journal cannot tell a repeated
// op_id from a new one (Options.LostDedup).
type LostDedup struct {
	// At is when the op_ids were lost; commands issued before it are the
	// ones refused.
	At time.Time
	// Until is when the refusal ends: At plus the time ended commands'
	// op_ids are kept for (hearthd's dedup window), after which the lost
	// records would have been pruned anyway.
	Until time.Time
}

// DefaultReadTimeout is how long the fresh read before every attempt at a
// risky action (unlock, open a garage door) waits for the device's report
// when Service.ReadTimeout is 0: a few seconds, enough for a Zigbee read
// of a mains-powered or polled lock. With no report by then the command
// fails with reason state_unknown and nothing is sent.
const DefaultReadTimeout = 5 * time.Second

// Request is a raw command as it arrived, before validation.
type Request struct {
	// Device is the <device> topic level or URL segment.
	Device string
	// Payload is the command body as sent.
	Payload []byte
	// Retained is the MQTT retain flag: a retained command is a replay and
	// is refused.
	Retained bool
	// Principal is who sent it, as the transport authenticated them (the
	// embedded broker's MQTT username, an HTTP bearer token's principal);
	// "" when unauthenticated.
	Principal string
	// Backlog says the transport delivered it from a backlog kept while
	// Hearth was away (an external broker's MQTT session: mqtt.Message's
	// Backlog), so its arrival says nothing of when it was sent. A risky
	// action (devices.Risky) from the backlog without issued_at is refused
	// (stale_command); with issued_at its TTL decides, as always.
	Backlog bool
	// Done, if set, is called once with the first result: accepted (the
	// command is stored), rejected, or, for a known op_id, the stored one.
	Done func(devices.Result)
}

// Dispatcher runs commands. Create it with New and start it with Run.
type Dispatcher struct {
	prefix    string
	journal   Journal
	authz     Authorizer  // nil: everyone may command everything
	auditLog  AuditLog    // nil: no audit trail kept
	dead      DeadLetters // nil: no dead-letter store
	onBreaker func(BreakerChange)
	onResult  func(devices.Result)
	// onEnd, onAttempt and onRetryAfter: Options.OnEnd, OnAttempt and
	// OnRetryAfter, or nil.
	onEnd        func(End)
	onAttempt    func(Attempt)
	onRetryAfter func(string, time.Duration)
	// onState and onAvailability: Options.OnState and OnAvailability, or
	// nil.
	onState        func(string, map[string]any)
	onAvailability func(string, bool)
	// onFreshRead and onFreshState are Options.OnFreshRead and
	// OnFreshState, or nil.
	onFreshRead, onFreshState func(devices.Device)
	clock                     clockwork.Clock
	log                       *slog.Logger
	rand                      retry.Rand // safe for concurrent use
	lostDedup                 LostDedup

	devices map[string]*deviceQueue
	// deviceIDs lists the devices in Options order.
	deviceIDs []string
	services  map[string]*Service
	// serviceNames lists the services in Options order.
	serviceNames []string
	intake       chan Request
	out          *publish.Outbox
	saver        *stateSaver

	connMu sync.Mutex
	conn   chan struct{} // closed at the next Reconnected, then replaced
	lost   chan struct{} // closed at the next Disconnected, then replaced

	republishRate int
	sweep         chan struct{} // a republish sweep is wanted

	stopped chan struct{} // closed when Run stops taking commands

	// workCtx is Run's context, set before it resumes anything; workers
	// are the device workers it started (see startWorkerLocked). Both
	// are used only from Run's goroutine, except workers.Done.
	workCtx context.Context
	workers sync.WaitGroup

	notes *notify.Queues // the notify services' queues and workers
}

// New checks the options and returns a dispatcher that does nothing until
// Run.
func New(opts Options) (*Dispatcher, error) {
	if opts.Journal == nil || opts.Publisher == nil {
		return nil, errors.New("dispatcher: Journal and Publisher are required")
	}
	d := &Dispatcher{
		prefix:   opts.Prefix,
		journal:  opts.Journal,
		clock:    opts.Clock,
		log:      opts.Logger,
		rand:     opts.Rand,
		devices:  make(map[string]*deviceQueue, len(opts.Devices)),
		services: make(map[string]*Service, len(opts.Services)),
		conn:     make(chan struct{}),
		lost:     make(chan struct{}),
		stopped:  make(chan struct{}),
	}
	if d.prefix == "" {
		d.prefix = "hearth"
	}
	d.onBreaker = opts.OnBreakerChange
	d.authz, d.auditLog, d.dead = opts.Authorizer, opts.Audit, opts.DeadLetters
	d.onResult = opts.OnResult
	d.onEnd, d.onAttempt, d.onRetryAfter = opts.OnEnd, opts.OnAttempt, opts.OnRetryAfter
	d.onState, d.onAvailability = opts.OnState, opts.OnAvailability
	d.onFreshRead, d.onFreshState = opts.OnFreshRead, opts.OnFreshState
	d.lostDedup = opts.LostDedup
	d.republishRate = opts.RepublishRate
	if d.republishRate <= 0 {
		d.republishRate = DefaultRepublishRate
	}
	d.sweep = make(chan struct{}, 1)
	if d.clock == nil {
		d.clock = clockwork.NewRealClock()
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.rand == nil {
		d.rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	d.rand = &lockedRand{r: d.rand}
	n := opts.IntakeQueue
	if n <= 0 {
		n = 4096
	}
	d.intake = make(chan Request, n)
	var notifiers []notify.Service
	for i := range opts.Services {
		s := opts.Services[i]
		switch {
		case s.Bridge == nil && s.Notifier == nil && s.Breaker == nil:
			return nil, fmt.Errorf("dispatcher: service %q has neither a bridge, a notifier nor a breaker", s.Name)
		case s.Bridge != nil && s.Notifier != nil:
			return nil, fmt.Errorf("dispatcher: service %q has both a bridge and a notifier; a notify service takes no commands", s.Name)
		case s.Bridge == nil && s.Notifier == nil:
			// Watched only: no commands, no policy.
		case s.Policy.MaxAttempts < 1:
			return nil, fmt.Errorf("dispatcher: service %q: max attempts %d < 1", s.Name, s.Policy.MaxAttempts)
		case s.Policy.AttemptTimeout <= 0:
			return nil, fmt.Errorf("dispatcher: service %q: attempt timeout must be positive", s.Name)
		}
		s.link = service.NewLink(d.now())
		if s.Direct {
			s.link.Set(true, d.now())
		}
		svc := &s
		svc.bound = requestBound(s.Bridge)
		if s.Breaker != nil {
			svc.breaker = d.newBreaker(svc)
			svc.silence = &service.Silence[*deviceQueue]{}
		}
		d.services[s.Name] = svc
		d.serviceNames = append(d.serviceNames, s.Name)
		if svc.Notifier != nil {
			notifiers = append(notifiers, notifyService(svc))
		}
	}
	for _, dev := range opts.Devices {
		svc, ok := d.services[dev.Service]
		if !ok {
			return nil, fmt.Errorf("dispatcher: device %q names unknown service %q", dev.ID, dev.Service)
		}
		if svc.Notifier != nil {
			return nil, fmt.Errorf("dispatcher: device %q names service %q, a notify service (it takes no commands)", dev.ID, dev.Service)
		}
		if svc.Bridge == nil {
			return nil, fmt.Errorf("dispatcher: device %q names service %q, which is watched only (it has no bridge)", dev.ID, dev.Service)
		}
		if dev.TTL <= 0 {
			return nil, fmt.Errorf("dispatcher: device %q: TTL must be positive", dev.ID)
		}
		if dev.AttemptTimeout < 0 {
			return nil, fmt.Errorf("dispatcher: device %q: attempt timeout %s is negative", dev.ID, dev.AttemptTimeout)
		}
		q := newDeviceQueue(d, dev, svc)
		d.devices[dev.ID] = q
		d.deviceIDs = append(d.deviceIDs, dev.ID)
		if svc.silence != nil && witnessClass(dev.Class) && !dev.Sleep.Sleepy {
			svc.silence.AddWitness(q)
		}
	}
	d.notes = notify.New(notify.Options{
		Services: notifiers, TTL: opts.NotifyTTL, Outbox: opts.NotifyOutbox,
		Clock: d.clock, Rand: d.rand, Logger: d.log, OnRetryAfter: d.onRetryAfter,
	})
	d.out = publish.New(d.prefix, opts.Publisher, d.log)
	d.saver = newStateSaver(opts.Journal, d.log)
	return d, nil
}

// Run resumes the stored pending commands, then takes commands until ctx
// is cancelled. It returns once every goroutine it started has stopped;
// commands still pending stay stored and resume at the next Run.
func (d *Dispatcher) Run(ctx context.Context) error {
	pending, err := d.journal.Pending()
	if err != nil {
		return fmt.Errorf("dispatcher: read pending commands: %w", err)
	}
	var wg sync.WaitGroup
	// The outbox outlives the intake and the workers, so that every result
	// they produce, up to the last, is published (or held in the drain).
	outCtx, stopOut := context.WithCancel(context.WithoutCancel(ctx))
	outDone := make(chan struct{})
	go func() { defer close(outDone); d.out.Run(outCtx) }()
	wg.Go(func() { d.saver.run(ctx) })
	wg.Go(func() { d.republisher(ctx) })
	wg.Go(func() { d.freshReads(ctx) })
	for _, s := range d.services {
		if s.breaker != nil {
			wg.Go(func() { d.runBreakerClock(ctx, s) })
		}
	}
	// The stored notifications are queued before any new one.
	d.notes.Restore()
	wg.Go(func() { d.notes.Run(ctx) })
	d.republishEnded()
	// A device's worker runs only while it has commands: resume and the
	// intake start it.
	d.workCtx = ctx
	d.resume(pending)
	d.runIntake(ctx)
	close(d.stopped)
	wg.Wait()
	d.workers.Wait()
	d.notes.Close()
	stopOut()
	<-outDone
	return nil
}

// republishEnded queues again, in the outbox, the results of the ops that
// ended within RepublishWindow before the last end stored (see
// EndedJournal), ahead of the resumed and new commands' results, so that
// a device's results keep their order. They may have been published
// before the restart: a subscriber may see such a result twice, with the
// same op_id, status and at. OnResult is not called for them. A Journal
// that cannot list its ends republishes nothing; a read that fails is
// logged, and Hearth starts all the same.
func (d *Dispatcher) republishEnded() {
	j, ok := d.journal.(EndedJournal)
	if !ok {
		return
	}
	ops, err := j.LastEnded(RepublishWindow, RepublishMax)
	if err != nil {
		d.log.Error("results of the last commands before the restart not republished", "err", err)
		return
	}
	for _, op := range ops {
		d.out.Push(d.topic(op.Device, "result"), op.Result(), false)
	}
	if len(ops) > 0 {
		d.log.Info("republishing the results of the last commands before the restart", "results", len(ops), "window", RepublishWindow)
	}
}

// ErrStopped is returned by Submit once the dispatcher has stopped taking
// commands: the command was not accepted.
var ErrStopped = errors.New("dispatcher: stopped")

// Submit hands a raw command to the intake. It blocks only while the
// intake queue is full (backpressure), until ctx is done, or until the
// dispatcher stops (ErrStopped): a caller is never stranded by shutdown.
func (d *Dispatcher) Submit(ctx context.Context, req Request) error {
	select {
	case <-d.stopped:
		return ErrStopped
	default:
	}
	select {
	case d.intake <- req:
		return nil
	case <-d.stopped:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (d *Dispatcher) now() time.Time { return d.clock.Now() }

// lockedRand shares one random source among the device workers.
type lockedRand struct {
	mu sync.Mutex
	r  retry.Rand
}

func (l *lockedRand) Int64N(n int64) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Int64N(n)
}

func (d *Dispatcher) newOpID() string {
	return ulid.MustNew(ulid.Timestamp(d.now()), ulid.DefaultEntropy()).String()
}

func (d *Dispatcher) topic(device, suffix string) string {
	if suffix == "" {
		return d.prefix + "/" + device
	}
	return d.prefix + "/" + device + "/" + suffix
}

// publishResult queues r for hearth/<device>/result and hands it to
// OnResult.
func (d *Dispatcher) publishResult(r devices.Result) {
	d.out.Push(d.topic(r.Device, "result"), r, false)
	if d.onResult != nil {
		d.onResult(r)
	}
}

// signal wakes the one waiting on ch, buffered 1, without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
