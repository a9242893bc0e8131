// Package webhook is Hearth's adapter for notify services reached over
// HTTP: ntfy, Gotify, a Home Assistant webhook, or anything that takes a
// JSON POST. A Sender POSTs one JSON body to one URL and says, through the
// shape of its error, what happened, so that the dispatcher's retry policy
// and circuit breaker can judge it (package retry's Classify reads the
// error's status code and Retry-After structurally; this package imports
// nothing of Hearth's).
//
// It never retries, queues or decides whether to try again: one Notify is
// one POST. It never follows redirects: a 3xx is returned as a
// *StatusError, since a notify URL that moved is a configuration mistake.
//
// # Caveats
//
//   - Connections are not kept alive: notifications are rare, and a
//     connection per POST leaves nothing behind between them.
//   - Error texts name the URL without its query and user info, where
//     services such as Gotify carry their token (?token=…).
package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
)

// DefaultTimeout bounds one POST, from dialling to the end of the
// response headers and the bounded body read, when Options.Timeout is 0.
const DefaultTimeout = 10 * time.Second

// MaxBodyRead is how many bytes of a response body a Sender reads (and
// discards) at most; a service answering a notification with megabytes
// costs no more.
const MaxBodyRead = 64 << 10

// maxBodyShown is how many bytes of a failed response's body its
// *StatusError keeps, for the log.
const maxBodyShown = 200

// Options configures a Sender.
type Options struct {
	// URL is where notifications are POSTed: an absolute http:// or
	// https:// URL with a host. Required.
	URL string
	// Headers are sent with every POST, after Content-Type
	// (application/json) and User-Agent (hearth), which they may
	// override: for instance "Authorization: Bearer <token>" for ntfy,
	// Gotify or Home Assistant. Names must be HTTP tokens; values must not
	// hold control characters other than tab.
	Headers map[string]string
	// Timeout bounds one POST; 0 means DefaultTimeout. Negative is an
	// error.
	Timeout time.Duration
	// Transport, if set, carries the requests (tests, proxies); nil means
	// a clone of http.DefaultTransport without keep-alives.
	Transport http.RoundTripper
}

// Sender POSTs JSON bodies to one notify service. It is safe for
// concurrent use.
type Sender struct {
	url     string
	shown   string // the URL without query and user info, for errors
	headers http.Header
	timeout time.Duration
	client  *http.Client
}

// New checks opts and returns a Sender. It returns an error for a URL that
// is not absolute http(s) with a host, a bad header name or value, or a
// negative timeout; the error never repeats the URL's query or user info.
func New(opts Options) (*Sender, error) {
	if err := CheckURL(opts.URL); err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	u, _ := url.Parse(opts.URL)
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("webhook: timeout must not be negative, got %s", opts.Timeout)
	}
	s := &Sender{
		url:     opts.URL,
		shown:   (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String(),
		headers: http.Header{},
		timeout: opts.Timeout,
	}
	if s.timeout == 0 {
		s.timeout = DefaultTimeout
	}
	for name, value := range opts.Headers {
		if err := CheckHeader(name, value); err != nil {
			return nil, fmt.Errorf("webhook: %w", err)
		}
		s.headers.Set(name, value)
	}
	tr := opts.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DisableKeepAlives = true
		tr = t
	}
	s.client = &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // a 3xx is the answer
		},
	}
	return s, nil
}

// CheckURL reports whether raw is a URL a Sender can POST to: absolute,
// scheme http or https, with a host. The error never repeats the URL,
// which may hold a token.
func CheckURL(raw string) error {
	if raw == "" {
		return errors.New("URL is empty")
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("not a valid URL: %v", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		if u.Scheme == "" {
			return errors.New("want an http:// or https:// URL; this one has no scheme")
		}
		return fmt.Errorf("want an http:// or https:// URL, not %s://", u.Scheme)
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("no host; want %s://host/path", u.Scheme)
	}
	return nil
}

// CheckHeader reports whether name and value make a valid HTTP header
// field (RFC 9110 §5.1, §5.5): name a non-empty token, value without
// control characters other than horizontal tab.
func CheckHeader(name, value string) error {
	if name == "" {
		return errors.New("header name is empty")
	}
	for _, r := range name {
		if r > unicode.MaxASCII || !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return fmt.Errorf("header name %q is not an HTTP token", name)
		}
	}
	for _, r := range value {
		if (r < 0x20 && r != '\t') || r == 0x7f {
			return fmt.Errorf("header %s: the value holds control character %U", name, r)
		}
	}
	return nil
}

// StatusError is a response with a status code other than 2xx. Package
// retry classifies it by StatusCode as "http_<code>" (429 and most 5xx
// transient, most 4xx permanent) and honours its RetryAfterValue.
type StatusError struct {
	// URL is the service's URL without query and user info.
	URL string
	// Code is the response's status code, such as 503.
	Code int
	// RetryAfter is the raw Retry-After header (delay-seconds or an
	// HTTP-date), "" when absent.
	RetryAfter string
	// Body is the start of the response body (at most 200 bytes, spaces
	// trimmed), for the log; "" when empty.
	Body string
}

func (e *StatusError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "webhook %s: HTTP %d", e.URL, e.Code)
	if e.RetryAfter != "" {
		fmt.Fprintf(&b, " (Retry-After: %s)", e.RetryAfter)
	}
	if e.Body != "" {
		fmt.Fprintf(&b, ": %q", e.Body)
	}
	return b.String()
}

// StatusCode returns the HTTP status code, for retry.Classify.
func (e *StatusError) StatusCode() int { return e.Code }

// RetryAfterValue returns the raw Retry-After header, for
// retry.RetryAfterOf.
func (e *StatusError) RetryAfterValue() string { return e.RetryAfter }

// Notify POSTs payload (JSON) to the service, within the Sender's timeout
// and ctx. It returns nil on a 2xx status; a *StatusError on any other
// status (3xx included: redirects are not followed); otherwise the
// transport's error as net/http returns it, a *url.Error whose chain
// holds the cause (context.DeadlineExceeded on a timeout,
// syscall.ECONNREFUSED, a *net.DNSError, …) for retry.Classify, with the
// URL stripped of query and user info. At most MaxBodyRead bytes of the
// response body are read.
func (s *Sender) Notify(ctx context.Context, payload []byte) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("webhook %s: %w", s.shown, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "hearth")
	for name, values := range s.headers {
		req.Header[name] = values
	}
	resp, err := s.client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = s.shown
		}
		return err
	}
	defer resp.Body.Close()
	head := make([]byte, maxBodyShown)
	n, _ := io.ReadFull(resp.Body, head)
	io.Copy(io.Discard, io.LimitReader(resp.Body, MaxBodyRead-int64(n)))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	return &StatusError{
		URL:        s.shown,
		Code:       resp.StatusCode,
		RetryAfter: resp.Header.Get("Retry-After"),
		Body:       strings.TrimSpace(strings.ToValidUTF8(string(head[:n]), "")),
	}
}
