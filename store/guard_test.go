package store

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// filledStore returns a data directory holding a closed store of n ops,
// one in three of them ended, and n/4 audit entries.
func filledStore(t testing.TB, n int) string {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	const batch = 1000
	for i := 0; i < n; i += batch {
		var ops []devices.Op
		for j := i; j < min(i+batch, n); j++ {
			op := newOp(fmt.Sprintf("op-%06d", j))
			if j%3 == 0 {
				op.Status = devices.Succeeded
			}
			ops = append(ops, op)
		}
		if err := s.Save(ops...); err != nil {
			t.Fatalf("save: %v", err)
		}
	}
	var entries []devices.AuditEntry
	for i := 0; i < n/4; i++ {
		entries = append(entries, devices.AuditEntry{OpID: fmt.Sprintf("op-%06d", i), Device: "front_door", Event: devices.AuditAccepted, At: t0})
	}
	if err := s.AppendAudit(entries...); err != nil {
		t.Fatalf("append audit: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	return dir
}

// damage rewrites dir's hearth.db with fn.
func damage(t *testing.T, dir string, fn func(b []byte) []byte) {
	t.Helper()
	path := filepath.Join(dir, FileName)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, fn(b), 0o600); err != nil {
		t.Fatal(err)
	}
}

// openAndWalk opens dir and, if that works, runs every start-up read
// (Pending, LastEnded, States, Audit, DeadLetters and the prunes), so
// that a panic anywhere fails the test. It returns the first error.
func openAndWalk(t *testing.T, dir string) error {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("panic: %v", p)
		}
	}()
	s, err := Open(dir, Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	reads := []func() error{
		func() error { _, err := s.Pending(); return err },
		func() error { _, err := s.LastEnded(5*time.Minute, 1000); return err },
		func() error { _, err := s.States(); return err },
		func() error { _, err := s.Audit(AuditQuery{}); return err },
		func() error { _, err := s.DeadLetters(DeadLetterQuery{}); return err },
		func() error { _, err := s.PruneTerminal(t0.Add(time.Hour)); return err },
		func() error { _, err := s.PruneAudit(t0.Add(time.Hour)); return err },
	}
	for _, read := range reads {
		if err := read(); err != nil {
			return err
		}
	}
	return nil
}

func assertDamaged(t *testing.T, dir string, err error) {
	t.Helper()
	t.Logf("open: %v", err)
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("err = %v, want one wrapping ErrDamaged", err)
	}
	if path := filepath.Join(dir, FileName); !strings.Contains(err.Error(), path) {
		t.Errorf("err = %q, want it to name %s", err, path)
	}
}

func TestOpenZeroLengthFileWithMarkerIsDamaged(t *testing.T) {
	dir := filledStore(t, 100)
	damage(t, dir, func(b []byte) []byte { return nil })
	assertDamaged(t, dir, openAndWalk(t, dir))
	if fi, err := os.Stat(filepath.Join(dir, FileName)); err != nil || fi.Size() != 0 {
		t.Errorf("hearth.db after open: %v, %v; want it left empty, not initialised", fi, err)
	}
}

func TestOpenAllZerosIsDamaged(t *testing.T) {
	dir := filledStore(t, 100)
	damage(t, dir, func(b []byte) []byte { return make([]byte, len(b)) })
	assertDamaged(t, dir, openAndWalk(t, dir))
}

func TestOpenMissingFileWithMarkerIsDamaged(t *testing.T) {
	dir := filledStore(t, 10)
	if err := os.Remove(filepath.Join(dir, FileName)); err != nil {
		t.Fatal(err)
	}
	assertDamaged(t, dir, openAndWalk(t, dir))
}

func TestOpenTruncatedToHalfIsDamagedNotAPanic(t *testing.T) {
	dir := filledStore(t, 2000)
	damage(t, dir, func(b []byte) []byte { return b[:len(b)/2] })
	assertDamaged(t, dir, openAndWalk(t, dir))
}

func TestOpenOnePageInFourZeroedIsDamagedNotAPanic(t *testing.T) {
	dir := filledStore(t, 2000)
	damage(t, dir, func(b []byte) []byte {
		const page = 4096
		for off := 3 * page; off < len(b); off += 4 * page {
			clear(b[off:min(off+page, len(b))])
		}
		return b
	})
	assertDamaged(t, dir, openAndWalk(t, dir))
}

func TestOpenGarbageInTheMiddleNeverPanics(t *testing.T) {
	for seed := uint64(1); seed <= 8; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			dir := filledStore(t, 2000)
			damage(t, dir, func(b []byte) []byte {
				r := rand.New(rand.NewPCG(seed, seed))
				start := len(b)/2 - 8<<10 + int(r.IntN(8))*4096
				for i := start; i < start+16<<10 && i < len(b); i++ {
					b[i] = byte(r.Uint32())
				}
				return b
			})
			// Garbage in free pages harms nothing; elsewhere it is damage.
			if err := openAndWalk(t, dir); err != nil {
				assertDamaged(t, dir, err)
			}
		})
	}
}

func TestOpenFreshDirectoryStartsAndWritesMarker(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := openAndWalk(t, dir); err != nil {
		t.Fatalf("open fresh: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, MarkerName)); err != nil {
		t.Errorf("marker after first open: %v", err)
	}
	if err := openAndWalk(t, dir); err != nil {
		t.Fatalf("open again: %v", err)
	}
}

func TestOpenStoreWithoutMarkerOpensAndWritesIt(t *testing.T) {
	dir := filledStore(t, 100)
	marker := filepath.Join(dir, MarkerName)
	if err := os.Remove(marker); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, dir, hooks{})
	if _, ok, err := s.Lookup("op-000042"); !ok || err != nil {
		t.Errorf("Lookup after upgrade = %v, %v; want the op", ok, err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Errorf("marker after upgrade open: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temp file %s left behind", e.Name())
		}
	}
}

func TestGuardedTurnsAPanicIntoErrDamaged(t *testing.T) {
	err := guarded("/data/hearth.db", func() error { panic("invalid freelist page: 7, page type is leaf") })
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "/data/hearth.db") {
		t.Fatalf("err = %v, want ErrDamaged naming the file", err)
	}
}

// TestOpenCheckTime100kOps logs how long Open (with its walk and
// Tx.Check) takes on a store of 100,000 ops. It measures; it asserts only
// that the store opens. Skipped with -short.
func TestOpenCheckTime100kOps(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 100,000-op store")
	}
	dir := filledStore(t, 100_000)
	fi, _ := os.Stat(filepath.Join(dir, FileName))
	start := time.Now()
	db, err := Open(dir, Options{})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	t.Logf("Open of 100,000 ops (%d bytes): %v", fi.Size(), took)
}
