package dispatcher

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// What metrics hear of a sleepy device's commands: Load counts the
// command waiting for the wake as pending and sleepy; OnEnd hears each
// command once as it ends (the older superseded, never sent; the newer
// succeeded after one attempt, confirmed at its send; a rejection) and
// never a repeat of an op_id answered from the journal; OnAttempt hears
// the one send, attempt 1.
func TestLoadAndEndsOfASleepyDevicesCommands(t *testing.T) {
	var mu sync.Mutex
	var ends []End
	var attempts []Attempt
	r := startSleepy(t, sleepyOptions{
		onEnd:     func(e End) { mu.Lock(); ends = append(ends, e); mu.Unlock() },
		onAttempt: func(a Attempt) { mu.Lock(); attempts = append(attempts, a); mu.Unlock() },
	})
	load := func() ServiceLoad {
		t.Helper()
		l := r.d.Load()
		if len(l) != 1 || l[0].Service != "zw" || l[0].Notify || !math.IsInf(l[0].RetryTokens, 1) {
			t.Fatalf("Load = %+v; want service zw alone, commands, no budget (+Inf tokens)", l)
		}
		l[0].RetryTokens = 0
		return l[0]
	}
	if got := load(); got != (ServiceLoad{Service: "zw"}) {
		t.Errorf("Load before any command = %+v; want nothing pending", got)
	}

	r.submit(`{"occupied_heating_setpoint":21,"current_heating_setpoint":21,"op_id":"A"}`)
	r.status("A", devices.Queued)
	if got, want := load(), (ServiceLoad{Service: "zw", Pending: 1, Sleepy: 1}); got != want {
		t.Errorf("Load with A waiting for the wake = %+v; want %+v", got, want)
	}
	r.submit(`{"current_heating_setpoint":18,"op_id":"B"}`)
	r.await("A's end", func(res devices.Result) bool { return res.OpID == "A" && res.Status.Terminal() })
	if got, want := load(), (ServiceLoad{Service: "zw", Pending: 1, Sleepy: 1}); got != want {
		t.Errorf("Load with B in A's place = %+v; want %+v", got, want)
	}

	r.d.NodeStatus("radiator", devices.NodeAwake, false) // the wake
	if m := r.next(); m.verb != "set" {
		t.Fatalf("at the wake: a %s; want B's set", m.verb)
	}
	r.report(map[string]any{"current_heating_setpoint": 18.0})
	r.status("B", devices.Succeeded)
	// A repeat of B's op_id, and a command the device cannot take.
	r.submit(`{"current_heating_setpoint":18,"op_id":"B"}`)
	r.status("B", devices.Succeeded)
	if err := r.d.Submit(context.Background(), Request{Device: "radiator", Payload: []byte(`{"state":"TOGGLE","op_id":"C"}`)}); err != nil {
		t.Fatal(err)
	}
	r.status("C", devices.Rejected)
	if got := load(); got != (ServiceLoad{Service: "zw"}) {
		t.Errorf("Load after B's end = %+v; want nothing pending", got)
	}

	mu.Lock()
	defer mu.Unlock()
	at := r.clock.Now() // the clock never moved
	type end struct {
		id       string
		status   devices.Status
		reason   devices.Reason
		attempts int
		accepted bool
		sent     time.Time
		service  string
	}
	var got []end
	for _, e := range ends {
		got = append(got, end{e.Op.OpID, e.Op.Status, e.Op.Reason, e.Op.Attempts, !e.Op.AcceptedAt.IsZero(), e.Op.LastSentAt, e.Device.Service})
		if e.SafetyAlert {
			t.Errorf("%s: a safety alert for a radiator", e.Op.OpID)
		}
	}
	want := []end{
		{"A", devices.Superseded, devices.ReasonNewerCommand, 0, true, time.Time{}, "zw"},
		{"B", devices.Succeeded, "", 1, true, at, "zw"},
		{"C", devices.Rejected, devices.ReasonRelativeCommand, 0, false, time.Time{}, "zw"},
	}
	if len(got) != len(want) {
		t.Fatalf("OnEnd heard %+v; want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("end %d: %+v; want %+v", i, got[i], want[i])
		}
	}
	if len(attempts) != 1 || attempts[0].Number != 1 || attempts[0].Resend || attempts[0].Err != nil || !attempts[0].At.Equal(at) || attempts[0].Device.ID != "radiator" {
		t.Errorf("OnAttempt heard %+v; want attempt 1 to the radiator, sent at %s", attempts, at)
	}
}
