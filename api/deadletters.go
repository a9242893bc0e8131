package api

import (
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hearthd/hearth/devices"
)

// MaxDeadLetterLimit is the largest limit GET /api/v1/deadletters accepts,
// in dead letters.
const MaxDeadLetterLimit = 1000

// DeadLetterQuery selects dead letters; it is what GET
// /api/v1/deadletters's query parameters say. Zero fields select
// everything; set filters are exact matches combined with AND.
type DeadLetterQuery struct {
	// Device keeps dead letters of that device.
	Device string
	// Status and Reason keep dead letters whose op ended with them.
	Status devices.Status
	Reason devices.Reason
	// After is a Seq cursor: only dead letters with Seq > After.
	After uint64
	// Since, if not zero, keeps dead letters whose op ended (UpdatedAt)
	// at or after it.
	Since time.Time
	// Limit is the most dead letters to return, 1 to MaxDeadLetterLimit;
	// 0 means the source's default (100 for the store).
	Limit int
	// Newest asks for the last Limit matching dead letters instead of the
	// first Limit after the cursor; either way they come in ascending Seq
	// order.
	Newest bool
}

// DeadLetterSource is what the API reads the dead-letter store from.
// hearthd adapts its store (store.Store.DeadLetters) to it. DeadLetters
// returns the matching dead letters in ascending Seq order, at most
// q.Limit of them.
type DeadLetterSource interface {
	DeadLetters(q DeadLetterQuery) ([]devices.DeadLetter, error)
}

// DeadLetterPage is the body of a 200 answer of GET /api/v1/deadletters.
type DeadLetterPage struct {
	// DeadLetters are in ascending Seq order; [] (never null) when none
	// match.
	DeadLetters []devices.DeadLetter `json:"dead_letters"`
	// NextAfter is the Seq of the last dead letter, to pass as after= for
	// the next page or to poll for new ones; when none matched, it is the
	// request's after (0 if none).
	NextAfter uint64 `json:"next_after"`
}

// deadLetterParams are the query parameters GET /api/v1/deadletters
// knows.
var deadLetterParams = []string{"device", "status", "reason", "after", "since", "limit", "newest"}

// deadLetterStatuses are the statuses a dead letter can have.
var deadLetterStatuses = []devices.Status{devices.Failed, devices.Expired, devices.Superseded}

// RegisterDeadLetters adds GET /api/v1/deadletters to mux: the dead-letter
// store, commands that ended without success and will never be attempted
// again (devices.DeadLetter), read from src.
//
// Query parameters, each at most once: device, status (failed, expired
// or superseded), reason (exact matches), after (a Seq: dead
// letters after it), since (RFC 3339: dead letters whose op ended at or
// after it), limit (1 to 1000; default 100), newest (true: the last limit
// dead letters rather than the first after the cursor). The answer is 200
// with a DeadLetterPage: {"dead_letters":[...],"next_after":N}. A bad,
// repeated or unknown parameter is 400 and an error from src is 500, both
// with {"error":"..."}; a 400's error starts with the parameter's name.
func RegisterDeadLetters(mux *http.ServeMux, src DeadLetterSource) {
	mux.HandleFunc("GET /api/v1/deadletters", func(w http.ResponseWriter, r *http.Request) {
		q, err := parseDeadLetterQuery(r.URL.Query())
		if err != nil {
			writeJSON(w, http.StatusBadRequest, apiError{Error: err.Error()})
			return
		}
		dead, err := src.DeadLetters(q)
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, apiError{Error: "read dead letters: " + err.Error()})
			return
		}
		page := DeadLetterPage{DeadLetters: dead, NextAfter: q.After}
		if len(dead) == 0 {
			page.DeadLetters = []devices.DeadLetter{} // [] rather than null
		} else {
			page.NextAfter = dead[len(dead)-1].Seq
		}
		writeJSON(w, http.StatusOK, page)
	})
}

// parseDeadLetterQuery reads GET /api/v1/deadletters's parameters. Its
// errors start with the parameter's name.
func parseDeadLetterQuery(v url.Values) (DeadLetterQuery, error) {
	var q DeadLetterQuery
	for _, name := range slices.Sorted(maps.Keys(v)) {
		vals := v[name]
		if !slices.Contains(deadLetterParams, name) {
			return q, fmt.Errorf("%s: unknown parameter (known: %s)", name, strings.Join(deadLetterParams, ", "))
		}
		if len(vals) > 1 {
			return q, fmt.Errorf("%s: given %d times; give it once", name, len(vals))
		}
	}
	q.Device = v.Get("device")
	if s := v.Get("status"); s != "" {
		if !slices.Contains(deadLetterStatuses, devices.Status(s)) {
			return q, fmt.Errorf("status: %q is not a dead letter's status (failed, expired or superseded)", s)
		}
		q.Status = devices.Status(s)
	}
	q.Reason = devices.Reason(v.Get("reason"))
	if s := v.Get("after"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return q, fmt.Errorf("after: %q is not a seq (a whole number, 0 or more)", s)
		}
		q.After = n
	}
	if s := v.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return q, fmt.Errorf("since: %q is not an RFC 3339 time such as 2026-11-29T19:00:00Z", s)
		}
		q.Since = t
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxDeadLetterLimit {
			return q, fmt.Errorf("limit: %q is not a number from 1 to %d", s, MaxDeadLetterLimit)
		}
		q.Limit = n
	}
	if s := v.Get("newest"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return q, fmt.Errorf("newest: %q is not true or false", s)
		}
		q.Newest = b
	}
	return q, nil
}
