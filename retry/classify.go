package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Class names the kind of a failure, found from the error's type, wrapped
// sentinel or status code, never from its message text. Each class is
// transient (worth another attempt) or permanent (another attempt fails
// the same way); Canceled is neither.
//
// HTTP status codes classify as "http_<code>", such as "http_503".
type Class string

// The classes Classify returns, besides "http_<code>".
const (
	Timeout           Class = "timeout"
	Unavailable       Class = "unavailable"
	ConnectionRefused Class = "connection_refused"
	ConnectionReset   Class = "connection_reset"
	DNSFailure        Class = "dns_failure"
	RateLimited       Class = "rate_limited"
	InvalidPayload    Class = "invalid_payload"
	Unauthorized      Class = "unauthorized"
	Unsupported       Class = "unsupported"
	// Refused is any other failure the service declares permanent, such
	// as an error with a method Permanent() bool that returns true.
	Refused Class = "refused"
	// Canceled is the caller giving up (context.Canceled): never retried
	// and never counted as a failure.
	Canceled Class = "canceled"
	// Unknown is an error Classify cannot place. It counts as transient:
	// the attempt ceiling bounds it.
	Unknown Class = "unknown"
)

// The groups a policy's retry_on and never_retry may name besides single
// classes: every transient or every permanent class.
const (
	GroupTransient Class = "transient"
	GroupPermanent Class = "permanent"
)

// Sentinel errors for failures without a type or code of their own. Wrap
// them (fmt.Errorf("…: %w", retry.ErrUnavailable)) so Classify finds them.
var (
	ErrUnavailable    = errors.New("service unavailable")
	ErrRateLimited    = errors.New("rate limited")
	ErrInvalidPayload = errors.New("invalid payload")
	ErrUnauthorized   = errors.New("unauthorized")
	ErrUnsupported    = errors.New("unsupported")
)

// StatusError is an HTTP response that failed with Code. RetryAfter is the
// raw Retry-After field value, "" when absent.
type StatusError struct {
	Code       int
	RetryAfter string
}

func (e *StatusError) Error() string {
	if e.RetryAfter != "" {
		return fmt.Sprintf("HTTP %d (Retry-After: %s)", e.Code, e.RetryAfter)
	}
	return fmt.Sprintf("HTTP %d", e.Code)
}

// StatusCode returns the HTTP status code.
func (e *StatusError) StatusCode() int { return e.Code }

// RetryAfterValue returns the raw Retry-After field value.
func (e *StatusError) RetryAfterValue() string { return e.RetryAfter }

// transientStatus and permanentStatus are the HTTP codes of RFC 9110 (and
// RFC 6585 for 429, RFC 8470 for 425) whose class is settled: a request
// that timed out, came too early, was rate limited or met a failing or
// overloaded server may succeed later; the others will fail the same way.
var (
	transientStatus = map[int]bool{408: true, 425: true, 429: true, 500: true, 502: true, 503: true, 504: true}
	permanentStatus = map[int]bool{400: true, 401: true, 403: true, 404: true, 405: true, 409: true, 410: true, 413: true, 422: true}
)

