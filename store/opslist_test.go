package store

import (
	"strconv"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// Ops lists newest first by Seq (op_ids here sort the other way), pages
// with Before, and filters by device, principal, status, pending and
// since.
func TestOpsNewestFirstPagedAndFiltered(t *testing.T) {
	s := openStore(t, "", hooks{})
	mk := func(id, device, principal string, st devices.Status, at time.Duration) devices.Op {
		op := newOp(id)
		op.Device, op.Principal, op.Status, op.UpdatedAt = device, principal, st, t0.Add(at)
		return op
	}
	// Saved in this order: seqs 1 to 5.
	all := []devices.Op{
		mk("e", "lamp", "tablet", devices.Succeeded, 1*time.Second),
		mk("d", "door", "phone", devices.Accepted, 2*time.Second),
		mk("c", "lamp", "phone", devices.Failed, 3*time.Second),
		mk("b", "lamp", "tablet", devices.Accepted, 4*time.Second),
		mk("a", "door", "tablet", devices.Expired, 5*time.Second),
	}
	for _, op := range all {
		if err := s.Save(op); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(ops []devices.Op) string {
		out := ""
		for _, op := range ops {
			out += op.OpID
		}
		return out
	}
	for _, c := range []struct {
		name string
		q    OpsQuery
		want string
		more bool
	}{
		{"all", OpsQuery{}, "abcde", false},
		{"first page", OpsQuery{Limit: 2}, "ab", true},
		{"second page", OpsQuery{Limit: 2, Before: 4}, "cd", true},
		{"last page", OpsQuery{Limit: 2, Before: 2}, "e", false},
		{"device", OpsQuery{Device: "lamp"}, "bce", false},
		{"principal", OpsQuery{Principal: "phone"}, "cd", false},
		{"status", OpsQuery{Status: devices.Failed}, "c", false},
		{"pending", OpsQuery{Pending: true}, "bd", false},
		{"pending paged", OpsQuery{Pending: true, Limit: 1}, "b", true},
		{"pending before", OpsQuery{Pending: true, Before: 4}, "d", false},
		{"since", OpsQuery{Since: t0.Add(3 * time.Second)}, "abc", false},
		{"none", OpsQuery{Device: "attic"}, "", false},
	} {
		ops, more, err := s.Ops(c.q)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := ids(ops); got != c.want || more != c.more {
			t.Errorf("%s: %q more %v; want %q more %v", c.name, got, more, c.want, c.more)
		}
	}
}

// The cost of a listing: every stored op is read and decoded, whatever
// the page (see Ops); status=pending reads the pending ones only.
func BenchmarkOpsListing10k(b *testing.B) {
	s := openStore(b, "", hooks{})
	ops := make([]devices.Op, 10000)
	for i := range ops {
		ops[i] = newOp("op-" + strconv.Itoa(i))
		if i%100 != 0 {
			ops[i].Status = devices.Succeeded
		}
	}
	if err := s.Save(ops...); err != nil {
		b.Fatal(err)
	}
	for _, q := range []struct {
		name string
		q    OpsQuery
	}{{"newest50", OpsQuery{Limit: 50}}, {"pending50", OpsQuery{Pending: true, Limit: 50}}} {
		b.Run(q.name, func(b *testing.B) {
			for b.Loop() {
				if _, _, err := s.Ops(q.q); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
