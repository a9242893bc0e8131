package notify

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/retry"
)

// wait bounds every wait for something the queues must do; a wait ends
// as soon as it happens.
const wait = 5 * time.Second

var t0 = time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)

// scripted hands each call's payload to the test, which answers it: the
// service's side of Notifier, with the HTTP left out (cmd/hearthd's
// end-to-end tests use protocols/webhook and httptest).
type scripted struct {
	calls   chan string
	replies chan error
}

func (s *scripted) Notify(ctx context.Context, payload []byte) error {
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

type rig struct {
	t          *testing.T
	qs         *Queues
	clock      *clockwork.FakeClock
	svc        *scripted
	retryAfter chan time.Duration
}

// start runs the queues of one notify service "ntfy", its notifier
// scripted, with the webhook default policy (3 attempts, full jitter base
// 2 s, cap 60 s); adjust changes the service.
func start(t *testing.T, adjust func(*Service)) *rig {
	t.Helper()
	r := &rig{t: t, clock: clockwork.NewFakeClockAt(t0), svc: &scripted{calls: make(chan string, 100), replies: make(chan error, 100)}, retryAfter: make(chan time.Duration, 10)}
	s := Service{Name: "ntfy", Notifier: r.svc, Policy: retry.Policy{
		MaxAttempts:    3,
		AttemptTimeout: 10 * time.Second,
		Backoff:        retry.Backoff{Base: 2 * time.Second, Multiplier: 2, Cap: time.Minute},
	}}
	if adjust != nil {
		adjust(&s)
	}
	r.qs = New(Options{Services: []Service{s}, Clock: r.clock, Rand: maxRand{},
		OnRetryAfter: func(service string, d time.Duration) { r.retryAfter <- d }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.qs.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// enqueue hands the queues a notification about op, its payload naming
// op.
func (r *rig) enqueue(op string) {
	r.qs.Enqueue(Notification{ID: "01JDOOR0000000000000000001", Device: "front_door", OpID: op}, []byte(`{"op_id":"`+op+`"}`))
}

// call waits for the notifier's next call and returns its payload.
func (r *rig) call() string {
	r.t.Helper()
	select {
	case p := <-r.svc.calls:
		return p
	case <-time.After(wait):
		r.t.Fatal("timed out waiting for a notification to be sent")
		return ""
	}
}

// noCall fails if the notifier was called.
func (r *rig) noCall() {
	r.t.Helper()
	select {
	case p := <-r.svc.calls:
		r.t.Fatalf("a notification was sent: %s", p)
	default:
	}
}

// advance waits until the worker waits on the clock, then moves it by d.
func (r *rig) advance(d time.Duration) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := r.clock.BlockUntilContext(ctx, 1); err != nil {
		r.t.Fatal("the worker never waited on the clock")
	}
	r.clock.Advance(d)
}

// eventually polls cond until it holds, failing after wait.
func (r *rig) eventually(what string, cond func() bool) {
	r.t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(wait)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			r.t.Fatalf("timed out waiting for %s; status %+v", what, r.qs.Status())
		}
	}
}

func (r *rig) status() Status { return r.qs.Status()[0] }

// A 503 with Retry-After: 2 is retried exactly 2 s later with the same
// payload, the wait is reported to OnRetryAfter, and the retry's success
// counts as delivered.
func TestRetryAfterSpacesTheRetry(t *testing.T) {
	r := start(t, nil)
	r.enqueue("op-1")
	first := r.call()
	r.svc.replies <- &httpError{503, "2"}
	r.advance(2*time.Second - time.Millisecond)
	r.noCall()
	r.advance(time.Millisecond)
	if got := r.call(); got != first {
		t.Fatalf("retry payload %s, want %s", got, first)
	}
	if got := <-r.retryAfter; got != 2*time.Second {
		t.Errorf("OnRetryAfter told %s, want 2s", got)
	}
	r.svc.replies <- nil
	r.eventually("delivered", func() bool { return r.status().Delivered == 1 })
	if s := r.status(); s != (Status{Service: "ntfy", Delivered: 1}) {
		t.Errorf("status %+v, want 1 delivered", s)
	}
}

// Without Retry-After the policy's backoff spaces the attempts (ceiling
// draws: 2 s, then 4 s), and after max attempts the notification is
// given up.
func TestGivenUpAfterMaxAttempts(t *testing.T) {
	r := start(t, nil)
	r.enqueue("op-1")
	r.call()
	r.svc.replies <- &httpError{code: 500}
	r.advance(2*time.Second - time.Nanosecond)
	r.noCall()
	r.advance(time.Nanosecond)
	r.call()
	r.svc.replies <- &httpError{code: 502}
	r.advance(4*time.Second - time.Nanosecond)
	r.noCall()
	r.advance(time.Nanosecond)
	r.call()
	r.svc.replies <- &httpError{code: 503}
	r.eventually("given up", func() bool { return r.status().Failed == 1 })
	r.noCall()
	if s := r.status(); s != (Status{Service: "ntfy", Failed: 1}) {
		t.Errorf("status %+v, want 1 failed", s)
	}
}

// A permanent error (401: a wrong token) is not retried.
func TestPermanentErrorIsNotRetried(t *testing.T) {
	r := start(t, nil)
	r.enqueue("op-1")
	r.call()
	r.svc.replies <- &httpError{code: 401}
	r.eventually("given up", func() bool { return r.status().Failed == 1 })
	r.noCall()
}

// A notification that waited in the queue past its TTL is given up
// without a call.
func TestQueuedPastTTLIsGivenUp(t *testing.T) {
	r := start(t, func(s *Service) { s.Policy.MaxAttempts = 1 })
	r.enqueue("op-1")
	r.call() // being delivered while the next one waits
	r.enqueue("op-2")
	r.clock.Advance(DefaultTTL)
	r.svc.replies <- nil
	r.eventually("the waiting one expired", func() bool { return r.status().Expired == 1 })
	r.noCall()
	if s := r.status(); s != (Status{Service: "ntfy", Delivered: 1, Failed: 1, Expired: 1}) {
		t.Errorf("status %+v, want 1 delivered, 1 failed and expired", s)
	}
}

// A full queue drops its oldest waiting notification: with room for 2
// and one being delivered, the third and fourth pushed push out the first
// two waiting.
func TestFullQueueDropsTheOldest(t *testing.T) {
	r := start(t, func(s *Service) { s.Queue = 2 })
	r.enqueue("op-0")
	first := r.call() // being delivered: not in the queue
	for i := 1; i <= 4; i++ {
		r.enqueue(fmt.Sprint("op-", i))
	}
	if s := r.status(); s.Queued != 2 || s.Dropped != 2 {
		t.Fatalf("status %+v, want 2 queued and 2 dropped", s)
	}
	r.svc.replies <- nil
	var got []string
	for range 2 {
		got = append(got, r.call())
		r.svc.replies <- nil
	}
	r.eventually("all delivered", func() bool { return r.status().Delivered == 3 })
	want := []string{`"op_id":"op-0"`, `"op_id":"op-3"`, `"op_id":"op-4"`}
	for i, p := range append([]string{first}, got...) {
		if !strings.Contains(p, want[i]) {
			t.Errorf("delivery %d: %s, want %s", i, p, want[i])
		}
	}
}
