package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hearthd/hearth/devices"
)

// Salvage copies what can be read and trusted out of a quarantined file
// into the fresh store, in two passes over the file:
//
//  1. bbolt's own cursors (cursorWalk), if bbolt opens the file read-only:
//     every key of ops, audit, deadletters and states, in key order; where
//     a page panics or fails, the walk seeks past the last good key with
//     growing jumps, narrows the first jump that works down to the first
//     key past the bad page, and goes on ("recovery per page").
//  2. a raw scan of every page of the file (pagescan.go), which needs no
//     meta page, freelist or branch page: every leaf element whose value
//     is a v1 record whose checksum matches one of the four buckets (that
//     identifies the bucket: the checksum covers its name). Legacy records
//     (no checksum) are only salvaged through the cursors.
//
// A record is kept only if its checksum matches (legacy: if it decodes)
// and it decodes as its bucket's type with the key it is stored under.
// Records of the cursor walk win; of raw versions of one op (freed pages
// keep old ones), a terminal one beats a non-terminal one, then the later
// UpdatedAt; of a device's states the later At.
//
// Freed pages also keep records deleted before the damage (pruned ops,
// audit entries, dead letters), often in an old version: a pruned op
// that succeeded long ago may survive only as it was while pending. A
// raw record whose key lies in a range of keys the cursor walk read
// without a gap is such a deleted record, and is dropped (unless the
// walk found that very key damaged). Where bbolt could not read (bad
// pages, or a file it cannot open at all), deleted records cannot be told
// from lost ones and are salvaged: terminal ones the next prune deletes
// again, pending ones are ended store_damaged like the rest.

// salvageOpenTimeout is how long the salvage's read-only bolt.Open waits
// for the file's shared lock.
const salvageOpenTimeout = 100 * time.Millisecond

// Bounds of the cursor walk's recovery, per bucket: at most maxJumps
// growing jumps past one failing spot, at most maxPasses passes.
const (
	maxJumps  = 64
	maxPasses = 4096
)

// candidate is one trusted record found in the damaged file.
type candidate struct {
	body   []byte // the record's JSON (seq included), copied out of the file
	cursor bool   // found by bbolt's cursor walk, which wins over the raw scan
	op     devices.Op
	at     time.Time // a state's At
}

// salvage is what was read and trusted out of one damaged file, by
// bucket name and key.
type salvage struct {
	found map[string]map[string]candidate
	// untrusted holds, by bucket, the keys of records found but failing
	// their checksum or decode; those salvaged in another version are
	// not counted as skipped.
	untrusted map[string]map[string]bool
	// seqs are the largest bucket sequences read, by bbolt or the raw
	// scan.
	seqs map[string]uint64
	// boltErr is why bbolt could not open the file for the cursor walk,
	// nil if it could; the raw scan runs either way.
	boltErr error
	// problems are read errors of the salvage itself, for the record.
	problems []error
	// covered holds, by bucket, the ranges of keys the cursor walk read
	// without a gap, in key order: each from one trusted key to the next
	// (or from where a pass began, or to the end), with no untrusted one
	// between. A key in one that the walk did not find had been deleted.
	covered map[string][]keyRange
	// damaged holds, by bucket, the keys the cursor walk found but did
	// not trust.
	damaged map[string]map[string]bool
}

// keyRange is the keys from lo to hi, both included; nil lo is the first
// key, nil hi the last.
type keyRange struct{ lo, hi []byte }

func (r keyRange) holds(k []byte) bool {
	return (r.lo == nil || bytes.Compare(r.lo, k) <= 0) && (r.hi == nil || bytes.Compare(k, r.hi) <= 0)
}

// cover records that the cursor walk read bucket from lo to hi without a
// gap (see covered); ranges arrive in key order, and one that begins
// where the last ended extends it.
func (sv *salvage) cover(bucket, lo, hi []byte) {
	rs := sv.covered[string(bucket)]
	if n := len(rs); n > 0 && rs[n-1].hi != nil && lo != nil && bytes.Equal(rs[n-1].hi, lo) {
		rs[n-1].hi = hi
		return
	}
	sv.covered[string(bucket)] = append(rs, keyRange{lo: lo, hi: hi})
}

