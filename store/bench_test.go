package store

import (
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/hearthd/hearth/devices"
)

// Each Save commits and fsyncs: these measure the disk under the test's
// temp dir as much as the store. Compare ns/op of the two: the parallel
// one divides the fsyncs among the callers that share a group.

func BenchmarkSaveSerial(b *testing.B) {
	s := openStore(b, "", hooks{})
	op := newOp("")
	for i := 0; b.Loop(); i++ {
		op.OpID = "op-" + strconv.Itoa(i)
		if err := s.Save(op); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/float64(s.commits.Load()), "ops/commit")
}

func BenchmarkSaveParallel(b *testing.B) {
	s := openStore(b, "", hooks{})
	before := s.commits.Load()
	var next atomic.Uint64
	b.SetParallelism(16) // 16 × GOMAXPROCS callers, like a burst of automations
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		op := newOp("")
		for pb.Next() {
			op.OpID = "op-" + strconv.FormatUint(next.Add(1), 10)
			if err := s.Save(op); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/float64(s.commits.Load()-before), "ops/commit")
}

// BenchmarkPending100k reads back 100,000 pending ops, as a restart does
// before it takes its first command: µs/op is the read cost per pending
// command.
func BenchmarkPending100k(b *testing.B) {
	const n = 100_000
	s := openStore(b, "", hooks{})
	ops := make([]devices.Op, 0, 1000)
	for i := range n {
		op := newOp("")
		op.OpID = "op-" + strconv.Itoa(i)
		ops = append(ops, op)
		if len(ops) == cap(ops) {
			if err := s.Save(ops...); err != nil {
				b.Fatal(err)
			}
			ops = ops[:0]
		}
	}
	for b.Loop() {
		got, err := s.Pending()
		if err != nil || len(got) != n {
			b.Fatalf("Pending: %d ops, %v; want %d", len(got), err, n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/n, "µs/op")
}

// BenchmarkOpen100kOps measures Open (pre-check, bolt.Open, the walk of
// every key and Tx.Check) and Close of a store of 100,000 ops, with the
// file in the page cache: docs/STORE.md's "Opening" quotes it.
func BenchmarkOpen100kOps(b *testing.B) {
	dir := filledStore(b, 100_000)
	for b.Loop() {
		s, err := Open(dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		_ = s.Close()
	}
}

// BenchmarkCheck100kOps measures check alone (the walk and Tx.Check) on
// a store of 100,000 ops.
func BenchmarkCheck100kOps(b *testing.B) {
	dir := filledStore(b, 100_000)
	s := openStore(b, dir, hooks{})
	for b.Loop() {
		if _, err := check(s.db, s.path); err != nil {
			b.Fatal(err)
		}
	}
}
