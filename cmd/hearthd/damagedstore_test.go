package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/store"
)

// A hearthd whose store is damaged (zero length, truncated to half)
// neither panics (a crash loop under Restart=always) nor exits, nor
// starts empty over it: it moves the file to hearth.db.corrupt-<time>,
// byte for byte as it was, starts on a fresh store that records the
// quarantine with the damage named, serves a live command, and refuses an
// op_id of the damaged store sent again with its issued_at.
func TestDamagedStoreIsQuarantinedAndHearthdStartsOnAFreshOne(t *testing.T) {
	cases := []struct {
		name   string
		damage func(b []byte) []byte
	}{
		{"zero length", func(b []byte) []byte { return nil }},
		{"truncated to half", func(b []byte) []byte { return b[:len(b)/2] }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s, err := store.Open(dir, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			issued := t0.Add(-time.Hour)
			var ops []devices.Op
			for i := range 500 {
				ops = append(ops, devices.Op{OpID: fmt.Sprintf("op-%d", i), Device: "hall_light",
					Target: devices.Target{"state": "ON"}, AcceptedAt: issued, IssuedAt: issued,
					Deadline: issued.Add(time.Minute), Status: devices.Succeeded, UpdatedAt: issued})
			}
			if err := s.Save(ops...); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, store.FileName)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			damaged := tc.damage(b)
			if err := os.WriteFile(path, damaged, 0o600); err != nil {
				t.Fatal(err)
			}

			h := newHarness(t, harnessOptions{dataDir: dir})
			q, found, err := h.d.store.Quarantine()
			if err != nil || !found || q.Acked() {
				t.Fatalf("Quarantine() = %+v, %v, %v; want an unacknowledged quarantine", q, found, err)
			}
			if want := "database file " + path + " is damaged: "; !strings.HasPrefix(q.Cause, want) {
				t.Errorf("cause %q; want it to start %q", q.Cause, want)
			}
			if kept, err := os.ReadFile(q.File); err != nil || !bytes.Equal(kept, damaged) {
				t.Errorf("the quarantined file %s: %d bytes, %v; want the %d damaged bytes, kept", q.File, len(kept), err, len(damaged))
			}
			h.settle("plug")
			h.publish("plug", `{"state":"ON","op_id":"live"}`)
			if r := h.final("live"); r.Status != devices.Succeeded {
				t.Errorf("a live command: %s/%s; want succeeded", r.Status, r.Reason)
			}
			h.publish("hall_light", `{"state":"ON","op_id":"op-7","issued_at":"`+issued.Format(time.RFC3339)+`","ttl":"3h"}`)
			if r := h.result("op-7"); r.Status != devices.Rejected || r.Reason != devices.ReasonStaleCommand {
				t.Errorf("op-7 of the damaged store again: %s/%s (%s); want rejected stale_command", r.Status, r.Reason, r.Detail)
			}
		})
	}
}

// A locked data directory (another hearthd holds it) still stops the
// start, with the error that says so, and is never quarantined: the file
// another process is using is not moved.
func TestLockedDataDirStopsTheStartAndQuarantinesNothing(t *testing.T) {
	dir := t.TempDir()
	held, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	cfg, err := config.Parse("test.yaml", []byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = dir
	openWithoutPrincipals(cfg)
	_, err = start(cfg, deps{logger: testLogger(t), lockTimeout: 50 * time.Millisecond})
	if !errors.Is(err, store.ErrLocked) || errors.Is(err, store.ErrDamaged) {
		t.Fatalf("start on a locked data directory = %v; want an error wrapping store.ErrLocked", err)
	}
	if files := quarantinedFiles(t, dir); len(files) != 0 {
		t.Errorf("quarantined %v although the store was only locked", files)
	}
	if q, found, err := held.Quarantine(); found || err != nil {
		t.Errorf("the held store has a quarantine record %+v, %v", q, err)
	}
}
