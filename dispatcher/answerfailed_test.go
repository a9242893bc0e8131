package dispatcher

import (
	"errors"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// permanentErr is a device's answer that no resend can change.
type permanentErr struct{}

func (permanentErr) Error() string   { return "-103 invalid argument" }
func (permanentErr) Permanent() bool { return true }

// A device's error answer matched to the set by its request id
// (AnswerFailed) ends the attempt waiting, whichever it is: during attempt
// 2 a permanent one ends the command failed/permanent_error at once, with
// no third attempt.
func TestAnswerFailedEndsALaterAttempt(t *testing.T) {
	r := startSleepy(t, sleepyOptions{awake: true})
	firstSet(r)
	r.d.AnswerFailed("radiator", errors.New("-114 unavailable"))
	r.eventually("attempt 1 to stop waiting for its confirmation", r.unwatched)
	r.advance(1, time.Second)
	r.advance(1, time.Second)
	if m := r.next(); m.verb != "set" {
		t.Fatalf("after the transient answer: a %s; want attempt 2's set", m.verb)
	}
	r.d.AnswerFailed("radiator", permanentErr{})
	res := r.await("warm's end", func(res devices.Result) bool { return res.OpID == "warm" && res.Status.Terminal() })
	if res.Status != devices.Failed || res.Reason != devices.ReasonPermanentError || res.Attempts != 2 {
		t.Fatalf("warm: %s/%s after %d attempts (%s); want failed/permanent_error after 2", res.Status, res.Reason, res.Attempts, res.Detail)
	}
}

// A risky action's attempt (an unlock) takes the device's error answer
// too: it names its request, so it cannot be an earlier command's.
func TestAnswerFailedEndsARiskyAttempt(t *testing.T) {
	r := startSleepy(t, sleepyOptions{awake: true, class: devices.Lock})
	r.submit(`{"op_id":"open","state":"UNLOCK"}`)
	for {
		m := r.next()
		if m.verb == "set" {
			break
		}
		r.report(map[string]any{"state": "LOCK", "lock_state": "locked"}) // the fresh read's answer
	}
	r.d.AnswerFailed("radiator", permanentErr{})
	res := r.await("open's end", func(res devices.Result) bool { return res.OpID == "open" && res.Status.Terminal() })
	if res.Status != devices.Failed || res.Reason != devices.ReasonPermanentError || res.Attempts != 1 {
		t.Fatalf("open: %s/%s after %d attempts (%s); want failed/permanent_error after 1", res.Status, res.Reason, res.Attempts, res.Detail)
	}
}
