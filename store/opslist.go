package store

import (
	"cmp"
	"slices"
	"time"

	"github.com/hearthd/hearth/devices"
)

// OpsQuery selects stored ops for a listing (Ops). Zero fields select
// everything; set filters are exact matches combined with AND.
type OpsQuery struct {
	Device    string
	Principal string
	// Status keeps ops with that stored status; Pending, ops whose
	// status is not terminal. Set at most one of them.
	Status  devices.Status
	Pending bool
	// Since, if not zero, keeps ops last updated (UpdatedAt) at or
	// after it.
	Since time.Time
	// Before is a Seq cursor: only ops with Seq < Before; 0 means from
	// the newest.
	Before uint64
	// Limit is the most ops to return; 0 or less means 50.
	Limit int
}

// Ops returns the stored ops that q selects, newest (highest Seq) first,
// at most q.Limit of them, and more: whether further ops match past the
// last one returned (pass its Seq as q.Before for them).
//
// Cost: with q.Pending it walks the pending index from the newest and
// reads only the pending ops, stopping once it has a page. Otherwise
// there is no index by Seq: it reads every stored op's record (every op
// accepted within the retention of ended ones, hearthd's 7 days), in one
// read transaction, decoding each, and sorts the matches by Seq: a
// listing costs a scan of the store, not of the page. A record that
// fails its checksum is an error wrapping ErrDamaged. After Close it
// returns ErrClosed.
func (s *Store) Ops(q OpsQuery) (ops []devices.Op, more bool, err error) {
	if q.Limit <= 0 {
		q.Limit = 50
	}
	keep := func(op *devices.Op) bool {
		return (q.Before == 0 || op.Seq < q.Before) &&
			(q.Device == "" || op.Device == q.Device) &&
			(q.Principal == "" || op.Principal == q.Principal) &&
			(q.Status == "" || op.Status == q.Status) &&
			(!q.Pending || !op.Status.Terminal()) &&
			(q.Since.IsZero() || !op.UpdatedAt.Before(q.Since))
	}
	err = s.view(func(b buckets) error {
		if q.Pending {
			c := b.pending.Cursor()
			for k, _ := c.Last(); k != nil; k, _ = c.Prev() {
				if len(k) <= 8 {
					return damaged(s.path, "pending index key %x is shorter than a seq and an op_id", k)
				}
				id := k[8:]
				v := b.ops.Get(id)
				if v == nil {
					return damaged(s.path, "pending index names op %q, which has no record", id)
				}
				var op devices.Op
				if err := decodeOp(id, v, &op); err != nil {
					return err
				}
				if !keep(&op) {
					continue
				}
				if len(ops) == q.Limit {
					more = true
					return nil
				}
				ops = append(ops, op)
			}
			return nil
		}
		return b.ops.ForEach(func(k, v []byte) error {
			var op devices.Op
			if err := decodeOp(k, v, &op); err != nil {
				return err
			}
			if keep(&op) {
				ops = append(ops, op)
			}
			return nil
		})
	})
	if err != nil {
		return nil, false, err
	}
	if !q.Pending {
		slices.SortFunc(ops, func(a, b devices.Op) int { return cmp.Compare(b.Seq, a.Seq) })
		if len(ops) > q.Limit {
			ops, more = ops[:q.Limit], true
		}
	}
	return ops, more, nil
}
