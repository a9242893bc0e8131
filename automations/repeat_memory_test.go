package automations

import (
	"fmt"
	"testing"
	"time"
)

// A flood of distinct events (a sensor on a trigger's topic, a client
// publishing there) leaves in the rule's memory of events only those
// whose repeat window has not passed: it does not keep an hour of them.
func TestRepeatMemoryForgetsEventsPastTheirWindow(t *testing.T) {
	h := start(t, friday, sceneRule(&MQTTTrigger{Topic: "sensor/x"}))
	const n = 5000 // one every 10 ms: 200 within any 2 s window
	for i := range n {
		h.e.Message("sensor/x", fmt.Appendf(nil, `{"n":%d}`, i), false)
		if i%50 == 49 { // fewer than the rule's queue holds
			h.sync()
		}
		h.clock.Advance(10 * time.Millisecond)
	}
	h.sync()
	if got := len(h.rec.Commands()); got != n {
		t.Fatalf("%d commands for %d distinct events; want %d", got, n, n)
	}
	if got := len(h.e.rules[0].seen); got > maxSeen {
		t.Errorf("the rule remembers %d events after %d distinct ones over %s; want at most %d", got, n, n*10*time.Millisecond, maxSeen)
	}
	// The latest event is still within its window: its copy is a repeat.
	h.e.Message("sensor/x", fmt.Appendf(nil, `{"n":%d}`, n-1), false)
	h.sync()
	if s := h.status("scene"); s.Repeats != 1 {
		t.Errorf("status %+v; want the copy of the latest event counted as a repeat", s)
	}
}
