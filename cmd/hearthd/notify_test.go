package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/notify"
	"github.com/hearthd/hearth/store"
)

// post is one POST a notify service received, with the fake clock's
// reading when it arrived.
type post struct {
	body, auth, contentType string
	at                      time.Duration // since t0
}

// notifyServer is an HTTP notify service: it answers the i-th POST with
// statuses[i] (the last one from then on), with Retry-After: retryAfter
// on a 503 when set, and reports every POST.
func notifyServer(t *testing.T, h **harness, retryAfter string, statuses ...int) (*httptest.Server, <-chan post) {
	t.Helper()
	posts := make(chan post, 100)
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		posts <- post{string(b), r.Header.Get("Authorization"), r.Header.Get("Content-Type"), (*h).clock.Since(t0)}
		status := statuses[min(n, len(statuses)-1)]
		n++
		if status == http.StatusServiceUnavailable && retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, posts
}

// notifyConfig is a Zigbee2MQTT service with a breaker and a lock, and
// the webhook service alerts at url with its defaults but breaker.
func notifyConfig(url, breaker string) string {
	return fmt.Sprintf(`
mqtt:
  listen: 127.0.0.1:0
  reconnect: {base: 10ms, cap: 100ms}
http:
  listen: 127.0.0.1:0
services:
  zigbee:
    protocol: zigbee2mqtt
    retry: {max_attempts: 2, attempt_timeout: 5s}
  alerts:
    protocol: webhook
    url: %s
    headers: {Authorization: Bearer tk_test}
    breaker: %s
devices:
  front_door: {class: lock, service: zigbee}
`, url, breaker)
}

// nextPost waits for the service's next POST.
func nextPost(t *testing.T, posts <-chan post) post {
	t.Helper()
	select {
	case p := <-posts:
		return p
	case <-time.After(eventWait):
		t.Fatal("timed out waiting for a POST to the notify service")
		return post{}
	}
}

// noPost fails if the service received a POST.
func noPost(t *testing.T, posts <-chan post) {
	t.Helper()
	select {
	case p := <-posts:
		t.Fatalf("a POST at +%v: %s", p.at, p.body)
	default:
	}
}

// The test: a safety-critical command failed by an open breaker
// notifies; the notification reaches the webhook service as the JSON
// published on hearth/notifications. The service answers 503 with
// Retry-After: 2, then 200: it receives exactly two POSTs, the second
// once the fake clock moved 2 s and not before.
func TestFailedLockNotifiesTheWebhookHonouringRetryAfter(t *testing.T) {
	var h *harness
	srv, posts := notifyServer(t, &h, "2", http.StatusServiceUnavailable, http.StatusOK)
	h = newHarness(t, harnessOptions{config: notifyConfig(srv.URL+"/api/webhook/hearth", "{}")})
	h.settle("front_door")
	notes := h.watch("hearth/notifications")
	h.openBreaker()

	h.publish("front_door", `{"state":"UNLOCK","op_id":"unlock"}`)
	if r := h.final("unlock"); r.Status != devices.Failed || r.Reason != devices.ReasonBreakerOpen {
		t.Fatalf("unlock: %s/%s, want failed/breaker_open", r.Status, r.Reason)
	}
	wantRest := `"title":"front_door: unlock failed","message":"The unlock command to front_door was not carried out (breaker_open): the circuit breaker of service zigbee is open","severity":"critical","source":"dispatcher","device":"front_door","op_id":"unlock","reason":"breaker_open","at":"2026-11-29T19:00:00Z"}`
	var published string
	select {
	case m := <-notes:
		published = string(m.Payload())
	case <-time.After(eventWait):
		t.Fatal("no notification on hearth/notifications")
	}
	// The id comes first: a ULID drawn on hearthd's clock.
	id := noteID(t, published)
	if u, err := ulid.ParseStrict(id); err != nil || !ulid.Time(u.Time()).Equal(t0) {
		t.Errorf("id %q: %v, time %v; want a ULID of %v", id, err, ulid.Time(u.Time()), t0)
	}
	want := `{"id":"` + id + `",` + wantRest
	first := nextPost(t, posts)
	if first.body != want || published != want || first.auth != "Bearer tk_test" || first.contentType != "application/json" || first.at != 0 {
		t.Fatalf("first POST %+v, published %s; want at +0s, Bearer tk_test, application/json, both\n%s", first, published, want)
	}

	h.elapse(2*time.Second - time.Millisecond)
	noPost(t, posts)
	h.advance(time.Millisecond)
	second := nextPost(t, posts)
	if second.body != want || second.at != 2*time.Second {
		t.Fatalf("second POST %+v; want at +2s, the same body", second)
	}
	h.eventually("delivered", func() bool { return h.d.disp.NotifyStatus()[0].Delivered == 1 })
	if s := h.d.disp.NotifyStatus(); len(s) != 1 || s[0] != (notify.Status{Service: "alerts", Delivered: 1}) {
		t.Errorf("NotifyStatus() = %+v, want alerts: 1 delivered", s)
	}
	noPost(t, posts)
}