// deleted reports whether the cursor walk read past key in bucket
// without a gap and without finding it damaged: key had been deleted.
func (sv *salvage) deleted(bucket, key []byte) bool {
	if sv.damaged[string(bucket)][string(key)] {
		return false
	}
	rs := sv.covered[string(bucket)]
	i := sort.Search(len(rs), func(i int) bool { return rs[i].lo != nil && bytes.Compare(rs[i].lo, key) > 0 }) - 1
	return i >= 0 && rs[i].holds(key)
}

func newSalvage() *salvage {
	sv := &salvage{found: map[string]map[string]candidate{}, untrusted: map[string]map[string]bool{}, seqs: map[string]uint64{},
		covered: map[string][]keyRange{}, damaged: map[string]map[string]bool{}}
	for _, b := range checksummed {
		sv.found[string(b)] = map[string]candidate{}
		sv.untrusted[string(b)] = map[string]bool{}
		sv.damaged[string(b)] = map[string]bool{}
	}
	return sv
}

// salvageFile reads every record it can trust out of the damaged bbolt
// file at path: the cursor walk, then the raw scan. It never fails: what
// it cannot read is skipped, and read errors are kept in problems.
func salvageFile(path string) *salvage {
	sv := newSalvage()
	sv.boltErr = sv.cursorWalk(path)
	if err := sv.rawScan(path); err != nil {
		sv.problems = append(sv.problems, fmt.Errorf("raw scan: %w", err))
	}
	return sv
}

// consider keeps value, found under key in bucket, if it can be trusted
// and beats the version already kept, and otherwise marks key untrusted.
// legacy allows records without a frame (the cursor walk only). It
// reports whether the record was trusted; a raw record the cursor walk
// shows deleted, or whose key the walk already has, is passed over
// (false).
func (sv *salvage) consider(bucket, key, value []byte, cursor, legacy bool) bool {
	if len(value) > 0 && value[0] == '{' && !legacy {
		return false
	}
	found := sv.found[string(bucket)]
	old, had := found[string(key)]
	if had && old.cursor && !cursor {
		return false // the cursor's version wins; skip the decode
	}
	if !had && !cursor && sv.deleted(bucket, key) {
		return false
	}
	c, err := decodeCandidate(bucket, key, value)
	if err != nil {
		sv.untrusted[string(bucket)][string(key)] = true
		if cursor {
			sv.damaged[string(bucket)][string(key)] = true
		}
		return false
	}
	c.cursor = cursor
	if !had || beats(bucket, c, old) {
		c.body = bytes.Clone(c.body)
		found[string(key)] = c
	}
	return true
}

// beats reports whether c should replace old, both found under one key.
func beats(bucket []byte, c, old candidate) bool {
	switch {
	case c.cursor != old.cursor:
		return c.cursor
	case bytes.Equal(bucket, bucketOps):
		if ct, ot := c.op.Status.Terminal(), old.op.Status.Terminal(); ct != ot {
			return ct
		}
		return c.op.UpdatedAt.After(old.op.UpdatedAt)
	case bytes.Equal(bucket, bucketStates):
		return c.at.After(old.at)
	}
	return false // audit entries and dead letters are never changed
}

// decodeCandidate unframes value and decodes it as a record of bucket
// stored under key: an op whose op_id is key, an audit entry or dead
// letter whose Seq is key's, or a device state. body aliases value.
func decodeCandidate(bucket, key, value []byte) (candidate, error) {
	body, err := unframe(bucket, key, value)
	if err != nil {
		return candidate{}, err
	}
	c := candidate{body: body}
	switch string(bucket) {
	case string(bucketOps):
		if err := json.Unmarshal(body, &c.op); err != nil {
			return c, err
		}
		if c.op.OpID != string(key) {
			return c, fmt.Errorf("op %q: record says op_id %q", key, c.op.OpID)
		}
	case string(bucketAudit):
		_, err = auditLog.decode(key, body)
	case string(bucketDeadLetters):
		_, err = deadLetterLog.decode(key, body)
	case string(bucketStates):
		var rec stateRecord
		err = json.Unmarshal(body, &rec)
		c.at = rec.At
	}
	return c, err
}

// cursorWalk opens path read-only with bbolt and walks each checksummed
// bucket (walkBucket). It returns bbolt's open error, if any.
func (sv *salvage) cursorWalk(path string) error {
	db, err := openBolt(path, &bolt.Options{ReadOnly: true, Timeout: salvageOpenTimeout})
	if err != nil {
		return err
	}
	defer func() { _ = guarded(path, db.Close) }()
	for _, name := range checksummed {
		sv.walkBucket(db, path, name)
	}
	return nil
}

