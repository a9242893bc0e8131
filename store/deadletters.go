package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hearthd/hearth/devices"
)

// Limits of one DeadLetters call, in entries.
const (
	// DefaultDeadLetterLimit is the number of dead letters DeadLetters
	// returns when DeadLetterQuery.Limit is 0.
	DefaultDeadLetterLimit = 100
	// MaxDeadLetterLimit is the most dead letters one DeadLetters call
	// returns; a larger DeadLetterQuery.Limit is lowered to it.
	MaxDeadLetterLimit = 1000
)

// AddDeadLetters stores ops in the dead-letter store, durably and in
// order: when it returns nil they are committed and fsync'd, through the
// same group commit as Save. Each becomes a devices.DeadLetter whose Seq
// is one more than the last dead letter's ever stored in this data
// directory (bbolt's bucket sequence, which survives restarts and
// pruning); the ops of one call get consecutive Seqs and are committed
// together or not at all. The op is kept as given, its own Seq included
// (see devices.DeadLetter's JSON); an op given with Seq 0 takes the Seq of
// its stored record, when there is one. Nothing is deduplicated: an op added
// twice is there twice.
//
// An op with an empty OpID, a status other than Failed, Expired or
// Superseded (an op not ended, one that succeeded, or one Rejected, which
// was never accepted), a zero UpdatedAt (which PruneDeadLetters and
// DeadLetterQuery.Since go by), or a Target or State that JSON cannot
// encode fails the whole call before anything is queued, with an error
// naming the op_id. With no ops it stores nothing. After Close it returns
// ErrClosed. *Store satisfies dispatcher.DeadLetters with it.
func (s *Store) AddDeadLetters(ops ...devices.Op) error {
	bodies, err := s.deadLetterBodies(ops)
	if err != nil {
		return err
	}
	return deadLetterLog.append(s, bodies)
}

// SaveDeadLetters stores ops, ended, and their dead letters in one
// commit: each op's record as Save stores it, and its dead letter as
// AddDeadLetters does; a crash leaves both or neither. The ops must be
// valid dead letters (see AddDeadLetters); its errors are theirs and
// Save's.
func (s *Store) SaveDeadLetters(ops ...devices.Op) error {
	bodies, err := s.deadLetterBodies(ops)
	if err != nil {
		return err
	}
	r := &request{records: bodies, putRecord: deadLetterLog.put}
	for _, op := range ops {
		e, err := encodeOp(op)
		if err != nil {
			return err
		}
		r.ops = append(r.ops, e)
	}
	if len(r.ops) == 0 {
		return s.openErr()
	}
	return s.submit(r)
}

// deadLetterBodies encodes ops as dead letters, each with its op's Seq.
func (s *Store) deadLetterBodies(ops []devices.Op) ([][]byte, error) {
	bodies := make([][]byte, 0, len(ops))
	for i, op := range ops {
		if op.Seq == 0 {
			// The caller's copy may predate the store's numbering of the
			// op (Save assigns Seq): the stored record has it.
			if stored, found, err := s.Lookup(op.OpID); err == nil && found {
				op.Seq = stored.Seq
			}
		}
		body, err := encodeDeadLetter(op)
		if err != nil {
			return nil, fmt.Errorf("add dead letter %d (op %q): %w", i, op.OpID, err)
		}
		bodies = append(bodies, body)
	}
	return bodies, nil
}

// DeadLetterQuery selects dead letters. Zero fields select everything: the
// filters are exact matches combined with AND.
type DeadLetterQuery struct {
	// Device, if set, keeps dead letters of that device.
	Device string
	// Status and Reason, if set, keep dead letters whose op ended with
	// them.
	Status devices.Status
	Reason devices.Reason
	// Principal, if set, keeps dead letters of commands that principal
	// sent (devices.Op.Principal).
	Principal string
	// After is a Seq cursor: only dead letters with Seq > After are
	// returned. Pass the last Seq of one page to get the next.
	After uint64
	// Since, if not zero, keeps dead letters whose op's UpdatedAt (when
	// it ended) is at or after it.
	Since time.Time
	// Limit is the most dead letters returned: 0 means
	// DefaultDeadLetterLimit (100), above MaxDeadLetterLimit (1000) means
	// MaxDeadLetterLimit, negative is an error.
	Limit int
	// Newest returns the last Limit matching dead letters instead of the
	// first Limit after the cursor.
	Newest bool
}

