// Package httpdev is Hearth's adapter for plain HTTP devices and services
// (protocol: http): a device behind a REST endpoint, such as a garage door
// controller, a heat pump's local API or a cloud service. It encodes a
// target as one request, reads the device's state with a GET, and says,
// through the shape of its errors, what the service answered, so that the
// dispatcher's retry policy and the service's breaker can judge it. It
// never decides whether a command succeeded: it reports the state it read
// and the dispatcher judges it.
//
// # Contract (docs/HTTP.md)
//
// A service has a base URL; each device an address, the path of its
// resource under it (default its ID): "doors/1" is <base>/doors/1.
//
//	<method> <base>/<address>   Hearth → device: the target as a JSON object in
//	                            Hearth's attribute names, {"state":"CLOSE"}
//	                            (method PUT by default, or POST or PATCH)
//	GET <base>/<address>        Hearth → device: its state, answered as a JSON
//	                            object in the same names, {"state":"CLOSE","position":0}
//
// # Confirmation
//
// The response to a command confirms nothing, whatever its body says (it
// may be an optimistic echo of the request). After a 2xx the adapter GETs
// the status at once and reports what it reads, after the send: the
// dispatcher confirms the command when that state is the target. A device
// still on its way (a door travelling) is read again by the dispatcher's
// read_back at the attempt's timeout, or by the fresh read before the next
// attempt of a risky action; the adapter does not poll.
//
// # Errors
//
// A status other than 2xx is an *httpreq.StatusError (package retry:
// 400, 401, 403, 404, 422 permanent, never retried; 408, 425, 429 and 5xx
// but 501 and 505 transient, with Retry-After honoured). A connection
// refused, reset or closed without an answer, and a request past its
// timeout (a *TimeoutError, which counts against the breaker), are
// transient. A 401 is permanent: the adapter has no token
// source to refresh a token from; the token is a static header from the
// config.
//
// # Reads and availability
//
// Read GETs the status and reports it (the fresh read before a risky
// attempt). Every answer, of any status, marks the device online
// (Sink.Availability); no answer marks nothing: the service's breaker
// stands for a service that does not answer.
package httpdev

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/httpreq"
)

// DefaultTimeout bounds one request when Options.Timeout is 0.
const DefaultTimeout = 5 * time.Second

// Transport is what plain HTTP does for Hearth: no radio-layer retry, no
// wake-up queue, and no report of its own after a change (Hearth reads
// the state after each send). Its DefaultAttempts is 3.
var Transport = devices.Transport{RadioRetries: false, WakeUpQueue: false, ReportsState: false}

// Methods are the methods a command may be sent with.
var Methods = []string{http.MethodPut, http.MethodPost, http.MethodPatch}

// Sink receives what the devices answer. The dispatcher implements it.
type Sink interface {
	Report(device string, state map[string]any, retained bool)
	Availability(device string, online bool)
}

// Options configures an Adapter.
type Options struct {
	Service string
	// BaseURL is the service's base URL (http:// or https://, with a
	// host); a device's address is a path under it. Required.
	BaseURL string
	// Method sends commands: PUT, POST or PATCH; "" means PUT.
	Method string
	// Headers go with every request (Authorization: Bearer <token>);
	// their values are never logged.
	Headers map[string]string
	// Timeout bounds one request; 0 means DefaultTimeout.
	Timeout time.Duration
	// Devices are the devices this service reaches; Address is read by
	// ParseAddress (default: the ID).
	Devices []devices.Device
	Logger  *slog.Logger
	// HTTPTransport, if set, carries the requests (tests); nil means
	// net/http's default transport without keep-alives.
	HTTPTransport http.RoundTripper
}

// Adapter speaks to the devices of one HTTP service.
type Adapter struct {
	service string
	method  string
	urls    map[string]string // device → its resource's URL
	client  *httpreq.Client
	timeout time.Duration // bounds one request
	log     *slog.Logger
	sink    Sink
}

