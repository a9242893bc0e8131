package api

import (
	"encoding/json"
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

// MaxAuditLimit is the largest limit GET /api/v1/audit accepts, in
// entries.
const MaxAuditLimit = 1000

// AuditQuery selects audit entries; it is what GET /api/v1/audit's query
// parameters say. Zero fields select everything; set filters are exact
// matches combined with AND.
type AuditQuery struct {
	// Device, OpID and Principal keep entries whose field equals them.
	Device, OpID, Principal string
	// After is a Seq cursor: only entries with Seq > After.
	After uint64
	// Since, if not zero, keeps entries with At at or after it.
	Since time.Time
	// Limit is the most entries to return, 1 to MaxAuditLimit; 0 means
	// the source's default (100 for the store).
	Limit int
	// Newest asks for the last Limit matching entries instead of the
	// first Limit after the cursor; either way they come in ascending
	// Seq order.
	Newest bool
}

// AuditSource is what the API reads the audit trail from. hearthd adapts
// its store (store.Store.Audit) to it. Audit returns the matching entries
// in ascending Seq order, at most q.Limit of them.
type AuditSource interface {
	Audit(q AuditQuery) ([]devices.AuditEntry, error)
}

// AuditPage is the body of a 200 answer of GET /api/v1/audit.
type AuditPage struct {
	// Entries are in ascending Seq order; [] (never null) when none match.
	Entries []devices.AuditEntry `json:"entries"`
	// NextAfter is the Seq of the last entry, to pass as after= for the
	// next page or to poll for new entries; when no entry matched, it is
	// the request's after (0 if none).
	NextAfter uint64 `json:"next_after"`
}

// auditParams are the query parameters GET /api/v1/audit knows.
var auditParams = []string{"device", "op_id", "principal", "after", "since", "limit", "newest"}

// RegisterAudit adds GET /api/v1/audit to mux: the audit trail of
// safety-critical commands (devices.AuditEntry), read from src.
//
// Query parameters, each at most once: device, op_id, principal (exact
// matches), after (a Seq: entries after it), since (RFC 3339: entries at
// or after it), limit (1 to 1000; default 100), newest (true: the last
// limit entries rather than the first after the cursor). The answer is 200
// with an AuditPage: {"entries":[...],"next_after":N}. A bad, repeated or
// unknown parameter is 400 and an error from src is 500, both with
// {"error":"..."}; a 400's error starts with the parameter's name.
func RegisterAudit(mux *http.ServeMux, src AuditSource) {
	mux.HandleFunc("GET /api/v1/audit", func(w http.ResponseWriter, r *http.Request) {
		q, err := parseAuditQuery(r.URL.Query())
		if err != nil {
			auditError(w, http.StatusBadRequest, err.Error())
			return
		}
		entries, err := src.Audit(q)
		if err != nil {
			auditError(w, http.StatusInternalServerError, "read audit trail: "+err.Error())
			return
		}
		page := AuditPage{Entries: entries, NextAfter: q.After}
		if len(entries) == 0 {
			page.Entries = []devices.AuditEntry{} // [] rather than null
		} else {
			page.NextAfter = entries[len(entries)-1].Seq
		}
		auditJSON(w, http.StatusOK, page)
	})
}

// parseAuditQuery reads GET /api/v1/audit's parameters. Its errors start
// with the parameter's name.
func parseAuditQuery(v url.Values) (AuditQuery, error) {
	var q AuditQuery
	for _, name := range slices.Sorted(maps.Keys(v)) {
		vals := v[name]
		if !slices.Contains(auditParams, name) {
			return q, fmt.Errorf("%s: unknown parameter (known: %s)", name, strings.Join(auditParams, ", "))
		}
		if len(vals) > 1 {
			return q, fmt.Errorf("%s: given %d times; give it once", name, len(vals))
		}
	}
	q.Device = v.Get("device")
	q.OpID = v.Get("op_id")
	q.Principal = v.Get("principal")
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
		if err != nil || n < 1 || n > MaxAuditLimit {
			return q, fmt.Errorf("limit: %q is not a number from 1 to %d", s, MaxAuditLimit)
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

// auditJSON answers status with v as JSON. (Named for audit so that it
// cannot collide with helpers of the command endpoints being written in
// parallel; merge them once both exist.)
func auditJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// auditError answers status with {"error":msg}.
func auditError(w http.ResponseWriter, status int, msg string) {
	auditJSON(w, status, struct {
		Error string `json:"error"`
	}{msg})
}
