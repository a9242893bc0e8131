package store

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hearthd/hearth/devices"
)

// history is everything a test store was given, in every version saved,
// with the Seqs the store assigned.
type history struct {
	ops    map[string][]devices.Op // by op_id, every version saved
	audit  map[uint64]devices.AuditEntry
	dead   map[uint64]devices.DeadLetter
	states map[string][]DeviceState
	last   map[string]devices.Op // the last version saved
}

// richStore returns a data directory holding a closed store of n ops
// saved over many commits (so that freed pages keep old versions), a
// quarter succeeded, a quarter failed (each with a dead letter), the rest
// pending, every fifth pending op saved again succeeded; n/4 audit
// entries; and three states of each of 10 devices.
func richStore(t *testing.T, n int) (string, *history) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := &history{ops: map[string][]devices.Op{}, audit: map[uint64]devices.AuditEntry{}, dead: map[uint64]devices.DeadLetter{}, states: map[string][]DeviceState{}, last: map[string]devices.Op{}}
	save := func(ops ...devices.Op) {
		if err := s.Save(ops...); err != nil {
			t.Fatal(err)
		}
		for _, op := range ops {
			h.ops[op.OpID] = append(h.ops[op.OpID], op)
			h.last[op.OpID] = op
		}
	}
	var failed []devices.Op
	const batch = 50
	for i := 0; i < n; i += batch {
		var ops []devices.Op
		for j := i; j < min(i+batch, n); j++ {
			op := newOp(fmt.Sprintf("op-%05d", j))
			op.Seq = uint64(j + 1)
			op.UpdatedAt = t0.Add(time.Duration(j) * time.Second)
			switch j % 4 {
			case 0:
				op.Status, op.State, op.Attempts = devices.Succeeded, map[string]any{"state": "ON"}, 1
			case 1:
				op.Status, op.Reason, op.Attempts = devices.Failed, devices.ReasonTimeout, 3
				failed = append(failed, op)
			}
			ops = append(ops, op)
		}
		save(ops...)
	}
	for i := 2; i < n; i += 20 {
		op := h.last[fmt.Sprintf("op-%05d", i)]
		op.Status, op.State, op.Attempts, op.UpdatedAt = devices.Succeeded, map[string]any{"state": "ON"}, 1, op.UpdatedAt.Add(time.Hour)
		save(op)
	}
	for i := 0; i < len(failed); i += batch {
		part := failed[i:min(i+batch, len(failed))]
		if err := s.AddDeadLetters(part...); err != nil {
			t.Fatal(err)
		}
		for _, op := range part {
			seq := uint64(len(h.dead) + 1)
			h.dead[seq] = devices.DeadLetter{Seq: seq, Op: op}
		}
	}
	for i := 0; i < n/4; i += batch {
		var entries []devices.AuditEntry
		for j := i; j < min(i+batch, n/4); j++ {
			e := devices.AuditEntry{Seq: uint64(j + 1), OpID: fmt.Sprintf("op-%05d", j), Device: "front_door", Event: devices.AuditAccepted, At: t0.Add(time.Duration(j) * time.Second)}
			entries = append(entries, e)
			h.audit[e.Seq] = e
		}
		if err := s.AppendAudit(entries...); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 3 {
		for d := range 10 {
			dev := fmt.Sprintf("light_%d", d)
			st := DeviceState{State: map[string]any{"brightness": float64(round)}, At: t0.Add(time.Duration(round) * time.Minute)}
			if err := s.SaveState(dev, st.State, st.At); err != nil {
				t.Fatal(err)
			}
			h.states[dev] = append(h.states[dev], st)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, h
}

// sameOp reports whether got equals want, times compared as instants.
func sameOp(got, want devices.Op) bool {
	for _, p := range [][2]*time.Time{{&got.AcceptedAt, &want.AcceptedAt}, {&got.IssuedAt, &want.IssuedAt}, {&got.Deadline, &want.Deadline}, {&got.LastSentAt, &want.LastSentAt}, {&got.UpdatedAt, &want.UpdatedAt}} {
		if !p[0].Equal(*p[1]) {
			return false
		}
		*p[0], *p[1] = time.Time{}, time.Time{}
	}
	return reflect.DeepEqual(got, want)
}

// quarantineAt is the clock of the tests' quarantines.
var quarantineAt = time.Date(2026, 12, 2, 3, 15, 0, 0, time.UTC)

// openQuarantined opens dir with Options.Quarantine and returns the
// store (closed when the test ends) and its Quarantine, failing the test
// unless the store was quarantined.
func openQuarantined(t *testing.T, dir string) (*Store, Quarantine) {
	t.Helper()
	s, err := Open(dir, Options{Quarantine: true, Now: func() time.Time { return quarantineAt }})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	q, ok, err := s.Quarantine()
	if err != nil || !ok {
		t.Fatalf("Quarantine() = %+v, %v, %v; want a record", q, ok, err)
	}
	t.Logf("quarantine: salvaged %+v, skipped %+v, ended %d; cause %s", q.Salvaged, q.Skipped, q.Ended, q.Cause)
	if fi, err := os.Stat(q.File); err != nil || !strings.HasPrefix(filepath.Base(q.File), FileName+QuarantineSuffix) {
		t.Errorf("quarantined file %q: %v, %v", q.File, fi, err)
	}
	return s, q
}

// assertSalvageTrue checks that every record in s is one that h stored,
// unaltered, except that a salvaged op that had not ended is ended
// failed/store_damaged at the quarantine with a dead letter and an end;
// that the counts of q are what s holds; and that new records get Seqs
// above every salvaged one.
func assertSalvageTrue(t *testing.T, s *Store, q Quarantine, h *history) {
	t.Helper()
	var ops []devices.Op
	var maxSeq uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketOps).ForEach(func(k, v []byte) error {
			var op devices.Op
			if err := decodeOp(k, v, &op); err != nil {
				return err
			}
			ops = append(ops, op)
			maxSeq = max(maxSeq, op.Seq)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) != q.Salvaged.Ops {
		t.Errorf("store holds %d ops, Salvaged.Ops = %d", len(ops), q.Salvaged.Ops)
	}
	var ended []string
	for _, got := range ops {
		if got.Reason == devices.ReasonStoreDamaged {
			if got.Status != devices.Failed || !got.UpdatedAt.Equal(quarantineAt) || got.Detail != endedDetail(quarantineAt) {
				t.Errorf("ended op %s: %+v", got.OpID, got)
			}
			ended = append(ended, got.OpID)
		}
		ok := false
		for _, want := range h.ops[got.OpID] {
			if got.Reason == devices.ReasonStoreDamaged && !want.Status.Terminal() {
				want.Status, want.Reason, want.Detail, want.UpdatedAt = got.Status, got.Reason, got.Detail, got.UpdatedAt
			}
			ok = ok || sameOp(got, want)
		}
		if !ok {
			t.Errorf("salvaged op %s = %+v; it was never stored so: %+v", got.OpID, got, h.ops[got.OpID])
		}
	}
	if len(ended) != q.Ended {
		t.Errorf("%d ops ended store_damaged, Quarantine.Ended = %d", len(ended), q.Ended)
	}
	if pending, err := s.Pending(); err != nil || len(pending) != 0 {
		t.Errorf("Pending = %d ops, %v; want none", len(pending), err)
	}
	last, err := s.LastEnded(time.Minute, 1_000_000)
	if err != nil || len(last) != len(ended) {
		t.Errorf("LastEnded = %d ops, %v; want the %d ended", len(last), err, len(ended))
	}

	var dead []devices.DeadLetter
	for after := uint64(0); ; {
		page, err := s.DeadLetters(DeadLetterQuery{After: after, Limit: MaxDeadLetterLimit})
		if err != nil {
			t.Fatal(err)
		}
		dead = append(dead, page...)
		if len(page) < MaxDeadLetterLimit {
			break
		}
		after = page[len(page)-1].Seq
	}
	// New dead letters (of the ops ended) come after every salvaged one.
	// (When the last ones and every copy of the bucket's header are lost,
	// as in a truncated file, their Seqs cannot be known.)
	salvagedDead, newDead, maxDead := 0, 0, uint64(0)
	for _, d := range dead {
		if want, stored := h.dead[d.Seq]; stored && sameOp(d.Op, want.Op) {
			salvagedDead++
			maxDead = max(maxDead, d.Seq)
		}
	}
	for _, d := range dead {
		want, stored := h.dead[d.Seq]
		switch {
		case stored && sameOp(d.Op, want.Op):
		case d.Reason == devices.ReasonStoreDamaged && d.Seq > maxDead:
			newDead++
		default:
			t.Errorf("dead letter %d = %+v; stored %v %+v", d.Seq, d.Op, stored, want.Op)
		}
	}
	if salvagedDead != q.Salvaged.DeadLetters || newDead != q.Ended {
		t.Errorf("dead letters: %d salvaged, %d new; want %d and %d", salvagedDead, newDead, q.Salvaged.DeadLetters, q.Ended)
	}

	entries, err := s.Audit(AuditQuery{Limit: MaxAuditLimit})
	if err != nil {
		t.Fatal(err)
	}
	var maxAudit uint64
	for _, e := range entries {
		want := h.audit[e.Seq]
		if !e.At.Equal(want.At) {
			t.Errorf("audit %d at %v, want %v", e.Seq, e.At, want.At)
		}
		e.At, want.At = time.Time{}, time.Time{}
		if e != want {
			t.Errorf("audit %d = %+v, want %+v", e.Seq, e, want)
		}
		maxAudit = max(maxAudit, e.Seq)
	}
	if len(entries) != min(q.Salvaged.Audit, MaxAuditLimit) {
		t.Errorf("Audit = %d entries, Salvaged.Audit = %d", len(entries), q.Salvaged.Audit)
	}

	states, err := s.States()
	if err != nil || len(states) != q.Salvaged.States {
		t.Errorf("States = %d, %v; Salvaged.States = %d", len(states), err, q.Salvaged.States)
	}
	for dev, got := range states {
		ok := false
		for _, want := range h.states[dev] {
			ok = ok || (got.At.Equal(want.At) && reflect.DeepEqual(got.State, want.State))
		}
		if !ok {
			t.Errorf("state of %s = %+v; never stored", dev, got)
		}
	}

	// Seqs are never reused.
	if err := s.Save(newOp("after-quarantine")); err != nil {
		t.Fatal(err)
	}
	if op, _, err := s.Lookup("after-quarantine"); err != nil || op.Seq <= max(maxSeq, uint64(len(h.last))) && q.Salvaged.Ops > 0 {
		t.Errorf("new op's Seq = %d, %v; want above %d", op.Seq, err, maxSeq)
	}
	if err := s.AppendAudit(devices.AuditEntry{OpID: "x", Device: "front_door", Event: devices.AuditAccepted, At: t0}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Audit(AuditQuery{Newest: true, Limit: 1}); err != nil || len(got) != 1 || got[0].Seq <= maxAudit {
		t.Errorf("new audit entry = %+v, %v; want a Seq above %d", got, err, maxAudit)
	}
}

// atLeast fails the test unless got ≥ frac of want.
func atLeast(t *testing.T, what string, got, want int, frac float64) {
	t.Helper()
	if float64(got) < frac*float64(want) || got == 0 && want > 0 {
		t.Errorf("salvaged %d of %d %s; want at least %.0f%%", got, want, what, 100*frac)
	}
}

func TestSalvageOfAZeroLengthFileSalvagesNothing(t *testing.T) {
	dir, h := richStore(t, 200)
	damage(t, dir, func(b []byte) []byte { return nil })
	s, q := openQuarantined(t, dir)
	if q.Salvaged != (Counts{}) || q.Skipped != (Counts{}) || q.Ended != 0 {
		t.Errorf("counts %+v %+v %d; want zeros", q.Salvaged, q.Skipped, q.Ended)
	}
	assertSalvageTrue(t, s, q, h)
}

func TestSalvageAfterTruncationToHalf(t *testing.T) {
	dir, h := richStore(t, 2000)
	damage(t, dir, func(b []byte) []byte { return b[:len(b)/2] })
	s, q := openQuarantined(t, dir)
	atLeast(t, "ops", q.Salvaged.Ops, len(h.last), 0.25)
	assertSalvageTrue(t, s, q, h)
}

func TestSalvageAfterOnePageInFourZeroed(t *testing.T) {
	dir, h := richStore(t, 2000)
	damage(t, dir, func(b []byte) []byte {
		const page = 4096
		for off := 3 * page; off < len(b); off += 4 * page {
			clear(b[off:min(off+page, len(b))])
		}
		return b
	})
	s, q := openQuarantined(t, dir)
	atLeast(t, "ops", q.Salvaged.Ops, len(h.last), 0.6)
	atLeast(t, "audit entries", q.Salvaged.Audit, len(h.audit), 0.5)
	assertSalvageTrue(t, s, q, h)
}

func TestSalvageAfterGarbageInTheMiddle(t *testing.T) {
	quarantined := 0
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			dir, h := richStore(t, 2000)
			damage(t, dir, func(b []byte) []byte {
				r := rand.New(rand.NewPCG(seed, seed))
				start := len(b)/2 - 8<<10 + int(r.IntN(8))*4096
				for i := start; i < start+16<<10 && i < len(b); i++ {
					b[i] = byte(r.Uint32())
				}
				return b
			})
			if openAndWalk(t, dir) == nil {
				return // the garbage hit only free pages
			}
			quarantined++
			s, q := openQuarantined(t, dir)
			atLeast(t, "ops", q.Salvaged.Ops, len(h.last), 0.9)
			assertSalvageTrue(t, s, q, h)
		})
	}
	if quarantined == 0 {
		t.Fatal("no seed damaged a live page: the test tests nothing")
	}
}

