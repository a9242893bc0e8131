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
)

// seqLog is an append-only bucket of records of type T kept in Seq order
// under seqKey keys: the audit trail (auditLog) and the dead-letter store
// (deadLetterLog). A record is T's JSON with "seq" first. The caller's
// goroutine encodes it without its seq, the writer draws the Seq from the
// bucket's sequence (which survives restarts and pruning, so Seqs are
// never reused) and prefixes it (withSeq).
type seqLog[T any] struct {
	// noun names one record in errors: "audit entry", "dead letter".
	noun string
	// name is the bucket's name, which the record frame's checksum
	// covers (checksum.go).
	name []byte
	// bucket picks the log's bucket out of a transaction's buckets.
	bucket func(buckets) *bolt.Bucket
	// seq is a decoded record's Seq.
	seq func(T) uint64
	// at reads the time prune goes by out of a stored record, decoding
	// only that field.
	at func(record []byte) (time.Time, error)
}

// append queues bodies, records encoded without their seq, for the
// writer and returns when they are committed and fsync'd, together or
// not at all. With no bodies it stores nothing and only reports
// ErrClosed after Close.
func (l *seqLog[T]) append(s *Store, bodies [][]byte) error {
	if len(bodies) == 0 {
		return s.openErr()
	}
	return s.submit(&request{records: bodies, putRecord: l.put})
}

// put stores one encoded record under the next Seq of the log's bucket,
// in the writer's transaction.
func (l *seqLog[T]) put(b buckets, body []byte) error {
	bucket := l.bucket(b)
	seq, err := bucket.NextSequence()
	if err != nil {
		return fmt.Errorf("assign seq to %s: %w", l.noun, err)
	}
	key := seqKey(seq)
	if err := bucket.Put(key, frameWithSeq(l.name, key, body, seq)); err != nil {
		return fmt.Errorf("save %s %d: %w", l.noun, seq, err)
	}
	return nil
}

// seqPage is the part of a query that seqLog.query reads itself: which
// page of the Seq order to return.
type seqPage struct {
	// after is a Seq cursor: only records with Seq > after.
	after uint64
	// limit is the most records returned, already resolved (pageLimit).
	limit int
	// newest asks for the last limit matching records rather than the
	// first limit after the cursor.
	newest bool
}

// pageLimit resolves a query's Limit: 0 means def, above max means max,
// negative is an error.
func pageLimit(limit, def, max int) (int, error) {
	switch {
	case limit < 0:
		return 0, fmt.Errorf("negative limit %d", limit)
	case limit == 0:
		return def, nil
	case limit > max:
		return max, nil
	}
	return limit, nil
}

// query returns the records that keep accepts within p, in ascending Seq
// order: the first p.limit with Seq > p.after, or with p.newest the last
// p.limit of them. An empty result is nil. It reads in one read-only
// transaction and scans from the cursor, so keep costs a scan of the
// records it skips. A record that does not decode is an error naming its
// Seq. After Close it returns ErrClosed.
func (l *seqLog[T]) query(s *Store, p seqPage, keep func(T) bool) ([]T, error) {
	var out []T
	err := s.view(func(b buckets) error {
		c := l.bucket(b).Cursor()
		var k, v []byte
		var next func() ([]byte, []byte)
		if p.newest {
			k, v = c.Last()
			next = c.Prev
		} else {
			k, v = c.Seek(seqKey(p.after + 1))
			next = c.Next
			if p.after == ^uint64(0) {
				k = nil // no Seq is after the largest
			}
		}
		for ; k != nil && len(out) < p.limit; k, v = next() {
			r, err := l.decode(k, v)
			if err != nil {
				return err
			}
			if l.seq(r) <= p.after {
				break // only when walking back (newest)
			}
			if keep(r) {
				out = append(out, r)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if p.newest {
		slices.Reverse(out)
	}
	return out, nil
}

// prune deletes the records whose time (l.at) is before before and
// returns how many it deleted, in one read-write transaction of its own.
// A record that does not decode is an error naming its Seq, and nothing
// is deleted. After Close it returns ErrClosed.
func (l *seqLog[T]) prune(s *Store, before time.Time) (int, error) {
	if err := s.openErr(); err != nil {
		return 0, err
	}
	var n int
	err := s.update(func(tx *bolt.Tx) error {
		bucket := l.bucket(txBuckets(tx))
		var doomed [][]byte
		err := bucket.ForEach(func(k, v []byte) error {
			body, err := unframe(l.name, k, v)
			if err != nil {
				return err
			}
			at, err := l.at(body)
			if err != nil && v[0] == '{' {
				return legacyError(l.name, k, err)
			}
			if err != nil {
				return fmt.Errorf("decode %s %s: %w", l.noun, seqKeyName(k), err)
			}
			if at.Before(before) {
				doomed = append(doomed, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range doomed {
			if err := bucket.Delete(k); err != nil {
				return fmt.Errorf("delete %s %s: %w", l.noun, seqKeyName(k), err)
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

// decode decodes the record stored under k, checking its checksum
// (unframe: a mismatch is an error wrapping ErrDamaged), that k is an
// 8-byte Seq and that the record says the same Seq. A legacy record
// failing either is damage too (legacyError).
func (l *seqLog[T]) decode(k, v []byte) (T, error) {
	var r T
	if len(k) != 8 {
		return r, fmt.Errorf("decode %s %s: key is not an 8-byte seq", l.noun, seqKeyName(k))
	}
	legacy := len(v) > 0 && v[0] == '{'
	v, err := unframe(l.name, k, v)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(v, &r); err != nil {
		if legacy {
			return r, legacyError(l.name, k, err)
		}
		return r, fmt.Errorf("decode %s %s: %w", l.noun, seqKeyName(k), err)
	}
	if seq := binary.BigEndian.Uint64(k); l.seq(r) != seq {
		err := fmt.Errorf("record says seq %d", l.seq(r))
		if legacy {
			return r, legacyError(l.name, k, err)
		}
		return r, fmt.Errorf("decode %s %s: %w", l.noun, seqKeyName(k), err)
	}
	return r, nil
}
