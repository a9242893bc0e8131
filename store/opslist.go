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
// read transaction, decoding the fields the filters need, sorts the
// matches by Seq and decodes the page's ops whole: a listing costs a scan
// of the store, not of the page (BenchmarkOpsListing10k). A record that
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
		// The filters' fields of every op first (no target or state
		// decoded), then the page's ops whole.
		type match struct {
			seq uint64
			id  []byte // valid until the transaction ends
		}
		var matches []match
		err := b.ops.ForEach(func(k, v []byte) error {
			var head listHead
			if err := unframeJSON(bucketOps, k, v, &head); err != nil {
				return err
			}
			op := devices.Op{Seq: head.Seq, Device: head.Device, Principal: head.Principal, Status: head.Status, UpdatedAt: head.UpdatedAt}
			if keep(&op) {
				matches = append(matches, match{head.Seq, k})
			}
			return nil
		})
		if err != nil {
			return err
		}
		slices.SortFunc(matches, func(a, b match) int { return cmp.Compare(b.seq, a.seq) })
		if len(matches) > q.Limit {
			matches, more = matches[:q.Limit], true
		}
		ops = make([]devices.Op, len(matches))
		for i, m := range matches {
			if err := decodeOp(m.id, b.ops.Get(m.id), &ops[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return ops, more, nil
}

// listHead is what Ops's filters read of an op's record.
type listHead struct {
	Seq       uint64         `json:"seq"`
	Device    string         `json:"device"`
	Principal string         `json:"principal"`
	Status    devices.Status `json:"status"`
	UpdatedAt time.Time      `json:"updated_at"`
}
