package dispatcher

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/hearthd/hearth/devices"
)

// savesJournal records every op saved, in order.
type savesJournal struct {
	Journal
	mu    sync.Mutex
	saves []devices.Op
}

func (j *savesJournal) Save(ops ...devices.Op) error {
	j.mu.Lock()
	j.saves = append(j.saves, ops...)
	j.mu.Unlock()
	return j.Journal.Save(ops...)
}

// of returns op opID's saves as "status/attempts", in order.
func (j *savesJournal) of(opID string) []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	for _, op := range j.saves {
		if op.OpID == opID {
			out = append(out, fmt.Sprintf("%s/%d", op.Status, op.Attempts))
		}
	}
	return out
}

// A command to an idle device that listens, whose first send goes out at
// once, has that attempt stored in the commit that accepts it: two commits
// (accept with its attempt, end) instead of three. The published accepted
// result still says 0 attempts. A command that arrives while the device
// is busy is accepted with 0 attempts and its attempt stored before its
// own send, as before.
func TestFirstAttemptOfAnIdleDeviceIsStoredWithTheAccept(t *testing.T) {
	j := &savesJournal{}
	r := startSleepy(t, sleepyOptions{awake: true, journal: func(mem *memJournal) Journal { j.Journal = mem; return j }})

	r.submit(`{"current_heating_setpoint":20,"op_id":"idle"}`)
	if res := r.status("idle", devices.Accepted); res.Attempts != 0 {
		t.Errorf("idle: accepted with %d attempts; want 0 in the result", res.Attempts)
	}
	if m := r.next(); m.verb != "set" {
		t.Fatalf("idle: a %s reached the bridge; want its set", m.verb)
	}
	// While idle's attempt waits for its confirmation, busy arrives.
	r.submit(`{"occupied_heating_setpoint":18,"op_id":"busy"}`)
	r.status("busy", devices.Accepted)
	r.report(map[string]any{"current_heating_setpoint": 20.0})
	r.status("idle", devices.Succeeded)
	if m := r.next(); m.verb != "set" {
		t.Fatalf("busy: a %s reached the bridge; want its set", m.verb)
	}
	r.report(map[string]any{"current_heating_setpoint": 20.0, "occupied_heating_setpoint": 18.0})
	r.status("busy", devices.Succeeded)

	if got, want := j.of("idle"), []string{"accepted/1", "succeeded/1"}; !slices.Equal(got, want) {
		t.Errorf("idle's saves %v; want %v: its first attempt stored with its acceptance", got, want)
	}
	if got, want := j.of("busy"), []string{"accepted/0", "accepted/1", "succeeded/1"}; !slices.Equal(got, want) {
		t.Errorf("busy's saves %v; want %v: accepted while the device was busy, its attempt stored before its send", got, want)
	}
}

// A sleepy device's command waits for a wake: its acceptance stores no
// attempt.
func TestFirstAttemptOfASleepyDeviceIsNotStoredWithTheAccept(t *testing.T) {
	j := &savesJournal{}
	r := startSleepy(t, sleepyOptions{journal: func(mem *memJournal) Journal { j.Journal = mem; return j }})
	r.submit(`{"current_heating_setpoint":20,"op_id":"s"}`)
	r.status("s", devices.Accepted)
	r.status("s", devices.Queued)
	if got, want := j.of("s"), []string{"accepted/0"}; !slices.Equal(got, want) {
		t.Errorf("s's saves %v; want %v", got, want)
	}
}
