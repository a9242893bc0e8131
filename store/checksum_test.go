package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hearthd/hearth/devices"
)

// The frame is exactly 0x01, CRC-32C big-endian over bucket, 0x00, key
// and JSON, then the JSON: computed here without the package's helpers.
func TestFrameV1IsVersionCRC32CBigEndianThenJSON(t *testing.T) {
	body := []byte(`{"seq":1,"op_id":"a"}`)
	want := crc32.Checksum([]byte("ops\x00a"+string(body)), crc32.MakeTable(crc32.Castagnoli))
	got := frame([]byte("ops"), []byte("a"), body)
	if got[0] != 0x01 || binary.BigEndian.Uint32(got[1:5]) != want || !bytes.Equal(got[5:], body) {
		t.Fatalf("frame = % x, want 01 %08x then the JSON", got[:5], want)
	}
	if got := frameWithSeq([]byte("ops"), []byte("a"), []byte(`{"op_id":"a"}`), 1); !bytes.Equal(got, frame([]byte("ops"), []byte("a"), body)) {
		t.Errorf("frameWithSeq = %q, want %q", got, frame([]byte("ops"), []byte("a"), body))
	}
}

func TestUnframe(t *testing.T) {
	good := frame(bucketOps, []byte("a"), []byte(`{}`))
	flipped := bytes.Clone(good)
	flipped[len(flipped)-1] ^= 0x01
	tests := []struct {
		name     string
		bucket   string
		key      string
		v        []byte
		want     string // the JSON, or "" for an error
		wantText string // the error's text
	}{
		{"v1", "ops", "a", good, `{}`, ""},
		{"legacy JSON", "ops", "a", []byte(`{"op_id":"a"}`), `{"op_id":"a"}`, ""},
		{"flipped JSON byte", "ops", "a", flipped, "", `op "a": record fails its checksum`},
		{"other key", "ops", "b", good, "", `op "b": record fails its checksum`},
		{"other bucket", "states", "a", good, "", `state of "a": record fails its checksum`},
		{"empty", "audit", "\x00\x00\x00\x00\x00\x00\x00\x07", nil, "", `audit entry seq 7: record is empty`},
		{"short v1", "deadletters", "\x00\x00\x00\x00\x00\x00\x00\x07", []byte{1, 2}, "", `dead letter seq 7: record has unknown format 0x01`},
		{"unknown version", "ops", "a", []byte{2, 0, 0, 0, 0, '{', '}'}, "", `op "a": record has unknown format 0x02`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := unframe([]byte(tt.bucket), []byte(tt.key), tt.v)
			if tt.want != "" {
				if err != nil || string(got) != tt.want {
					t.Fatalf("unframe = %q, %v; want %q", got, err, tt.want)
				}
				return
			}
			if !errors.Is(err, ErrDamaged) || err.Error() != tt.wantText {
				t.Fatalf("unframe error = %v; want %q wrapping ErrDamaged", err, tt.wantText)
			}
		})
	}
}

// flipStored flips the last JSON byte of the record under key in bucket,
// straight through bbolt under the open store.
func flipStored(t *testing.T, s *Store, bucket, key []byte) {
	t.Helper()
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucket)
		v := bytes.Clone(b.Get(key))
		if len(v) == 0 {
			t.Fatalf("no record %q in %s", key, bucket)
		}
		v[len(v)-2] ^= 0x20 // inside the JSON, which still decodes
		return b.Put(key, v)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// assertChecksumError checks that err is the damage of record name in
// s's file, not a plain decode error or a miss.
func assertChecksumError(t *testing.T, s *Store, call string, err error, name string) {
	t.Helper()
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("%s: err = %v; want one wrapping ErrDamaged", call, err)
	}
	for _, want := range []string{name + ": record fails its checksum", s.Path()} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %q; want it to say %q", call, err, want)
		}
	}
}

// A record whose bytes changed is damage at every read, never "not
// found" and never a silently different op.
func TestAFlippedOpRecordIsDamageAtEveryRead(t *testing.T) {
	s := openStore(t, "", hooks{})
	ended := newOp("ended")
	ended.Status = devices.Succeeded
	if err := s.Save(newOp("x"), ended); err != nil {
		t.Fatal(err)
	}
	flipStored(t, s, bucketOps, []byte("x"))
	flipStored(t, s, bucketOps, []byte("ended"))

	_, found, err := s.Lookup("x")
	assertChecksumError(t, s, "Lookup", err, `op "x"`)
	if found {
		t.Error("Lookup found the damaged op")
	}
	_, err = s.Pending()
	assertChecksumError(t, s, "Pending", err, `op "x"`)
	_, err = s.LastEnded(time.Hour, 10)
	assertChecksumError(t, s, "LastEnded", err, `op "ended"`)
	_, err = s.PruneTerminal(t0.Add(time.Hour))
	assertChecksumError(t, s, "PruneTerminal", err, `op "ended"`)
	err = s.Save(newOp("x")) // putOp reads the old head
	assertChecksumError(t, s, "Save", err, `op "x"`)
}

