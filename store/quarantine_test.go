package store

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// With Options.Quarantine, a damaged hearth.db is moved aside, not
// deleted, and a fresh store opens with the quarantine recorded until it
// is acknowledged.
func TestOpenQuarantinesADamagedStoreAndStartsFresh(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, FileName)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 2, 3, 15, 0, 0, time.UTC)
	s, err = Open(dir, Options{Quarantine: true, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	q, ok, err := s.Quarantine()
	if err != nil || !ok {
		t.Fatalf("Quarantine() = %+v, %v, %v; want a record", q, ok, err)
	}
	want := path + ".corrupt-20261202T031500Z"
	if q.File != want || !q.At.Equal(at) || q.Cause == "" || q.Acked() {
		t.Errorf("record %+v; want file %s at %s with a cause, not acked", q, want, at)
	}
	if fi, err := os.Stat(want); err != nil || fi.Size() != 0 {
		t.Errorf("quarantined file: %v, %v; want the empty file kept", fi, err)
	}
	acked, err := s.AckQuarantine("admin", at.Add(time.Hour))
	if err != nil || !acked.Acked() || acked.AckedBy != "admin" {
		t.Errorf("AckQuarantine = %+v, %v", acked, err)
	}
	if q, _, _ := s.Quarantine(); !q.Acked() {
		t.Error("acknowledgement not kept")
	}
}
