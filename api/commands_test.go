package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/retry"
	"github.com/hearthd/hearth/store"
)

// The command endpoints are tested against a real dispatcher and a real
// store (a test-only import: package api itself reads the store only
// through Ops). The dispatcher's bridge and publisher are the edges where
// MQTT would begin: they take everything and answer nothing.

var t0 = time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)

const eventWait = 10 * time.Second

type quietBridge struct{}

func (quietBridge) Send(context.Context, devices.Device, devices.Target) error { return nil }
func (quietBridge) Read(context.Context, devices.Device, devices.Target) error { return nil }

type discard struct{}

func (discard) Publish(context.Context, string, byte, bool, []byte) error { return nil }

// submissions records what reaches the dispatcher.
type submissions struct {
	Commander
	mu   sync.Mutex
	reqs []dispatcher.Request
}

func (s *submissions) Submit(ctx context.Context, req dispatcher.Request) error {
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	s.mu.Unlock()
	return s.Commander.Submit(ctx, req)
}

func (s *submissions) all() []dispatcher.Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]dispatcher.Request(nil), s.reqs...)
}

type fixture struct {
	t        *testing.T
	store    *store.Store
	waiter   *Waiter
	clock    *clockwork.FakeClock // the API's: ?wait= and its own rejections
	received *submissions
	handler  http.Handler
	stopDisp func()
}

// newFixture serves RegisterCommands behind Authenticate with principals
// p, over a running dispatcher with a lock (front_door) and a light
// (hall_light).
func newFixture(t *testing.T, p Principals) *fixture {
	t.Helper()
	st, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{t: t, store: st, waiter: &Waiter{}, clock: clockwork.NewFakeClockAt(t0.Add(time.Hour))}
	disp, err := dispatcher.New(dispatcher.Options{
		Services: []dispatcher.Service{{
			Name:   "zigbee",
			Bridge: quietBridge{},
			Policy: retry.Policy{MaxAttempts: 1, AttemptTimeout: 5 * time.Second},
		}},
		Devices: []dispatcher.Device{
			{Device: devices.Device{ID: "front_door", Service: "zigbee", Class: devices.Lock}, TTL: time.Minute},
			{Device: devices.Device{ID: "hall_light", Service: "zigbee", Class: devices.Light}, TTL: time.Minute},
		},
		Journal:   st,
		Publisher: discard{},
		Clock:     clockwork.NewFakeClockAt(t0), // the dispatcher's own, apart from the API's
		OnResult:  f.waiter.Notify,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); disp.Run(ctx) }()
	var once sync.Once
	f.stopDisp = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(f.stopDisp)
	f.received = &submissions{Commander: disp}
	mux := http.NewServeMux()
	RegisterCommands(mux, Commands{Commander: f.received, Ops: st, Waiter: f.waiter, Clock: f.clock})
	f.handler = Authenticate(p, mux)
	return f
}

type response struct {
	status int
	header http.Header
	body   string
}

func (f *fixture) do(method, path, token, body string) response {
	f.t.Helper()
	return f.doContext(context.Background(), method, path, token, body)
}

