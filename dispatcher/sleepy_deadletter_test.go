package dispatcher

import (
	"testing"

	"github.com/hearthd/hearth/devices"
)

// A command superseded after its attempt was counted but before it was
// sent is filed in the dead-letter store, and never reaches the device.
//
// DEADLETTERS.md: a command "superseded" — "a newer command for the same
// attributes of a sleeping device replaced it before it was sent" — goes
// to the dead-letter store. deliverAwake counts the attempt (Attempts++)
// and stores it (a synced write) before send; a newer command that
// supersedes the old one in that window ends it with Attempts 1, and send
// then sees it ended and sends nothing. The fault this pins:
// deadLetterIntake skipped it because Attempts is not 0, so a command that never reached the device is
// superseded, stored with one attempt, and never filed as a dead letter.
func TestSupersededBeforeItsSendIsADeadLetter(t *testing.T) {
	r := startSleepy(t, sleepyOptions{})
	entered, release := r.holdFirstAttempt("old")

	r.submit(`{"current_heating_setpoint":22,"op_id":"old"}`)
	r.status("old", devices.Accepted)
	r.status("old", devices.Queued)
	r.report(map[string]any{"current_heating_setpoint": 16.0}) // the wake
	waitClosed(t, entered, "the attempt of old to be stored")
	r.submit(`{"current_heating_setpoint":18,"op_id":"new"}`)
	if res := r.await("old's end", func(res devices.Result) bool { return res.OpID == "old" && res.Status.Terminal() }); res.Status != devices.Superseded {
		t.Fatalf("old: %s/%s; want superseded", res.Status, res.Reason)
	}
	close(release)
	// The first thing the radiator receives is the newer setpoint: old
	// never reached it.
	if m := r.next(); m.verb != "set" || m.target["current_heating_setpoint"] != 18.0 {
		t.Fatalf("first message to the radiator: %s %v; want the set of 18", m.verb, m.target)
	}
	stored, _, _ := r.journal.Lookup("old")
	var filed bool
	for _, op := range r.dead.list() {
		if op.OpID == "old" {
			filed = true
		}
	}
	if !filed {
		t.Errorf("old was superseded before it was ever sent (stored with %d attempts) and is not in the dead-letter store: %d dead letters", stored.Attempts, len(r.dead.list()))
	}
}
