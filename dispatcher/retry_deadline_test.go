package dispatcher

import (
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// The fresh read before a risky retry waits for its answer only until the
// retry's policy deadline: a lock that does not answer the read makes the
// retry end failed/deadline_exceeded at that deadline, not
// failed/state_unknown a read timeout later.
func TestRiskyRetrysReadEndsAtThePolicyDeadline(t *testing.T) {
	r := startSleepy(t, sleepyOptions{awake: true, class: devices.Lock, deadline: 8 * time.Second})
	locked := map[string]any{"state": "LOCK", "lock_state": "locked"}
	r.submit(`{"state":"UNLOCK","op_id":"unlock"}`)
	// The reads (the one after the start, the one before attempt 1) are
	// answered: still locked. Then attempt 1 goes out.
	for m := r.next(); m.verb != "set"; m = r.next() {
		r.report(locked)
	}
	r.advance(1, 5*time.Second) // attempt 1 unconfirmed; the retry's backoff (up to 1 s) begins
	r.advance(1, time.Second)   // the backoff passes
	if m := r.next(); m.verb != "get" {
		t.Fatalf("then: a %s; want the read before attempt 2", m.verb)
	}
	r.advance(1, 3*time.Second) // no answer; the policy's deadline (+8 s) passes, the read's own timeout (5 s) not yet
	res := r.await("unlock's end", func(res devices.Result) bool { return res.OpID == "unlock" && res.Status.Terminal() })
	if res.Status != devices.Failed || res.Reason != devices.ReasonDeadlineExceeded || res.Attempts != 1 {
		t.Errorf("unlock: %s/%s after %d attempts (%s); want failed/deadline_exceeded after 1", res.Status, res.Reason, res.Attempts, res.Detail)
	}
}