func (f *fixture) doContext(ctx context.Context, method, path, token, body string) response {
	req := httptest.NewRequestWithContext(ctx, method, path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	f.handler.ServeHTTP(rec, req)
	return response{rec.Code, rec.Header(), rec.Body.String()}
}

func (r response) result(t *testing.T) devices.Result {
	t.Helper()
	var res devices.Result
	if err := json.Unmarshal([]byte(r.body), &res); err != nil {
		t.Fatalf("body is no result: %s", r.body)
	}
	return res
}

func (f *fixture) save(op devices.Op) {
	f.t.Helper()
	if err := f.store.Save(op); err != nil {
		f.t.Fatal(err)
	}
}

const lockPath = "/api/v1/devices/front_door/commands"

// A plain LOCK from an authenticated principal is accepted: 202, the
// result with a fresh op_id, Location to the op, and the principal passed
// to the dispatcher; the op is then readable.
func TestPostAccepted(t *testing.T) {
	f := newFixture(t, twoPrincipals)
	r := f.do("POST", lockPath, tabletToken, "LOCK")
	res := r.result(t)
	if r.status != http.StatusAccepted || res.Status != devices.Accepted || res.OpID == "" || res.Device != "front_door" {
		t.Fatalf("status %d, body %s; want 202 accepted with an op_id", r.status, r.body)
	}
	if got, want := r.header.Get("Location"), "/api/v1/ops/"+res.OpID; got != want {
		t.Errorf("Location %q, want %q", got, want)
	}
	reqs := f.received.all()
	if len(reqs) != 1 || reqs[0].Principal != "tablet" || string(reqs[0].Payload) != "LOCK" || reqs[0].Retained {
		t.Errorf("the dispatcher received %+v; want one LOCK from tablet", reqs)
	}
	g := f.do("GET", "/api/v1/ops/"+res.OpID, tabletToken, "")
	if g.status != http.StatusOK || g.result(t).Status != devices.Accepted || g.result(t).OpID != res.OpID {
		t.Errorf("GET the op: %d %s", g.status, g.body)
	}
}

// Each way a command is refused has its HTTP status, and the body is the
// dispatcher's result (or, over the size limit, the API's own, nothing
// submitted).
func TestPostRefused(t *testing.T) {
	f := newFixture(t, twoPrincipals)
	f.save(devices.Op{OpID: "done-1", Device: "front_door", Target: devices.Target{"state": "LOCK"},
		AcceptedAt: t0.Add(-time.Minute), Deadline: t0, Status: devices.Succeeded, Attempts: 1,
		State: map[string]any{"state": "LOCK"}, UpdatedAt: t0.Add(-50 * time.Second)})
	at := `"at":"2026-11-29T19:00:00Z"`
	for _, tc := range []struct {
		name, path, body string
		status           int
		want             string
		location         string
	}{
		{"unknown device", "/api/v1/devices/back_door/commands", `{"state":"LOCK","op_id":"u-1"}`, http.StatusNotFound,
			`{"op_id":"u-1","device":"back_door","status":"rejected","reason":"unknown_device","detail":"no device \"back_door\" in the configuration","attempts":0,` + at + `}`, ""},
		{"relative command", "/api/v1/devices/hall_light/commands", `{"state":"TOGGLE","op_id":"r-1"}`, http.StatusBadRequest,
			`{"op_id":"r-1","device":"hall_light","status":"rejected","reason":"relative_command","detail":"state TOGGLE is a relative change; send ON or OFF","attempts":0,` + at + `}`, ""},
		{"op_id of another device's command", "/api/v1/devices/hall_light/commands", `{"state":"ON","op_id":"done-1"}`, http.StatusConflict,
			`{"op_id":"done-1","device":"hall_light","status":"rejected","reason":"op_id_conflict","detail":"op_id \"done-1\" belongs to a command for device \"front_door\"","attempts":0,` + at + `}`, ""},
		{"repeated op_id, ended", lockPath, `{"state":"LOCK","op_id":"done-1"}`, http.StatusOK,
			`{"op_id":"done-1","device":"front_door","status":"succeeded","attempts":1,"target":{"state":"LOCK"},"state":{"state":"LOCK"},"at":"2026-11-29T18:59:10Z"}`, "/api/v1/ops/done-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := f.do("POST", tc.path, tabletToken, tc.body)
			if r.status != tc.status || r.body != tc.want+"\n" {
				t.Errorf("%d %s\nwant %d %s", r.status, r.body, tc.status, tc.want)
			}
			if got := r.header.Get("Location"); got != tc.location {
				t.Errorf("Location %q, want %q", got, tc.location)
			}
		})
	}
}

// A body over devices.MaxPayloadBytes is 413 and never reaches the
// dispatcher; one of exactly the limit does (and is refused there for
// what it says).
func TestPostTooLarge(t *testing.T) {
	f := newFixture(t, twoPrincipals)
	r := f.do("POST", lockPath, tabletToken, strings.Repeat("A", devices.MaxPayloadBytes+1))
	want := `{"op_id":"","device":"front_door","status":"rejected","reason":"payload_too_large","detail":"the body is over 65536 bytes, the limit","attempts":0,"at":"2026-11-29T20:00:00Z"}` + "\n"
	if r.status != http.StatusRequestEntityTooLarge || r.body != want {
		t.Errorf("%d %s\nwant 413 %s", r.status, r.body, want)
	}
	if n := len(f.received.all()); n != 0 {
		t.Errorf("%d requests reached the dispatcher", n)
	}
	r = f.do("POST", lockPath, tabletToken, strings.Repeat("A", devices.MaxPayloadBytes))
	if r.status != http.StatusBadRequest || len(f.received.all()) != 1 {
		t.Errorf("a body at the limit: %d %s, %d submitted; want 400 from the dispatcher", r.status, r.body, len(f.received.all()))
	}
}

