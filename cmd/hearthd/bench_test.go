package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/store"
)

// benchBurst is how many commands one round of BenchmarkIntakeGroupCommit
// sends.
const benchBurst = 500

// BenchmarkIntakeGroupCommit measures how fast hearthd accepts a burst of
// commands over MQTT — each stored and synced before its "accepted" — against
// a baseline measured in the same run: the same number of commands stored
// one synced commit each. It reports both and their ratio (speedup-x); a
// ratio well above 1 shows that intake is not capped at one fsync per
// command.
func BenchmarkIntakeGroupCommit(b *testing.B) {
	var baseline, intake time.Duration
	devs := []string{"hall_light", "front_door", "blinds", "plug"}
	payload := map[string]string{
		"hall_light": `{"state":"ON","op_id":"%s"}`,
		"front_door": `{"state":"LOCK","op_id":"%s"}`,
		"blinds":     `{"position":50,"op_id":"%s"}`,
		"plug":       `{"state":"ON","op_id":"%s"}`,
	}
	for round := 0; round < b.N; round++ {
		b.StopTimer()
		// Baseline: one synced commit per command.
		st, err := store.Open(b.TempDir(), store.Options{})
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		for i := range benchBurst {
			op := devices.Op{OpID: fmt.Sprintf("base-%d", i), Device: "plug", Target: devices.Target{"state": "ON"},
				Status: devices.Accepted, AcceptedAt: start, Deadline: start.Add(time.Minute), UpdatedAt: start}
			if err := st.Save(op); err != nil {
				b.Fatal(err)
			}
		}
		baseline += time.Since(start)
		st.Close()

		// hearthd: the same number of commands in one burst over MQTT.
		h := newHarness(b, harnessOptions{})
		start = time.Now()
		for i := range benchBurst {
			dev := devs[i%len(devs)]
			h.client.Publish("hearth/"+dev+"/set", 1, false, fmt.Sprintf(payload[dev], fmt.Sprintf("r%d-%d", round, i)))
		}
		accepted := 0
		deadline := time.After(time.Minute)
		for accepted < benchBurst {
			select {
			case r := <-h.results:
				if r.Status == devices.Accepted {
					accepted++
				}
			case <-deadline:
				b.Fatalf("only %d of %d commands accepted", accepted, benchBurst)
			}
		}
		intake += time.Since(start)
		h.stop()
	}
	b.ReportMetric(float64(baseline.Microseconds())/float64(b.N*benchBurst), "baseline-µs/cmd")
	b.ReportMetric(float64(intake.Microseconds())/float64(b.N*benchBurst), "intake-µs/cmd")
	b.ReportMetric(float64(baseline)/float64(intake), "speedup-x")
}
