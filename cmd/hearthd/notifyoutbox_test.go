package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/notify"
	"github.com/hearthd/hearth/protocols/webhook"
	"github.com/hearthd/hearth/retry"
	"github.com/hearthd/hearth/store"
)

// The notify outbox across restarts of the dispatcher and the store, on
// real bbolt files and a real webhook service (protocols/webhook over
// HTTP); the end-to-end test with a whole hearthd is
// TestKilledWithNotificationsInTheOutboxDeliversEveryOneAfterTheRestart.

// webhookService is an HTTP notify service that answers every POST with
// its current status (503 with Retry-After: 60 while down) and reports
// each POST's body.
type webhookService struct {
	srv    *httptest.Server
	status atomic.Int32
	posts  chan string
}

func newWebhookService(t *testing.T, status int) *webhookService {
	t.Helper()
	w := &webhookService{posts: make(chan string, 100)}
	w.status.Store(int32(status))
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.posts <- string(b)
		status := int(w.status.Load())
		if status == http.StatusServiceUnavailable {
			rw.Header().Set("Retry-After", "60")
		}
		rw.WriteHeader(status)
	}))
	t.Cleanup(w.srv.Close)
	return w
}

// next waits for the next POST and returns its body.
func (w *webhookService) next(t *testing.T) string {
	t.Helper()
	select {
	case p := <-w.posts:
		return p
	case <-time.After(eventWait):
		t.Fatal("timed out waiting for a POST to the notify service")
		return ""
	}
}

// none fails if the service received a POST.
func (w *webhookService) none(t *testing.T) {
	t.Helper()
	select {
	case p := <-w.posts:
		t.Fatalf("unexpected POST: %s", p)
	default:
	}
}

// discardPublisher takes the MQTT copies of the notifications: this
// file's tests watch the notify service.
type discardPublisher struct{}

func (discardPublisher) Publish(context.Context, string, byte, bool, []byte) error { return nil }

// outboxRig is one run of a dispatcher with the notify service "alerts"
// on a store in dir.
type outboxRig struct {
	t    *testing.T
	st   *store.Store
	d    *dispatcher.Dispatcher
	stop func()
}

