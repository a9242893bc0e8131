package store

import (
	"strconv"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/hearthd/hearth/devices"
)

// Pending decodes its records on several CPUs: it still returns every
// pending op once, in Seq order, across many decoding chunks.
func TestPendingReturnsEveryOpInSeqOrderAcrossChunks(t *testing.T) {
	n := 3*decodeChunk + 7
	s := openStore(t, "", hooks{})
	saveMany(t, s, n)
	ops, err := s.Pending()
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != n {
		t.Fatalf("Pending: %d ops; want %d", len(ops), n)
	}
	for i, op := range ops {
		if want := "op-" + strconv.Itoa(i); op.OpID != want || op.Seq != uint64(i+1) {
			t.Fatalf("Pending()[%d] = %s seq %d; want %s seq %d", i, op.OpID, op.Seq, want, i+1)
		}
	}
}

// Two damaged records in different decoding chunks: the error names the
// one earlier in Seq order, whichever decoder finds its own first.
func TestPendingNamesTheFirstDamagedRecord(t *testing.T) {
	n := 3*decodeChunk + 7
	s := openStore(t, "", hooks{})
	saveMany(t, s, n)
	first, second := "op-"+strconv.Itoa(decodeChunk+5), "op-"+strconv.Itoa(2*decodeChunk+5)
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, id := range []string{second, first} {
			if err := tx.Bucket(bucketOps).Put([]byte(id), []byte("{not json")); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		_, err := s.Pending()
		if err == nil || !strings.Contains(err.Error(), `"`+first+`"`) {
			t.Fatalf("Pending with %s and %s damaged: %v; want an error naming %s", first, second, err, first)
		}
	}
}

// saveMany saves n pending ops op-0 … op-<n-1>, in that order, in one
// commit.
func saveMany(t *testing.T, s *Store, n int) {
	t.Helper()
	ops := make([]devices.Op, n)
	for i := range ops {
		ops[i] = newOp("op-" + strconv.Itoa(i))
	}
	if err := s.Save(ops...); err != nil {
		t.Fatal(err)
	}
}
