package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

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
	r := &request{audit: make([][]byte, 0, len(entries))}
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
		r.audit = append(r.audit, body)
	}
	if len(r.audit) == 0 {
		return s.openErr()
	}
	return s.submit(r)
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
// decode is an error naming its Seq. After Close it returns ErrClosed.
func (s *Store) Audit(q AuditQuery) ([]devices.AuditEntry, error) {
	limit := q.Limit
	switch {
	case limit < 0:
		return nil, fmt.Errorf("audit query: negative limit %d", limit)
	case limit == 0:
		limit = DefaultAuditLimit
	case limit > MaxAuditLimit:
		limit = MaxAuditLimit
	}
	var out []devices.AuditEntry
	err := s.view(func(b buckets) error {
		c := b.audit.Cursor()
		var k, v []byte
		var next func() ([]byte, []byte)
		if q.Newest {
			k, v = c.Last()
			next = c.Prev
		} else {
			k, v = c.Seek(seqKey(q.After + 1))
			next = c.Next
			if q.After == ^uint64(0) {
				k = nil // no Seq is after the largest
			}
		}
		for ; k != nil && len(out) < limit; k, v = next() {
			e, err := decodeAudit(k, v)
			if err != nil {
				return err
			}
			if e.Seq <= q.After {
				break // only when walking back (Newest)
			}
			if q.matches(e) {
				out = append(out, e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if q.Newest {
		slices.Reverse(out)
	}
	return out, nil
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
// decode is an error naming its Seq, and nothing is deleted. After Close
// it returns ErrClosed.
func (s *Store) PruneAudit(before time.Time) (int, error) {
	if err := s.openErr(); err != nil {
		return 0, err
	}
	var n int
	err := s.db.Update(func(tx *bolt.Tx) error {
		audit := tx.Bucket(bucketAudit)
		var doomed [][]byte
		err := audit.ForEach(func(k, v []byte) error {
			var head struct {
				At time.Time `json:"at"`
			}
			if err := json.Unmarshal(v, &head); err != nil {
				return fmt.Errorf("decode audit entry %s: %w", seqKeyName(k), err)
			}
			if head.At.Before(before) {
				doomed = append(doomed, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range doomed {
			if err := audit.Delete(k); err != nil {
				return fmt.Errorf("delete audit entry %s: %w", seqKeyName(k), err)
			}
		}
		n = len(doomed)
		return nil
	})
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return 0, ErrClosed
	}
	if err != nil {
		return 0, err
	}
	return n, nil
}

// Encoding. An audit entry is stored as its JSON with "seq" first, like an
// op: the caller's goroutine encodes the rest, the writer draws the Seq
// and prefixes it (withSeq).

// auditBody encodes an entry without its Seq (the trick of opBody).
type auditBody struct {
	devices.AuditEntry
	Seq struct{} `json:"seq,omitzero"`
}

// putAudit stores one encoded entry under the next Seq of the audit
// bucket, in the writer's transaction.
func (b buckets) putAudit(body []byte) error {
	seq, err := b.audit.NextSequence()
	if err != nil {
		return fmt.Errorf("assign seq to audit entry: %w", err)
	}
	if err := b.audit.Put(seqKey(seq), withSeq(body, seq)); err != nil {
		return fmt.Errorf("save audit entry %d: %w", seq, err)
	}
	return nil
}

func decodeAudit(k, v []byte) (devices.AuditEntry, error) {
	var e devices.AuditEntry
	if len(k) != 8 {
		return e, fmt.Errorf("decode audit entry %s: key is not an 8-byte seq", seqKeyName(k))
	}
	if err := json.Unmarshal(v, &e); err != nil {
		return e, fmt.Errorf("decode audit entry %s: %w", seqKeyName(k), err)
	}
	if seq := binary.BigEndian.Uint64(k); e.Seq != seq {
		return e, fmt.Errorf("decode audit entry %s: record says seq %d", seqKeyName(k), e.Seq)
	}
	return e, nil
}