// The checksum covers the key: a record under another op_id (a flipped
// key byte) is damage, not a different op.
func TestARecordUnderAnotherKeyIsDamage(t *testing.T) {
	s := openStore(t, "", hooks{})
	if err := s.Save(newOp("op-1")); err != nil {
		t.Fatal(err)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketOps)
		return b.Put([]byte("op-3"), bytes.Clone(b.Get([]byte("op-1"))))
	})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = s.Lookup("op-3")
	assertChecksumError(t, s, "Lookup", err, `op "op-3"`)
	if _, found, err := s.Lookup("op-1"); !found || err != nil {
		t.Errorf("Lookup(op-1) = %v, %v; want the op", found, err)
	}
}

func TestFlippedAuditDeadLetterAndStateRecordsAreDamage(t *testing.T) {
	s := openStore(t, "", hooks{})
	if err := s.AppendAudit(devices.AuditEntry{OpID: "a", Device: "front_door", Event: devices.AuditAccepted, At: t0}); err != nil {
		t.Fatal(err)
	}
	dead := newOp("d")
	dead.Status, dead.Reason = devices.Failed, devices.ReasonTimeout
	if err := s.AddDeadLetters(dead); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveState("hall_light", map[string]any{"state": "ON"}, t0); err != nil {
		t.Fatal(err)
	}
	flipStored(t, s, bucketAudit, seqKey(1))
	flipStored(t, s, bucketDeadLetters, seqKey(1))
	flipStored(t, s, bucketStates, []byte("hall_light"))

	_, err := s.Audit(AuditQuery{})
	assertChecksumError(t, s, "Audit", err, "audit entry seq 1")
	_, err = s.PruneAudit(t0.Add(time.Hour))
	assertChecksumError(t, s, "PruneAudit", err, "audit entry seq 1")
	_, err = s.DeadLetters(DeadLetterQuery{})
	assertChecksumError(t, s, "DeadLetters", err, "dead letter seq 1")
	_, err = s.PruneDeadLetters(t0.Add(time.Hour))
	assertChecksumError(t, s, "PruneDeadLetters", err, "dead letter seq 1")
	_, err = s.States()
	assertChecksumError(t, s, "States", err, `state of "hall_light"`)
}

// Records from before the frame are plain JSON and read as before.
func TestLegacyRecordsWithoutAFrameStillRead(t *testing.T) {
	s := openStore(t, "", hooks{})
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, p := range []struct {
			bucket, key []byte
			v           string
		}{
			{bucketOps, []byte("old"), `{"seq":1,"op_id":"old","device":"hall_light","status":"succeeded","updated_at":"2026-11-29T19:00:00Z"}`},
			{bucketAudit, seqKey(1), `{"seq":1,"at":"2026-11-29T19:00:00Z","event":"accepted","op_id":"old","device":"front_door"}`},
			{bucketStates, []byte("hall_light"), `{"state":{"state":"ON"},"at":"2026-11-29T19:00:00Z"}`},
		} {
			if err := tx.Bucket(p.bucket).Put(p.key, []byte(p.v)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s) // the walk at open passes legacy records
	if op, found, err := s.Lookup("old"); !found || err != nil || op.Status != devices.Succeeded {
		t.Errorf("Lookup(old) = %+v, %v, %v", op, found, err)
	}
	if got, err := s.Audit(AuditQuery{}); err != nil || len(got) != 1 {
		t.Errorf("Audit = %v, %v; want the legacy entry", got, err)
	}
	if got, err := s.States(); err != nil || got["hall_light"].State["state"] != "ON" {
		t.Errorf("States = %v, %v", got, err)
	}
	// A save of a legacy op rewrites it framed.
	if err := s.Save(newOp("old")); err != nil {
		t.Fatal(err)
	}
}

// The walk at open checks every record: a store with one flipped record
// fails to open with ErrDamaged naming the file and the record.
func TestOpenFindsAFlippedRecord(t *testing.T) {
	s := openStore(t, "", hooks{})
	if err := s.Save(newOp("a"), newOp("b")); err != nil {
		t.Fatal(err)
	}
	flipStored(t, s, bucketOps, []byte("b"))
	dir := filepath.Dir(s.Path())
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, Options{})
	assertDamaged(t, dir, err)
	if !strings.Contains(err.Error(), `op "b": record fails its checksum`) {
		t.Errorf("err = %v; want it to name op \"b\"", err)
	}
}
