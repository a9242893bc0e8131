package retry

import (
	"errors"
	"math"
	"net/http"
	"strings"
	"time"
)

// DefaultMaxRetryAfter is the longest wait a Retry-After may ask for when a
// policy sets no MaxRetryAfter.
const DefaultMaxRetryAfter = time.Hour

// RetryAfterOf returns the raw Retry-After value an error carries through
// a method RetryAfterValue() string (such as *StatusError's), and whether
// it carries a non-empty one.
func RetryAfterOf(err error) (string, bool) {
	var ra interface{ RetryAfterValue() string }
	if errors.As(err, &ra) && ra.RetryAfterValue() != "" {
		return ra.RetryAfterValue(), true
	}
	return "", false
}

// ParseRetryAfter returns the wait a Retry-After field value asks for
// (RFC 9110 §10.2.3), measured from now, and whether the value is valid.
//
// The value is either delay-seconds (1*DIGIT) or an HTTP-date in any of the
// three forms a recipient must accept (IMF-fixdate, RFC 850, asctime; RFC
// 9110 §5.6.7, parsed by net/http.ParseTime). Surrounding spaces and tabs
// are trimmed. A date in the past means now (0). A wait beyond max, a
// delay-seconds beyond int64 or one that overflows time.Duration clamps to
// max, so a huge value never yields a negative or tiny wait; max ≤ 0 means
// DefaultMaxRetryAfter.
//
// An empty, malformed, signed (negative or "+") or fractional value is not
// valid: ok is false and the caller falls back to its computed backoff.
func ParseRetryAfter(value string, now time.Time, max time.Duration) (wait time.Duration, ok bool) {
	if max <= 0 {
		max = DefaultMaxRetryAfter
	}
	v := strings.Trim(value, " \t")
	if v == "" {
		return 0, false
	}
	if isDigits(v) {
		// Count seconds until they pass max; more digits only add to it.
		limit := int64(max / time.Second)
		var secs int64
		for i := 0; i < len(v); i++ {
			secs = secs*10 + int64(v[i]-'0')
			if secs > limit {
				return max, true
			}
		}
		return min(time.Duration(secs)*time.Second, max), true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now) // saturates at the extremes of time.Duration
	switch {
	case d <= 0:
		return 0, true
	case d > max || d == math.MaxInt64:
		return max, true
	}
	return d, true
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return len(s) > 0
}
