package main

import (
	"bytes"
	"encoding/binary"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/store"
)

// A store whose file is sound to bbolt but whose records disagree (a
// pending index entry naming no op, a garbled quarantine record, a garbled
// record from before the checksums) is damage like any other: hearthd
// quarantines it and serves commands, instead of staying up and ready
// while it runs none, or exiting at every start.
func TestInconsistentStoreIsQuarantinedAndHearthdServes(t *testing.T) {
	cases := []struct {
		name   string
		bucket string
		key    []byte
		value  []byte
	}{
		{"pending entry naming no op", "pending", append(binary.BigEndian.AppendUint64(nil, 999), "no-such-op"...), []byte{}},
		{"pending entry shorter than a seq", "pending", []byte{1, 2}, []byte{}},
		{"garbled quarantine record", "meta", []byte("quarantine"), []byte(`{"at":"2026-12-01T00:00:00Z","cause":"x"!`)},
		{"garbled record from before the checksums", "states", []byte("hall_light"), []byte(`{"state":{"state":"ON"},"at":"2026-12-01T00:00:0#Z"}`)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			damageStore(t, dir)
			db, err := bolt.Open(filepath.Join(dir, store.FileName), 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := db.Update(func(tx *bolt.Tx) error {
				return tx.Bucket([]byte(tc.bucket)).Put(tc.key, tc.value)
			}); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}

			h := newHarness(t, harnessOptions{dataDir: dir})
			q, found, err := h.d.store.Quarantine()
			if err != nil || !found || q.Acked() {
				t.Fatalf("Quarantine() = %+v, %v, %v; want an unacknowledged quarantine", q, found, err)
			}
			t.Logf("cause: %s; salvaged %+v", q.Cause, q.Salvaged)
			if q.Salvaged.Ops != damageEnded+damagePending {
				t.Errorf("salvaged %d ops; want all %d: the records themselves are sound", q.Salvaged.Ops, damageEnded+damagePending)
			}
			if status, r := h.readyz(); status != http.StatusOK || r.Status != "degraded" {
				t.Errorf("/readyz: %d %+v; want 200 degraded", status, r)
			}
			h.settle("plug")
			h.publish("plug", `{"state":"OFF","op_id":"live"}`)
			if r := h.final("live"); r.Status != devices.Succeeded {
				t.Errorf("a live command: %s/%s; want succeeded", r.Status, r.Reason)
			}
		})
	}
}

// Damage found while hearthd runs (a record that fails its checksum, as a
// failing card returns it) is said at once, not at the next restart: the
// command that needs the record is refused store_error, /readyz's store
// check fails naming the damage, and one critical notification tells to
// restart hearthd, which then quarantines the store (once: see
// TestStoreDamageIsNotifiedOnceAndFailsTheCheckUntilARestart).
func TestDamageFoundWhileRunningFailsReadinessAndNotifiesOnce(t *testing.T) {
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	notes := subscribe(t, b.URL(), "hearth/notifications")
	h := newHarness(t, harnessOptions{brokerURL: b.URL()})
	h.settle("plug")
	h.publish("plug", `{"state":"ON","op_id":"soon-damaged"}`)
	if r := h.final("soon-damaged"); r.Status != devices.Succeeded {
		t.Fatalf("soon-damaged: %s/%s", r.Status, r.Reason)
	}
	// Every copy of the record in the file, the current one and older
	// versions on freed pages, loses a byte of its JSON.
	f, err := os.OpenFile(filepath.Join(h.cfg.DataDir, store.FileName), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b0, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	needle := []byte(`"op_id":"soon-damaged"`)
	n := 0
	for i := bytes.Index(b0, needle); i >= 0; i = bytes.Index(b0[i+1:], needle) + i + 1 {
		if _, err := f.WriteAt([]byte("X"), int64(i+len(`"op_id":"`))); err != nil {
			t.Fatal(err)
		}
		n++
		if bytes.Index(b0[i+1:], needle) < 0 {
			break
		}
	}
	if err := f.Close(); err != nil || n == 0 {
		t.Fatalf("damaged %d copies: %v", n, err)
	}

	for range 2 {
		h.publish("plug", `{"state":"ON","op_id":"soon-damaged"}`)
		if r := h.result("soon-damaged"); r.Status != devices.Rejected || r.Reason != devices.ReasonStoreError {
			t.Errorf("soon-damaged sent again: %s/%s (%s); want rejected store_error: its record is damaged", r.Status, r.Reason, r.Detail)
		}
	}
	if status, r := h.readyz(); status != http.StatusServiceUnavailable || !strings.Contains(r.Checks["store"], "damaged") {
		t.Errorf("/readyz: %d %+v; want 503 with the store check naming the damage", status, r)
	}
	for {
		n := h.nextNotification(notes)
		if n.Source != "store" {
			continue
		}
		if n.Reason != string(devices.ReasonStoreDamaged) || n.Severity != "critical" || !strings.Contains(n.Message, "Restart hearthd") {
			t.Errorf("notification %+v; want critical store_damaged, telling to restart hearthd", n)
		}
		break
	}
}
