package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/store"
)

// Results at least once, across crashes: hearthd killed right after the
// store committed terminal results and before the outbox published them
// (here: the results are committed into the store while hearthd is down,
// as that commit would have left them). After the restart every one
// reaches the automation, still subscribed on the external broker, in the
// order the commands ended; a result published before the restart may
// come again, the same op_id, status and at; a command that ended long
// before the restart (more than dispatcher.RepublishWindow before the
// last end) is not republished.
func TestResultsStoredButNotPublishedArePublishedAfterTheRestart(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	ended := func(id string, status devices.Status, reason devices.Reason, at time.Time) devices.Op {
		return devices.Op{OpID: id, Device: "hall_light", Target: devices.Target{"state": "OFF"},
			AcceptedAt: at.Add(-time.Second), Deadline: at.Add(time.Minute), Status: status, Reason: reason,
			Attempts: 1, UpdatedAt: at}
	}
	// A command that ended an hour before the others.
	ancient := ended("ancient", devices.Succeeded, "", t0.Add(-time.Hour))
	saveEnded(t, dir, ancient)

	h := newHarness(t, harnessOptions{dataDir: dir, brokerURL: b.URL()})
	h.publish("hall_light", `{"state":"ON","op_id":"live"}`)
	live := h.final("live")
	if live.Status != devices.Succeeded {
		t.Fatalf("live: %s/%s; want succeeded", live.Status, live.Reason)
	}
	clock := h.clock
	h.stopHearth()

	// What the kill left: results committed, never published.
	now := clock.Now()
	var unpublished []devices.Op
	for i := range 6 {
		status, reason := devices.Succeeded, devices.Reason("")
		if i%3 == 2 {
			status, reason = devices.Failed, devices.ReasonTimeout
		}
		op := ended(fmt.Sprintf("unpublished-%d", i), status, reason, now.Add(time.Duration(i)*time.Millisecond))
		unpublished = append(unpublished, op)
	}
	saveEnded(t, dir, unpublished...)

	clock.Advance(time.Hour) // the outage's length does not matter
	h2 := newHarness(t, harnessOptions{dataDir: dir, clock: clock, brokerURL: b.URL(), automation: h})
	dup := h2.result("live")
	if dup.Status != live.Status || !dup.At.Equal(live.At) {
		t.Errorf("live again: %s at %s; want the same result, %s at %s", dup.Status, dup.At, live.Status, live.At)
	}
	for _, op := range unpublished {
		r := h2.result(op.OpID)
		if r.Status != op.Status || r.Reason != op.Reason || !r.At.Equal(op.UpdatedAt) || r.Attempts != 1 {
			t.Errorf("%s after the restart: %s/%s after %d at %s; want %s/%s after 1 at %s",
				op.OpID, r.Status, r.Reason, r.Attempts, r.At, op.Status, op.Reason, op.UpdatedAt)
		}
	}
	// One device, one lane of the outbox: had "ancient" been republished,
	// it would have come before every other.
	for _, r := range h2.backlog {
		if r.OpID == ancient.OpID {
			t.Errorf("ancient, ended %s before the last end, was republished", time.Hour)
		}
	}
	if dispatcher.RepublishWindow >= time.Hour {
		t.Fatalf("RepublishWindow %s: the test's ancient op is within it", dispatcher.RepublishWindow)
	}
}

// saveEnded commits ops into the store in dir while hearthd is not
// running, as hearthd's own commit would have.
func saveEnded(t *testing.T, dir string, ops ...devices.Op) {
	t.Helper()
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ops...); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
