package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// indexedStore returns a data directory holding a closed store of 50 ops
// op-000…op-049, Seq 1…50: the even ones saved succeeded (in the ends
// index, never pending), the odd ones pending.
func indexedStore(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		op := newOp(fmt.Sprintf("op-%03d", i))
		if i%2 == 0 {
			op.Status = devices.Succeeded
		}
		if err := s.Save(op); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// rewriteAll replaces every occurrence of old in dir's hearth.db (live
// pages and freed copies alike) with new, of the same length, as bytes
// damaged at rest would, and fails the test if there is none.
func rewriteAll(t *testing.T, dir string, old, new []byte) {
	t.Helper()
	damage(t, dir, func(b []byte) []byte {
		if !bytes.Contains(b, old) {
			t.Fatalf("no %q in the file", old)
		}
		return bytes.ReplaceAll(b, old, new)
	})
}

func pendingKeyBytes(seq uint64, id string) []byte {
	return append(binary.BigEndian.AppendUint64(nil, seq), id...)
}

// assertIndexDamage asserts that Open finds dir's store damaged, naming
// want, and that with Quarantine it is quarantined and every start-up
// read works.
func assertIndexDamage(t *testing.T, dir, want string) {
	t.Helper()
	_, err := Open(dir, Options{})
	if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), want) {
		t.Fatalf("Open: %v; want ErrDamaged naming %q", err, want)
	}
	s, err := Open(dir, Options{Quarantine: true, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatalf("Open with Quarantine: %v", err)
	}
	defer s.Close()
	if q, ok, err := s.Quarantine(); !ok || err != nil || !strings.Contains(q.Cause, want) {
		t.Errorf("Quarantine() = %+v, %v, %v; want one whose cause names %q", q, ok, err, want)
	}
	if _, err := s.Pending(); err != nil {
		t.Errorf("Pending after the quarantine: %v", err)
	}
	if _, err := s.LastEnded(time.Hour, 100); err != nil {
		t.Errorf("LastEnded after the quarantine: %v", err)
	}
}

// The pending index is checked against ops at open: a key naming an op
// that is missing, terminal or of another Seq, or too short to hold a
// Seq, is damage, not a Pending() that fails at every start.
func TestOpenChecksThePendingIndexAgainstOps(t *testing.T) {
	t.Run("names a missing op", func(t *testing.T) {
		dir := indexedStore(t)
		rewriteAll(t, dir, pendingKeyBytes(2, "op-001"), pendingKeyBytes(2, "op-00x"))
		assertIndexDamage(t, dir, `pending index names op "op-00x", which has no record`)
	})
	t.Run("names a terminal op", func(t *testing.T) {
		dir := indexedStore(t)
		// (2, op-001) → (1, op-000): op-000 has Seq 1 and succeeded.
		rewriteAll(t, dir, pendingKeyBytes(2, "op-001"), pendingKeyBytes(1, "op-000"))
		assertIndexDamage(t, dir, `pending index names op "op-000", which is succeeded`)
	})
	t.Run("names an op of another seq", func(t *testing.T) {
		dir := indexedStore(t)
		rewriteAll(t, dir, pendingKeyBytes(2, "op-001"), pendingKeyBytes(3, "op-001"))
		assertIndexDamage(t, dir, `pending index key of seq 3 names op "op-001", whose seq is 2`)
	})
	t.Run("key shorter than a seq", func(t *testing.T) {
		dir := indexedStore(t)
		shortenKey(t, dir, pendingKeyBytes(2, "op-001"), 5)
		assertIndexDamage(t, dir, "pending index key 0000000000 is shorter than")
	})
}

// shortenKey finds the leaf element of dir's hearth.db whose key is key
// (each copy of it) and sets its key size to n: the key becomes its
// first n bytes, as a damaged element header would make it.
func shortenKey(t *testing.T, dir string, key []byte, n uint32) {
	t.Helper()
	damage(t, dir, func(b []byte) []byte {
		found := 0
		for off := 0; ; {
			i := bytes.Index(b[off:], key)
			if i < 0 {
				break
			}
			i += off
			off = i + 1
			// A leaf element is flags, pos, ksize, vsize (4 bytes each,
			// little-endian); pos counts from the element itself.
			for e := i - 16; e >= max(0, i-4096); e-- {
				if e+16 > len(b) {
					continue
				}
				pos := binary.LittleEndian.Uint32(b[e+4:])
				ksize := binary.LittleEndian.Uint32(b[e+8:])
				if uint32(i-e) == pos && ksize == uint32(len(key)) && binary.LittleEndian.Uint32(b[e:]) == 0 {
					binary.LittleEndian.PutUint32(b[e+8:], n)
					found++
					break
				}
			}
		}
		if found == 0 {
			t.Fatalf("no leaf element with key %x", key)
		}
		return b
	})
}

// The ends index is checked at open: an entry naming an op that has no
// record is damage.
func TestOpenChecksTheEndsIndexAgainstOps(t *testing.T) {
	dir := indexedStore(t)
	// ends entry 1 → op-000; its value, right after its key.
	rewriteAll(t, dir, pendingKeyBytes(1, "op-000"), pendingKeyBytes(1, "op-0x0"))
	assertIndexDamage(t, dir, `ends index entry seq 1 names op "op-0x0", which has no record`)
}

// The check reads an op's own status, not a "status" of its target or
// state: a pending op whose target and state say succeeded opens.
func TestOpenIndexCheckReadsTheOpsOwnStatus(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	op := newOp(`we"ird\op`)
	op.Target = devices.Target{"status": "succeeded", "seq": float64(99)}
	op.State = map[string]any{"status": "failed", "nested": map[string]any{"status": "expired"}}
	op.Detail = `"status":"succeeded"`
	if err := s.Save(op); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if p, err := s.Pending(); err != nil || len(p) != 1 {
		t.Errorf("Pending = %v, %v", p, err)
	}
	for _, body := range []string{
		`{"seq":7,"target":{"status":"succeeded"},"status":"accepted"}`,
		`{ "target" : [ "}" , {"status":"x"} ], "status" : "queued", "seq" : 7 }`,
		`{"seq":7,"st\u0061tus":"failed","status":"accepted"}`,
	} {
		h, err := opHead([]byte(body))
		var want opRecordHead
		_ = json.Unmarshal([]byte(body), &want)
		if err != nil || h != want {
			t.Errorf("opHead(%s) = %+v, %v; want %+v", body, h, err, want)
		}
	}
}