// walkBucket reads every key of bucket name in key order, each pass in a
// read-only transaction under guarded. When a pass fails (bbolt panics
// on a bad page, or keys stop rising), the next starts past the bad spot
// (resumeAfter), at most maxPasses times in all.
func (sv *salvage) walkBucket(db *bolt.DB, path string, name []byte) {
	var last, from []byte // last key read; where the next pass starts (nil: First)
	for range maxPasses {
		start := from
		var missing bool          // found no bucket
		var prev []byte           // the last trusted key of this pass
		first, gap := true, false // no trusted key yet; an untrusted one since
		err := guarded(path, func() error {
			return db.View(func(tx *bolt.Tx) error {
				b := tx.Bucket(name)
				if b == nil {
					missing = true // perhaps a damaged root page: covers nothing
					return nil
				}
				sv.seqs[string(name)] = max(sv.seqs[string(name)], b.Sequence())
				c := b.Cursor()
				k, v := c.First()
				if from != nil {
					k, v = c.Seek(from)
				}
				for ; k != nil; k, v = c.Next() {
					if last != nil && bytes.Compare(k, last) <= 0 {
						return errors.New("keys out of order")
					}
					last = bytes.Clone(k)
					if v == nil {
						continue // a nested bucket: none in Hearth's
					}
					if !sv.consider(name, k, v, true, true) && !keyIsGenuine(name, k, v) {
						gap = true
						continue
					}
					if !gap {
						sv.cover(name, rangeStart(first, start, prev), last)
					}
					prev, first, gap = last, false, false
				}
				return nil
			})
		})
		if err == nil {
			if !missing && !gap {
				sv.cover(name, rangeStart(first, start, prev), nil)
			}
			return
		}
		next := resumeAfter(db, path, name, last)
		if next == nil || from != nil && bytes.Compare(next, from) <= 0 {
			return // no way past, or no progress
		}
		from = next
	}
}

// keyIsGenuine reports whether the untrusted record v says it belongs
// under key: an op's JSON naming key as its op_id, an audit entry's or
// dead letter's starting with key's Seq. Then the damage is in its value
// and key is where the record really sits in the tree, so a range of keys
// read without a gap may run through it. A flipped key byte fails this.
func keyIsGenuine(bucket, key, v []byte) bool {
	body := v
	if len(v) >= frameHeader && v[0] == frameV1 {
		body = v[frameHeader:]
	}
	switch string(bucket) {
	case string(bucketOps):
		id, err := json.Marshal(string(key))
		return err == nil && bytes.Contains(body, append([]byte(`"op_id":`), id...))
	case string(bucketAudit), string(bucketDeadLetters):
		return len(key) == 8 && bytes.HasPrefix(body, strconv.AppendUint([]byte(`{"seq":`), binary.BigEndian.Uint64(key), 10))
	}
	return false
}

// rangeStart is where a range of keys read without a gap begins: at the
// pass's start (nil: the first key) before its first trusted key, at the
// last trusted key after it.
func rangeStart(first bool, start, prev []byte) []byte {
	if first {
		return start
	}
	return prev
}

// resumeAfter returns where a walk of bucket name that failed after key
// last (nil: before any key) should go on: the first key after last that
// bbolt can seek to without failing. It tries last's successor, then
// ever larger jumps (keyAfter, at most maxJumps), and narrows a jump that
// works down by bisection to the smallest 8-byte key that works (a
// bad page spans one range of keys: seeks into it fail, seeks past it
// work), so that no more than the bad page's keys are passed over. It
// returns nil when no jump works.
func resumeAfter(db *bolt.DB, path string, name, last []byte) []byte {
	seeks := func(target []byte) bool {
		return guarded(path, func() error {
			return db.View(func(tx *bolt.Tx) error {
				if b := tx.Bucket(name); b != nil {
					if k, _ := b.Cursor().Seek(target); k != nil && last != nil && bytes.Compare(k, last) <= 0 {
						return errors.New("keys out of order")
					}
				}
				return nil
			})
		}) == nil
	}
	if next := keyAfter(last, 1); seeks(next) {
		return next
	}
	var p [8]byte
	copy(p[:], last)
	lo := binary.BigEndian.Uint64(p[:]) // the seeks in (lo, hi) that were tried failed
	for jump := 2; jump <= maxJumps; jump++ {
		next := keyAfter(last, jump)
		if next == nil {
			return nil
		}
		hi := binary.BigEndian.Uint64(next)
		if !seeks(next) {
			lo = hi
			continue
		}
		for hi-lo > 1 {
			mid := lo + (hi-lo)/2
			if seeks(binary.BigEndian.AppendUint64(nil, mid)) {
				hi = mid
			} else {
				lo = mid
			}
		}
		return binary.BigEndian.AppendUint64(nil, hi)
	}
	return nil
}

