package api

import (
	"net/http"
	"net/url"
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

// RegisterAudit adds GET /api/v1/audit to mux: the audit trail of
// safety-critical commands (devices.AuditEntry), read from src.
//
// Query parameters, each at most once: device, op_id, principal (exact
// matches), after (a Seq: entries after it), since (RFC 3339: entries at
// or after it), limit (1 to 1000; default 100), newest (true: the last
// limit entries rather than the first after the cursor). The answer is 200
// with an AuditPage: {"entries":[...],"next_after":N}. A bad, repeated or
// unknown parameter is 400 invalid_parameter, whose detail starts with the
// parameter's name, and an error from src is 500 store_error.
//
// With principals, one that seesAll does not allow (nil: everyone is)
// reads only the entries of its own commands, as GET /api/v1/ops lists
// them: who unlocked what is not another principal's to read. Its
// principal= naming another matches nothing.
func RegisterAudit(mux *http.ServeMux, src AuditSource, seesAll func(principal string) bool) {
	mux.Handle("GET /api/v1/audit", paged[devices.AuditEntry]{
		filters:  []filter{{name: "device"}, {name: "op_id"}, {name: "principal"}},
		maxLimit: MaxAuditLimit,
		what:     "audit trail",
		seesAll:  seesAll,
		read: func(v url.Values, p pageQuery) ([]devices.AuditEntry, error) {
			principal := v.Get("principal")
			if p.principal != "" {
				if principal != "" && principal != p.principal {
					return nil, nil
				}
				principal = p.principal
			}
			return src.Audit(AuditQuery{
				Device: v.Get("device"), OpID: v.Get("op_id"), Principal: principal,
				After: p.after, Since: p.since, Limit: p.limit, Newest: p.newest,
			})
		},
		seq: func(e devices.AuditEntry) uint64 { return e.Seq },
		page: func(entries []devices.AuditEntry, nextAfter uint64) any {
			return AuditPage{Entries: entries, NextAfter: nextAfter}
		},
	})
}
