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
)

// paged is a GET endpoint that answers one page of records of type T in
// ascending Seq order: GET /api/v1/audit and GET /api/v1/deadletters.
//
// Its query parameters, each at most once, are its filters, then after
// (a Seq), since (RFC 3339), limit (1 to maxLimit) and newest (a bool). A
// bad, repeated or unknown parameter is 400 with {"error":"..."} whose
// detail starts with the parameter's name
// ({"error":"invalid_parameter","detail":"limit: ..."}); an error from
// read is 500 with {"error":"store_error","detail":"read <what>: ..."}. Otherwise the answer is 200 with
// page(records, nextAfter): records are [] (never null) when none match,
// and nextAfter is the last record's Seq, or the request's after if there
// is none.
type paged[T any] struct {
	// filters are the endpoint's own parameters, in the order an unknown
	// parameter's error lists them.
	filters []filter
	// maxLimit is the largest limit accepted.
	maxLimit int
	// what names what read reads, in a 500's error: "audit trail".
	what string
	// read returns the records that v's filters and p select.
	read func(v url.Values, p pageQuery) ([]T, error)
	// seq is a record's Seq.
	seq func(T) uint64
	// page is the 200 answer's body.
	page func(records []T, nextAfter uint64) any
	// seesAll, if set, reports whether an authenticated principal may
	// read every principal's records; one that may not reads only its
	// own (pageQuery.principal). nil: every principal reads all.
	seesAll func(principal string) bool
}

// filter is an exact-match query parameter of a paged endpoint.
type filter struct {
	name string
	// check, if set, refuses a value the parameter cannot take; its
	// error follows "name: " in the 400.
	check func(value string) error
}

// pageQuery is what the parameters every paged endpoint shares say.
type pageQuery struct {
	// principal, if set, is the only principal whose records the
	// request may read (paged.seesAll said it may not read all).
	principal string
	after     uint64
	since     time.Time
	limit     int // 0 when not given
	newest    bool
}

func (p paged[T]) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	q, err := p.parse(v)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_parameter", err.Error())
		return
	}
	if who, ok := principalOf(r); ok && who != "" && p.seesAll != nil && !p.seesAll(who) {
		q.principal = who
	}
	records, err := p.read(v, q)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "store_error", "read "+p.what+": "+err.Error())
		return
	}
	next := q.after
	if len(records) == 0 {
		records = []T{} // [] rather than null
	} else {
		next = p.seq(records[len(records)-1])
	}
	writeJSON(w, http.StatusOK, p.page(records, next))
}

// parse checks v's parameters and reads the shared ones. Its errors start
// with the parameter's name.
func (p paged[T]) parse(v url.Values) (pageQuery, error) {
	var q pageQuery
	known := []string{}
	for _, f := range p.filters {
		known = append(known, f.name)
	}
	known = append(known, "after", "since", "limit", "newest")
	if err := checkParams(v, known); err != nil {
		return q, err
	}
	for _, f := range p.filters {
		if s := v.Get(f.name); s != "" && f.check != nil {
			if err := f.check(s); err != nil {
				return q, fmt.Errorf("%s: %w", f.name, err)
			}
		}
	}
	if s := v.Get("after"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return q, fmt.Errorf("after: %q is not a seq (a whole number, 0 or more)", s)
		}
		q.after = n
	}
	if s := v.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return q, fmt.Errorf("since: %q is not an RFC 3339 time such as 2026-11-29T19:00:00Z", s)
		}
		q.since = t
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > p.maxLimit {
			return q, fmt.Errorf("limit: %q is not a number from 1 to %d", s, p.maxLimit)
		}
		q.limit = n
	}
	if s := v.Get("newest"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return q, fmt.Errorf("newest: %q is not true or false", s)
		}
		q.newest = b
	}
	return q, nil
}

// checkParams refuses a parameter of v that is not one of known, and one
// given more than once; its error starts with the parameter's name.
func checkParams(v url.Values, known []string) error {
	for _, name := range slices.Sorted(maps.Keys(v)) {
		if !slices.Contains(known, name) {
			return fmt.Errorf("%s: unknown parameter (known: %s)", name, strings.Join(known, ", "))
		}
		if n := len(v[name]); n > 1 {
			return fmt.Errorf("%s: given %d times; give it once", name, n)
		}
	}
	return nil
}