// With both meta pages garbled bbolt cannot open the file at all: only
// the raw scan can salvage, and it salvages nearly everything.
func TestSalvageWithBothMetaPagesGarbledIsTheRawScans(t *testing.T) {
	dir, h := richStore(t, 2000)
	damage(t, dir, func(b []byte) []byte {
		r := rand.New(rand.NewPCG(7, 7))
		for _, off := range []int{0, 4096} {
			for i := off + 16; i < off+96; i++ {
				b[i] = byte(r.Uint32())
			}
		}
		return b
	})
	if sv := salvageFile(filepath.Join(dir, FileName)); sv.boltErr == nil {
		t.Fatal("bbolt opened the file: the test does not reach the raw scan alone")
	}
	s, q := openQuarantined(t, dir)
	atLeast(t, "ops", q.Salvaged.Ops, len(h.last), 1)
	atLeast(t, "audit entries", q.Salvaged.Audit, len(h.audit), 1)
	atLeast(t, "dead letters", q.Salvaged.DeadLetters, len(h.dead), 1)
	atLeast(t, "states", q.Salvaged.States, len(h.states), 1)
	if q.Skipped != (Counts{}) {
		t.Errorf("skipped %+v; want none (only the meta pages were hit)", q.Skipped)
	}
	// The raw scan found old versions too; the terminal one won.
	for id, want := range h.last {
		if got, found, err := s.Lookup(id); err != nil || !found || want.Status.Terminal() && !sameOp(got, want) {
			t.Fatalf("Lookup(%s) = %+v, %v, %v; want %+v", id, got, found, err, want)
		}
	}
	assertSalvageTrue(t, s, q, h)
}

