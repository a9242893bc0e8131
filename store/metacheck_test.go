package store

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// quarantinedStore returns a data directory whose store holds a
// quarantine record with cause "disk gremlins", written by the store.
func quarantinedStore(t *testing.T) string {
	t.Helper()
	dir := indexedStore(t)
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.recordQuarantine(Quarantine{At: t0.UTC(), File: "x", Cause: "disk gremlins"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The quarantine record carries a checksum like the other records, and
// Open verifies it: a changed byte in it is damage, quarantined, not an
// error of every start's Quarantine() (hearthd exits on it: a crash
// loop).
func TestOpenVerifiesTheQuarantineRecord(t *testing.T) {
	dir := quarantinedStore(t)
	rewriteAll(t, dir, []byte(`"cause":"disk gremlins"`), []byte(`"cause":"disk gremlinz"`))
	_, err := Open(dir, Options{})
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "quarantine record") {
		t.Fatalf("Open: %v; want ErrDamaged naming the quarantine record", err)
	}
	s, err := Open(dir, Options{Quarantine: true, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatalf("Open with Quarantine: %v", err)
	}
	defer s.Close()
	q, ok, err := s.Quarantine()
	if !ok || err != nil || !strings.Contains(q.Cause, "quarantine record") {
		t.Errorf("Quarantine() = %+v, %v, %v; want the new quarantine, its cause naming the record", q, ok, err)
	}
	if _, err := s.AckQuarantine("admin", t0); err != nil {
		t.Errorf("AckQuarantine: %v", err)
	}
}

// A quarantine record from before its frame (plain JSON) still reads, and
// one that does not decode is damage at open.
func TestOpenReadsALegacyQuarantineRecord(t *testing.T) {
	for _, c := range []struct {
		name, v string
		ok      bool
	}{
		{"valid", `{"at":"2026-12-01T00:00:00Z","file":"x","cause":"old"}`, true},
		{"changed byte", `{"at":"2026-12-01T00:00:00Z","file":"x","cause":"old"]`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := indexedStore(t)
			db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(metaQuarantine, []byte(c.v)) })
			if cerr := db.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Fatal(err)
			}
			s, err := Open(dir, Options{})
			if !c.ok {
				if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "quarantine record") {
					t.Fatalf("Open: %v; want ErrDamaged naming the quarantine record", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			q, ok, err := s.Quarantine()
			if !ok || err != nil || q.Cause != "old" {
				t.Fatalf("Quarantine() = %+v, %v, %v", q, ok, err)
			}
			// An ack rewrites it framed, and it still reads.
			if _, err := s.AckQuarantine("admin", t0); err != nil {
				t.Fatal(err)
			}
			var raw []byte
			_ = s.db.View(func(tx *bolt.Tx) error { raw = append(raw, tx.Bucket(bucketMeta).Get(metaQuarantine)...); return nil })
			if len(raw) == 0 || raw[0] != frameV1 || json.Valid(raw) {
				t.Errorf("stored %q; want a v1 frame", raw)
			}
			if q, _, err := s.Quarantine(); err != nil || !q.Acked() {
				t.Errorf("after the ack: %+v, %v", q, err)
			}
		})
	}
}