// Classify returns the class of err, checked in this order:
//
//   - nil: "".
//   - context.Canceled anywhere in the chain: Canceled.
//   - an error with StatusCode() int (such as *StatusError): "http_<code>"
//     for a code from 100 to 599, Unknown for any other.
//   - the sentinels ErrUnavailable, ErrRateLimited, ErrInvalidPayload,
//     ErrUnauthorized, ErrUnsupported: their class.
//   - an error with Permanent() bool returning true: Refused.
//   - context.DeadlineExceeded, os.ErrDeadlineExceeded or an error with
//     Timeout() bool returning true (net.Error): Timeout.
//   - *net.DNSError: DNSFailure.
//   - syscall.ECONNREFUSED: ConnectionRefused; ECONNRESET, ECONNABORTED,
//     EPIPE, io.ErrUnexpectedEOF: ConnectionReset; EHOSTUNREACH,
//     ENETUNREACH, EHOSTDOWN, ENETDOWN: Unavailable.
//   - anything else: Unknown.
func Classify(err error) Class {
	if err == nil {
		return ""
	}
	if errors.Is(err, context.Canceled) {
		return Canceled
	}
	var sc interface{ StatusCode() int }
	if errors.As(err, &sc) {
		if code := sc.StatusCode(); code >= 100 && code <= 599 {
			return Class("http_" + strconv.Itoa(code))
		}
		return Unknown // not an HTTP status code
	}
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return s.class
		}
	}
	var p interface{ Permanent() bool }
	if errors.As(err, &p) && p.Permanent() {
		return Refused
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return Timeout
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		if dns.IsTimeout {
			return Timeout
		}
		return DNSFailure
	}
	var to interface{ Timeout() bool }
	if errors.As(err, &to) && to.Timeout() {
		return Timeout
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return ConnectionRefused
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EPIPE), errors.Is(err, io.ErrUnexpectedEOF):
		return ConnectionReset
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, syscall.EHOSTDOWN), errors.Is(err, syscall.ENETDOWN):
		return Unavailable
	}
	return Unknown
}

var sentinels = []struct {
	err   error
	class Class
}{
	{ErrUnavailable, Unavailable},
	{ErrRateLimited, RateLimited},
	{ErrInvalidPayload, InvalidPayload},
	{ErrUnauthorized, Unauthorized},
	{ErrUnsupported, Unsupported},
}

// Permanent reports whether c is a permanent class: another attempt would
// fail the same way. Other 4xx codes than the listed ones, and 501 Not
// Implemented and 505 HTTP Version Not Supported, are permanent too.
func (c Class) Permanent() bool {
	switch c {
	case InvalidPayload, Unauthorized, Unsupported, Refused:
		return true
	}
	if code, ok := c.httpCode(); ok {
		if permanentStatus[code] || transientStatus[code] {
			return permanentStatus[code]
		}
		return (code >= 400 && code < 500) || code == 501 || code == 505
	}
	return false
}

// Transient reports whether c is a transient class: another attempt may
// succeed. Unknown is transient; Canceled is neither transient nor
// permanent.
func (c Class) Transient() bool {
	if c == Canceled || c == "" {
		return false
	}
	if code, ok := c.httpCode(); ok && code < 400 {
		return false // not a failure status; nothing to retry
	}
	return !c.Permanent()
}

// httpCode returns the status code of an "http_<code>" class.
func (c Class) httpCode() (int, bool) {
	s, ok := strings.CutPrefix(string(c), "http_")
	if !ok || len(s) != 3 {
		return 0, false
	}
	code, err := strconv.Atoi(s)
	if err != nil || code < 100 {
		return 0, false
	}
	return code, true
}

// ParseClass checks a class or group name as written in a policy's
// retry_on or never_retry: a named class, "transient", "permanent", or
// "http_<code>" with a status code from 100 to 599. "canceled" is refused:
// a cancellation is never retried.
func ParseClass(s string) (Class, error) {
	c := Class(s)
	switch c {
	case Timeout, Unavailable, ConnectionRefused, ConnectionReset, DNSFailure, RateLimited,
		InvalidPayload, Unauthorized, Unsupported, Refused, Unknown, GroupTransient, GroupPermanent:
		return c, nil
	case Canceled:
		return "", errors.New(`"canceled" cannot be listed: a cancellation is never retried nor counted as a failure`)
	}
	if code, ok := c.httpCode(); ok && code <= 599 {
		return c, nil
	}
	return "", fmt.Errorf("unknown error class %q; want transient, permanent, a class such as timeout or unavailable, or http_<code>", s)
}

// in reports whether c is listed in classes, directly or through its
// group.
func (c Class) in(classes []Class) bool {
	for _, l := range classes {
		if l == c || (l == GroupTransient && c.Transient()) || (l == GroupPermanent && c.Permanent()) {
			return true
		}
	}
	return false
}
