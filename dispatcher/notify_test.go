package dispatcher

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/notify"
	"github.com/hearthd/hearth/retry"
)

// notifyWait bounds every wait for something the dispatcher must do; a
// wait ends as soon as it happens.
const notifyWait = 5 * time.Second

var notifyT0 = time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)

// scriptedNotifier hands each call's payload to the test, which answers
// it: the service's side of the interface, with the HTTP left out (the
// end-to-end tests in cmd/hearthd use protocols/webhook and httptest).
type scriptedNotifier struct {
	calls   chan string
	replies chan error
}

func newScripted() *scriptedNotifier {
	return &scriptedNotifier{calls: make(chan string, 100), replies: make(chan error, 100)}
}

func (s *scriptedNotifier) Notify(ctx context.Context, payload []byte) error {
	s.calls <- string(payload)
	select {
	case err := <-s.replies:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// httpError is a response status as protocols/webhook returns it.
type httpError struct {
	code       int
	retryAfter string
}

func (e *httpError) Error() string           { return fmt.Sprintf("HTTP %d", e.code) }
func (e *httpError) StatusCode() int         { return e.code }
func (e *httpError) RetryAfterValue() string { return e.retryAfter }

// maxRand draws every full-jitter wait at its ceiling.
type maxRand struct{}

func (maxRand) Int64N(n int64) int64 { return n - 1 }

// notifyPolicy is the webhook default: 3 attempts, exponential full
// jitter base 2 s, cap 60 s.
var notifyPolicy = retry.Policy{
	MaxAttempts:    3,
	AttemptTimeout: 10 * time.Second,
	Backoff:        retry.Backoff{Base: 2 * time.Second, Multiplier: 2, Cap: time.Minute},
}

type notifyRig struct {
	t     *testing.T
	d     *Dispatcher
	clock *clockwork.FakeClock
	svc   *scriptedNotifier
}

// startNotify runs a dispatcher with one notify service "ntfy" whose
// notifier is scripted; svc adjusts the service.
func startNotify(t *testing.T, svc func(*Service)) *notifyRig {
	t.Helper()
	r := &notifyRig{t: t, clock: clockwork.NewFakeClockAt(notifyT0), svc: newScripted()}
	s := Service{Name: "ntfy", Notifier: r.svc, Policy: notifyPolicy}
	if svc != nil {
		svc(&s)
	}
	var err error
	r.d, err = New(Options{Services: []Service{s}, Journal: nopJournal{}, Publisher: nopPublisher{}, Clock: r.clock, Rand: maxRand{}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// call waits for the notifier's next call and returns its payload.
func (r *notifyRig) call() string {
	r.t.Helper()
	select {
	case p := <-r.svc.calls:
		return p
	case <-time.After(notifyWait):
		r.t.Fatal("timed out waiting for a notification to be sent")
		return ""
	}
}

// noCall fails if the notifier was called.
func (r *notifyRig) noCall() {
	r.t.Helper()
	select {
	case p := <-r.svc.calls:
		r.t.Fatalf("a notification was sent: %s", p)
	default:
	}
}

// advance waits until n goroutines wait on the clock, then moves it by d.
func (r *notifyRig) advance(n int, d time.Duration) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), notifyWait)
	defer cancel()
	if err := r.clock.BlockUntilContext(ctx, n); err != nil {
		r.t.Fatalf("%d waiters on the clock never came", n)
	}
	r.clock.Advance(d)
}

// eventually polls cond until it holds, failing after notifyWait.
func (r *notifyRig) eventually(what string, cond func() bool) {
	r.t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(notifyWait)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			r.t.Fatalf("timed out waiting for %s; status %+v", what, r.d.NotifyStatus())
		}
	}
}

func (r *notifyRig) status() notify.Status { return r.d.NotifyStatus()[0] }

var doorNote = notify.Notification{ID: "01JDOOR0000000000000000001", Title: "front_door: command not carried out", Message: "m", Severity: "critical", Source: "dispatcher", Device: "front_door", OpID: "op-1", Principal: "ha", Reason: "breaker_open"}

const doorJSON = `{"id":"01JDOOR0000000000000000001","title":"front_door: command not carried out","message":"m","severity":"critical","source":"dispatcher","device":"front_door","op_id":"op-1","principal":"ha","reason":"breaker_open","at":"2026-11-29T19:00:00Z"}`

// Notify hands every notify service the notification as JSON (its
// retries and queue are package notify's), and the delivery is counted.
func TestNotifySendsTheNotificationAsJSON(t *testing.T) {
	r := startNotify(t, nil)
	r.d.Notify(doorNote)
	if got := r.call(); got != doorJSON {
		t.Fatalf("payload\n%s\nwant\n%s", got, doorJSON)
	}
	r.svc.replies <- nil
	r.eventually("delivered", func() bool { return r.status().Delivered == 1 })
	if s := r.status(); s != (notify.Status{Service: "ntfy", Delivered: 1}) {
		t.Errorf("status %+v, want 1 delivered", s)
	}
}

