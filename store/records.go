package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/hearthd/hearth/devices"
)

// DeviceState is a device's last confirmed state, kept so that Hearth can
// republish hearth/<device> retained after a restart.
type DeviceState struct {
	// State is the reported state, attribute name → value.
	State map[string]any
	// At is when the state was confirmed.
	At time.Time
}

// Save stores ops durably: when it returns nil, they are committed and
// fsync'd. Each op is upserted by OpID. The first save of an op_id assigns
// its Seq from a counter that only grows; later saves keep that Seq,
// whatever the caller's op says. A non-terminal op is in the pending index
// (see Pending); saving it with a terminal status removes it. Once an op is
// stored terminal, later saves of it are ignored.
//
// Concurrent calls share one transaction and one fsync (see the package
// doc). The ops of one call are committed together or not at all. An op
// with an empty OpID, an OpID over devices.MaxOpIDBytes, or a Target or
// State that JSON cannot encode fails this call before anything is
// queued. After Close, Save returns ErrClosed.
func (s *Store) Save(ops ...devices.Op) error {
	r := &request{ops: make([]encodedOp, 0, len(ops))}
	for _, op := range ops {
		e, err := encodeOp(op)
		if err != nil {
			return err
		}
		r.ops = append(r.ops, e)
	}
	if len(r.ops) == 0 {
		return s.openErr()
	}
	return s.submit(r)
}

// Lookup returns the op stored under opID, and false if there is none.
func (s *Store) Lookup(opID string) (devices.Op, bool, error) {
	var op devices.Op
	var found bool
	err := s.view(func(b buckets) error {
		v := b.ops.Get([]byte(opID))
		if v == nil {
			return nil
		}
		found = true
		return decodeOp([]byte(opID), v, &op)
	})
	if err != nil {
		return devices.Op{}, false, err
	}
	return op, found, nil
}

