package health

import (
	"testing"
	"time"
)

// What the metrics add to each command on the hot path: one end
// (a success after one attempt, as most are) and one attempt sent.
func BenchmarkCommandEndedAndAttemptSent(b *testing.B) {
	m := NewMetrics()
	e := CommandEnd{Service: "zigbee", Class: "light", Status: "succeeded", Accepted: true, Attempts: 1,
		Duration: 40 * time.Millisecond, Confirm: 30 * time.Millisecond}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.AttemptSent("zigbee", "light", 1)
			m.CommandEnded(e)
			m.PubackWait(time.Millisecond)
		}
	})
}
