package webhook

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hearthd/hearth/retry"
)

// TestMain fails the package if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// request is what a test server received.
type request struct {
	method string
	header http.Header
	body   string
}

// server answers every request with status, extra headers and body, and
// hands what it received to the returned channel.
func server(t *testing.T, status int, header map[string]string, body string) (*httptest.Server, <-chan request) {
	t.Helper()
	got := make(chan request, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- request{r.Method, r.Header.Clone(), string(b)}
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func newSender(t *testing.T, o Options) *Sender {
	t.Helper()
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A 2xx is delivered: the POST carries the JSON body, its content type and
// the static headers.
func TestNotifyDelivers(t *testing.T) {
	for _, status := range []int{200, 202, 204} {
		srv, got := server(t, status, nil, "")
		s := newSender(t, Options{URL: srv.URL + "/hook", Headers: map[string]string{"Authorization": "Bearer tok", "x-priority": "5"}})
		if err := s.Notify(context.Background(), []byte(`{"device":"front_door"}`)); err != nil {
			t.Fatalf("status %d: Notify() = %v, want nil", status, err)
		}
		r := <-got
		if r.method != "POST" || r.body != `{"device":"front_door"}` {
			t.Errorf("status %d: got %s %s, want POST {\"device\":\"front_door\"}", status, r.method, r.body)
		}
		for name, want := range map[string]string{"Content-Type": "application/json", "User-Agent": "hearth", "Authorization": "Bearer tok", "X-Priority": "5"} {
			if v := r.header.Get(name); v != want {
				t.Errorf("status %d: header %s = %q, want %q", status, name, v, want)
			}
		}
	}
}

// Static headers may override the defaults, such as ntfy's plain-text
// Content-Type.
func TestHeadersOverrideDefaults(t *testing.T) {
	srv, got := server(t, 200, nil, "")
	s := newSender(t, Options{URL: srv.URL, Headers: map[string]string{"Content-Type": "text/plain"}})
	if err := s.Notify(context.Background(), []byte("x")); err != nil {
		t.Fatal(err)
	}
	if v := (<-got).header.Get("Content-Type"); v != "text/plain" {
		t.Errorf("Content-Type = %q, want text/plain", v)
	}
}

// Every non-2xx status is a *StatusError with its code and raw
// Retry-After, which retry classifies and honours.
func TestStatusErrors(t *testing.T) {
	now := time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)
	tests := []struct {
		status     int
		retryAfter string
		wantClass  retry.Class
		permanent  bool
		wantWait   time.Duration // the Retry-After's wait from now; 0: none valid
	}{
		{503, "2", "http_503", false, 2 * time.Second},
		{429, "Sun, 29 Nov 2026 19:00:30 GMT", "http_429", false, 30 * time.Second},
		{500, "", "http_500", false, 0},
		{502, "", "http_502", false, 0},
		{400, "", "http_400", true, 0},
		{401, "", "http_401", true, 0},
		{404, "", "http_404", true, 0},
		{301, "", "http_301", false, 0}, // not followed; no failure class: not retried
	}
	for _, tc := range tests {
		header := map[string]string{"Location": "/elsewhere"}
		if tc.retryAfter != "" {
			header["Retry-After"] = tc.retryAfter
		}
		srv, _ := server(t, tc.status, header, "  busy  ")
		// The path is the secret of many webhooks (ntfy's topic, Home
		// Assistant's webhook id), like the query's token.
		err := newSender(t, Options{URL: srv.URL + "/secret-topic?token=secret"}).Notify(context.Background(), []byte("{}"))
		var se *StatusError
		if !errors.As(err, &se) || se.Code != tc.status || se.RetryAfter != tc.retryAfter || se.Body != "busy" || se.URL != srv.URL+"/…" {
			t.Errorf("status %d: Notify() = %#v, want a *StatusError with code %d, Retry-After %q, body busy, URL %s/…", tc.status, err, tc.status, tc.retryAfter, srv.URL)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("status %d: error %q shows the URL's path or query", tc.status, err)
		}
		if c := retry.Classify(err); c != tc.wantClass || c.Permanent() != tc.permanent {
			t.Errorf("status %d: class %s (permanent %v), want %s (permanent %v)", tc.status, c, c.Permanent(), tc.wantClass, tc.permanent)
		}
		ra, ok := retry.RetryAfterOf(err)
		wait, valid := retry.ParseRetryAfter(ra, now, time.Hour)
		if ok != (tc.retryAfter != "") || (tc.wantWait != 0 && (!valid || wait != tc.wantWait)) {
			t.Errorf("status %d: Retry-After %q (%v) waits %v (valid %v), want %v", tc.status, ra, ok, wait, valid, tc.wantWait)
		}
	}
}

// The policy honours a 503's Retry-After and gives up on a 401 at once.
func TestPolicyReadsStatusErrors(t *testing.T) {
	p := retry.Policy{MaxAttempts: 3, Backoff: retry.Backoff{Base: time.Second, Multiplier: 2, Cap: time.Minute}}
	now := time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)
	f := func(err error) retry.Decision {
		return p.Next(retry.Failure{Attempt: 1, Err: err, Now: now, Deadline: now.Add(10 * time.Minute)}, zeroRand{}, nil)
	}
	if d := f(&StatusError{Code: 503, RetryAfter: "2"}); !d.Retry || d.Wait != 2*time.Second || !d.RetryAfter {
		t.Errorf("503 Retry-After 2: %v, want retry in 2s from Retry-After", d)
	}
	if d := f(&StatusError{Code: 401}); d.Retry || d.Reason != retry.GiveUpPermanent {
		t.Errorf("401: %v, want give up: permanent_error", d)
	}
}

type zeroRand struct{}

func (zeroRand) Int64N(int64) int64 { return 0 }

// A server that does not answer within the timeout is a timeout, and the
// POST returns then.
func TestTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	err := newSender(t, Options{URL: srv.URL, Timeout: 20 * time.Millisecond}).Notify(context.Background(), []byte("{}"))
	if c := retry.Classify(err); c != retry.Timeout {
		t.Errorf("Notify() = %v, class %s; want class timeout", err, c)
	}
}

