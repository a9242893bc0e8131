package store

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A second quarantine within the same second keeps the first damaged
// file: the second gets a free name (-2), never the first's.
func TestASecondQuarantineInTheSameSecondKeepsTheFirstFile(t *testing.T) {
	dir := indexedStore(t)
	path := filepath.Join(dir, FileName)
	now := func() time.Time { return t0 }
	first := path + QuarantineSuffix + t0.UTC().Format("20060102T150405Z")
	for i, content := range []string{"", "second damage"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(dir, Options{Quarantine: true, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		q, _, err := s.Quarantine()
		s.Close()
		want := first
		if i == 1 {
			want = first + "-2"
		}
		if err != nil || q.File != want {
			t.Errorf("quarantine %d: file %q, %v; want %s", i+1, q.File, err, want)
		}
	}
	for name, want := range map[string]string{first: "", first + "-2": "second damage"} {
		if b, err := os.ReadFile(name); err != nil || string(b) != want {
			t.Errorf("%s holds %q, %v; want %q", filepath.Base(name), b, err, want)
		}
	}
}