// keyAfter returns a key above last to resume a walk at, further the
// larger jump (1 or more): last followed by 0x00 (its successor) for 1;
// for jump n ≥ 2, the first 8 bytes of last (zero-padded), read as a
// big-endian number, plus 2^(n-2), as 8 bytes. It returns nil when no
// such key is above last.
func keyAfter(last []byte, jump int) []byte {
	if jump <= 1 {
		return append(bytes.Clone(last), 0)
	}
	var p [8]byte
	copy(p[:], last)
	n, step := binary.BigEndian.Uint64(p[:]), uint64(1)<<min(jump-2, 63)
	if n > math.MaxUint64-step {
		return nil
	}
	return binary.BigEndian.AppendUint64(nil, n+step)
}

// rawScan reads every page of path (scanPages, in the page size of a
// valid meta page, else the OS's) and considers each v1 record whose
// checksum matches one of the checksummed buckets as that bucket's.
func (sv *salvage) rawScan(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	size := fi.Size()
	return scanPages(f, size, filePageSize(f, size), func(key, value []byte, bucket bool) {
		if bucket {
			sv.bucketSeq(key, value)
			return
		}
		if len(value) < frameHeader || value[0] != frameV1 {
			return
		}
		sum := binary.BigEndian.Uint32(value[1:frameHeader])
		for _, bucket := range checksummed {
			if frameSum(bucket, key, value[frameHeader:]) == sum {
				sv.consider(bucket, key, value, false, false)
				return
			}
		}
		if bucket := guessBucket(key, value[frameHeader:]); bucket != nil && !sv.deleted(bucket, key) {
			sv.untrusted[string(bucket)][string(key)] = true
		}
	})
}

// maxSeq is the largest bucket sequence the raw scan believes: Seqs
// stay exact as JSON numbers in every client (2^53), and a sequence near
// 2^64 would wrap.
const maxSeq = 1 << 53

// bucketSeq keeps the sequence of a header of one of the checksummed
// buckets found by the raw scan (a root page, or an old copy of one in a
// freed page: sequences only grow, so the largest is the last).
func (sv *salvage) bucketSeq(name, value []byte) {
	if len(value) < bucketHeaderSize || !isChecksummed(name) {
		return
	}
	if seq := le.Uint64(value[8:16]); seq <= maxSeq {
		sv.seqs[string(name)] = max(sv.seqs[string(name)], seq)
	}
}

// guessBucket names the bucket a v1 record failing every checksum looks
// like it came from, so that it is counted as skipped, or nil: an op's
// JSON names its op_id, an audit entry's or dead letter's key is 8
// bytes, a state starts {"state":.
func guessBucket(key, body []byte) []byte {
	switch {
	case len(key) == 8 && bytes.Contains(body, []byte(`"op_seq":`)):
		return bucketDeadLetters
	case len(key) == 8 && bytes.Contains(body, []byte(`"event":`)):
		return bucketAudit
	case bytes.Contains(body, []byte(`"op_id":`)) && bytes.Contains(body, key):
		return bucketOps
	case bytes.HasPrefix(body, []byte(`{"state":`)):
		return bucketStates
	}
	return nil
}

// counts returns how many records of each bucket were salvaged and how
// many were found but not trusted in any version.
func (sv *salvage) counts() (salvaged, skipped Counts) {
	n := func(bucket []byte) (int, int) {
		found, bad := sv.found[string(bucket)], 0
		for k := range sv.untrusted[string(bucket)] {
			if _, ok := found[k]; !ok {
				bad++
			}
		}
		return len(found), bad
	}
	salvaged.Ops, skipped.Ops = n(bucketOps)
	salvaged.Audit, skipped.Audit = n(bucketAudit)
	salvaged.DeadLetters, skipped.DeadLetters = n(bucketDeadLetters)
	salvaged.States, skipped.States = n(bucketStates)
	return salvaged, skipped
}

