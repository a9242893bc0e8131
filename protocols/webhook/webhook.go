// Package webhook is Hearth's adapter for notify services reached over
// HTTP: ntfy, Gotify, a Home Assistant webhook, or anything that takes a
// JSON POST. A Sender POSTs one JSON body to one URL and says, through the
// shape of its error, what happened, so that the dispatcher's retry policy
// and circuit breaker can judge it (package retry's Classify reads the
// error's status code and Retry-After structurally). The request itself,
// its timeout, the bounded body read and *StatusError are package
// httpreq's, which protocols/httpdev shares.
//
// It never retries, queues or decides whether to try again: one Notify is
// one POST. It never follows redirects: a 3xx is returned as a
// *StatusError, since a notify URL that moved is a configuration mistake.
//
// # Caveats
//
//   - Connections are not kept alive: notifications are rare, and a
//     connection per POST leaves nothing behind between them.
//   - Error texts name the URL's scheme and host only: not its query and
//     user info, where services such as Gotify carry their token
//     (?token=…), nor its path, which is the secret of others (ntfy's
//     topic, Home Assistant's webhook id); a failed response's body
//     shown has the path and its last segment replaced too.
package webhook

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/hearthd/hearth/protocols/httpreq"
)

// DefaultTimeout bounds one POST, from dialling to the end of the
// response headers and the bounded body read, when Options.Timeout is 0.
const DefaultTimeout = httpreq.DefaultTimeout

// MaxBodyRead is how many bytes of a response body a Sender reads (and
// discards) at most; a service answering a notification with megabytes
// costs no more.
const MaxBodyRead = httpreq.MaxBodyRead

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
	url    string
	client *httpreq.Client
}

// New checks opts and returns a Sender. It returns an error for a URL that
// is not absolute http(s) with a host, a bad header name or value, or a
// negative timeout; the error never repeats the URL's query or user info.
func New(opts Options) (*Sender, error) {
	if err := CheckURL(opts.URL); err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	// A webhook's path is often its secret (ntfy's topic, Home
	// Assistant's webhook id): errors, which are logged, leave it out.
	c, err := httpreq.New(httpreq.Options{Name: "webhook", Headers: opts.Headers, Timeout: opts.Timeout, Transport: opts.Transport, HidePath: true})
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	return &Sender{url: opts.URL, client: c}, nil
}

// CheckURL reports whether raw is a URL a Sender can POST to: absolute,
// scheme http or https, with a host (httpreq.CheckURL). The error never
// repeats the URL, which may hold a token.
func CheckURL(raw string) error { return httpreq.CheckURL(raw) }

// StatusError is a response with a status code other than 2xx
// (httpreq.StatusError, What "webhook"). Package retry classifies it by
// StatusCode as "http_<code>" (429 and most 5xx transient, most 4xx
// permanent) and honours its RetryAfterValue.
type StatusError = httpreq.StatusError

// Notify POSTs payload (JSON) to the service, within the Sender's timeout
// and ctx. It returns nil on a 2xx status; a *StatusError on any other
// status (3xx included: redirects are not followed); otherwise the
// transport's error as net/http returns it, a *url.Error whose chain
// holds the cause (context.DeadlineExceeded on a timeout,
// syscall.ECONNREFUSED, a *net.DNSError, …) for retry.Classify, with the
// URL shown as its scheme and host only. At most MaxBodyRead bytes of the
// response body are read.
func (s *Sender) Notify(ctx context.Context, payload []byte) error {
	if payload == nil {
		payload = []byte{}
	}
	_, err := s.client.Do(ctx, http.MethodPost, s.url, payload)
	return err
}