func TestSalvageAfterRandomByteFlips(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			dir, h := richStore(t, 2000)
			damage(t, dir, func(b []byte) []byte {
				r := rand.New(rand.NewPCG(seed, 42))
				for range 200 {
					b[r.IntN(len(b))] ^= byte(1 + r.IntN(255))
				}
				return b
			})
			s, q := openQuarantined(t, dir)
			atLeast(t, "ops", q.Salvaged.Ops, len(h.last), 0.9)
			assertSalvageTrue(t, s, q, h)
		})
	}
}

// A record whose bytes were flipped is skipped, never salvaged as it
// reads now; the records around it are salvaged.
func TestSalvageSkipsAFlippedRecord(t *testing.T) {
	dir, h := richStore(t, 200)
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	victim := newOp("victim") // saved once, in the last commit: one copy in the file
	victim.Seq = uint64(len(h.last) + 1)
	victim.Target = devices.Target{"state": "OFF"}
	if err := s.Save(victim); err != nil {
		t.Fatal(err)
	}
	h.ops[victim.OpID] = []devices.Op{victim}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	damage(t, dir, func(b []byte) []byte {
		at := bytes.Index(b, []byte(`"target":{"state":"OFF"}`))
		if at < 0 || bytes.Count(b, []byte(`"target":{"state":"OFF"}`)) != 1 {
			t.Fatal("the victim's record is not in the file exactly once")
		}
		copy(b[at:], `"target":{"state":"ON!"}`) // still JSON, a different command
		return b
	})
	s, q := openQuarantined(t, dir)
	if !strings.Contains(q.Cause, `op "victim": record fails its checksum`) {
		t.Errorf("cause %q; want the victim's checksum", q.Cause)
	}
	if _, found, err := s.Lookup("victim"); found || err != nil {
		t.Errorf("Lookup(victim) = %v, %v; want it skipped", found, err)
	}
	if q.Skipped.Ops != 1 || q.Salvaged.Ops != len(h.last) {
		t.Errorf("salvaged %d ops, skipped %d; want %d and 1", q.Salvaged.Ops, q.Skipped.Ops, len(h.last))
	}
	assertSalvageTrue(t, s, q, h)
}

