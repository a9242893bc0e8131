package main

import (
	"reflect"
	"testing"
	"time"

	"github.com/hearthd/hearth/api"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/store"
)

// The store is the dispatcher's dead-letter store, and the adapter the
// API's source.
var (
	_ dispatcher.DeadLetters     = (*store.Store)(nil)
	_ dispatcher.DeadLetterSaver = (*store.Store)(nil) // a command's end and its dead letter in one commit
	_ api.DeadLetterSource       = deadLetterSource{}
)

// deadLetterOpIDs GETs /api/v1/deadletters from h's hearthd and returns
// the op_ids of the dead letters.
func deadLetterOpIDs(t *testing.T, h *harness) []string {
	t.Helper()
	var page api.DeadLetterPage
	getPage(t, h, "/api/v1/deadletters", &page)
	ids := []string{}
	for _, d := range page.DeadLetters {
		ids = append(ids, d.OpID)
	}
	return ids
}

// hearthd serves its store's dead letters and deletes those that ended
// more than deadLetterRetention ago at its next start (and hourly).
func TestDeadLettersAreServedAndPrunedAfterRetention(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, harnessOptions{dataDir: dir})
	ended := func(id string, at time.Time) devices.Op {
		return devices.Op{OpID: id, Device: "hall_light", Target: devices.Target{"state": "ON"}, AcceptedAt: at.Add(-time.Minute),
			Deadline: at, Status: devices.Expired, Reason: devices.ReasonTTLElapsed, UpdatedAt: at}
	}
	if err := h.d.store.AddDeadLetters(ended("old", t0), ended("newer", t0.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	if got, want := deadLetterOpIDs(t, h), []string{"old", "newer"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("dead letters %v, want %v", got, want)
	}
	clock := h.clock
	h.stop()

	clock.Advance(deadLetterRetention + 30*time.Minute) // "old" is past retention, "newer" is not
	h2 := newHarness(t, harnessOptions{dataDir: dir, clock: clock})
	if got, want := deadLetterOpIDs(t, h2), []string{"newer"}; !reflect.DeepEqual(got, want) {
		t.Errorf("dead letters after retention %v, want %v", got, want)
	}
}
