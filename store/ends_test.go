package store

import (
	"slices"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

func endedOp(id string, status devices.Status, at time.Time) devices.Op {
	return devices.Op{OpID: id, Device: "lamp", Status: status, AcceptedAt: at, UpdatedAt: at}
}

func opIDs(ops []devices.Op) []string {
	var ids []string
	for _, op := range ops {
		ids = append(ids, op.OpID)
	}
	return ids
}

// LastEnded returns the ops stored terminal within the window before the
// last end, in the order they ended, whatever their Seq; ops ended long
// before, ops still pending and a second terminal save change nothing.
func TestLastEndedReturnsTheEndsWithinTheWindowOfTheLastEnd(t *testing.T) {
	s := openStore(t, "", hooks{})
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.Save(endedOp("old", devices.Succeeded, t0.Add(-time.Hour))))
	must(s.Save(endedOp("b", devices.Accepted, t0))) // Seq before a's
	must(s.Save(endedOp("a", devices.Failed, t0.Add(time.Second))))
	must(s.Save(endedOp("pending", devices.Accepted, t0)))
	must(s.Save(endedOp("b", devices.Succeeded, t0.Add(2*time.Second))))
	must(s.Save(endedOp("a", devices.Succeeded, t0.Add(3*time.Second)))) // ignored: a ended
	got, err := s.LastEnded(5*time.Minute, 100)
	must(err)
	if want := []string{"a", "b"}; !slices.Equal(opIDs(got), want) {
		t.Fatalf("LastEnded = %v; want %v", opIDs(got), want)
	}
	if got[0].Status != devices.Failed {
		t.Fatalf("a's status %s; want failed (its first terminal save)", got[0].Status)
	}
	got, err = s.LastEnded(5*time.Minute, 1)
	must(err)
	if want := []string{"b"}; !slices.Equal(opIDs(got), want) {
		t.Fatalf("LastEnded limit 1 = %v; want %v", opIDs(got), want)
	}
	got, err = s.LastEnded(2*time.Hour, 100)
	must(err)
	if want := []string{"old", "a", "b"}; !slices.Equal(opIDs(got), want) {
		t.Fatalf("LastEnded 2h = %v; want %v", opIDs(got), want)
	}
}

// Pruning an op removes it from the index of ends too; the ends after it
// stay.
func TestPruneTerminalRemovesPrunedOpsFromTheEnds(t *testing.T) {
	s := openStore(t, "", hooks{})
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	if err := s.Save(endedOp("old", devices.Succeeded, t0.Add(-time.Hour)), endedOp("new", devices.Succeeded, t0)); err != nil {
		t.Fatal(err)
	}
	if n, err := s.PruneTerminal(t0.Add(-time.Minute)); err != nil || n != 1 {
		t.Fatalf("PruneTerminal = %d, %v; want 1, nil", n, err)
	}
	var entries int
	if err := s.view(func(b buckets) error { entries = b.ends.Stats().KeyN; return nil }); err != nil {
		t.Fatal(err)
	}
	got, err := s.LastEnded(2*time.Hour, 100)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"new"}; !slices.Equal(opIDs(got), want) || entries != 1 {
		t.Fatalf("after prune: LastEnded = %v, %d entries; want %v, 1", opIDs(got), entries, want)
	}
}
