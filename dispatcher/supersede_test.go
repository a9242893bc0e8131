package dispatcher

import (
	"testing"

	"github.com/hearthd/hearth/devices"
)

// A command that ended where it waited (a sleepy device's command at its
// TTL) stays in the waiting list until the worker next looks; a newer
// command arriving in that gap must not end it a second time (a second
// result, a second dead letter).
func TestSupersedeNeverEndsAnEndedCommandAgain(t *testing.T) {
	r := startSleepy(t, sleepyOptions{})
	q := r.d.devices["radiator"]
	expired := &task{op: devices.Op{OpID: "old", Device: "radiator", Target: devices.Target{"current_heating_setpoint": 21.0},
		Status: devices.Expired}, cancel: make(chan struct{}), ended: true}
	close(expired.cancel)
	q.mu.Lock()
	q.waiting = append(q.waiting, expired)
	q.mu.Unlock()

	ended := q.supersede(devices.Op{OpID: "new", Device: "radiator", Target: devices.Target{"current_heating_setpoint": 18.0}}, r.clock.Now())
	if len(ended) != 0 {
		t.Errorf("supersede ended %+v; want nothing: the old command had ended already", ended)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.waiting) != 0 {
		t.Errorf("waiting %d commands; want the ended one dropped", len(q.waiting))
	}
}