// legacyStore writes n legacy op records (plain JSON, no frame) in one
// bbolt transaction, so that every leaf page holding them is live, and
// returns the file's path.
func legacyStore(t *testing.T, n int) string {
	t.Helper()
	dir := filledStore(t, 0)
	path := filepath.Join(dir, FileName)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for i := range n {
			id := fmt.Sprintf("op-%05d", i)
			v := fmt.Sprintf(`{"seq":%d,"op_id":%q,"device":"hall_light","status":"succeeded","detail":%q,"updated_at":"2026-11-29T19:00:00Z"}`, i+1, id, strings.Repeat("x", 200))
			if err := tx.Bucket(bucketOps).Put([]byte(id), []byte(v)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// Legacy records can be salvaged only by bbolt's cursors: past a bad
// page, the walk goes on and salvages what follows.
func TestCursorWalkGoesOnPastABadPage(t *testing.T) {
	path := legacyStore(t, 2000)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	bad := -1
	for off := 0; off+page <= len(b) && bad < 0; off += page {
		scanLeaf(b[off:off+page], 0, func(key, _ []byte, _ bool) {
			if string(key) == "op-01000" {
				bad = off
			}
		})
	}
	if bad < 0 {
		t.Fatal("no leaf page holds op-01000")
	}
	clear(b[bad : bad+page])
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	sv := salvageFile(path)
	if sv.boltErr != nil {
		t.Fatalf("bbolt did not open the file: %v", sv.boltErr)
	}
	ops := sv.found[string(bucketOps)]
	if _, ok := ops["op-01000"]; ok {
		t.Error("op-01000 salvaged from a zeroed page")
	}
	if _, ok := ops["op-01999"]; !ok || len(ops) < 1950 {
		t.Errorf("salvaged %d of 2000 legacy ops (op-01999: %v); want all but the zeroed page's", len(ops), ok)
	}
}

// On an intact file, the cursor walk and the raw scan each find every
// record.
func TestCursorWalkAndRawScanEachFindEveryRecord(t *testing.T) {
	dir, h := richStore(t, 500)
	path := filepath.Join(dir, FileName)
	walked, scanned := newSalvage(), newSalvage()
	if err := walked.cursorWalk(path); err != nil {
		t.Fatal(err)
	}
	if err := scanned.rawScan(path); err != nil {
		t.Fatal(err)
	}
	want := Counts{Ops: len(h.last), Audit: len(h.audit), DeadLetters: len(h.dead), States: len(h.states)}
	for name, sv := range map[string]*salvage{"cursor walk": walked, "raw scan": scanned} {
		if got, skipped := sv.counts(); got != want || skipped != (Counts{}) {
			t.Errorf("%s: found %+v, skipped %+v; want %+v", name, got, skipped, want)
		}
	}
	for id, want := range h.last {
		if got := scanned.found[string(bucketOps)][id].op; !sameOp(got, want) {
			t.Errorf("raw scan: %s = %+v, want the last version %+v", id, got, want)
		}
	}
}

func TestKeyAfter(t *testing.T) {
	tests := []struct {
		last []byte
		jump int
		want []byte
	}{
		{[]byte("op-1"), 1, []byte("op-1\x00")},
		{nil, 1, []byte{0}},
		{seqKey(7), 2, seqKey(8)},
		{seqKey(7), 5, seqKey(15)},
		{[]byte("op-00012345"), 2, []byte("op-00013")},
		{seqKey(^uint64(0)), 2, nil},
	}
	for _, tt := range tests {
		if got := keyAfter(tt.last, tt.jump); !bytes.Equal(got, tt.want) || got != nil && bytes.Compare(got, tt.last) <= 0 {
			t.Errorf("keyAfter(%q, %d) = %q, want %q", tt.last, tt.jump, got, tt.want)
		}
	}
}

// TestSalvageTime100kOps logs how long Open takes to quarantine and
// salvage a store of 100,000 ops in which one record fails its checksum
// (bbolt opens it: the cursor walk and the raw scan both run). It
// measures; it asserts only that every other op is salvaged. Skipped with
// -short.
func TestSalvageTime100kOps(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 100,000-op store")
	}
	dir := filledStore(t, 100_000)
	damage(t, dir, func(b []byte) []byte {
		at := bytes.Index(b, []byte(`"op_id":"op-050000"`))
		if at < 0 {
			t.Fatal("op-050000 is not in the file")
		}
		b[at+len(`"op_id":"op-05`)] = '9' // another op_id in the JSON: fails the checksum
		return b
	})
	fi, _ := os.Stat(filepath.Join(dir, FileName))
	start := time.Now()
	s, q := openQuarantined(t, dir)
	took := time.Since(start)
	if q.Salvaged.Ops < 100_000-1 {
		t.Errorf("salvaged %d ops; want all but one", q.Salvaged.Ops)
	}
	_ = s
	t.Logf("Open with quarantine and salvage of 100,000 ops (%d bytes): %v", fi.Size(), took)
}

// Freed pages keep ops pruned before the damage, often as they were while
// pending: where bbolt's cursors read the tree without a gap, they are
// not brought back (and never ended store_damaged).
func TestSalvageBringsBackNoPrunedOp(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 300; i += 10 {
		var ops []devices.Op
		for j := i; j < i+10; j++ {
			ops = append(ops, newOp(fmt.Sprintf("old-%03d", j)))
		}
		if err := s.Save(ops...); err != nil {
			t.Fatal(err)
		}
	}
	var ended []devices.Op
	for i := range 300 {
		op := newOp(fmt.Sprintf("old-%03d", i))
		op.Status = devices.Succeeded
		ended = append(ended, op)
	}
	if err := s.Save(ended...); err != nil {
		t.Fatal(err)
	}
	if n, err := s.PruneTerminal(t0.Add(time.Hour)); err != nil || n != 300 {
		t.Fatalf("PruneTerminal = %d, %v", n, err)
	}
	victim := newOp("victim")
	victim.Target = devices.Target{"state": "OFF"}
	if err := s.Save(newOp("live"), victim); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	damage(t, dir, func(b []byte) []byte {
		if n := bytes.Count(b, []byte(`"op_id":"old-`)); n < 100 {
			t.Fatalf("only %d pruned records left in freed pages: the test tests nothing", n)
		}
		at := bytes.Index(b, []byte(`"target":{"state":"OFF"}`))
		copy(b[at:], `"target":{"state":"ON!"}`)
		return b
	})
	s, q := openQuarantined(t, dir)
	if q.Salvaged.Ops != 1 || q.Skipped.Ops != 1 || q.Ended != 1 {
		t.Errorf("salvaged %d ops, skipped %d, ended %d; want live only: 1, 1, 1", q.Salvaged.Ops, q.Skipped.Ops, q.Ended)
	}
	for i := range 300 {
		if _, found, _ := s.Lookup(fmt.Sprintf("old-%03d", i)); found {
			t.Fatalf("pruned op old-%03d came back", i)
		}
	}
}