// DeadLetters returns the dead letters matching q, in ascending Seq order
// (at most q.Limit of them, see DeadLetterQuery.Limit): the first matching
// ones with Seq > q.After, or with q.Newest the last ones. An empty result
// is nil.
//
// A client pages forward by passing the last returned Seq as the next
// query's After, until a page comes back shorter than the limit; since the
// store only appends, paging forward never skips or repeats a dead letter,
// and polling with the last Seq picks up new ones as they are added.
//
// It reads in one read-only transaction and scans from the cursor, so
// filters cost a scan of the entries they skip. A record that does not
// decode is an error naming its Seq; one that fails its checksum is such
// an error wrapping ErrDamaged. After Close it returns ErrClosed.
func (s *Store) DeadLetters(q DeadLetterQuery) ([]devices.DeadLetter, error) {
	limit, err := pageLimit(q.Limit, DefaultDeadLetterLimit, MaxDeadLetterLimit)
	if err != nil {
		return nil, fmt.Errorf("dead letter query: %w", err)
	}
	return deadLetterLog.query(s, seqPage{after: q.After, limit: limit, newest: q.Newest}, q.matches)
}

func (q DeadLetterQuery) matches(d devices.DeadLetter) bool {
	return (q.Device == "" || d.Device == q.Device) &&
		(q.Status == "" || d.Status == q.Status) &&
		(q.Reason == "" || d.Reason == q.Reason) &&
		(q.Principal == "" || d.Principal == q.Principal) &&
		(q.Since.IsZero() || !d.UpdatedAt.Before(q.Since))
}

// PruneDeadLetters deletes the dead letters whose op's UpdatedAt is
// before before and returns how many it deleted. Seqs are never reused.
// It reads every dead letter, in one read-write transaction of its own, so
// run it now and then (hearthd does, hourly), not per command. A record
// that does not decode is an error naming its Seq, and nothing is
// deleted. After Close it returns ErrClosed.
func (s *Store) PruneDeadLetters(before time.Time) (int, error) {
	return deadLetterLog.prune(s, before)
}

// Encoding. A dead letter is stored as devices.DeadLetter's JSON, "seq"
// first, in the record frame (checksum.go). The caller's goroutine
// encodes it with Seq 0 and cuts that seq off; the writer draws the Seq,
// prefixes it and frames the record (frameWithSeq), as for audit entries.

// zeroSeq is how devices.DeadLetter's JSON starts when its Seq is 0.
var zeroSeq = []byte(`{"seq":0,`)

// encodeDeadLetter checks op and returns its dead letter's JSON without
// "seq".
func encodeDeadLetter(op devices.Op) ([]byte, error) {
	switch {
	case op.OpID == "":
		return nil, fmt.Errorf("empty op_id")
	case !op.Status.Terminal():
		return nil, fmt.Errorf("status %q is not terminal", op.Status)
	case op.Status != devices.Failed && op.Status != devices.Expired && op.Status != devices.Superseded:
		return nil, fmt.Errorf("status %s is not a dead letter's (failed, expired or superseded)", op.Status)
	case op.UpdatedAt.IsZero():
		return nil, fmt.Errorf("zero updated_at")
	}
	b, err := json.Marshal(devices.DeadLetter{Op: op})
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	if !bytes.HasPrefix(b, zeroSeq) {
		return nil, fmt.Errorf("encode: JSON does not start with %s", zeroSeq)
	}
	b[len(zeroSeq)-1] = '{'
	return b[len(zeroSeq)-1:], nil
}

// deadLetterLog is the deadletters bucket: dead letters in Seq order,
// pruned by their op's UpdatedAt.
var deadLetterLog = &seqLog[devices.DeadLetter]{
	noun:   "dead letter",
	name:   bucketDeadLetters,
	bucket: func(b buckets) *bolt.Bucket { return b.dead },
	seq:    func(d devices.DeadLetter) uint64 { return d.Seq },
	at: func(record []byte) (time.Time, error) {
		var head struct {
			UpdatedAt time.Time `json:"updated_at"`
		}
		err := json.Unmarshal(record, &head)
		return head.UpdatedAt, err
	},
}