// New checks opts and returns an adapter. It returns an error for a base
// URL that is not absolute http(s), an unknown method, a bad header or
// timeout, or a device address ParseAddress refuses (config refuses them
// first); no error repeats a URL's query or a header's value.
func New(opts Options) (*Adapter, error) {
	if err := httpreq.CheckURL(opts.BaseURL); err != nil {
		return nil, fmt.Errorf("http service %s: url: %w", opts.Service, err)
	}
	if strings.ContainsAny(opts.BaseURL, "?#") {
		return nil, fmt.Errorf("http service %s: url: a base URL takes no query or fragment (a device's address is a path under it)", opts.Service)
	}
	method := strings.ToUpper(opts.Method)
	if method == "" {
		method = http.MethodPut
	}
	if !contains(Methods, method) {
		return nil, fmt.Errorf("http service %s: method %q: want PUT, POST or PATCH", opts.Service, opts.Method)
	}
	timeout := opts.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	c, err := httpreq.New(httpreq.Options{Name: "http", Headers: opts.Headers, Timeout: timeout, Transport: opts.HTTPTransport})
	if err != nil {
		return nil, fmt.Errorf("http service %s: %w", opts.Service, err)
	}
	a := &Adapter{service: opts.Service, method: method, urls: map[string]string{}, client: c, timeout: timeout, log: opts.Logger}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	for _, d := range opts.Devices {
		raw := d.Address
		if raw == "" {
			raw = d.ID
		}
		addr, err := ParseAddress(raw)
		if err != nil {
			return nil, fmt.Errorf("http service %s: device %s: %w", opts.Service, d.ID, err)
		}
		a.urls[d.ID] = ResourceURL(opts.BaseURL, addr)
	}
	return a, nil
}

// CallTimeout returns the longest one Send or Read takes: twice
// Options.Timeout, since a Send is two requests (the command, then the
// status read), each bounded by it. The dispatcher lets a call run past
// it, so that a service that does not answer in time ends with a
// *TimeoutError (counted against the service's breaker), not with the
// dispatcher's own deadline.
func (a *Adapter) CallTimeout() time.Duration { return 2 * a.timeout }

// Start keeps sink for what the devices answer. Nothing is listened to:
// the adapter only makes requests.
func (a *Adapter) Start(_ context.Context, sink Sink) error {
	a.sink = sink
	return nil
}

// unsupportedError is a command the adapter cannot send: permanent.
type unsupportedError struct{ msg string }

func (e unsupportedError) Error() string   { return "http: " + e.msg }
func (e unsupportedError) Permanent() bool { return true }

// Send sends target as one request (see the package doc) and, on a 2xx,
// GETs the status and reports it. A nil error means the service took the
// command (2xx), never that the device acted on it; an error is the
// service's answer (*httpreq.StatusError) or the transport's. A status
// read that fails after a 2xx is logged, and the attempt waits for its
// confirmation as any other.
func (a *Adapter) Send(ctx context.Context, dev devices.Device, target devices.Target) error {
	u, ok := a.urls[dev.ID]
	if !ok {
		return unsupportedError{fmt.Sprintf("device %s is not on service %s", dev.ID, a.service)}
	}
	body, err := json.Marshal(map[string]any(target))
	if err != nil {
		return unsupportedError{fmt.Sprintf("target of %s: %v", dev.ID, err)}
	}
	_, err = a.client.Do(ctx, a.method, u, body)
	a.answered(dev.ID, err)
	if err != nil {
		return ownTimeout(ctx, err)
	}
	if err := a.read(ctx, dev.ID, u); err != nil {
		a.log.Warn("http: the status read after a command failed; the attempt waits for its confirmation", "device", dev.ID, "err", err)
	}
	return nil
}

// Read GETs the device's status and reports it. An error is the
// service's answer, the transport's, or a body that is no state.
func (a *Adapter) Read(ctx context.Context, dev devices.Device, _ devices.Target) error {
	u, ok := a.urls[dev.ID]
	if !ok {
		return unsupportedError{fmt.Sprintf("device %s is not on service %s", dev.ID, a.service)}
	}
	return a.read(ctx, dev.ID, u)
}

func (a *Adapter) read(ctx context.Context, id, u string) error {
	r, err := a.client.Do(ctx, http.MethodGet, u, nil)
	a.answered(id, err)
	if err != nil {
		return ownTimeout(ctx, err)
	}
	state, err := ParseState(r.Body)
	if err != nil {
		return fmt.Errorf("http %s: status: %w", httpreq.Redact(u), err)
	}
	a.sink.Report(id, state, false)
	return nil
}

// TimeoutError is a request the service did not answer within the
// service's timeout, while the caller's ctx was still live: the service's
// failure, so it carries no context.DeadlineExceeded in its chain (which
// the dispatcher takes for a send it abandoned itself, not the service's
// fault, and keeps from the breaker). retry.Classify reads it as a
// timeout by its Timeout method: transient.
type TimeoutError struct{ Err error }