// Without a token, or with a wrong one, a command never reaches the
// dispatcher.
func TestPostUnauthenticated(t *testing.T) {
	f := newFixture(t, twoPrincipals)
	for _, token := range []string{"", "not-a-principals-token-at-all"} {
		if r := f.do("POST", lockPath, token, "UNLOCK"); r.status != http.StatusUnauthorized {
			t.Errorf("token %q: %d %s", token, r.status, r.body)
		}
	}
	if n := len(f.received.all()); n != 0 {
		t.Errorf("%d requests reached the dispatcher", n)
	}
}

// Served without Authenticate, the endpoints refuse everything (500): a
// mux wired without authentication fails closed.
func TestServedWithoutAuthenticate(t *testing.T) {
	f := newFixture(t, nil)
	mux := http.NewServeMux()
	RegisterCommands(mux, Commands{Commander: f.received, Ops: f.store, Waiter: f.waiter})
	for _, req := range []*http.Request{
		httptest.NewRequest("POST", lockPath, strings.NewReader("LOCK")),
		httptest.NewRequest("GET", "/api/v1/ops/x", nil),
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		want := `{"error":"not_authenticated","detail":"the server is misconfigured: its API is not behind authentication"}` + "\n"
		if rec.Code != http.StatusInternalServerError || rec.Body.String() != want {
			t.Errorf("%s %s: %d %s", req.Method, req.URL, rec.Code, rec.Body)
		}
	}
	if n := len(f.received.all()); n != 0 {
		t.Errorf("%d requests reached the dispatcher", n)
	}
}

