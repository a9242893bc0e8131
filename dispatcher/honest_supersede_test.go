package dispatcher

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/machine"
	"github.com/hearthd/hearth/retry"
)

// Issue 15, item 8: a superseded command says whether a set of it went
// out first, in its result, its dead letter and its audit entry, so that
// "never sent" and "sent, then replaced" read differently.

const (
	sentThenReplaced = "superseded by op_id new after 1 attempt was sent"
	neverSent        = "superseded by op_id new before it was sent"
)

func TestSupersededAfterItsSendSaysItWasSent(t *testing.T) {
	r := startSleepy(t, sleepyOptions{})
	r.submit(`{"current_heating_setpoint":22,"op_id":"old"}`)
	r.status("old", devices.Queued)
	r.report(map[string]any{"current_heating_setpoint": 16.0}) // the wake
	if m := r.next(); m.verb != "set" || m.target["current_heating_setpoint"] != 22.0 {
		t.Fatalf("first message to the radiator: %s %v; want the set of 22", m.verb, m.target)
	}
	// old's set is out and waits for its confirming report.
	r.submit(`{"current_heating_setpoint":18,"op_id":"new"}`)
	res := r.await("old's end", func(res devices.Result) bool { return res.OpID == "old" && res.Status.Terminal() })
	if res.Status != devices.Superseded || res.Attempts != 1 || res.Detail != sentThenReplaced {
		t.Errorf("old: %s, %d attempts, %q; want superseded, 1 attempt, %q", res.Status, res.Attempts, res.Detail, sentThenReplaced)
	}
	if stored, _, _ := r.journal.Lookup("old"); stored.Detail != sentThenReplaced {
		t.Errorf("old stored with detail %q; want %q", stored.Detail, sentThenReplaced)
	}
	for _, op := range r.dead.list() {
		if op.OpID == "old" {
			t.Errorf("old reached the radiator and is a dead letter: %+v", op)
		}
	}
}

func TestSupersededWhileQueuedSaysItWasNeverSent(t *testing.T) {
	r := startSleepy(t, sleepyOptions{})
	r.submit(`{"current_heating_setpoint":22,"op_id":"old"}`)
	r.status("old", devices.Queued) // asleep: nothing sent
	r.submit(`{"current_heating_setpoint":18,"op_id":"new"}`)
	res := r.await("old's end", func(res devices.Result) bool { return res.OpID == "old" && res.Status.Terminal() })
	if res.Status != devices.Superseded || res.Attempts != 0 || res.Detail != neverSent {
		t.Errorf("old: %s, %d attempts, %q; want superseded, 0 attempts, %q", res.Status, res.Attempts, res.Detail, neverSent)
	}
	var filed []devices.Op
	for _, op := range r.dead.list() {
		if op.OpID == "old" {
			filed = append(filed, op)
		}
	}
	if len(filed) != 1 || filed[0].Detail != neverSent || filed[0].Attempts != 0 {
		t.Errorf("old's dead letters: %+v; want one, 0 attempts, detail %q", filed, neverSent)
	}
}

// A command resumed after a restart with an attempt recorded, and
// superseded before Hearth sent it again, cannot say that attempt went out:
// the crash may have come between the record and the send.
func TestSupersededResumedAttemptSaysItsDeliveryIsUnknown(t *testing.T) {
	r := startSleepy(t, sleepyOptions{awake: true})
	q := r.d.devices["radiator"]
	q.mu.Lock()
	q.m.Accept(devices.Op{OpID: "old", Device: "radiator", Target: devices.Target{"current_heating_setpoint": 21.0},
		Status: devices.Accepted, Attempts: 1}, machine.Resumed)
	q.mu.Unlock()

	ended := q.supersede(devices.Op{OpID: "new", Device: "radiator", Target: devices.Target{"current_heating_setpoint": 18.0}}, r.clock.Now())
	want := "superseded by op_id new after 1 attempt, the last recorded before a restart (its delivery unknown)"
	if len(ended) != 1 || ended[0].Detail != want || ended[0].Attempts != 1 {
		t.Fatalf("supersede ended %+v; want old with 1 attempt and detail %q", ended, want)
	}
}

