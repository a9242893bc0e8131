package retry

import (
	"errors"
	"fmt"
	"math"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	// 37 s before the date of RFC 9110's examples, Sun, 06 Nov 1994
	// 08:49:37 GMT.
	now := time.Date(1994, time.November, 6, 8, 49, 0, 0, time.UTC)
	const maxD = time.Duration(math.MaxInt64)
	tests := []struct {
		name  string
		value string
		now   time.Time
		max   time.Duration
		want  time.Duration
		ok    bool
	}{
		// delay-seconds
		{"seconds", "120", now, 0, 120 * s, true},
		{"zero", "0", now, 0, 0, true},
		{"leading zeros", "00120", now, 0, 120 * s, true},
		{"all zeros", "000", now, 0, 0, true},
		{"padded with spaces", " 120 ", now, 0, 120 * s, true},
		{"leading tab", "\t30", now, 0, 30 * s, true},
		{"trailing tab and space", "30\t ", now, 0, 30 * s, true},
		{"exactly the default max", "3600", now, 0, time.Hour, true},
		{"beyond the default max", "3601", now, 0, time.Hour, true},
		{"max 0 means 1h", "7200", now, 0, DefaultMaxRetryAfter, true},
		{"negative max means 1h", "7200", now, -s, DefaultMaxRetryAfter, true},
		{"custom max, below", "29", now, 30 * s, 29 * s, true},
		{"custom max, at", "30", now, 30 * s, 30 * s, true},
		{"custom max, above", "31", now, 30 * s, 30 * s, true},
		{"max of 1.5s, 1s below it", "1", now, 1500 * ms, s, true},
		{"max of 1.5s, 2s clamps", "2", now, 1500 * ms, 1500 * ms, true},
		{"max of 1ns", "1", now, 1, 1, true},
		{"beyond int64", "99999999999999999999999", now, 0, time.Hour, true},
		{"beyond int64, no practical max", "99999999999999999999999", now, maxD, maxD, true},
		{"largest whole seconds in a Duration", "9223372036", now, maxD, 9223372036 * s, true},
		{"overflows a Duration", "9223372037", now, maxD, maxD, true},
		{"overflows a Duration, default max", "9223372037", now, 0, time.Hour, true},
		{"negative", "-5", now, 0, 0, false},
		{"plus sign", "+5", now, 0, 0, false},
		{"fractional", "1.5", now, 0, 0, false},
		{"exponent", "1e3", now, 0, 0, false},
		{"hex", "0x10", now, 0, 0, false},
		{"trailing letters", "12abc", now, 0, 0, false},
		{"inner space", "1 2", now, 0, 0, false},
		{"newline is not OWS (RFC 9110 §5.6.3: SP, HTAB)", "30\r\n", now, 0, 0, false},
		{"word", "soon", now, 0, 0, false},
		{"empty", "", now, 0, 0, false},
		{"only blanks", " \t ", now, 0, 0, false},
		{"non-ASCII digits", "١٢٠", now, 0, 0, false},

		// HTTP-date, all three forms of RFC 9110 §5.6.7.
		{"IMF-fixdate", "Sun, 06 Nov 1994 08:49:37 GMT", now, 0, 37 * s, true},
		{"RFC 850", "Sunday, 06-Nov-94 08:49:37 GMT", now, 0, 37 * s, true},
		{"asctime", "Sun Nov  6 08:49:37 1994", now, 0, 37 * s, true},
		{"IMF-fixdate padded", "  Sun, 06 Nov 1994 08:49:37 GMT\t", now, 0, 37 * s, true},
		{"now in another zone", "Sun, 06 Nov 1994 08:49:37 GMT", now.In(time.FixedZone("CET", 3600)), 0, 37 * s, true},
		{"now with nanoseconds", "Sun, 06 Nov 1994 08:49:37 GMT", now.Add(500 * ms), 0, 36500 * ms, true},
		{"date equal to now", "Sun, 06 Nov 1994 08:49:00 GMT", now, 0, 0, true},
		{"past date", "Sun, 06 Nov 1994 08:48:00 GMT", now, 0, 0, true},
		{"past date, RFC 850", "Saturday, 05-Nov-94 08:49:37 GMT", now, 0, 0, true},
		{"past date, asctime", "Thu Jan  1 00:00:00 1970", now, 0, 0, true},
		{"two hours ahead, default max", "Sun, 06 Nov 1994 10:49:00 GMT", now, 0, time.Hour, true},
		{"two hours ahead, max 3h", "Sun, 06 Nov 1994 10:49:00 GMT", now, 3 * time.Hour, 2 * time.Hour, true},
		{"centuries ahead", "Sun, 06 Nov 2394 08:49:37 GMT", now, 0, time.Hour, true},
		{"centuries ahead, no practical max", "Fri, 31 Dec 9999 23:59:59 GMT", now, maxD, maxD, true},
		{"date without zone", "Sun, 06 Nov 1994 08:49:37", now, 0, 0, false},
		{"date in UTC, not GMT", "Sun, 06 Nov 1994 08:49:37 UTC", now, 0, 0, false},
		{"ISO 8601", "1994-11-06T08:49:37Z", now, 0, 0, false},
		{"impossible day", "Sun, 32 Nov 1994 08:49:37 GMT", now, 0, 0, false},
	}
	for _, tc := range tests {
		got, ok := ParseRetryAfter(tc.value, tc.now, tc.max)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: ParseRetryAfter(%q, %v, %v) = %v, %v; want %v, %v", tc.name, tc.value, tc.now, tc.max, got, ok, tc.want, tc.ok)
		}
	}
}

func TestRetryAfterOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
		ok   bool
	}{
		{"status error", &StatusError{Code: 503, RetryAfter: "120"}, "120", true},
		{"wrapped with %w", fmt.Errorf("hue: set light: %w", &StatusError{Code: 429, RetryAfter: "Sun, 06 Nov 1994 08:49:37 GMT"}), "Sun, 06 Nov 1994 08:49:37 GMT", true},
		{"wrapped twice", fmt.Errorf("a: %w", fmt.Errorf("b: %w", &StatusError{Code: 503, RetryAfter: "7"})), "7", true},
		{"joined", errors.Join(errors.New("other"), &StatusError{Code: 503, RetryAfter: "7"}), "7", true},
		{"raw value kept as sent", &StatusError{Code: 503, RetryAfter: " soon "}, " soon ", true},
		{"no Retry-After", &StatusError{Code: 503}, "", false},
		{"plain error", errors.New("Retry-After: 120"), "", false},
		{"nil", nil, "", false},
	}
	for _, tc := range tests {
		got, ok := RetryAfterOf(tc.err)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: RetryAfterOf(%v) = %q, %v; want %q, %v", tc.name, tc.err, got, ok, tc.want, tc.ok)
		}
	}
}