// A notify service that keeps failing opens its own breaker (threshold 3
// failures, open 30 s): later notifications fail fast without a POST, one
// probe goes out after the open period, and the service sees 4 POSTs for
// 4 notifications instead of 12. The bridge's breaker is not touched.
func TestDownNotifyServiceOpensItsBreakerAndFailsFast(t *testing.T) {
	var h *harness
	srv, posts := notifyServer(t, &h, "", http.StatusServiceUnavailable)
	h = newHarness(t, harnessOptions{config: notifyConfig(srv.URL, "{failure_threshold: 3, open_for: 30s, max_open_for: 1m}")})
	states := h.watch("hearth/services/alerts/state")
	nextState(t, states, "closed")
	note := func(op string) {
		h.d.disp.Notify(notify.Notification{Title: "t", Severity: "critical", Source: "test", OpID: op})
	}
	failed := func(n uint64) {
		t.Helper()
		h.eventually(fmt.Sprintf("%d failed", n), func() bool { return h.d.disp.NotifyStatus()[0].Failed == n })
	}

	// The first: 3 attempts, 2 s and 4 s apart (full jitter at its
	// ceiling), all 503. The third failure opens the breaker.
	note("n1")
	for i, at := range []time.Duration{0, 2 * time.Second, 6 * time.Second} {
		if p := nextPost(t, posts); p.at != at {
			t.Fatalf("POST %d at +%v, want +%v", i+1, p.at, at)
		}
		if i < 2 {
			h.advance(at + []time.Duration{2 * time.Second, 4 * time.Second}[i] - h.clock.Since(t0))
		}
	}
	failed(1)
	nextState(t, states, "open")

	// While open: fails fast, nothing sent.
	note("n2")
	failed(2)
	noPost(t, posts)

	// After open_for, one probe; it fails, and the breaker opens again.
	h.advance(30 * time.Second)
	nextState(t, states, "half_open")
	note("n3")
	if p := nextPost(t, posts); p.at != 36*time.Second {
		t.Fatalf("probe at +%v, want +36s", p.at)
	}
	nextState(t, states, "open")
	// Its retry, 2 s later, finds the breaker open: given up, not sent.
	h.advanceAfter(2, 2*time.Second)
	failed(3)

	note("n4")
	failed(4)
	noPost(t, posts)
	if s := h.d.disp.NotifyStatus()[0]; s != (notify.Status{Service: "alerts", Failed: 4}) {
		t.Errorf("NotifyStatus() = %+v, want alerts: 4 failed", s)
	}
	for _, b := range h.d.disp.Breakers() {
		switch {
		case b.Service == "alerts" && (b.State != "open" || !b.Notify || b.Trips != 2):
			t.Errorf("alerts breaker %+v, want open, a notify service, 2 trips", b)
		case b.Service == "zigbee" && b.State != "closed":
			t.Errorf("zigbee breaker %+v, want closed", b)
		}
	}
}

// The test of durable notifications: hearthd is killed with
// five notifications in the webhook service's outbox (the service is
// down: the first POST got a 503 with Retry-After: 60, the other four
// wait behind it). The crash is simulated as the other restart tests
// do: what a kill -9 leaves is what the store had committed (every
// commit is synced), read while hearthd runs; hearthd is then stopped,
// and the test checks that the stop left the outbox exactly so. After
// the restart, with the service up, every one is delivered, once, in
// order, with the JSON (and id) it had before, and the outbox is empty.
func TestKilledWithNotificationsInTheOutboxDeliversEveryOneAfterTheRestart(t *testing.T) {
	clock := newDueClock(t0)
	stamps := &harness{clock: clock} // the service's POSTs read the clock of both hearthds
	srv, posts := notifyServer(t, &stamps, "60", http.StatusServiceUnavailable, http.StatusOK)
	dir := t.TempDir()
	cfg := notifyConfig(srv.URL, "{}")
	h := newHarness(t, harnessOptions{dataDir: dir, clock: clock, config: cfg})
	for i := range 5 {
		h.d.disp.Notify(notify.Notification{Title: fmt.Sprintf("note %d", i), Message: "m", Severity: "critical", Source: "test"})
	}
	first := nextPost(t, posts)
	h.eventually("5 notifications stored", func() bool {
		ns, err := h.d.store.Notifications()
		return err == nil && len(ns) == 5
	})
	committed, err := h.d.store.Notifications() // what a kill -9 now leaves
	if err != nil {
		t.Fatal(err)
	}
	if got := string(committed[0].Payload); got != first.body {
		t.Fatalf("first stored %s, want the first POST's %s", got, first.body)
	}
	noPost(t, posts)
	h.stop()

	st, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	left, err := st.Notifications()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(outboxPayloads(left)) != fmt.Sprint(outboxPayloads(committed)) {
		t.Fatalf("the stop changed the outbox: %v, want what was committed before it, %v", outboxPayloads(left), outboxPayloads(committed))
	}

	h = newHarness(t, harnessOptions{dataDir: dir, clock: clock, config: cfg})
	for i, want := range outboxPayloads(committed) {
		if p := nextPost(t, posts); p.body != want {
			t.Fatalf("POST %d after the restart\n%s\nwant\n%s", i+1, p.body, want)
		}
	}
	h.eventually("5 delivered", func() bool { return h.d.disp.NotifyStatus()[0].Delivered == 5 })
	h.eventually("an empty outbox", func() bool {
		ns, err := h.d.store.Notifications()
		return err == nil && len(ns) == 0
	})
	noPost(t, posts)
	for i, p := range outboxPayloads(committed) {
		if id := noteID(t, p); id != committed[i].ID {
			t.Errorf("notification %d: id %q in its JSON, %q in the outbox", i, id, committed[i].ID)
		}
	}
}

// outboxPayloads lists the entries' payloads, in order.
func outboxPayloads(ns []devices.OutboxNotification) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = string(n.Payload)
	}
	return out
}
