package store

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// garbleMetas damages both meta pages of dir's hearth.db (bytes 16–96 of
// pages 0 and 1 randomised): bbolt refuses the file, and the raw scan
// salvages every record.
func garbleMetas(t *testing.T, dir string) {
	t.Helper()
	damage(t, dir, func(b []byte) []byte {
		r := rand.New(rand.NewPCG(7, 7))
		for _, off := range []int{0, 4096} {
			for i := off + 16; i < off+96; i++ {
				b[i] = byte(r.Uint32())
			}
		}
		return b
	})
}

var errCrash = errors.New("simulated crash")

// A crash at any point of a quarantine leaves the next Open to finish it:
// the damaged file is kept under the name the quarantine chose, what it
// holds is salvaged, a fresh store the crash left behind is moved aside
// (not deleted, not served), and the quarantine is recorded. Never a
// silently empty store, never a lost salvage.
func TestACrashDuringAQuarantineIsFinishedAtTheNextOpen(t *testing.T) {
	at := time.Date(2026, 12, 2, 3, 15, 0, 0, time.UTC)
	later := at.Add(time.Minute)
	for _, step := range []string{"pending", "moved", "fresh", "restored"} {
		t.Run("after "+step, func(t *testing.T) {
			dir := indexedStore(t)
			garbleMetas(t, dir)
			path := filepath.Join(dir, FileName)
			moved := path + QuarantineSuffix + "20261202T031500Z"
			_, err := open(dir, Options{Quarantine: true, Now: func() time.Time { return at }}, hooks{
				quarantineStep: func(s string) error {
					if s == step {
						return errCrash
					}
					return nil
				},
			})
			if !errors.Is(err, errCrash) {
				t.Fatalf("Open with a crash after %s: %v", step, err)
			}
			if _, err := os.Stat(filepath.Join(dir, PendingQuarantineName)); err != nil {
				t.Fatalf("no pending-quarantine file after the crash: %v", err)
			}
			// The next start without Quarantine refuses, rather than
			// serving what the crash left.
			if _, err := Open(dir, Options{}); !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), PendingQuarantineName) {
				t.Errorf("Open without Quarantine: %v; want ErrDamaged naming %s", err, PendingQuarantineName)
			}
			s, err := Open(dir, Options{Quarantine: true, Now: func() time.Time { return later }})
			if err != nil {
				t.Fatalf("next Open: %v", err)
			}
			defer s.Close()
			q, ok, err := s.Quarantine()
			if !ok || err != nil {
				t.Fatalf("Quarantine() = %+v, %v, %v", q, ok, err)
			}
			if q.File != moved || !q.At.Equal(at) || !strings.Contains(q.Cause, "invalid") || !strings.Contains(q.Cause, "interrupted") {
				t.Errorf("record %+v; want file %s at %s, the first cause, saying it was interrupted", q, moved, at)
			}
			if q.Salvaged.Ops != 50 || q.Ended != 25 {
				t.Errorf("salvaged %d ops, ended %d; want 50 and 25", q.Salvaged.Ops, q.Ended)
			}
			if op, found, err := s.Lookup("op-001"); !found || err != nil || op.Reason != devices.ReasonStoreDamaged {
				t.Errorf("Lookup(op-001) = %s/%s, %v, %v; want it salvaged, ended store_damaged", op.Status, op.Reason, found, err)
			}
			if fi, err := os.Stat(moved); err != nil || fi.Size() == 0 {
				t.Errorf("damaged file %s: %v", moved, err)
			}
			if _, err := os.Stat(filepath.Join(dir, PendingQuarantineName)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("pending-quarantine file after the finish: %v; want it removed", err)
			}
			aside, _ := filepath.Glob(path + UnfinishedSuffix + "*")
			if wantAside := step == "fresh" || step == "restored"; wantAside != (len(aside) == 1) {
				t.Errorf("stores moved aside: %v; want one: %v", aside, wantAside)
			}
			corrupt, _ := filepath.Glob(path + QuarantineSuffix + "*")
			if len(corrupt) != 1 {
				t.Errorf("quarantined files %v; want only %s", corrupt, moved)
			}
		})
	}
}
