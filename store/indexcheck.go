package store

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	bolt "go.etcd.io/bbolt"

	"github.com/hearthd/hearth/devices"
)

// indexCheck verifies, at open, the two indexes over ops against the
// records they name: every pending key is an 8-byte Seq followed by the
// op_id of an op that exists, is not terminal and has that Seq; every
// ends entry has an 8-byte key and names an op that exists. A mismatch
// is an error (check makes it ErrDamaged): otherwise Pending, hence
// every start, would fail on it, or a pending op would be resumed under
// a Seq that is not its own.
//
// It costs no lookup in ops: collectIndexes reads both indexes first and
// sorts their entries by op_id; the walk of ops, which reads every op in
// op_id order anyway, calls op for each, which merges; finish reports
// what no op answered. For an op the pending index names, only its
// "seq" and "status" are read (opHead), not the whole record. The op_ids
// held are slices of the read transaction's mapped file, valid until it
// ends; the indexCheck is dropped before that.
type indexCheck struct {
	pending, ends []indexEntry // sorted by id
}

// indexEntry is one entry of an index: the op_id it names and its Seq
// (pending: the op's, from the key; ends: the entry's own).
type indexEntry struct {
	id  []byte
	seq uint64
}

// collectIndexes reads the pending and ends indexes of tx.
func collectIndexes(tx *bolt.Tx) (*indexCheck, error) {
	ic := &indexCheck{}
	if ops := tx.Bucket(bucketOps); ops != nil {
		// The number of Seqs ever drawn bounds both; growing is most of
		// the cost of collecting.
		n := int(min(ops.Sequence(), 1<<16))
		ic.pending, ic.ends = make([]indexEntry, 0, n), make([]indexEntry, 0, n)
	}
	if pending := tx.Bucket(bucketPending); pending != nil {
		err := pending.ForEach(func(k, _ []byte) error {
			if len(k) <= 8 {
				return fmt.Errorf("pending index key %x is shorter than a seq and an op_id", k)
			}
			ic.pending = append(ic.pending, indexEntry{id: k[8:], seq: binary.BigEndian.Uint64(k[:8])})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	if ends := tx.Bucket(bucketEnds); ends != nil {
		err := ends.ForEach(func(k, v []byte) error {
			if len(k) != 8 {
				return fmt.Errorf("ends index key %x is not an 8-byte seq", k)
			}
			if len(v) == 0 {
				return fmt.Errorf("ends index entry %s names no op", seqKeyName(k))
			}
			ic.ends = append(ic.ends, indexEntry{id: v, seq: binary.BigEndian.Uint64(k)})
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	byID := func(a, b indexEntry) int { return cmp.Or(bytes.Compare(a.id, b.id), cmp.Compare(a.seq, b.seq)) }
	slices.SortFunc(ic.pending, byID)
	slices.SortFunc(ic.ends, byID)
	for i := 1; i < len(ic.pending); i++ {
		if a, b := ic.pending[i-1], ic.pending[i]; bytes.Equal(a.id, b.id) {
			return nil, fmt.Errorf("pending index names op %q twice, under seq %d and %d", a.id, a.seq, b.seq)
		}
	}
	return ic, nil
}

// op checks the op stored under id, whose record's frame was verified
// and whose JSON is body, against the indexes. The walk calls it in
// ascending id order: an entry of a lower id than id names no op.
func (ic *indexCheck) op(id, body []byte) error {
	if err := ic.skipTo(id); err != nil {
		return err
	}
	for len(ic.ends) > 0 && bytes.Equal(ic.ends[0].id, id) {
		ic.ends = ic.ends[1:]
	}
	if len(ic.pending) == 0 || !bytes.Equal(ic.pending[0].id, id) {
		return nil
	}
	seq := ic.pending[0].seq
	ic.pending = ic.pending[1:]
	head, err := opHead(body)
	if err != nil {
		return fmt.Errorf("pending index names op %q: %w", id, err)
	}
	if head.Status.Terminal() {
		return fmt.Errorf("pending index names op %q, which is %s", id, head.Status)
	}
	if head.Seq != seq {
		return fmt.Errorf("pending index key of seq %d names op %q, whose seq is %d", seq, id, head.Seq)
	}
	return nil
}

// skipTo reports an entry of an id below id (nil: every entry left): no
// op has it.
func (ic *indexCheck) skipTo(id []byte) error {
	below := func(e []indexEntry) bool { return len(e) > 0 && (id == nil || bytes.Compare(e[0].id, id) < 0) }
	if below(ic.pending) {
		e := ic.pending[0]
		return fmt.Errorf("pending index names op %q, which has no record (seq %d)", e.id, e.seq)
	}
	if below(ic.ends) {
		e := ic.ends[0]
		return fmt.Errorf("ends index entry %s names op %q, which has no record", seqKeyName(seqKey(e.seq)), e.id)
	}
	return nil
}

// finish reports an index entry that names an op the walk did not find.
func (ic *indexCheck) finish() error { return ic.skipTo(nil) }

// opRecordHead is what checkIndexes and a commit need of a stored op.
type opRecordHead struct {
	Seq    uint64         `json:"seq"`
	Status devices.Status `json:"status"`
}

// opHead reads the top-level "seq" and "status" of an op's JSON. It
// skims the object's top level (skimOpHead), skipping other values
// without decoding them, and falls back to encoding/json for anything
// the skim does not expect (an escape in a key or in the status).
func opHead(body []byte) (opRecordHead, error) {
	if h, ok := skimOpHead(body); ok {
		return h, nil
	}
	var h opRecordHead
	if err := json.Unmarshal(body, &h); err != nil {
		return h, fmt.Errorf("record does not decode: %w", err)
	}
	return h, nil
}

// skimOpHead reads "seq" and "status" out of the top level of the JSON
// object body. ok is false when both are not found or body is not what
// json.Marshal writes for an op (then opHead decodes it properly).
func skimOpHead(body []byte) (h opRecordHead, ok bool) {
	i := skipSpace(body, 0)
	if i >= len(body) || body[i] != '{' {
		return h, false
	}
	i++
	var haveSeq, haveStatus bool
	for {
		i = skipSpace(body, i)
		if i >= len(body) || body[i] != '"' {
			return h, false
		}
		end := bytes.IndexByte(body[i+1:], '"')
		if end < 0 {
			return h, false
		}
		key := body[i+1 : i+1+end]
		if bytes.IndexByte(key, '\\') >= 0 {
			return h, false
		}
		i = skipSpace(body, i+end+2)
		if i >= len(body) || body[i] != ':' {
			return h, false
		}
		i = skipSpace(body, i+1)
		start := i
		i = skipValue(body, i)
		if i < 0 {
			return h, false
		}
		switch string(key) {
		case "seq":
			n, err := strconv.ParseUint(string(body[start:i]), 10, 64)
			if err != nil {
				return h, false
			}
			h.Seq, haveSeq = n, true
		case "status":
			v := body[start:i]
			if len(v) < 2 || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 {
				return h, false
			}
			h.Status, haveStatus = devices.Status(v[1:len(v)-1]), true
		}
		if haveSeq && haveStatus {
			return h, true
		}
		i = skipSpace(body, i)
		if i >= len(body) || body[i] != ',' {
			return h, false // '}' before both: let json say
		}
		i++
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the JSON value starting at
// b[i], or -1 if it does not end. It only tracks strings and nesting.
func skipValue(b []byte, i int) int {
	depth := 0
	for i < len(b) {
		switch c := b[i]; c {
		case '"':
			end := skipString(b, i)
			if end < 0 {
				return -1
			}
			i = end
			if depth == 0 {
				return i
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i // the end of the enclosing object
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',':
			if depth == 0 {
				return i
			}
		}
		i++
	}
	if depth == 0 {
		return i
	}
	return -1
}

// skipString returns the index just past the JSON string starting at
// b[i] (a '"'), or -1 if it does not end.
func skipString(b []byte, i int) int {
	for i++; ; {
		j := bytes.IndexByte(b[i:], '"')
		if j < 0 {
			return -1
		}
		i += j
		n := 0 // backslashes before the quote
		for k := i - 1; k >= 0 && b[k] == '\\'; k-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i
		}
	}
}
