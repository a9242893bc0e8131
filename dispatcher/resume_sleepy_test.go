package dispatcher

import (
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// startResumedSleepy starts the rig's sleepy radiator as after a kill -9
// with one command (op_id "r", setpoint 22) whose first attempt went out
// at the device's last wake, an hour before, and was never confirmed.
func startResumedSleepy(t *testing.T) *sleepyRig {
	t.Helper()
	var sentAt time.Time
	return startSleepy(t, sleepyOptions{journal: func(j *memJournal) Journal {
		now := time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC) // the rig's clock
		sentAt = now.Add(-time.Hour)
		op := devices.Op{
			OpID: "r", Device: "radiator", Target: devices.Target{"current_heating_setpoint": 22.0},
			Seq: 1, AcceptedAt: sentAt, Deadline: now.Add(time.Hour),
			Status: devices.Accepted, Attempts: 1, LastSentAt: sentAt, UpdatedAt: sentAt,
		}
		j.ops[op.OpID] = op
		return &resumeJournal{memJournal: j, pending: []devices.Op{op}}
	}})
}

// A sleepy device's command resumed after a restart with an attempt in
// flight is not sent again at the next wake when the device wakes
// reporting the target: the attempt before the restart reached it. It
// ends succeeded after 1 attempt, and nothing is charged to the device.
func TestResumedSleepyAttemptConfirmedAtTheWakeIsNotResent(t *testing.T) {
	r := startResumedSleepy(t)
	r.waiting() // the resumed command waits for the wake
	r.none("while the radiator sleeps")
	r.report(map[string]any{"current_heating_setpoint": 22.0}) // the wake
	res := r.status("r", devices.Succeeded)
	if res.Attempts != 1 {
		t.Errorf("r succeeded after %d attempts; want 1, the one before the restart", res.Attempts)
	}
	r.none("after the wake that showed the target")
}

// A sleepy device that wakes reporting another state gets the resumed
// command's set at that wake: the attempt before the restart did not
// act.
func TestResumedSleepyAttemptNotAtTheTargetIsSentAtTheWake(t *testing.T) {
	r := startResumedSleepy(t)
	r.waiting()
	r.report(map[string]any{"current_heating_setpoint": 16.0}) // the wake
	m := r.next()
	if m.verb != "set" || m.target["current_heating_setpoint"] != 22.0 {
		t.Fatalf("got a %s %v; want the set of 22 sent at the wake", m.verb, m.target)
	}
	r.report(map[string]any{"current_heating_setpoint": 22.0})
	if res := r.status("r", devices.Succeeded); res.Attempts != 2 {
		t.Errorf("r succeeded after %d attempts; want 2", res.Attempts)
	}
}