// With no principals configured the API is open, and commands carry no
// principal.
func TestPostOpen(t *testing.T) {
	f := newFixture(t, nil)
	if r := f.do("POST", lockPath, "", `{"state":"LOCK","op_id":"open-1"}`); r.status != http.StatusAccepted {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if reqs := f.received.all(); len(reqs) != 1 || reqs[0].Principal != "" {
		t.Errorf("received %+v; want one request without principal", reqs)
	}
}

// Once the dispatcher stops, a command is 503 with Retry-After.
func TestPostShuttingDown(t *testing.T) {
	f := newFixture(t, twoPrincipals)
	f.stopDisp()
	r := f.do("POST", lockPath, tabletToken, "LOCK")
	want := `{"error":"unavailable","detail":"Hearth is not taking commands (shutting down); nothing was accepted"}` + "\n"
	if r.status != http.StatusServiceUnavailable || r.body != want || r.header.Get("Retry-After") != "5" {
		t.Errorf("%d Retry-After %q %s\nwant 503 Retry-After 5 %s", r.status, r.header.Get("Retry-After"), r.body, want)
	}
}

// The HTTP status of each first result.
func TestStatusOf(t *testing.T) {
	for _, tc := range []struct {
		status devices.Status
		reason devices.Reason
		want   int
	}{
		{devices.Accepted, "", 202},
		{devices.Queued, devices.ReasonBreakerOpen, 202},
		{devices.Succeeded, "", 200},
		{devices.Expired, devices.ReasonTTLElapsed, 200},
		{devices.Failed, devices.ReasonTimeout, 200},
		{devices.Rejected, devices.ReasonUnauthorized, 403},
		{devices.Rejected, devices.ReasonUnknownDevice, 404},
		{devices.Rejected, devices.ReasonOpIDConflict, 409},
		{devices.Rejected, devices.ReasonPayloadTooLarge, 413},
		{devices.Rejected, devices.ReasonStoreError, 500},
		{devices.Rejected, devices.ReasonInvalidPayload, 400},
		{devices.Rejected, devices.ReasonRelativeCommand, 400},
	} {
		if got := statusOf(devices.Result{Status: tc.status, Reason: tc.reason}); got != tc.want {
			t.Errorf("%s/%s: %d, want %d", tc.status, tc.reason, got, tc.want)
		}
	}
}

// pending is a lock command accepted and not yet ended.
func pending(opID string) devices.Op {
	return devices.Op{OpID: opID, Device: "front_door", Target: devices.Target{"state": "UNLOCK"}, Principal: "tablet",
		AcceptedAt: t0, Deadline: t0.Add(time.Minute), Status: devices.Accepted, UpdatedAt: t0}
}

func succeeded(op devices.Op) devices.Op {
	op.Status, op.Attempts, op.State, op.UpdatedAt = devices.Succeeded, 1, map[string]any{"state": "UNLOCK"}, t0.Add(2*time.Second)
	return op
}

// GET of an unknown op, of another principal's op, or with a bad wait, is
// answered at once.
func TestGetOpRefused(t *testing.T) {
	f := newFixture(t, twoPrincipals)
	f.save(pending("p-1"))
	if r := f.do("GET", "/api/v1/ops/p-1?wait=5s", "home-assistant-token-fedcba98", ""); r.status != 403 ||
		r.body != `{"error":"unauthorized","detail":"op_id \"p-1\" belongs to a command of another principal"}`+"\n" {
		t.Errorf("another principal's op: %d %s; want 403 unauthorized", r.status, r.body)
	}
	for _, tc := range []struct {
		path   string
		status int
		want   string
	}{
		{"/api/v1/ops/nope", 404, `{"error":"unknown_op","detail":"no command with op_id \"nope\" is stored (rejected commands never are; ended ones are kept for 7 days)"}`},
		{"/api/v1/ops/nope?wait=5s", 404, `{"error":"unknown_op","detail":"no command with op_id \"nope\" is stored (rejected commands never are; ended ones are kept for 7 days)"}`},
		{"/api/v1/ops/p-1?wait=soon", 400, `{"error":"invalid_wait","detail":"wait is \"soon\"; want a Go duration from 0s to 1m0s, such as 30s"}`},
		{"/api/v1/ops/p-1?wait=-1s", 400, `{"error":"invalid_wait","detail":"wait is \"-1s\"; want a Go duration from 0s to 1m0s, such as 30s"}`},
		{"/api/v1/ops/p-1?wait=61s", 400, `{"error":"invalid_wait","detail":"wait is \"61s\"; want a Go duration from 0s to 1m0s, such as 30s"}`},
		{"/api/v1/ops/p-1?wait=0s", 200, `{"op_id":"p-1","device":"front_door","status":"accepted","attempts":0,"target":{"state":"UNLOCK"},"at":"2026-11-29T19:00:00Z"}`},
	} {
		if r := f.do("GET", tc.path, tabletToken, ""); r.status != tc.status || r.body != tc.want+"\n" {
			t.Errorf("%s: %d %s\nwant %d %s", tc.path, r.status, r.body, tc.status, tc.want)
		}
	}
	if n := f.waiter.waiting(); n != 0 {
		t.Errorf("%d waiters left", n)
	}
}

// getAsync runs a GET in the background and returns its answer's channel.
func (f *fixture) getAsync(ctx context.Context, path string) <-chan response {
	ch := make(chan response, 1)
	go func() { ch <- f.doContext(ctx, "GET", path, tabletToken, "") }()
	return ch
}

func (f *fixture) answer(ch <-chan response) response {
	f.t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(eventWait):
		f.t.Fatal("the GET did not answer")
		panic("unreachable")
	}
}

// blockUntilWaiting waits until the GET has set its wait timer on the
// API's clock: it is waiting.
func (f *fixture) blockUntilWaiting() {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	defer cancel()
	if err := f.clock.BlockUntilContext(ctx, 1); err != nil {
		f.t.Fatal("the GET never waited")
	}
}

// ?wait= answers as soon as the op ends: the dispatcher's terminal result
// wakes it, and the answer is the stored op.
func TestGetOpWaitWakes(t *testing.T) {
	f := newFixture(t, twoPrincipals)
	f.save(pending("w-1"))
	ch := f.getAsync(context.Background(), "/api/v1/ops/w-1?wait=30s")
	f.blockUntilWaiting()
	// What the dispatcher does when the command ends: store it, then
	// publish the result, which OnResult hands to the waiter.
	done := succeeded(pending("w-1"))
	f.save(done)
	f.waiter.Notify(done.Result())
	r := f.answer(ch)
	want := `{"op_id":"w-1","device":"front_door","status":"succeeded","attempts":1,"target":{"state":"UNLOCK"},"state":{"state":"UNLOCK"},"at":"2026-11-29T19:00:02Z"}` + "\n"
	if r.status != http.StatusOK || r.body != want {
		t.Errorf("%d %s\nwant 200 %s", r.status, r.body, want)
	}
	if n := f.waiter.waiting(); n != 0 {
		t.Errorf("%d waiters left", n)
	}
}