// A service that keeps failing opens its breaker, and then notifications
// fail fast without a call: the service is not hammered. After open_for
// one probe goes out, and its success closes the breaker.
func TestNotifyBreakerFailsFast(t *testing.T) {
	r := startNotify(t, func(s *Service) {
		s.Policy.MaxAttempts = 1
		s.Breaker = &breaker.Options{FailureThreshold: 2, OpenFor: func(int) time.Duration { return 30 * time.Second }, ProbeTimeout: 10 * time.Second}
	})
	for range 2 {
		r.d.Notify(doorNote)
		r.call()
		r.svc.replies <- &httpError{code: 503}
	}
	r.eventually("2 failed", func() bool { return r.status().Failed == 2 })
	if b := r.d.Breakers()[0]; b.State != "open" || !b.Notify || b.Watched {
		t.Fatalf("breaker %+v, want open, notify, not watched", b)
	}
	for range 3 {
		r.d.Notify(doorNote)
	}
	r.eventually("5 failed", func() bool { return r.status().Failed == 5 })
	r.noCall()
	r.advance(1, 30*time.Second) // the breaker's clock: the open period ends
	r.eventually("half-open", func() bool { return r.d.Breakers()[0].State == "half_open" })
	r.d.Notify(doorNote)
	r.call() // the probe
	r.svc.replies <- nil
	r.eventually("closed", func() bool { return r.d.Breakers()[0].State == "closed" })
	// The breaker hears of the probe's success before the delivery is
	// counted: wait for the count too.
	r.eventually("the probe counted delivered", func() bool { return r.status().Delivered == 1 })
	if s := r.status(); s != (notify.Status{Service: "ntfy", Delivered: 1, Failed: 5}) {
		t.Errorf("status %+v, want 1 delivered, 5 failed", s)
	}
}

// With hold, a notification waits while the breaker is open and goes out
// as the probe once it is half-open.
func TestNotifyHoldWaitsForTheBreaker(t *testing.T) {
	r := startNotify(t, func(s *Service) {
		s.Policy.MaxAttempts = 1
		s.Hold = true
		s.Breaker = &breaker.Options{FailureThreshold: 1, OpenFor: func(int) time.Duration { return 30 * time.Second }, ProbeTimeout: 10 * time.Second}
	})
	r.d.Notify(doorNote)
	r.call()
	r.svc.replies <- &httpError{code: 503}
	r.eventually("failed", func() bool { return r.status().Failed == 1 })
	r.d.Notify(doorNote)
	// The held notification (its deadline) and the breaker's clock (the
	// open period's end) wait.
	r.advance(2, 30*time.Second)
	r.call()
	r.svc.replies <- nil
	r.eventually("delivered", func() bool { return r.status().Delivered == 1 })
}

// A notification held past its TTL is given up, never sent.
func TestNotifyHeldPastTTLIsGivenUp(t *testing.T) {
	r := startNotify(t, func(s *Service) {
		s.Policy.MaxAttempts = 1
		s.Hold = true
		s.Breaker = &breaker.Options{FailureThreshold: 1, OpenFor: func(int) time.Duration { return time.Hour }}
	})
	r.d.Notify(doorNote)
	r.call()
	r.svc.replies <- &httpError{code: 503}
	r.eventually("failed", func() bool { return r.status().Failed == 1 })
	r.d.Notify(doorNote)
	r.advance(2, notify.DefaultTTL)
	r.eventually("expired", func() bool { return r.status().Failed == 2 })
	r.noCall()
}

// New refuses a service with both a bridge and a notifier, and a device on
// a notify service.
func TestNewRefusesNotifyMisuse(t *testing.T) {
	_, err := New(Options{
		Services: []Service{{Name: "ntfy", Notifier: newScripted(), Policy: notifyPolicy}},
		Devices:  []Device{{Device: devices.Device{ID: "front_door", Service: "ntfy", Class: devices.Lock}, TTL: time.Minute}},
		Journal:  nopJournal{}, Publisher: nopPublisher{},
	})
	if want := `dispatcher: device "front_door" names service "ntfy", a notify service (it takes no commands)`; err == nil || err.Error() != want {
		t.Errorf("New() = %v, want %s", err, want)
	}
	_, err = New(Options{
		Services: []Service{{Name: "ntfy", Notifier: newScripted(), Policy: retry.Policy{MaxAttempts: 3}}},
		Journal:  nopJournal{}, Publisher: nopPublisher{},
	})
	if want := `dispatcher: service "ntfy": attempt timeout must be positive`; err == nil || err.Error() != want {
		t.Errorf("New() = %v, want %s", err, want)
	}
}
