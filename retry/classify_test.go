package retry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// netErr is a net.Error whose Timeout is chosen.
type netErr struct{ timeout bool }

func (e netErr) Error() string   { return "net error" }
func (e netErr) Timeout() bool   { return e.timeout }
func (e netErr) Temporary() bool { return e.timeout }

// permanentErr declares itself permanent or not.
type permanentErr bool

func (e permanentErr) Error() string   { return "refused by the bridge" }
func (e permanentErr) Permanent() bool { return bool(e) }

// coded is any error with a status code, not a *StatusError.
type coded int

func (c coded) Error() string   { return "coded" }
func (c coded) StatusCode() int { return int(c) }

func wrap(err error) error { return fmt.Errorf("zigbee: set lamp: %w", err) }

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want Class
	}{
		{"nil", nil, ""},

		{"canceled", context.Canceled, Canceled},
		{"canceled wrapped", wrap(context.Canceled), Canceled},
		{"canceled joined after another", errors.Join(errors.New("flush failed"), context.Canceled), Canceled},
		{"canceled joined with a 503", errors.Join(&StatusError{Code: 503}, wrap(context.Canceled)), Canceled},
		{"canceled joined with a deadline", errors.Join(context.DeadlineExceeded, context.Canceled), Canceled},

		{"status code 0 is no HTTP status", coded(0), Unknown},
		{"status code 600 is no HTTP status", coded(600), Unknown},
		{"status code 599", coded(599), "http_599"},
		{"status code 100", coded(100), "http_100"},

		{"deadline exceeded", context.DeadlineExceeded, Timeout},
		{"deadline exceeded wrapped", wrap(context.DeadlineExceeded), Timeout},
		{"os deadline exceeded", os.ErrDeadlineExceeded, Timeout},
		{"net.Error timing out", netErr{timeout: true}, Timeout},
		{"net.Error timing out, wrapped", wrap(&net.OpError{Op: "read", Net: "tcp", Err: netErr{timeout: true}}), Timeout},
		{"net.Error not timing out", netErr{timeout: false}, Unknown},
		{"ETIMEDOUT (Errno.Timeout)", syscall.ETIMEDOUT, Timeout},

		{"DNS timeout", &net.DNSError{Err: "i/o timeout", Name: "bridge.local", IsTimeout: true}, Timeout},
		{"DNS not found", &net.DNSError{Err: "no such host", Name: "bridge.local", IsNotFound: true}, DNSFailure},
		{"DNS failure wrapped", wrap(&net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "server misbehaving", Name: "bridge.local"}}), DNSFailure},

		{"ECONNREFUSED", syscall.ECONNREFUSED, ConnectionRefused},
		{"ECONNREFUSED in an OpError", &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}, ConnectionRefused},
		{"ECONNRESET in an OpError", wrap(&net.OpError{Op: "read", Net: "tcp", Err: &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}}), ConnectionReset},
		{"ECONNABORTED", syscall.ECONNABORTED, ConnectionReset},
		{"EPIPE", wrap(syscall.EPIPE), ConnectionReset},
		{"unexpected EOF", io.ErrUnexpectedEOF, ConnectionReset},
		{"unexpected EOF wrapped", wrap(io.ErrUnexpectedEOF), ConnectionReset},
		{"EHOSTUNREACH", syscall.EHOSTUNREACH, Unavailable},
		{"ENETUNREACH", wrap(syscall.ENETUNREACH), Unavailable},
		{"EHOSTDOWN", syscall.EHOSTDOWN, Unavailable},
		{"ENETDOWN", syscall.ENETDOWN, Unavailable},

		{"ErrUnavailable", ErrUnavailable, Unavailable},
		{"ErrUnavailable wrapped", wrap(ErrUnavailable), Unavailable},
		{"ErrRateLimited wrapped", wrap(ErrRateLimited), RateLimited},
		{"ErrInvalidPayload wrapped", wrap(ErrInvalidPayload), InvalidPayload},
		{"ErrUnauthorized wrapped", wrap(ErrUnauthorized), Unauthorized},
		{"ErrUnsupported wrapped", wrap(ErrUnsupported), Unsupported},
		{"sentinel wrapped twice", wrap(wrap(ErrRateLimited)), RateLimited},

		{"Permanent() true", permanentErr(true), Refused},
		{"Permanent() true, wrapped", wrap(permanentErr(true)), Refused},
		{"Permanent() false", permanentErr(false), Unknown},

		{"status code before sentinel", errors.Join(ErrInvalidPayload, &StatusError{Code: 503}), "http_503"},
		{"sentinel before Permanent", errors.Join(permanentErr(true), ErrRateLimited), RateLimited},
		{"Permanent before deadline", errors.Join(context.DeadlineExceeded, permanentErr(true)), Refused},
		{"deadline before ECONNREFUSED", errors.Join(syscall.ECONNREFUSED, context.DeadlineExceeded), Timeout},
		{"any StatusCode() method", wrap(coded(429)), "http_429"},

		// The message is never read.
		{"message text ignored", errors.New("503 service unavailable timeout"), Unknown},
		{"message 'connection refused' ignored", errors.New("dial tcp: connection refused"), Unknown},
		{"message 'context canceled' ignored", errors.New("context canceled"), Unknown},
		{"a look-alike sentinel is not the sentinel", errors.New(ErrUnavailable.Error()), Unknown},
		{"EOF is not listed", io.EOF, Unknown},
	}
	for _, tc := range tests {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("%s: Classify(%v) = %q, want %q", tc.name, tc.err, got, tc.want)
		}
	}
}