// A result that is not terminal, or another op's, does not end the wait;
// the wait passing does, with the current status.
func TestGetOpWaitPasses(t *testing.T) {
	f := newFixture(t, twoPrincipals)
	f.save(pending("w-2"))
	ch := f.getAsync(context.Background(), "/api/v1/ops/w-2?wait=2s")
	f.blockUntilWaiting()
	f.waiter.Notify(devices.Result{OpID: "w-2", Device: "front_door", Status: devices.Queued})
	f.waiter.Notify(devices.Result{OpID: "other", Device: "front_door", Status: devices.Succeeded})
	// A rejection that names w-2 (a conflict on another device) wakes the
	// wait, which reads the store and waits on.
	f.waiter.Notify(devices.Result{OpID: "w-2", Device: "hall_light", Status: devices.Rejected, Reason: devices.ReasonOpIDConflict})
	select {
	case r := <-ch:
		t.Fatalf("answered before the wait passed: %d %s", r.status, r.body)
	default:
	}
	f.clock.Advance(2 * time.Second)
	r := f.answer(ch)
	if r.status != http.StatusOK || r.result(t).Status != devices.Accepted {
		t.Errorf("%d %s; want 200 accepted", r.status, r.body)
	}
}

// lateOps ends the op during the GET's first read, after the read: the
// result arrives between the read and the wait.
type lateOps struct {
	f    *fixture
	once sync.Once
}

func (o *lateOps) Lookup(opID string) (devices.Op, bool, error) {
	op, found, err := o.f.store.Lookup(opID)
	o.once.Do(func() {
		done := succeeded(op)
		o.f.save(done)
		o.f.waiter.Notify(done.Result())
	})
	return op, found, err
}

// No lost wake-up: a result that arrives between the GET's read and its
// wait still ends the wait, with no time passing.
func TestGetOpWaitNoLostWakeup(t *testing.T) {
	f := newFixture(t, twoPrincipals)
	f.save(pending("w-3"))
	mux := http.NewServeMux()
	RegisterCommands(mux, Commands{Commander: f.received, Ops: &lateOps{f: f}, Waiter: f.waiter, Clock: f.clock})
	f.handler = Authenticate(twoPrincipals, mux)
	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	defer cancel()
	r := f.doContext(ctx, "GET", "/api/v1/ops/w-3?wait=30s", tabletToken, "")
	if ctx.Err() != nil {
		t.Fatal("the wake-up was lost: the GET waited for its context")
	}
	if r.status != http.StatusOK || r.result(t).Status != devices.Succeeded {
		t.Errorf("%d %s; want 200 succeeded", r.status, r.body)
	}
}

// A client that leaves while waiting leaves nothing behind: its handler
// returns, its wait is taken out of the waiter, no goroutine is left.
func TestGetOpWaitClientLeaves(t *testing.T) {
	// The check runs after the fixture's cleanup has stopped its
	// dispatcher (cleanups run last first), against what ran before the
	// fixture: the dispatcher's workers, started as it goes, are not
	// the request's leaks.
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	f := newFixture(t, twoPrincipals)
	f.save(pending("w-4"))
	srv := httptest.NewServer(f.handler)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/v1/ops/w-4?wait=60s", nil)
	req.Header.Set("Authorization", "Bearer "+tabletToken)
	errc := make(chan error, 1)
	go func() {
		resp, err := srv.Client().Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		errc <- err
	}()
	f.blockUntilWaiting()
	if n := f.waiter.waiting(); n != 1 {
		t.Fatalf("%d waiting, want 1", n)
	}
	cancel()
	if err := <-errc; err == nil {
		t.Error("the request did not end with its context")
	}
	srv.Close() // returns once every handler has
	if n := f.waiter.waiting(); n != 0 {
		t.Errorf("%d waiters left", n)
	}
}