// startOutbox opens the store in dir and runs a dispatcher on it with the
// notify service "alerts" posting to url (the webhook defaults: 3
// attempts, 2 s exponential full jitter at its ceiling, queue bound
// queue); before, if set, runs before Run (as hearthd raises the
// quarantine's notification); stop stops the dispatcher, then closes
// the store.
func startOutbox(t *testing.T, dir string, clock clockwork.Clock, url string, queue int, before ...func(*dispatcher.Dispatcher)) *outboxRig {
	t.Helper()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	sender, err := webhook.New(webhook.Options{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	d, err := dispatcher.New(dispatcher.Options{
		Services: []dispatcher.Service{{Name: "alerts", Notifier: sender, NotifyQueue: queue,
			Policy: retry.Policy{MaxAttempts: 3, AttemptTimeout: 10 * time.Second,
				Backoff: retry.Backoff{Base: 2 * time.Second, Multiplier: 2, Cap: time.Minute}}}},
		Journal: st, Publisher: discardPublisher{}, NotifyOutbox: st,
		Clock: clock, Rand: ceilingRand{}, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range before {
		f(d)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	r := &outboxRig{t: t, st: st, d: d}
	stopped := false
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-done
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	}
	t.Cleanup(r.stop)
	return r
}

// outbox returns the stored entries' ids, in order.
func (r *outboxRig) outbox() []string {
	r.t.Helper()
	ns, err := r.st.Notifications()
	if err != nil {
		r.t.Fatalf("Notifications: %v", err)
	}
	var ids []string
	for _, n := range ns {
		ids = append(ids, n.ID)
	}
	return ids
}

// eventually polls cond until it holds, failing after eventWait.
func (r *outboxRig) eventually(what string, cond func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(eventWait)
	for !cond() {
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitRetry waits until the notifier waits on the clock: its first
// attempt failed and it sleeps until the retry.
func waitRetry(t *testing.T, clock *clockwork.FakeClock) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("the notifier did not wait for its retry: %v", err)
	}
}

func (r *outboxRig) status() notify.Status { return r.d.NotifyStatus()[0] }

// noteID returns the "id" of a notification's JSON.
func noteID(t *testing.T, payload string) string {
	t.Helper()
	var n struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(payload), &n); err != nil || n.ID == "" {
		t.Fatalf("payload %s: no id (%v)", payload, err)
	}
	return n.ID
}

func note(id string) notify.Notification {
	return notify.Notification{ID: id, Title: "front_door: unlock failed", Message: "m", Severity: "critical", Source: "test", Device: "front_door", OpID: "op-" + id}
}

// Two notifications wait while the service is down (the first's retry
// 60 s away on a Retry-After); the dispatcher and the store stop. After
// the restart, with the service up, each is delivered once, in order,
// with the same JSON and id, and leaves the outbox; so does one raised
// at the start, after them.
func TestStoredNotificationIsDeliveredOnceAfterARestart(t *testing.T) {
	dir := t.TempDir()
	clock := clockwork.NewFakeClockAt(t0)
	svc := newWebhookService(t, http.StatusServiceUnavailable)
	r := startOutbox(t, dir, clock, svc.srv.URL, 0)
	r.d.Notify(note("n1"))
	r.d.Notify(note("n2"))
	first := svc.next(t)
	if id := noteID(t, first); id != "n1" {
		t.Fatalf("first POST is %s, want n1", id)
	}
	waitRetry(t, clock)
	if got := r.outbox(); fmt.Sprint(got) != "[n1 n2]" {
		t.Fatalf("outbox before the restart = %v, want [n1 n2]", got)
	}
	r.stop()

	svc.status.Store(http.StatusOK)
	// n3 is raised before Run, as hearthd raises its start's
	// notifications: it comes after those stored before the restart.
	r = startOutbox(t, dir, clock, svc.srv.URL, 0, func(d *dispatcher.Dispatcher) { d.Notify(note("n3")) })
	if got := svc.next(t); got != first {
		t.Fatalf("first POST after the restart\n%s\nwant the same JSON as before\n%s", got, first)
	}
	if id := noteID(t, svc.next(t)); id != "n2" {
		t.Fatalf("second POST after the restart is %s, want n2", id)
	}
	if id := noteID(t, svc.next(t)); id != "n3" {
		t.Fatalf("third POST after the restart is %s, want n3", id)
	}
	r.eventually("3 delivered", func() bool { return r.status().Delivered == 3 })
	r.eventually("an empty outbox", func() bool { return r.outbox() == nil })
	svc.none(t)
	if s := r.status(); s != (notify.Status{Service: "alerts", Delivered: 3}) {
		t.Errorf("status %+v, want 3 delivered", s)
	}
}

// A stored notification whose TTL (10 minutes) passed while Hearth was
// down is not sent after the restart: counted failed and expired, and
// deleted.
func TestExpiredStoredNotificationIsNotSentAfterARestart(t *testing.T) {
	dir := t.TempDir()
	clock := clockwork.NewFakeClockAt(t0)
	svc := newWebhookService(t, http.StatusServiceUnavailable)
	r := startOutbox(t, dir, clock, svc.srv.URL, 0)
	r.d.Notify(note("n1"))
	svc.next(t)
	waitRetry(t, clock)
	r.stop()

	clock.Advance(notify.DefaultTTL)
	svc.status.Store(http.StatusOK)
	r = startOutbox(t, dir, clock, svc.srv.URL, 0)
	r.eventually("an empty outbox", func() bool { return r.outbox() == nil })
	if s := r.status(); s != (notify.Status{Service: "alerts", Failed: 1, Expired: 1}) {
		t.Errorf("status %+v, want 1 failed, expired", s)
	}
	r.d.Notify(note("n2")) // the queue works; n1 never came before it
	if id := noteID(t, svc.next(t)); id != "n2" {
		t.Fatalf("POST %s, want n2", id)
	}
	svc.none(t)
}

// Stored notifications of a notify service no longer configured are
// dropped at start and deleted; the configured service's are sent.
func TestStoredNotificationsOfARemovedServiceAreDropped(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	entry := func(service, id string) devices.OutboxNotification {
		return devices.OutboxNotification{ID: id, Service: service, QueuedAt: t0, Deadline: t0.Add(time.Minute),
			Payload: json.RawMessage(`{"id":"` + id + `"}`)}
	}
	if err := st.SaveNotifications(entry("gotify", "g1"), entry("alerts", "a1")); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	svc := newWebhookService(t, http.StatusOK)
	r := startOutbox(t, dir, clockwork.NewFakeClockAt(t0), svc.srv.URL, 0)
	if got := svc.next(t); got != `{"id":"a1"}` {
		t.Fatalf("POST %s, want a1's", got)
	}
	r.eventually("an empty outbox", func() bool { return r.outbox() == nil })
	svc.none(t)
}

// A full queue (bound 2) still drops the oldest waiting notification,
// counted, and deletes it from the outbox: n1 is being delivered (its
// retry 60 s away), n2 and n3 wait, n4 pushes n2 out.
func TestFullNotifyQueueDropsTheOldestFromTheOutbox(t *testing.T) {
	clock := clockwork.NewFakeClockAt(t0)
	svc := newWebhookService(t, http.StatusServiceUnavailable)
	r := startOutbox(t, t.TempDir(), clock, svc.srv.URL, 2)
	r.d.Notify(note("n1"))
	svc.next(t)
	waitRetry(t, clock)
	for _, id := range []string{"n2", "n3", "n4"} {
		r.d.Notify(note(id))
	}
	r.eventually("1 dropped", func() bool { return r.status().Dropped == 1 })
	r.eventually("n2 deleted", func() bool { return fmt.Sprint(r.outbox()) == "[n1 n3 n4]" })
	if s := r.status(); s != (notify.Status{Service: "alerts", Queued: 2, Dropped: 1}) {
		t.Errorf("status %+v, want 2 queued, 1 dropped", s)
	}
}
