package store

import (
	"strconv"
	"sync/atomic"
	"testing"
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