type honestAudit struct {
	mu      sync.Mutex
	entries []devices.AuditEntry
}

func (a *honestAudit) AppendAudit(entries ...devices.AuditEntry) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.entries = append(a.entries, entries...)
	return nil
}

func (a *honestAudit) ended(opID string) (devices.AuditEntry, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, e := range a.entries {
		if e.OpID == opID && e.Event == devices.AuditEnded {
			return e, true
		}
	}
	return devices.AuditEntry{}, false
}

// The audit trail of a lock tells the two apart too: lock-1 is superseded
// while its set waits for the confirming report, lock-2 while the fresh
// read before its first send waits for the lock's answer.
func TestSupersededLockAuditSaysWhetherItWasSent(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC))
	bridge := &scriptedBridge{clock: clock, msgs: make(chan bridgeMsg, 64)}
	audit := &honestAudit{}
	results := make(chan devices.Result, 64)
	d, err := New(Options{
		Services: []Service{{
			Name: "zw", Bridge: bridge,
			Policy: retry.Policy{MaxAttempts: 2, AttemptTimeout: 5 * time.Second, Backoff: retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 10 * time.Second}},
		}},
		Devices:   []Device{{Device: devices.Device{ID: "door", Service: "zw", Class: devices.Lock}, TTL: time.Hour}},
		Journal:   &memJournal{ops: map[string]devices.Op{}},
		Publisher: nopPublisher{},
		Audit:     audit,
		Clock:     clock,
		OnResult:  func(res devices.Result) { results <- res },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	d.BridgeState("zw", true, false)

	next := func(verb string) {
		t.Helper()
		select {
		case m := <-bridge.msgs:
			if m.verb != verb {
				t.Fatalf("a %s %v reached the lock; want a %s", m.verb, m.target, verb)
			}
		case <-time.After(rigWait):
			t.Fatalf("timed out waiting for a %s", verb)
		}
	}
	submit := func(opID string) {
		t.Helper()
		if err := d.Submit(context.Background(), Request{Device: "door", Payload: []byte(`{"state":"LOCK","op_id":"` + opID + `"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	ended := func(opID string) devices.Result {
		t.Helper()
		deadline := time.After(rigWait)
		for {
			select {
			case res := <-results:
				if res.OpID == opID && res.Status.Terminal() {
					return res
				}
			case <-deadline:
				t.Fatalf("timed out waiting for %s's end", opID)
			}
		}
	}
	check := func(opID, by string, attempts int, detail string) {
		t.Helper()
		want := "superseded by op_id " + by + detail
		if res := ended(opID); res.Status != devices.Superseded || res.Attempts != attempts || res.Detail != want {
			t.Errorf("%s: %s, %d attempts, %q; want superseded, %d, %q", opID, res.Status, res.Attempts, res.Detail, attempts, want)
		}
		e, ok := audit.ended(opID)
		if !ok || e.Status != devices.Superseded || e.Attempt != attempts || e.Detail != want {
			t.Errorf("%s's audit entry: %+v (found %v); want superseded, attempt %d, %q", opID, e, ok, attempts, want)
		}
	}

	next("get") // the fresh read after the start (freshread.go)
	submit("lock-1")
	next("get") // the fresh read before the first send
	d.Report("door", map[string]any{"state": "UNLOCK", "lock_state": "unlocked"}, false)
	next("set") // lock-1 is out, waiting for its confirmation
	submit("lock-2")
	check("lock-1", "lock-2", 1, " after 1 attempt was sent")

	next("get") // lock-2's fresh read: nothing of it is sent yet
	submit("lock-3")
	check("lock-2", "lock-3", 0, " before it was sent")
}
