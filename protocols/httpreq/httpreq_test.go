package httpreq

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
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

// answering starts a server that answers every request with code, the
// Retry-After ra (if any) and body.
func answering(t testing.TB, code int, ra, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		w.WriteHeader(code)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func client(t testing.TB, o Options) *Client {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Every status code the HTTP adapters name is classified as issue 20
// lists it: 400, 401, 403, 404, 422 permanent; 408, 425, 429 and 5xx
// (but 501 and 505) transient; a 2xx is no error.
func TestStatusCodesClassified(t *testing.T) {
	tests := []struct {
		code      int
		permanent bool
	}{
		{400, true}, {401, true}, {403, true}, {404, true}, {422, true}, {301, false},
		{408, false}, {425, false}, {429, false}, {500, false}, {502, false}, {503, false}, {504, false},
		{501, true}, {505, true},
	}
	for _, tc := range tests {
		srv := answering(t, tc.code, "", "nope")
		_, err := client(t, Options{}).Do(context.Background(), http.MethodPut, srv.URL+"/x", []byte(`{}`))
		var se *StatusError
		if !errors.As(err, &se) || se.Code != tc.code || se.Body != "nope" {
			t.Fatalf("HTTP %d: err %v; want a *StatusError with code %d and body nope", tc.code, err, tc.code)
		}
		c := retry.Classify(err)
		if string(c) != "http_"+strconv.Itoa(tc.code) {
			t.Errorf("HTTP %d classified %s", tc.code, c)
		}
		if tc.code >= 400 && (c.Permanent() != tc.permanent || c.Transient() == tc.permanent) {
			t.Errorf("HTTP %d: permanent %v, transient %v; want permanent %v", tc.code, c.Permanent(), c.Transient(), tc.permanent)
		}
	}
	srv := answering(t, 204, "", "")
	r, err := client(t, Options{}).Do(context.Background(), http.MethodGet, srv.URL, nil)
	if err != nil || r.Code != 204 {
		t.Fatalf("HTTP 204: %+v, %v; want the response, no error", r, err)
	}
}

// Retry-After reaches the policy in both of its forms, delay-seconds and
// an HTTP-date (parsed by net/http's ParseTime through retry).
func TestRetryAfterBothForms(t *testing.T) {
	now := time.Date(2026, 12, 3, 17, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		value string
		want  time.Duration
	}{
		{"7", 7 * time.Second},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
	} {
		srv := answering(t, 429, tc.value, "")
		_, err := client(t, Options{}).Do(context.Background(), http.MethodPost, srv.URL, []byte(`{}`))
		v, ok := retry.RetryAfterOf(err)
		if !ok || v != tc.value {
			t.Fatalf("Retry-After %q: got %q, %v", tc.value, v, ok)
		}
		if wait, ok := retry.ParseRetryAfter(v, now, time.Hour); !ok || wait != tc.want {
			t.Errorf("Retry-After %q waits %v (%v); want %v", tc.value, wait, ok, tc.want)
		}
	}
}

// A 3xx is the answer: the redirect is not followed.
func TestRedirectNotFollowed(t *testing.T) {
	followed := false
	target := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { followed = true }))
	defer target.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusFound)
	}))
	defer srv.Close()
	_, err := client(t, Options{}).Do(context.Background(), http.MethodGet, srv.URL, nil)
	var se *StatusError
	if !errors.As(err, &se) || se.Code != 302 || followed {
		t.Fatalf("err %v, followed %v; want HTTP 302, not followed", err, followed)
	}
}

// A server that does not answer within the timeout fails the request as a
// timeout, transient.
func TestTimeoutPerRequest(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	_, err := client(t, Options{Timeout: 50 * time.Millisecond}).Do(context.Background(), http.MethodGet, srv.URL, nil)
	if c := retry.Classify(err); c != retry.Timeout {
		t.Fatalf("err %v classified %s; want timeout", err, c)
	}
}

// Errors name the URL without its query and user info, and never a
// header's value.
func TestErrorsHideSecrets(t *testing.T) {
	srv := answering(t, 500, "", "")
	u := strings.Replace(srv.URL, "http://", "http://user:secret1@", 1) + "/p?token=secret2"
	_, err := client(t, Options{Headers: map[string]string{"Authorization": "Bearer secret3"}}).Do(context.Background(), http.MethodGet, u, nil)
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("err %v; want an error without the secrets", err)
	}
	_, err = client(t, Options{}).Do(context.Background(), http.MethodGet, "http://user:secret@127.0.0.1:1/?token=secret", nil)
	if err == nil || strings.Contains(err.Error(), "secret") {
		t.Fatalf("err %v; want an error without the secrets", err)
	}
}

// New refuses a bad header or a negative timeout, without the value.
func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Headers: map[string]string{"": "x"}}, "header name is empty"},
		{Options{Headers: map[string]string{"X-A": "secret\n"}}, "header X-A: the value holds control character U+000A"},
		{Options{Timeout: -time.Second}, "timeout must not be negative, got -1s"},
	} {
		if _, err := New(tc.o); err == nil || err.Error() != tc.want {
			t.Errorf("New(%+v) = %v; want %s", tc.o, err, tc.want)
		}
	}
}

// RedactPath leaves out what may be a webhook's secret, its path, with
// the query and user info; it keeps where the request went.
func TestRedactPathShowsOnlyWhereTheRequestWent(t *testing.T) {
	for raw, want := range map[string]string{
		"https://ntfy.sh/secret-topic":                       "https://ntfy.sh/…",
		"http://ha.local:8123/api/webhook/secret-id?x=1#f":   "http://ha.local:8123/…",
		"https://user:secret@gotify.local/message?token=abc": "https://gotify.local/…",
		"https://hooks.local/":                               "https://hooks.local/",
		"https://hooks.local":                                "https://hooks.local",
		"http://%zz":                                         "(unparsable URL)",
	} {
		if got := RedactPath(raw); got != want {
			t.Errorf("RedactPath(%q) = %q, want %q", raw, got, want)
		}
	}
}
