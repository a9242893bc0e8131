package dispatcher

import (
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// workerRunning reports whether the radiator's worker goroutine runs.
func (r *sleepyRig) workerRunning() bool {
	q := r.d.devices["radiator"]
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.running
}

// A device costs a worker goroutine only while it has commands (and, for
// one that listens, workerLinger after its last): none before the first,
// none once its last has ended, and the next command starts one again
// and is carried out.
func TestDeviceWorkerRunsOnlyWhileTheDeviceHasCommands(t *testing.T) {
	shortLinger(t)
	for _, tc := range []struct {
		name  string
		awake bool
	}{{"always listening", true}, {"sleepy", false}} {
		t.Run(tc.name, func(t *testing.T) {
			r := startSleepy(t, sleepyOptions{awake: tc.awake})
			if r.workerRunning() {
				t.Fatal("a worker runs before the device has any command")
			}
			for i, c := range []struct{ opID, payload string }{
				{"first", `{"current_heating_setpoint":20,"op_id":"first"}`},
				{"second", `{"current_heating_setpoint":21,"op_id":"second"}`},
			} {
				r.submit(c.payload)
				r.status(c.opID, devices.Accepted)
				if !tc.awake && i == 0 {
					// Asleep until its check-in; for the second command
					// it is still awake (the clock stands still).
					r.status(c.opID, devices.Queued)
					r.report(map[string]any{"current_heating_setpoint": 16.0})
				}
				m := r.next()
				if m.verb != "set" {
					t.Fatalf("%s: a %s reached the bridge; want its set", c.opID, m.verb)
				}
				r.report(map[string]any{"current_heating_setpoint": m.target["current_heating_setpoint"]})
				if res := r.await(c.opID+" terminal", func(res devices.Result) bool { return res.OpID == c.opID && res.Status.Terminal() }); res.Status != devices.Succeeded {
					t.Fatalf("%s: %s/%s; want succeeded", c.opID, res.Status, res.Reason)
				}
				r.eventually("the worker to end after "+c.opID, func() bool { return !r.workerRunning() })
			}
		})
	}
}

// shortLinger makes an idle worker end at once for the test.
func shortLinger(t *testing.T) {
	old := workerLinger
	workerLinger = time.Millisecond
	t.Cleanup(func() { workerLinger = old })
}

// A worker whose queue has emptied keeps running for workerLinger, and
// carries out the next command that comes meanwhile.
func TestIdleWorkerTakesTheNextCommandWithinItsLinger(t *testing.T) {
	r := startSleepy(t, sleepyOptions{awake: true})
	r.submit(`{"current_heating_setpoint":20,"op_id":"a"}`)
	r.next()
	r.report(map[string]any{"current_heating_setpoint": 20.0})
	r.status("a", devices.Succeeded)
	if !r.workerRunning() {
		t.Fatal("the worker ended at once; want it waiting for the next command")
	}
	r.submit(`{"current_heating_setpoint":21,"op_id":"b"}`)
	if m := r.next(); m.verb != "set" || m.target["current_heating_setpoint"] != 21.0 {
		t.Fatalf("a %s %v reached the bridge; want the set of 21", m.verb, m.target)
	}
}
