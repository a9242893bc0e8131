package automations

import (
	"testing"
)

// Queued says how many runs wait, whatever the interleaving of the loop
// queueing a run and the worker taking it: once every run has run, none.
func TestQueuedIsZeroOnceEveryRunHasRun(t *testing.T) {
	h := start(t, friday, Rule{
		Name:     "count",
		Triggers: []Trigger{{State: &StateTrigger{Device: "counter", Attribute: "n"}}},
		Actions:  []Action{notify("n")},
	})
	h.e.DeviceState("counter", map[string]any{"n": 0}, false) // the baseline
	for i := 1; i <= 2000; i++ {
		h.e.DeviceState("counter", map[string]any{"n": i}, false)
		h.sync()
		if s := h.status("count"); s.Queued != 0 {
			t.Fatalf("status %+v once run %d has run; want 0 queued", s, i)
		}
	}
	if s := h.status("count"); s.Runs != 2000 || s.Queued != 0 || s.Dropped != 0 {
		t.Errorf("status %+v once every run has run; want 2000 runs, 0 queued, 0 dropped", s)
	}
}