// Errors from real sockets on the loopback: a dial to a port whose
// listener was closed, and a read past its deadline.
func TestClassifyRealNetworkErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		t.Fatalf("dial %s after closing its listener succeeded", addr)
	}
	if got := Classify(err); got != ConnectionRefused {
		t.Errorf("Classify(dial to closed port: %v) = %q, want %q", err, got, ConnectionRefused)
	}

	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Unix(1, 0)) // long past: the read fails at once
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("read past the deadline = %v, want a net.Error with Timeout() true", err)
	}
	if got := Classify(err); got != Timeout {
		t.Errorf("Classify(read past deadline: %v) = %q, want %q", err, got, Timeout)
	}
}

// Every status code the package lists, and one of each other range.
func TestClassifyStatusCodes(t *testing.T) {
	transient := []int{408, 425, 429, 500, 502, 503, 504, 507, 599}
	permanent := []int{400, 401, 403, 404, 405, 409, 410, 413, 422, 418, 451, 499, 501, 505}
	neither := []int{100, 200, 204, 301, 304, 399}
	check := func(code int, wantTransient, wantPermanent bool) {
		want := Class("http_" + strconv.Itoa(code))
		for _, err := range []error{&StatusError{Code: code}, wrap(&StatusError{Code: code, RetryAfter: "5"})} {
			if got := Classify(err); got != want {
				t.Errorf("Classify(%v) = %q, want %q", err, got, want)
			}
		}
		if got := want.Transient(); got != wantTransient {
			t.Errorf("%q.Transient() = %v, want %v", want, got, wantTransient)
		}
		if got := want.Permanent(); got != wantPermanent {
			t.Errorf("%q.Permanent() = %v, want %v", want, got, wantPermanent)
		}
	}
	for _, code := range transient {
		check(code, true, false)
	}
	for _, code := range permanent {
		check(code, false, true)
	}
	for _, code := range neither {
		check(code, false, false)
	}
}

func TestClassTransientPermanent(t *testing.T) {
	tests := []struct {
		c                    Class
		transient, permanent bool
	}{
		{Timeout, true, false},
		{Unavailable, true, false},
		{ConnectionRefused, true, false},
		{ConnectionReset, true, false},
		{DNSFailure, true, false},
		{RateLimited, true, false},
		{Unknown, true, false},
		{InvalidPayload, false, true},
		{Unauthorized, false, true},
		{Unsupported, false, true},
		{Refused, false, true},
		{Canceled, false, false},
		{"", false, false},
	}
	for _, tc := range tests {
		if got := tc.c.Transient(); got != tc.transient {
			t.Errorf("%q.Transient() = %v, want %v", tc.c, got, tc.transient)
		}
		if got := tc.c.Permanent(); got != tc.permanent {
			t.Errorf("%q.Permanent() = %v, want %v", tc.c, got, tc.permanent)
		}
	}
}

func TestParseClass(t *testing.T) {
	accepted := []string{
		"timeout", "unavailable", "connection_refused", "connection_reset", "dns_failure",
		"rate_limited", "invalid_payload", "unauthorized", "unsupported", "refused", "unknown",
		"transient", "permanent",
		"http_100", "http_409", "http_503", "http_599",
	}
	for _, s := range accepted {
		if got, err := ParseClass(s); err != nil || got != Class(s) {
			t.Errorf("ParseClass(%q) = %q, %v; want %q, nil", s, got, err, s)
		}
	}
	rejected := []string{
		"canceled", "http_600", "http_abc", "bogus", "", "http_", "http_99", "http_099",
		"http_5030", "http_+50", "http_-50", "HTTP_503", "Timeout", " timeout",
	}
	for _, s := range rejected {
		if got, err := ParseClass(s); err == nil {
			t.Errorf("ParseClass(%q) = %q, nil; want an error", s, got)
		}
	}
}

func TestStatusError(t *testing.T) {
	e := &StatusError{Code: 503, RetryAfter: "120"}
	if got, want := e.Error(), "HTTP 503 (Retry-After: 120)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if got, want := (&StatusError{Code: 404}).Error(), "HTTP 404"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if e.StatusCode() != 503 || e.RetryAfterValue() != "120" {
		t.Errorf("StatusCode, RetryAfterValue = %d, %q; want 503, %q", e.StatusCode(), e.RetryAfterValue(), "120")
	}
}
