package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/store"
)

// A hearthd whose store is damaged exits at start with an error that
// names hearth.db and says it is damaged, instead of panicking (a crash
// loop under Restart=always) or starting empty over it.
func TestDamagedStoreStopsTheStartNamingTheFile(t *testing.T) {
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
			now := time.Now()
			var ops []devices.Op
			for i := range 500 {
				ops = append(ops, devices.Op{OpID: fmt.Sprintf("op-%d", i), Device: "hall_light",
					Target: devices.Target{"state": "ON"}, AcceptedAt: now, IssuedAt: now,
					Deadline: now.Add(time.Minute), Status: devices.Succeeded, UpdatedAt: now})
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
			if err := os.WriteFile(path, tc.damage(b), 0o600); err != nil {
				t.Fatal(err)
			}

			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err = run(ctx, []string{"-data-dir", dir, "-mqtt-listen", "127.0.0.1:0", "-http-listen", "127.0.0.1:0"}, io.Discard, io.Discard)
			if !errors.Is(err, store.ErrDamaged) {
				t.Fatalf("run = %v; want an error wrapping store.ErrDamaged", err)
			}
			// main prints "hearthd: " and this, then exits 1.
			if want := "database file " + path + " is damaged: "; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("run = %q; want it to start %q", err, want)
			}
			t.Logf("hearthd: %v", err)
		})
	}
}