// sortedKeys returns the keys of m in byte order.
func sortedKeys(m map[string]candidate) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// endedDetail is the Detail of a salvaged op that had not ended.
func endedDetail(at time.Time) string {
	return fmt.Sprintf("the store was damaged and quarantined at %s before this command ended; "+
		"whether its last attempt reached the device is unknown, so it is not sent again", at.Format(time.RFC3339))
}

// restore writes sv into the fresh store s, with q (counts filled in) as
// the last quarantine, in one synced transaction. Every salvaged op keeps
// its Seq; one still pending is stored ended (failed, store_damaged,
// endedDetail, UpdatedAt q.At), with a dead letter, and counted in
// q.Ended. The ends index is rebuilt from the terminal ops in UpdatedAt
// order, so the ended ones are the last (LastEnded republishes them);
// the pending index stays empty, since no op is left pending. Audit
// entries and dead letters keep their Seq keys, and every bucket's
// sequence is set past the highest Seq salvaged or read, so no Seq is
// used twice.
func (s *Store) restore(sv *salvage, q *Quarantine) error {
	q.Salvaged, q.Skipped = sv.counts()
	return s.update(func(tx *bolt.Tx) error {
		b := txBuckets(tx)
		for _, bk := range []*bolt.Bucket{b.ops, b.audit, b.dead, b.states, b.ends} {
			bk.FillPercent = 0.9 // keys arrive in order
		}
		ops := sv.found[string(bucketOps)]
		var ended, terminal []devices.Op
		seq := sv.seqs[string(bucketOps)]
		for _, id := range sortedKeys(ops) {
			c := ops[id]
			op, body := c.op, c.body
			if !op.Status.Terminal() {
				op.Status, op.Reason, op.Detail, op.UpdatedAt = devices.Failed, devices.ReasonStoreDamaged, endedDetail(q.At), q.At
				e, err := encodeOp(op)
				if err != nil {
					return err
				}
				body = withSeq(e.body, op.Seq)
				ended = append(ended, op)
			}
			terminal = append(terminal, op)
			seq = max(seq, op.Seq)
			if err := b.ops.Put([]byte(id), frame(bucketOps, []byte(id), body)); err != nil {
				return fmt.Errorf("salvage op %q: %w", id, err)
			}
		}
		if err := b.ops.SetSequence(seq); err != nil {
			return err
		}
		slices.SortStableFunc(terminal, func(a, b devices.Op) int {
			return cmp.Or(a.UpdatedAt.Compare(b.UpdatedAt), cmp.Compare(a.Seq, b.Seq))
		})
		for _, op := range terminal {
			if err := b.putEnd([]byte(op.OpID)); err != nil {
				return err
			}
		}
		if err := restoreSeqLog(b, sv, auditLog.name, b.audit); err != nil {
			return err
		}
		if err := restoreSeqLog(b, sv, deadLetterLog.name, b.dead); err != nil {
			return err
		}
		for _, op := range ended {
			body, err := encodeDeadLetter(op)
			if err != nil {
				return fmt.Errorf("dead letter of salvaged op %q: %w", op.OpID, err)
			}
			if err := deadLetterLog.put(b, body); err != nil {
				return err
			}
		}
		states := sv.found[string(bucketStates)]
		for _, dev := range sortedKeys(states) {
			if err := b.states.Put([]byte(dev), frame(bucketStates, []byte(dev), states[dev].body)); err != nil {
				return fmt.Errorf("salvage state of %q: %w", dev, err)
			}
		}
		q.Ended = len(ended)
		body, err := encodeQuarantine(*q)
		if err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(metaQuarantine, body)
	})
}

// restoreSeqLog writes the salvaged records of the seqLog bucket name
// into bucket under their Seq keys and sets its sequence past the
// highest of them and of the damaged file's sequence.
func restoreSeqLog(b buckets, sv *salvage, name []byte, bucket *bolt.Bucket) error {
	recs := sv.found[string(name)]
	seq := sv.seqs[string(name)]
	for _, k := range sortedKeys(recs) {
		key := []byte(k)
		seq = max(seq, binary.BigEndian.Uint64(key))
		if err := bucket.Put(key, frame(name, key, recs[k].body)); err != nil {
			return fmt.Errorf("salvage %s: %w", recordName(name, key), err)
		}
	}
	return bucket.SetSequence(seq)
}