// A refused connection is connection_refused, and its error names the
// host but not the URL's path or query.
func TestConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	err = newSender(t, Options{URL: "http://" + addr + "/secret-topic?token=secret"}).Notify(context.Background(), []byte("{}"))
	if c := retry.Classify(err); c != retry.ConnectionRefused {
		t.Errorf("Notify() = %v, class %s; want class connection_refused", err, c)
	}
	if err != nil && (strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), addr)) {
		t.Errorf("error %q shows the URL's path or query, or not its host", err)
	}
}

// A caller's cancellation is canceled: not a failure of the service.
func TestCanceled(t *testing.T) {
	srv, _ := server(t, 200, nil, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := newSender(t, Options{URL: srv.URL}).Notify(ctx, []byte("{}"))
	if c := retry.Classify(err); c != retry.Canceled {
		t.Errorf("Notify() = %v, class %s; want class canceled", err, c)
	}
}

// A huge response body is read only up to MaxBodyRead: the POST ends
// without the server having written it all.
func TestBodyReadIsBounded(t *testing.T) {
	wrote := make(chan int64, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		n, _ := io.Copy(w, io.LimitReader(spaces{}, 64<<20))
		wrote <- n
	}))
	defer srv.Close()
	err := newSender(t, Options{URL: srv.URL}).Notify(context.Background(), []byte("{}"))
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 500 || len(se.Body) != 0 {
		t.Fatalf("Notify() = %v, want HTTP 500 with an empty shown body (spaces only)", err)
	}
	if n := <-wrote; n >= 64<<20 {
		t.Errorf("the server wrote all %d bytes: the client read the whole body", n)
	}
}

type spaces struct{}

func (spaces) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

// New refuses what cannot be POSTed to, without repeating the URL.
func TestNewRefuses(t *testing.T) {
	tests := []struct {
		opts Options
		want string
	}{
		{Options{}, "webhook: URL is empty"},
		{Options{URL: "ntfy.sh/alerts"}, "webhook: want an http:// or https:// URL; this one has no scheme"},
		{Options{URL: "ftp://host/x"}, "webhook: want an http:// or https:// URL, not ftp://"},
		{Options{URL: "https:///x?token=secret"}, "webhook: no host; want https://host/path"},
		{Options{URL: "http://h/%zz"}, `webhook: not a valid URL: invalid URL escape "%zz"`},
		{Options{URL: "http://h/", Headers: map[string]string{"Bad Name": "x"}}, `webhook: header name "Bad Name" is not an HTTP token`},
		{Options{URL: "http://h/", Headers: map[string]string{"X-A": "a\r\nB: c"}}, `webhook: header X-A: the value holds control character U+000D`},
		{Options{URL: "http://h/", Timeout: -time.Second}, "webhook: timeout must not be negative, got -1s"},
	}
	for _, tc := range tests {
		_, err := New(tc.opts)
		if err == nil || err.Error() != tc.want {
			t.Errorf("New(%+v) = %v, want %s", tc.opts, err, tc.want)
		}
	}
}

// A receiver's error page that echoes the path (Express, Node-RED:
// "Cannot POST /api/webhook/<id>") does not bring the webhook's secret
// into the error, which is logged.
func TestEchoedPathStaysOutOfTheError(t *testing.T) {
	const secret = "7dc0b1c9-secret-id"
	srv, _ := server(t, 404, nil, "<pre>Cannot POST /api/webhook/"+secret+"</pre>")
	err := newSender(t, Options{URL: srv.URL + "/api/webhook/" + secret}).Notify(context.Background(), []byte("{}"))
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 404 {
		t.Fatalf("Notify() = %v, want a 404 *StatusError", err)
	}
	if strings.Contains(err.Error(), secret) || se.Body != "<pre>Cannot POST /…</pre>" {
		t.Errorf("error %q, body %q: want the echoed path hidden, body <pre>Cannot POST /…</pre>", err, se.Body)
	}
}