func (e *TimeoutError) Error() string { return e.Err.Error() }

// Timeout reports true, for retry.Classify.
func (e *TimeoutError) Timeout() bool { return true }

// ownTimeout turns err into a *TimeoutError when it is the request's own
// timeout rather than ctx's end.
func ownTimeout(ctx context.Context, err error) error {
	if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return &TimeoutError{Err: err}
	}
	return err
}

// answered marks the device online when the service answered at all.
func (a *Adapter) answered(id string, err error) {
	var se *httpreq.StatusError
	if err == nil || errors.As(err, &se) {
		a.sink.Availability(id, true)
	}
}

// Address is a device's resource: its path under the base URL, as
// segments.
type Address struct {
	Segments []string
}

// String returns the address as written: the segments joined by '/'.
func (a Address) String() string { return strings.Join(a.Segments, "/") }

// ParseAddress reads a device's address: a relative path of one or more
// segments separated by '/' ("doors/1", "heatpump"), each non-empty, not
// "." or "..", without '?', '#', '%', '\', spaces or control characters
// (Hearth escapes nothing the config may mean literally).
func ParseAddress(raw string) (Address, error) {
	if raw == "" {
		return Address{}, errors.New("the address is empty; want the device's path under the service's url, such as doors/1")
	}
	if strings.HasPrefix(raw, "/") || strings.HasSuffix(raw, "/") {
		return Address{}, fmt.Errorf("address %q: write the path without a leading or trailing '/' (doors/1)", raw)
	}
	segs := strings.Split(raw, "/")
	for _, s := range segs {
		switch {
		case s == "":
			return Address{}, fmt.Errorf("address %q: an empty path segment ('//')", raw)
		case s == "." || s == "..":
			return Address{}, fmt.Errorf("address %q: no '.' or '..' segments: the address stays under the service's url", raw)
		}
		for _, r := range s {
			if r <= ' ' || r == 0x7f || strings.ContainsRune("?#%\\", r) {
				return Address{}, fmt.Errorf("address %q: %q is not allowed in a path here (no '?', '#', '%%', '\\', spaces or control characters)", raw, r)
			}
		}
	}
	return Address{Segments: segs}, nil
}

// ResourceURL is the URL of the device at addr under base: base without a
// trailing '/', then each segment path-escaped.
func ResourceURL(base string, addr Address) string {
	esc := make([]string, len(addr.Segments))
	for i, s := range addr.Segments {
		esc[i] = url.PathEscape(s)
	}
	return strings.TrimRight(base, "/") + "/" + strings.Join(esc, "/")
}

// MaxStateKeys bounds the attributes of one status body.
const MaxStateKeys = 64

// ParseState reads a status body: a JSON object whose keys are Hearth's
// attribute names and whose values are strings, finite numbers or
// booleans ({"state":"CLOSE","position":0}); null values are left out. A
// "state" string is upper-cased, and CLOSED read as CLOSE (how door
// controllers say it). It returns an error for anything else: not JSON,
// not an object, an empty one, a nested value, more than MaxStateKeys
// attributes.
func ParseState(body []byte) (map[string]any, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	if raw == nil {
		return nil, errors.New("null, not a JSON object")
	}
	if len(raw) > MaxStateKeys {
		return nil, fmt.Errorf("%d attributes; at most %d", len(raw), MaxStateKeys)
	}
	out := map[string]any{}
	for k, v := range raw {
		if k == "" {
			return nil, errors.New("an attribute with an empty name")
		}
		var x any
		if err := json.Unmarshal(v, &x); err != nil {
			return nil, fmt.Errorf("attribute %q: %v", k, err)
		}
		switch t := x.(type) {
		case nil:
			continue
		case string:
			if k == "state" {
				t = strings.ToUpper(t)
				if t == "CLOSED" {
					t = "CLOSE"
				}
			}
			out[k] = t
		case float64:
			if math.IsNaN(t) || math.IsInf(t, 0) {
				return nil, fmt.Errorf("attribute %q: not a finite number", k)
			}
			out[k] = t
		case bool:
			out[k] = t
		default:
			return nil, fmt.Errorf("attribute %q: %s is not a string, number or boolean", k, truncate(v))
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no attributes")
	}
	return out, nil
}

func truncate(b []byte) string {
	if len(b) > 60 {
		return string(b[:60]) + "…"
	}
	return string(b)
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
