package store

import (
	"bytes"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// Helpers shared by the tests of the audit trail and the dead-letter
// store, the two seqLogs.

// seqsOf returns the Seqs of records, [] when there are none; call names
// the query in the failure if err is not nil.
func seqsOf[T any](t *testing.T, call string, records []T, err error, seq func(T) uint64) []uint64 {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", call, err)
	}
	seqs := []uint64{}
	for _, r := range records {
		seqs = append(seqs, seq(r))
	}
	return seqs
}

// seqCase is a query and the Seqs it should return.
type seqCase[Q any] struct {
	name string
	q    Q
	want []uint64
}

// runSeqCases runs each case as a subtest, comparing seqs(q) with want.
func runSeqCases[Q any](t *testing.T, cases []seqCase[Q], seqs func(*testing.T, Q) []uint64) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			if got := seqs(t, tt.q); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Seqs = %v, want %v", got, tt.want)
			}
		})
	}
}

// seqRange returns from, from+1, …, to.
func seqRange(from, to uint64) []uint64 {
	out := []uint64{}
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// pageForward pages with query, passing the last Seq of each page as the
// next cursor, until a page is shorter than limit (10 pages at most), and
// returns the pages.
func pageForward(limit int, query func(after uint64) []uint64) [][]uint64 {
	var pages [][]uint64
	var after uint64
	for range 10 {
		page := query(after)
		pages = append(pages, page)
		if len(page) < limit {
			break
		}
		after = page[len(page)-1]
	}
	return pages
}

func lens(pages [][]uint64) []int {
	var n []int
	for _, p := range pages {
		n = append(n, len(p))
	}
	return n
}

// storedRecords returns the keys of bucket in s, in hex and in order,
// and the JSON of the record stored under seqKey(seq), failing the test
// unless the record is in frame v1 with a matching checksum.
func storedRecords(t *testing.T, s *Store, bucket []byte, seq uint64) (keys []string, record []byte) {
	t.Helper()
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		_ = b.ForEach(func(k, _ []byte) error {
			keys = append(keys, fmt.Sprintf("%x", k))
			return nil
		})
		v := b.Get(seqKey(seq))
		if len(v) == 0 || v[0] != frameV1 {
			t.Errorf("record %d = %q, want frame v1", seq, v)
		}
		body, err := unframe(bucket, seqKey(seq), v)
		if err != nil {
			t.Error(err)
		}
		record = bytes.Clone(body)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return keys, record
}

// reopen closes s and opens its data directory again, until the test
// ends.
func reopen(t *testing.T, s *Store) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return openStore(t, filepath.Dir(s.Path()), hooks{})
}

// corrupt puts records (Seq → stored bytes, legacy JSON) into bucket of
// the open store s straight through bbolt, as bytes changed at rest
// after Open would (Open itself refuses a legacy record that does not
// decode), and returns s.
func corrupt(t *testing.T, s *Store, bucket []byte, records map[uint64]string) *Store {
	t.Helper()
	err := s.db.Update(func(tx *bolt.Tx) error {
		for seq, v := range records {
			if err := tx.Bucket(bucket).Put(seqKey(seq), []byte(v)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// closedStore returns a store that was opened and closed.
func closedStore(t *testing.T) *Store {
	t.Helper()
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return s
}

// sharesGroupCommitWithSave calls add (named what in failures) while a
// Save is committing, alongside another Save, and checks that both ride
// the second commit. It returns the store for the caller to check what
// add stored.
func sharesGroupCommitWithSave(t *testing.T, what string, add func(*Store) error) *Store {
	t.Helper()
	h, held, queued, release, groups := holdFirstCommit()
	s := openStore(t, "", h)
	errs := make(chan error, 3)
	go func() { errs <- s.Save(newOp("op-0")) }()
	waitFor(t, held, "the first commit")
	go func() { errs <- add(s) }()
	go func() { errs <- s.Save(newOp("op-1")) }()
	waitQueued(t, queued, 2)
	close(release)
	for range 3 {
		if err := waitFor(t, errs, "Save or "+what); err != nil {
			t.Errorf("%v", err)
		}
	}
	if got, want := groups(), []int{1, 2}; !reflect.DeepEqual(got, want) {
		t.Errorf("group sizes = %v, want %v", got, want)
	}
	return s
}