// Pending returns every op whose last saved status is not terminal, in Seq
// order: the work to resume after a restart.
//
// The records are decoded on every CPU at once: a restart reads them all
// before it takes a new command.
func (s *Store) Pending() ([]devices.Op, error) {
	var ops []devices.Op
	err := s.view(func(b buckets) error {
		var ids, bodies [][]byte // valid until the transaction ends
		c := b.pending.Cursor()
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			if len(k) <= 8 {
				return damaged(s.path, "pending index key %x is shorter than a seq and an op_id", k)
			}
			id := k[8:]
			v := b.ops.Get(id)
			if v == nil {
				return damaged(s.path, "pending index names op %q, which has no record", id)
			}
			ids, bodies = append(ids, id), append(bodies, v)
		}
		ops = make([]devices.Op, len(ids))
		chunks := (len(ids) + decodeChunk - 1) / decodeChunk
		workers := min(runtime.GOMAXPROCS(0), chunks)
		errs := make([]error, chunks) // the first error of each chunk
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for ch := w; ch < chunks; ch += workers {
					for i := ch * decodeChunk; i < min((ch+1)*decodeChunk, len(ids)); i++ {
						if err := decodeOp(ids[i], bodies[i], &ops[i]); err != nil {
							errs[ch] = err
							return
						}
					}
				}
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err // the first in Seq order among those found
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ops, nil
}

// decodeChunk is how many records one of Pending's decoders takes at a
// time.
const decodeChunk = 1024

// SaveState stores device's last confirmed state, confirmed at at,
// replacing the one before. Like Save it is durable when it returns nil
// and shares group commits with Save. An empty device ID or a state that
// JSON cannot encode is an error. After Close it returns ErrClosed.
func (s *Store) SaveState(device string, state map[string]any, at time.Time) error {
	if device == "" {
		return fmt.Errorf("save state: empty device id")
	}
	v, err := json.Marshal(stateRecord{State: state, At: at})
	if err != nil {
		return fmt.Errorf("encode state of %s: %w", device, err)
	}
	key := []byte(device)
	return s.submit(&request{state: &encodedState{key: key, value: frame(bucketStates, key, v)}})
}

// States returns the last confirmed state of every device that has one,
// by device ID. A record that fails its checksum is an error wrapping
// ErrDamaged that names the device.
func (s *Store) States() (map[string]DeviceState, error) {
	states := make(map[string]DeviceState)
	err := s.view(func(b buckets) error {
		return b.states.ForEach(func(k, v []byte) error {
			var rec stateRecord
			if err := unframeJSON(bucketStates, k, v, &rec); err != nil {
				return err
			}
			states[string(k)] = DeviceState(rec)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	return states, nil
}

// PruneTerminal deletes the terminal ops last updated before before (and
// their entries in the index of ends, see LastEnded) and
// returns how many it deleted. Terminal ops are kept until then so that an
// op_id sent again returns its stored result rather than running twice;
// callers choose the retention (for example, now minus devices.MaxTTL).
// Non-terminal ops are never pruned. It reads every op, in one
// transaction of its own.
func (s *Store) PruneTerminal(before time.Time) (int, error) {
	if err := s.openErr(); err != nil {
		return 0, err
	}
	var n int
	err := s.update(func(tx *bolt.Tx) error {
		ops := tx.Bucket(bucketOps)
		var doomed [][]byte
		err := ops.ForEach(func(k, v []byte) error {
			var head struct {
				Status    devices.Status `json:"status"`
				UpdatedAt time.Time      `json:"updated_at"`
			}
			if err := unframeJSON(bucketOps, k, v, &head); err != nil {
				return err
			}
			if head.Status.Terminal() && head.UpdatedAt.Before(before) {
				doomed = append(doomed, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range doomed {
			if err := ops.Delete(k); err != nil {
				return fmt.Errorf("delete op %q: %w", k, err)
			}
		}
		if err := pruneEnds(tx.Bucket(bucketEnds), doomed); err != nil {
			return err
		}
		n = len(doomed)
		return nil
	})
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return 0, ErrClosed
	}
	if err != nil {
		return 0, err
	}
	return n, nil
}

// openErr returns ErrClosed after Close and nil before.
func (s *Store) openErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	return nil
}

// Encoding. An op is stored as its JSON with "seq" first, in the record
// frame (checksum.go) keyed by its op_id. The caller's
// goroutine encodes everything but the Seq, which only the writer knows;
// the writer prefixes it. So encoding, the only per-op step that can fail,
// happens before the request is queued, and one bad op never fails a group.

// encodedOp is an op ready for the writer.
type encodedOp struct {
	id       []byte
	terminal bool
	body     []byte // JSON object of the op without its seq
}

// opBody encodes an op without its Seq: the outer Seq field shadows the
// embedded one (encoding/json takes the shallowest field of a name), and
// omitzero always leaves it out.
type opBody struct {
	devices.Op
	Seq struct{} `json:"seq,omitzero"`
}

func encodeOp(op devices.Op) (encodedOp, error) {
	if op.OpID == "" {
		return encodedOp{}, fmt.Errorf("save op: empty op_id")
	}
	if len(op.OpID) > devices.MaxOpIDBytes {
		return encodedOp{}, fmt.Errorf("save op %q: op_id is %d bytes; the limit is %d", op.OpID, len(op.OpID), devices.MaxOpIDBytes)
	}
	body, err := json.Marshal(opBody{Op: op})
	if err != nil {
		return encodedOp{}, fmt.Errorf("encode op %q: %w", op.OpID, err)
	}
	return encodedOp{id: []byte(op.OpID), terminal: op.Status.Terminal(), body: body}, nil
}

// withSeq returns the stored record: body with "seq":seq as its first
// field.
func withSeq(body []byte, seq uint64) []byte {
	return appendWithSeq(make([]byte, 0, len(body)+28), body, seq)
}

// appendWithSeq appends withSeq(body, seq) to out.
func appendWithSeq(out, body []byte, seq uint64) []byte {
	out = append(out, `{"seq":`...)
	out = strconv.AppendUint(out, seq, 10)
	if rest := body[1:]; !bytes.Equal(rest, []byte("}")) {
		out = append(out, ',')
	}
	return append(out, body[1:]...)
}

// decodeOp decodes v, the record stored under op_id id, into op: an error
// wrapping ErrDamaged when it fails its checksum (unframe), a decode
// error naming the op otherwise.
func decodeOp(id, v []byte, op *devices.Op) error {
	return unframeJSON(bucketOps, id, v, op)
}

// putOp upserts one op in the writer's transaction: it keeps the Seq of
// an existing record or draws a new one, and updates the pending index. A
// stored terminal status is final: a later save of that op is ignored, so
// a late write of an attempt can never reopen a command that already
// ended (a command ends in exactly one terminal status).
func (b buckets) putOp(op encodedOp) error {
	var seq uint64
	head, found, err := b.oldHead(op.id)
	if err != nil {
		return err
	}
	if found {
		if head.Status.Terminal() {
			return nil
		}
		seq = head.Seq
	} else {
		next, err := b.ops.NextSequence()
		if err != nil {
			return fmt.Errorf("assign seq to op %q: %w", op.id, err)
		}
		seq = next
	}
	if err := b.ops.Put(op.id, frameWithSeq(bucketOps, op.id, op.body, seq)); err != nil {
		return fmt.Errorf("save op %q: %w", op.id, err)
	}
	key := pendingKey(seq, op.id)
	if op.terminal {
		err = b.pending.Delete(key)
		if err == nil {
			err = b.putEnd(op.id)
		}
	} else {
		err = b.pending.Put(key, []byte{})
	}
	if err != nil {
		return fmt.Errorf("index op %q: %w", op.id, err)
	}
	return nil
}

// oldHead reads the Seq and status of the op stored under id, in the
// writer's transaction; found is false when there is none. A record that
// fails its frame, or a legacy one that does not decode, is a
// *recordError (damage); a v1 record that does not decode is an error
// naming the op.
func (b buckets) oldHead(id []byte) (head opRecordHead, found bool, err error) {
	old := b.ops.Get(id)
	if old == nil {
		return head, false, nil
	}
	body, err := unframe(bucketOps, id, old)
	if err != nil {
		return head, true, err
	}
	head, err = opHead(body)
	if err != nil {
		if old[0] == '{' {
			return head, true, legacyError(bucketOps, id, err)
		}
		return head, true, fmt.Errorf("decode %s: %w", recordName(bucketOps, id), err)
	}
	return head, true, nil
}

// pendingKey is the pending index key: 8-byte big-endian seq, then op_id,
// so that a cursor walks pending ops in Seq order.
func pendingKey(seq uint64, id []byte) []byte {
	k := make([]byte, 8, 8+len(id))
	binary.BigEndian.PutUint64(k, seq)
	return append(k, id...)
}

// encodedState is a device state ready for the writer.
type encodedState struct {
	key, value []byte
}

// stateRecord is how a DeviceState is stored.
type stateRecord struct {
	State map[string]any `json:"state"`
	At    time.Time      `json:"at"`
}

// putEnd records, in the writer's transaction, that op id was just stored
// terminal: the next entry of the ends index.
func (b buckets) putEnd(id []byte) error {
	seq, err := b.ends.NextSequence()
	if err != nil {
		return fmt.Errorf("assign end seq to op %q: %w", id, err)
	}
	if err := b.ends.Put(seqKey(seq), id); err != nil {
		return fmt.Errorf("index end of op %q: %w", id, err)
	}
	return nil
}

// pruneEnds deletes the ends entries of the pruned ops doomed.
func pruneEnds(ends *bolt.Bucket, doomed [][]byte) error {
	if len(doomed) == 0 {
		return nil
	}
	gone := make(map[string]bool, len(doomed))
	for _, k := range doomed {
		gone[string(k)] = true
	}
	var keys [][]byte
	err := ends.ForEach(func(k, v []byte) error {
		if gone[string(v)] {
			keys = append(keys, bytes.Clone(k))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := ends.Delete(k); err != nil {
			return fmt.Errorf("delete end %s: %w", seqKeyName(k), err)
		}
	}
	return nil
}

// LastEnded returns the ops most recently stored terminal, oldest first:
// walking back from the last op stored terminal, those whose UpdatedAt is
// no more than window before that last op's, at most limit of them (limit
// 0 or less means none). It reads only those records, through an index
// kept in the order ops ended, so its cost does not grow with the store.
// The window is measured from the last end, not from now, so that an
// outage of any length before a restart does not hide the results of the
// moments before it. Ops stored terminal by a Hearth older than this
// index are not in it. After Close it returns ErrClosed.
func (s *Store) LastEnded(window time.Duration, limit int) ([]devices.Op, error) {
	var ops []devices.Op
	err := s.view(func(b buckets) error {
		c := b.ends.Cursor()
		var newest time.Time
		for k, v := c.Last(); k != nil && len(ops) < limit; k, v = c.Prev() {
			rec := b.ops.Get(v)
			if rec == nil {
				continue // pruned
			}
			var op devices.Op
			if err := decodeOp(v, rec, &op); err != nil {
				return err
			}
			if len(ops) == 0 {
				newest = op.UpdatedAt
			} else if op.UpdatedAt.Before(newest.Add(-window)) {
				break
			}
			ops = append(ops, op)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Reverse(ops)
	return ops, nil
}
