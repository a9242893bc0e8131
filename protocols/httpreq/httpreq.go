// Package httpreq is the one HTTP request Hearth's HTTP adapters make
// (protocols/webhook's notifications, protocols/httpdev's device
// commands and status reads): a request with a timeout, without
// redirects, its response body read up to a bound, and a failure said in
// the shape package retry classifies. A response other than 2xx is a
// *StatusError, whose StatusCode and RetryAfterValue retry.Classify and
// retry.RetryAfterOf read structurally (408, 425, 429 and 5xx but 501 and
// 505 transient; 400, 401, 403, 404, 422 and the other 4xx permanent;
// Retry-After as delay-seconds or an HTTP-date). It imports nothing of
// Hearth's.
//
// It never retries, queues or decides whether to try again: one Do is one
// request. It never follows redirects: a 3xx is returned as a
// *StatusError, since a URL that moved is a configuration mistake.
//
// # Caveats
//
//   - Connections are not kept alive: a notification or a command is
//     rare, and a connection per request leaves nothing behind between
//     them.
//   - Error texts name the URL without its query and user info (Redact),
//     where services such as Gotify carry their token (?token=…); header
//     values (Authorization) never appear in an error.
package httpreq

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

// DefaultTimeout bounds one request, from dialling to the end of the
// response headers and the bounded body read, when Options.Timeout is 0.
const DefaultTimeout = 10 * time.Second

// MaxBodyRead is how many bytes of a response body Do reads at most; a
// service answering with megabytes costs no more.
const MaxBodyRead = 64 << 10

// maxBodyShown is how many bytes of a failed response's body its
// *StatusError keeps, for the log.
const maxBodyShown = 200

// Options configures a Client.
type Options struct {
	// Name starts every error text ("webhook", "http"). Default "http".
	Name string
	// Headers are sent with every request, after Content-Type
	// (application/json, on a request with a body) and User-Agent
	// (hearth), which they may override: for instance "Authorization:
	// Bearer <token>". Names must be HTTP tokens; values must not hold
	// control characters other than tab (CheckHeader).
	Headers map[string]string
	// Timeout bounds one request; 0 means DefaultTimeout. Negative is an
	// error.
	Timeout time.Duration
	// Transport, if set, carries the requests (tests, proxies); nil means
	// a clone of http.DefaultTransport without keep-alives.
	Transport http.RoundTripper
	// HidePath, for a URL whose path is a secret (ntfy's topic, Home
	// Assistant's webhook id), keeps the path out of error texts too:
	// they show scheme://host/… (RedactPath), and a failed response's
	// body shown in a *StatusError has the path and its last segment
	// replaced by "…".
	HidePath bool
}

// Client makes requests with one set of headers and one timeout. It is
// safe for concurrent use.
type Client struct {
	name     string
	headers  http.Header
	timeout  time.Duration
	hidePath bool
	client   *http.Client
}

// New checks opts and returns a Client. It returns an error for a bad
// header name or value, or a negative timeout; the error never repeats a
// header's value.
func New(opts Options) (*Client, error) {
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("timeout must not be negative, got %s", opts.Timeout)
	}
	c := &Client{name: opts.Name, headers: http.Header{}, timeout: opts.Timeout, hidePath: opts.HidePath}
	if c.name == "" {
		c.name = "http"
	}
	if c.timeout == 0 {
		c.timeout = DefaultTimeout
	}
	for name, value := range opts.Headers {
		if err := CheckHeader(name, value); err != nil {
			return nil, err
		}
		c.headers.Set(name, value)
	}
	tr := opts.Transport
	if tr == nil {
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.DisableKeepAlives = true
		tr = t
	}
	c.client = &http.Client{
		Transport: tr,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // a 3xx is the answer
		},
	}
	return c, nil
}

// Timeout returns the bound of one request.
func (c *Client) Timeout() time.Duration { return c.timeout }

// Response is a 2xx response: its status code, headers and the first
// MaxBodyRead bytes of its body.
type Response struct {
	Code   int
	Header http.Header
	Body   []byte
}

// Do sends one request, method to rawURL with body (JSON; nil sends
// none), within the Client's timeout and ctx. It returns the response on
// a 2xx status; a *StatusError on any other status (3xx included:
// redirects are not followed); otherwise the transport's error as
// net/http returns it, a *url.Error whose chain holds the cause
// (context.DeadlineExceeded on a timeout, syscall.ECONNREFUSED, io.EOF
// for a connection closed without an answer, a *net.DNSError, …) for
// retry.Classify, with the URL redacted (Redact). At most MaxBodyRead
// bytes of the response body are read.
func (c *Client) Do(ctx context.Context, method, rawURL string, body []byte) (Response, error) {
	shown := Redact(rawURL)
	if c.hidePath {
		shown = RedactPath(rawURL)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, rawURL, rd)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: %w", c.name, shown, redactErr(err, shown))
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", "hearth")
	for name, values := range c.headers {
		req.Header[name] = values
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return Response{}, redactErr(err, shown)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxBodyRead))
	io.Copy(io.Discard, io.LimitReader(resp.Body, MaxBodyRead)) // a little more, so the connection ends cleanly
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return Response{Code: resp.StatusCode, Header: resp.Header, Body: b}, nil
	}
	head := strings.ToValidUTF8(string(b[:min(len(b), maxBodyShown)]), "")
	if c.hidePath {
		head = hidePathIn(head, req.URL)
	}
	return Response{}, &StatusError{
		What:       c.name,
		URL:        shown,
		Code:       resp.StatusCode,
		RetryAfter: resp.Header.Get("Retry-After"),
		Body:       strings.TrimSpace(head),
	}
}

// hidePathIn replaces in body, a failed response's, the path of u and its
// last segment (the secret of ntfy's topic or a Home Assistant webhook's
// id), as sent and unescaped: a server's error page often echoes the path
// ("Cannot POST /api/webhook/<id>"), which HidePath keeps out of the log.
// A last segment under 3 characters is left: it would mangle the body's
// words, and is no secret worth the name.
func hidePathIn(body string, u *url.URL) string {
	for _, p := range []string{u.EscapedPath(), u.Path} {
		p = strings.TrimRight(p, "/")
		if p == "" {
			continue
		}
		body = strings.ReplaceAll(body, p, "/…")
		if last := p[strings.LastIndexByte(p, '/')+1:]; len(last) >= 3 {
			body = strings.ReplaceAll(body, last, "…")
		}
	}
	return body
}

// redactErr puts shown in place of the URL of a *url.Error in err.
func redactErr(err error, shown string) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = shown
	}
	return err
}

// Redact returns raw without its query, fragment and user info, for logs
// and errors: a token in ?token= or in user:password@ stays out. A raw
// that does not parse is shown as "(unparsable URL)".
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}).String()
}

// RedactPath returns raw as Redact does, its path left out too, for a URL
// whose path is a secret: "https://ntfy.sh/…" for https://ntfy.sh/topic.
// A raw that does not parse is shown as "(unparsable URL)".
func RedactPath(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	shown := (&url.URL{Scheme: u.Scheme, Host: u.Host}).String()
	if u.Path != "" && u.Path != "/" {
		return shown + "/…"
	}
	return shown + u.Path
}

// CheckURL reports whether raw is a URL a Client can send to: absolute,
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
// control characters other than horizontal tab. The error never repeats
// the value, which may be a secret.
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
	// What is the client's name (Options.Name): "webhook", "http".
	What string
	// URL is the request's URL without query and user info.
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
	fmt.Fprintf(&b, "%s %s: HTTP %d", e.What, e.URL, e.Code)
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
