package api

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// GET /api/v1/ops's query: any raw query either parses to values within
// their bounds or is refused with an error naming a parameter.
func FuzzParseOpsQuery(f *testing.F) {
	for _, s := range []string{"", "limit=10", "device=lamp&status=pending", "status=failed&since=2026-12-03T14:00:00Z&before=12",
		"limit=0", "limit=1001", "before=0", "status=done", "device=a/b", "x=1", "limit=1&limit=2", "since=yesterday", "%zz", ":+=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return // refused by net/http's own parse
		}
		q, err := ParseOpsQuery(v)
		if err != nil {
			if !namesParameter(err, v) {
				t.Fatalf("%q: error %q names no parameter given", raw, err)
			}
			return
		}
		if q.Limit < 1 || q.Limit > MaxOpsLimit || (q.Pending && q.Status != "") {
			t.Fatalf("%q: parsed %+v", raw, q)
		}
	})
}

// GET /api/v1/events's query: devices that are valid IDs, or an error
// naming the parameter.
func FuzzParseEventFilter(f *testing.F) {
	for _, s := range []string{"", "device=lamp", "device=lamp&device=door", "device=", "device=a%2Fb", "devices=x", "device=%2B", ":+=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		ef, err := ParseEventFilter(v)
		if err != nil {
			if !namesParameter(err, v) {
				t.Fatalf("%q: error %q names no parameter given", raw, err)
			}
			return
		}
		if len(ef.Devices) != len(v["device"]) {
			t.Fatalf("%q: %d devices of %d", raw, len(ef.Devices), len(v["device"]))
		}
	})
}

// ?wait=: a duration from 0 to MaxWait, or an error that quotes it.
func FuzzParseWait(f *testing.F) {
	for _, s := range []string{"10s", "0s", "1m", "61s", "-1s", "soon", "1h", "", "9223372036854775807ns"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseWait(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "wait is ") {
				t.Fatalf("%q: unclear error %q", s, err)
			}
			return
		}
		if d < 0 || d > MaxWait {
			t.Fatalf("%q: %v out of bounds", s, d)
		}
		if want, _ := time.ParseDuration(s); want != d {
			t.Fatalf("%q: %v, want %v", s, d, want)
		}
	})
}

// namesParameter reports whether err starts with the name of one of v's
// parameters and ": ".
func namesParameter(err error, v url.Values) bool {
	for name := range v {
		if strings.HasPrefix(err.Error(), name+": ") {
			return true
		}
	}
	return false
}
