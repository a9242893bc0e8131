package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strconv"

	bolt "go.etcd.io/bbolt"

	"github.com/hearthd/hearth/devices"
)

// checkIndexes verifies, at open, the two indexes over ops against the
// records they name: every pending key is an 8-byte Seq followed by the
// op_id of an op that exists, is not terminal and has that Seq; every
// ends entry has an 8-byte key and names an op that exists. It costs one
// lookup per entry, and for a pending one a read of its op's "seq" and
// "status" (opHead), not a decode. It runs after the walk has verified
// every op record's frame. A mismatch is an error (check makes it
// ErrDamaged): otherwise Pending, hence every start, would fail on it,
// or a pending op would be resumed under a Seq that is not its own.
func checkIndexes(tx *bolt.Tx) error {
	ops := tx.Bucket(bucketOps)
	get := func(id []byte) []byte {
		if ops == nil {
			return nil
		}
		return ops.Get(id)
	}
	if pending := tx.Bucket(bucketPending); pending != nil {
		err := pending.ForEach(func(k, _ []byte) error {
			if len(k) <= 8 {
				return fmt.Errorf("pending index key %x is shorter than a seq and an op_id", k)
			}
			seq, id := binary.BigEndian.Uint64(k[:8]), k[8:]
			rec := get(id)
			if rec == nil {
				return fmt.Errorf("pending index names op %q, which has no record", id)
			}
			head, err := opHead(recordBody(rec))
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
		})
		if err != nil {
			return err
		}
	}
	if ends := tx.Bucket(bucketEnds); ends != nil {
		return ends.ForEach(func(k, v []byte) error {
			if len(k) != 8 {
				return fmt.Errorf("ends index key %x is not an 8-byte seq", k)
			}
			if len(v) == 0 || get(v) == nil {
				return fmt.Errorf("ends index entry %s names op %q, which has no record", seqKeyName(k), v)
			}
			return nil
		})
	}
	return nil
}

// recordBody is the JSON of a record whose frame was already verified.
func recordBody(v []byte) []byte {
	if len(v) >= frameHeader && v[0] == frameV1 {
		return v[frameHeader:]
	}
	return v
}

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
			i++
			for i < len(b) && b[i] != '"' {
				if b[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(b) {
				return -1
			}
			i++
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
