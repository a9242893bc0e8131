package store

import (
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hearthd/hearth/devices"
)

// Limits of one Audit call, in entries.
const (
	// DefaultAuditLimit is the number of entries Audit returns when
	// AuditQuery.Limit is 0.
	DefaultAuditLimit = 100
	// MaxAuditLimit is the most entries one Audit call returns; a larger
	// AuditQuery.Limit is lowered to it.
	MaxAuditLimit = 1000
)

// AppendAudit stores entries durably, in order: when it returns nil they
// are committed and fsync'd, through the same group commit as Save. The
// store assigns each entry its Seq, one more than the last entry's ever
// stored in this data directory (bbolt's bucket sequence, which survives
// restarts and pruning), whatever Seq the caller set; the entries of one
// call get consecutive Seqs and are committed together or not at all.
//
// An entry with a zero At or an empty Event fails the whole call before
// anything is queued, as does one that JSON cannot encode. With no
// entries it stores nothing. After Close it returns ErrClosed.
// *Store satisfies dispatcher.AuditLog with it.
func (s *Store) AppendAudit(entries ...devices.AuditEntry) error {
	bodies := make([][]byte, 0, len(entries))
	for i, e := range entries {
		if e.At.IsZero() {
			return fmt.Errorf("append audit entry %d (op %q): zero time", i, e.OpID)
		}
		if e.Event == "" {
			return fmt.Errorf("append audit entry %d (op %q): empty event", i, e.OpID)
		}
		body, err := json.Marshal(auditBody{AuditEntry: e})
		if err != nil {
			return fmt.Errorf("encode audit entry %d (op %q): %w", i, e.OpID, err)
		}
		bodies = append(bodies, body)
	}
	return auditLog.append(s, bodies)
}

// AuditQuery selects audit entries. Zero fields select everything: the
// filters are exact matches combined with AND.
type AuditQuery struct {
	// Device, OpID and Principal, if set, keep entries whose field equals
	// them exactly.
	Device, OpID, Principal string
	// After is a Seq cursor: only entries with Seq > After are returned.
	// Pass the last Seq of one page to get the next.
	After uint64
	// Since, if not zero, keeps entries with At at or after it.
	Since time.Time
	// Limit is the most entries returned: 0 means DefaultAuditLimit (100),
	// above MaxAuditLimit (1000) means MaxAuditLimit, negative is an error.
	Limit int
	// Newest returns the last Limit matching entries instead of the first
	// Limit after the cursor: the view of "what happened lately".
	Newest bool
}

// Audit returns the entries matching q, in ascending Seq order (at most
// q.Limit of them, see AuditQuery.Limit): the first matching entries with
// Seq > q.After, or with q.Newest the last ones. An empty result is nil.
//
// A client pages forward by passing the last returned Seq as the next
// query's After, until a page comes back shorter than the limit; since the
// store only appends, paging forward never skips or repeats an entry, and
// polling with the last Seq picks up new entries as they are appended.
//
// It reads in one read-only transaction and scans from the cursor, so
// filters cost a scan of the entries they skip. A record that does not
// decode is an error naming its Seq; one that fails its checksum is such
// an error wrapping ErrDamaged. After Close it returns ErrClosed.
func (s *Store) Audit(q AuditQuery) ([]devices.AuditEntry, error) {
	limit, err := pageLimit(q.Limit, DefaultAuditLimit, MaxAuditLimit)
	if err != nil {
		return nil, fmt.Errorf("audit query: %w", err)
	}
	return auditLog.query(s, seqPage{after: q.After, limit: limit, newest: q.Newest}, q.matches)
}

func (q AuditQuery) matches(e devices.AuditEntry) bool {
	return (q.Device == "" || e.Device == q.Device) &&
		(q.OpID == "" || e.OpID == q.OpID) &&
		(q.Principal == "" || e.Principal == q.Principal) &&
		(q.Since.IsZero() || !e.At.Before(q.Since))
}

// PruneAudit deletes the audit entries whose At is before before and
// returns how many it deleted. Seqs are never reused: the next entry
// appended still gets a Seq above every Seq ever stored. It reads every
// entry, in one read-write transaction of its own, so run it now and
// then (hearthd does, hourly), not per command. A record that does not
// decode or fails its checksum (an error wrapping ErrDamaged) is an
// error naming its Seq, and nothing is deleted. After Close it returns
// ErrClosed.
func (s *Store) PruneAudit(before time.Time) (int, error) {
	return auditLog.prune(s, before)
}

// Encoding. An audit entry is stored as its JSON with "seq" first, like an
// op, in the record frame (checksum.go): the caller's goroutine encodes
// the rest, the writer draws the Seq, prefixes it and frames the record
// (frameWithSeq).

// auditBody encodes an entry without its Seq (the trick of opBody).
type auditBody struct {
	devices.AuditEntry
	Seq struct{} `json:"seq,omitzero"`
}

// auditLog is the audit bucket: entries in Seq order, pruned by At.
var auditLog = &seqLog[devices.AuditEntry]{
	noun:   "audit entry",
	name:   bucketAudit,
	bucket: func(b buckets) *bolt.Bucket { return b.audit },
	seq:    func(e devices.AuditEntry) uint64 { return e.Seq },
	at: func(record []byte) (time.Time, error) {
		var head struct {
			At time.Time `json:"at"`
		}
		err := json.Unmarshal(record, &head)
		return head.At, err
	},
}
