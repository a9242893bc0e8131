package httpreq

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/retry"
)

// FuzzResponse answers a request with any status, Retry-After and body:
// Do never panics, returns a 2xx as a response with at most MaxBodyRead
// bytes, and anything else as a *StatusError with its code and at most
// 200 bytes of body, whose Retry-After parses or is refused cleanly.
func FuzzResponse(f *testing.F) {
	f.Add(503, "120", []byte("busy"))
	f.Add(429, "Wed, 21 Oct 2015 07:28:00 GMT", []byte(""))
	f.Add(200, "", []byte(`{"state":"ON"}`))
	f.Add(404, "-1", []byte(strings.Repeat("x", 300)))
	var code int
	var ra string
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		w.WriteHeader(code)
		w.Write(body)
	}))
	defer srv.Close()
	c, err := New(Options{Timeout: 5 * time.Second})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, fcode int, fra string, fbody []byte) {
		code = 200 + ((fcode%400)+400)%400 // 200..599: a final response
		if code == 204 || code == 304 {
			fbody = nil // no body allowed
		}
		ra = strings.Map(func(r rune) rune {
			if r < 0x20 || r == 0x7f || r > 0x7e {
				return -1
			}
			return r
		}, fra)
		body = fbody
		r, err := c.Do(context.Background(), http.MethodGet, srv.URL, nil)
		if code < 300 {
			if err != nil || r.Code != code || len(r.Body) > MaxBodyRead {
				t.Fatalf("HTTP %d: %v, %d bytes", code, err, len(r.Body))
			}
			return
		}
		var se *StatusError
		if !errors.As(err, &se) || se.Code != code || len(se.Body) > maxBodyShown {
			t.Fatalf("HTTP %d: %v", code, err)
		}
		if v, ok := retry.RetryAfterOf(err); ok {
			if w, ok := retry.ParseRetryAfter(v, time.Unix(0, 0), time.Hour); ok && (w < 0 || w > time.Hour) {
				t.Fatalf("Retry-After %q: wait %v", v, w)
			}
		}
	})
}

// FuzzCheckURL: any text is a URL or a clear error, never a panic, and
// the error never repeats the text's query.
func FuzzCheckURL(f *testing.F) {
	f.Add("https://h/p?token=secret")
	f.Add("http://%zz")
	f.Fuzz(func(t *testing.T, raw string) {
		err := CheckURL(raw)
		if err != nil && err.Error() == "" {
			t.Fatal("empty error")
		}
		_ = Redact(raw)
		_ = RedactPath(raw)
	})
}
