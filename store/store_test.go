package store

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.uber.org/goleak"

	"github.com/hearthd/hearth/devices"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// openStore opens a store in dir (a fresh temp dir when dir is "") and
// closes it when the test ends.
func openStore(t testing.TB, dir string, h hooks) *Store {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	s, err := open(dir, Options{}, h)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var (
	zone = time.FixedZone("CET", 3600)
	t0   = time.Date(2026, 11, 29, 19, 0, 0, 123456789, zone)
)

// newOp returns a pending op with every field set.
func newOp(id string) devices.Op {
	return devices.Op{
		OpID:       id,
		Device:     "hall_light",
		Target:     devices.Target{"state": "ON", "brightness": float64(128), "transition": 1.5},
		AcceptedAt: t0,
		IssuedAt:   t0.Add(-time.Second),
		Deadline:   t0.Add(30 * time.Second),
		Status:     devices.Accepted,
		UpdatedAt:  t0,
	}
}

// waitFor receives from ch or fails the test after a deadline.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		panic("unreachable")
	}
}

func assertSameOp(t *testing.T, got, want devices.Op) {
	t.Helper()
	times := []struct {
		name      string
		got, want time.Time
	}{
		{"AcceptedAt", got.AcceptedAt, want.AcceptedAt},
		{"IssuedAt", got.IssuedAt, want.IssuedAt},
		{"Deadline", got.Deadline, want.Deadline},
		{"LastSentAt", got.LastSentAt, want.LastSentAt},
		{"UpdatedAt", got.UpdatedAt, want.UpdatedAt},
	}
	for _, tt := range times {
		if !tt.got.Equal(tt.want) {
			t.Errorf("op %s: %s = %v, want %v", want.OpID, tt.name, tt.got, tt.want)
		}
	}
	got.AcceptedAt, got.IssuedAt, got.Deadline, got.LastSentAt, got.UpdatedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}
	want.AcceptedAt, want.IssuedAt, want.Deadline, want.LastSentAt, want.UpdatedAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("op %s:\n got %+v\nwant %+v", want.OpID, got, want)
	}
}

func TestSaveLookupRoundTripsEveryField(t *testing.T) {
	s := openStore(t, "", hooks{})
	op := devices.Op{
		OpID:       "01JDQ5ZK3Y-lock",
		Device:     "front_door",
		Target:     devices.Target{"state": "LOCK"},
		Seq:        999, // ignored: the store assigns Seq
		AcceptedAt: t0,
		IssuedAt:   t0.Add(-1500 * time.Millisecond),
		Deadline:   t0.Add(time.Minute),
		Status:     devices.Failed,
		Reason:     devices.ReasonTimeout,
		Detail:     "no lock_state report after 3 attempts",
		Attempts:   3,
		LastSentAt: t0.Add(20 * time.Second).UTC(),
		State:      map[string]any{"state": "UNLOCK", "lock_state": "not_fully_locked", "battery": float64(87)},
		UpdatedAt:  t0.Add(50 * time.Second),
	}
	if err := s.Save(op); err != nil {
		t.Fatalf("Save: %v", err)
	}
	got, ok, err := s.Lookup(op.OpID)
	if err != nil || !ok {
		t.Fatalf("Lookup = _, %v, %v; want found", ok, err)
	}
	want := op
	want.Seq = 1
	assertSameOp(t, got, want)

	if _, ok, err := s.Lookup("no-such-op"); ok || err != nil {
		t.Errorf("Lookup(no-such-op) = _, %v, %v; want false, nil", ok, err)
	}
}

func TestSeqIsAssignedOnFirstSaveAndKept(t *testing.T) {
	s := openStore(t, "", hooks{})
	if err := s.Save(newOp("a"), newOp("b")); err != nil {
		t.Fatal(err)
	}
	update := newOp("a")
	update.Seq = 77
	update.Status = devices.Queued
	update.Attempts = 1
	if err := s.Save(update); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(newOp("c")); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]uint64{"a": 1, "b": 2, "c": 3} {
		op, _, err := s.Lookup(id)
		if err != nil {
			t.Fatal(err)
		}
		if op.Seq != want {
			t.Errorf("op %s: Seq = %d, want %d", id, op.Seq, want)
		}
	}
	a, _, _ := s.Lookup("a")
	if a.Status != devices.Queued || a.Attempts != 1 {
		t.Errorf("op a after update: Status %s, Attempts %d; want queued, 1", a.Status, a.Attempts)
	}
}

func TestSameOpIDTwiceInOneSaveKeepsOneSeq(t *testing.T) {
	s := openStore(t, "", hooks{})
	done := newOp("x")
	done.Status = devices.Succeeded
	if err := s.Save(newOp("x"), done); err != nil {
		t.Fatal(err)
	}
	op, _, _ := s.Lookup("x")
	if op.Seq != 1 || op.Status != devices.Succeeded {
		t.Errorf("Lookup(x) = Seq %d, Status %s; want 1, succeeded", op.Seq, op.Status)
	}
	if p, _ := s.Pending(); len(p) != 0 {
		t.Errorf("Pending() = %d ops, want 0", len(p))
	}
}

func pendingIDs(t *testing.T, s *Store) []string {
	t.Helper()
	ops, err := s.Pending()
	if err != nil {
		t.Fatalf("Pending: %v", err)
	}
	ids := make([]string, len(ops))
	for i, op := range ops {
		ids[i] = op.OpID
	}
	return ids
}

func TestPendingIsInSeqOrderAndTerminalOpsLeaveIt(t *testing.T) {
	s := openStore(t, "", hooks{})
	// Saved in an order unlike the ids' byte order, to tell Seq order apart.
	for _, id := range []string{"zeta", "alpha", "mid", "beta"} {
		if err := s.Save(newOp(id)); err != nil {
			t.Fatal(err)
		}
	}
	rejected := newOp("born-terminal")
	rejected.Status = devices.Rejected
	if err := s.Save(rejected); err != nil {
		t.Fatal(err)
	}
	if got, want := pendingIDs(t, s), []string{"zeta", "alpha", "mid", "beta"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("Pending = %v, want %v", got, want)
	}

	queued := newOp("mid")
	queued.Status = devices.Queued
	succeeded := newOp("alpha")
	succeeded.Status = devices.Succeeded
	expired := newOp("beta")
	expired.Status = devices.Expired
	if err := s.Save(queued, succeeded, expired); err != nil {
		t.Fatal(err)
	}
	if got, want := pendingIDs(t, s), []string{"zeta", "mid"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Pending = %v, want %v", got, want)
	}
	if op, ok, _ := s.Lookup("alpha"); !ok || op.Status != devices.Succeeded {
		t.Errorf("terminal op alpha: found %v, status %s; want kept for dedup", ok, op.Status)
	}
}

func TestStatesRoundTrip(t *testing.T) {
	s := openStore(t, "", hooks{})
	if err := s.SaveState("hall_light", map[string]any{"state": "ON", "brightness": float64(10)}, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveState("front_door", map[string]any{"state": "LOCK", "lock_state": "locked"}, t0); err != nil {
		t.Fatal(err)
	}
	later := t0.Add(time.Minute)
	if err := s.SaveState("hall_light", map[string]any{"state": "OFF"}, later); err != nil {
		t.Fatal(err)
	}
	got, err := s.States()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]DeviceState{
		"hall_light": {State: map[string]any{"state": "OFF"}, At: later},
		"front_door": {State: map[string]any{"state": "LOCK", "lock_state": "locked"}, At: t0},
	}
	assertStates(t, got, want)
}

func assertStates(t *testing.T, got, want map[string]DeviceState) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("States() has %d devices, want %d: %v", len(got), len(want), got)
	}
	for dev, w := range want {
		g, ok := got[dev]
		if !ok {
			t.Errorf("States() lacks %s", dev)
			continue
		}
		if !g.At.Equal(w.At) || !reflect.DeepEqual(g.State, w.State) {
			t.Errorf("States()[%s] = %+v, want %+v", dev, g, w)
		}
	}
}

func TestReopenKeepsOpsPendingAndStates(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := newOp("done")
	done.Status = devices.Succeeded
	done.State = map[string]any{"state": "ON"}
	if err := s.Save(newOp("p1"), done, newOp("p2")); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveState("hall_light", map[string]any{"state": "ON"}, t0); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s = openStore(t, dir, hooks{})
	if got, want := pendingIDs(t, s), []string{"p1", "p2"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Pending after reopen = %v, want %v", got, want)
	}
	got, ok, err := s.Lookup("done")
	if err != nil || !ok {
		t.Fatalf("Lookup(done) after reopen = _, %v, %v", ok, err)
	}
	done.Seq = 2
	assertSameOp(t, got, done)
	states, err := s.States()
	if err != nil {
		t.Fatal(err)
	}
	assertStates(t, states, map[string]DeviceState{"hall_light": {State: map[string]any{"state": "ON"}, At: t0}})

	// The Seq counter survives too.
	if err := s.Save(newOp("p3")); err != nil {
		t.Fatal(err)
	}
	if op, _, _ := s.Lookup("p3"); op.Seq != 4 {
		t.Errorf("first op after reopen: Seq = %d, want 4", op.Seq)
	}
}

func TestSecondOpenOfSameDirFailsWithErrLocked(t *testing.T) {
	dir := t.TempDir()
	first := openStore(t, dir, hooks{})

	start := time.Now()
	second, err := Open(dir, Options{LockTimeout: 50 * time.Millisecond})
	elapsed := time.Since(start)
	if err == nil {
		second.Close()
		t.Fatal("second Open succeeded while the first store is open")
	}
	t.Logf("second Open after %v: %v", elapsed, err)
	if !errors.Is(err, ErrLocked) {
		t.Errorf("errors.Is(err, ErrLocked) = false for %v", err)
	}
	want := fmt.Sprintf("data directory %q is in use by another hearthd (lock on %s held); stop it or use -data-dir", dir, first.Path())
	if err.Error() != want {
		t.Errorf("error = %q\nwant    %q", err, want)
	}
	// The 50 ms timeout was honoured, not the 1 s default.
	if elapsed >= DefaultLockTimeout {
		t.Errorf("second Open took %v, want about 50ms", elapsed)
	}

	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	third, err := Open(dir, Options{LockTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatalf("Open after the first store closed: %v", err)
	}
	third.Close()
}

func TestOpenCorruptFileNamesPath(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	if err := os.WriteFile(path, bytes.Repeat([]byte("not a bbolt file "), 1024), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{})
	if err == nil {
		s.Close()
		t.Fatal("Open of a corrupt file succeeded")
	}
	t.Logf("corrupt file: %v", err)
	if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name %s", err, path)
	}
	if errors.Is(err, ErrLocked) {
		t.Errorf("corrupt file reported as locked: %v", err)
	}
}

func TestOpenCreatesPrivateDataDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "var", "hearth")
	s := openStore(t, dir, hooks{})
	if s.Path() != filepath.Join(dir, "hearth.db") {
		t.Errorf("Path() = %s, want %s", s.Path(), filepath.Join(dir, "hearth.db"))
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		t.Errorf("data directory mode = %v, want 0700 (before umask)", perm)
	}
}

// holdFirstCommit returns hooks that stop the writer before its first
// commit until release is closed, a channel that reports when it is held,
// one that reports queue lengths, and a function returning group sizes.
func holdFirstCommit() (h hooks, held <-chan struct{}, queued <-chan int, release chan struct{}, groups func() []int) {
	heldCh := make(chan struct{})
	queuedCh := make(chan int, 1024)
	release = make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	h = hooks{
		queued: func(n int) { queuedCh <- n },
		beforeCommit: func(group int) {
			mu.Lock()
			sizes = append(sizes, group)
			first := len(sizes) == 1
			mu.Unlock()
			if first {
				close(heldCh)
				<-release
			}
		},
	}
	groups = func() []int {
		mu.Lock()
		defer mu.Unlock()
		return append([]int(nil), sizes...)
	}
	return h, heldCh, queuedCh, release, groups
}

// waitQueued waits until the queue holds n requests.
func waitQueued(t *testing.T, queued <-chan int, n int) {
	t.Helper()
	for waitFor(t, queued, fmt.Sprintf("%d queued saves", n)) != n {
	}
}

func TestGroupCommitMergesCallersWaitingDuringACommit(t *testing.T) {
	const n = 8
	h, held, queued, release, groups := holdFirstCommit()
	s := openStore(t, "", h)

	errs := make(chan error, n)
	go func() { errs <- s.Save(newOp("op-0")) }()
	waitFor(t, held, "the first commit")
	for i := 1; i < n; i++ {
		go func() { errs <- s.Save(newOp(fmt.Sprintf("op-%d", i))) }()
	}
	waitQueued(t, queued, n-1)
	close(release)
	for range n {
		if err := waitFor(t, errs, "Save"); err != nil {
			t.Errorf("Save: %v", err)
		}
	}

	if got := s.commits.Load(); got != 2 {
		t.Errorf("commits = %d, want 2", got)
	}
	if got, want := groups(), []int{1, n - 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("group sizes = %v, want %v", got, want)
	}
	for i := range n {
		if _, ok, err := s.Lookup(fmt.Sprintf("op-%d", i)); !ok || err != nil {
			t.Errorf("op-%d: found %v, err %v", i, ok, err)
		}
	}
	if p := pendingIDs(t, s); len(p) != n {
		t.Errorf("Pending = %v, want %d ops", p, n)
	}
}

func TestLoneSaveCommitsAtOnce(t *testing.T) {
	s := openStore(t, "", hooks{})
	for i := range 3 {
		if err := s.Save(newOp(fmt.Sprintf("op-%d", i))); err != nil {
			t.Fatal(err)
		}
		if got, want := s.commits.Load(), uint64(i+1); got != want {
			t.Errorf("after Save %d: commits = %d, want %d", i, got, want)
		}
	}
}

func TestUnencodableOpFailsOnlyItsCaller(t *testing.T) {
	h, held, queued, release, groups := holdFirstCommit()
	s := openStore(t, "", h)

	bad := newOp("bad")
	bad.State = map[string]any{"temperature": math.NaN()}

	errs := make(chan error, 2)
	go func() { errs <- s.Save(newOp("first")) }()
	waitFor(t, held, "the first commit")
	go func() { errs <- s.Save(newOp("good")) }()
	waitQueued(t, queued, 1)

	// While the writer is held, the bad op fails at once: it never joins
	// the group.
	if err := s.Save(newOp("bad-batch-mate"), bad); err == nil || !strings.Contains(err.Error(), `"bad"`) {
		t.Errorf("Save(bad) = %v, want an encoding error naming op \"bad\"", err)
	}
	if err := s.Save(devices.Op{Status: devices.Accepted}); err == nil {
		t.Error("Save of an op without op_id succeeded")
	}
	if err := s.Save(newOp(strings.Repeat("x", devices.MaxOpIDBytes+1))); err == nil {
		t.Error("Save of an over-long op_id succeeded")
	}
	close(release)
	for range 2 {
		if err := waitFor(t, errs, "Save"); err != nil {
			t.Errorf("Save of a good op: %v", err)
		}
	}
	if got, want := groups(), []int{1, 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("group sizes = %v, want %v", got, want)
	}
	for id, want := range map[string]bool{"first": true, "good": true, "bad": false, "bad-batch-mate": false} {
		if _, ok, _ := s.Lookup(id); ok != want {
			t.Errorf("Lookup(%s) found = %v, want %v", id, ok, want)
		}
	}
}

func TestCloseCommitsQueuedSavesFirst(t *testing.T) {
	const n = 5
	dir := t.TempDir()
	h, held, queued, release, _ := holdFirstCommit()
	closing := make(chan struct{})
	h.closing = func() { close(closing) }
	s, err := open(dir, Options{}, h)
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, n)
	go func() { errs <- s.Save(newOp("op-0")) }()
	waitFor(t, held, "the first commit")
	for i := 1; i < n; i++ {
		go func() { errs <- s.Save(newOp(fmt.Sprintf("op-%d", i))) }()
	}
	waitQueued(t, queued, n-1)

	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	waitFor(t, closing, "Close to refuse new saves")
	select {
	case <-closed:
		t.Fatal("Close returned while a commit was held")
	default:
	}
	if err := s.Save(newOp("late")); !errors.Is(err, ErrClosed) {
		t.Errorf("Save during Close = %v, want ErrClosed", err)
	}
	close(release)
	if err := waitFor(t, closed, "Close"); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for range n {
		if err := waitFor(t, errs, "Save"); err != nil {
			t.Errorf("queued Save: %v", err)
		}
	}

	s = openStore(t, dir, hooks{})
	if p := pendingIDs(t, s); len(p) != n {
		t.Errorf("after reopen Pending = %v, want %d ops", p, n)
	}
}

func TestEveryMethodFailsAfterCloseAndCloseIsIdempotent(t *testing.T) {
	s, err := Open(t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	checks := map[string]error{
		"Save":      s.Save(newOp("a")),
		"Save()":    s.Save(),
		"SaveState": s.SaveState("d", map[string]any{"state": "ON"}, t0),
	}
	_, _, checks["Lookup"] = s.Lookup("a")
	_, checks["Pending"] = s.Pending()
	_, checks["States"] = s.States()
	_, checks["PruneTerminal"] = s.PruneTerminal(t0)
	for name, err := range checks {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

func TestPruneTerminalDeletesOnlyOldTerminalOps(t *testing.T) {
	s := openStore(t, "", hooks{})
	cutoff := t0.Add(time.Hour)
	oldDone := newOp("old-done")
	oldDone.Status = devices.Succeeded
	oldFailed := newOp("old-failed")
	oldFailed.Status = devices.Failed
	newDone := newOp("new-done")
	newDone.Status = devices.Expired
	newDone.UpdatedAt = cutoff // not before the cutoff
	oldPending := newOp("old-pending")
	if err := s.Save(oldDone, oldFailed, newDone, oldPending); err != nil {
		t.Fatal(err)
	}
	n, err := s.PruneTerminal(cutoff)
	if err != nil || n != 2 {
		t.Fatalf("PruneTerminal = %d, %v; want 2, nil", n, err)
	}
	for id, want := range map[string]bool{"old-done": false, "old-failed": false, "new-done": true, "old-pending": true} {
		if _, ok, _ := s.Lookup(id); ok != want {
			t.Errorf("after prune Lookup(%s) found = %v, want %v", id, ok, want)
		}
	}
	if got, want := pendingIDs(t, s), []string{"old-pending"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Pending = %v, want %v", got, want)
	}
	if n, err := s.PruneTerminal(cutoff); n != 0 || err != nil {
		t.Errorf("second PruneTerminal = %d, %v; want 0, nil", n, err)
	}
}

func TestRecordsAreJSONWithSeqFirstAndIndexKeysAreSeqThenOpID(t *testing.T) {
	s := openStore(t, "", hooks{})
	if err := s.Save(newOp("a"), newOp("b")); err != nil {
		t.Fatal(err)
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketOps).Get([]byte("b"))
		if len(v) < frameHeader || v[0] != frameV1 {
			t.Fatalf("record b = %q, want frame v1", v)
		}
		if _, err := unframe(bucketOps, []byte("b"), v); err != nil {
			t.Errorf("record b: %v", err)
		}
		v = v[frameHeader:]
		if !bytes.HasPrefix(v, []byte(`{"seq":2,"op_id":"b",`)) || bytes.Count(v, []byte(`"seq"`)) != 1 {
			t.Errorf("record b = %s, want JSON starting {\"seq\":2,\"op_id\":\"b\", with one seq", v)
		}
		var keys []string
		_ = tx.Bucket(bucketPending).ForEach(func(k, _ []byte) error {
			keys = append(keys, fmt.Sprintf("%x", k))
			return nil
		})
		if want := []string{"000000000000000161", "000000000000000262"}; !reflect.DeepEqual(keys, want) {
			t.Errorf("pending keys = %v, want %v", keys, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestWithSeq(t *testing.T) {
	tests := []struct {
		body string
		seq  uint64
		want string
	}{
		{`{"op_id":"a"}`, 7, `{"seq":7,"op_id":"a"}`},
		{`{}`, 1, `{"seq":1}`},
		{`{"x":1}`, math.MaxUint64, `{"seq":18446744073709551615,"x":1}`},
	}
	for _, tt := range tests {
		if got := string(withSeq([]byte(tt.body), tt.seq)); got != tt.want {
			t.Errorf("withSeq(%s, %d) = %s, want %s", tt.body, tt.seq, got, tt.want)
		}
	}
}

// A late save of an attempt must never reopen a command that already ended:
// the terminal status stays, and the op stays out of the pending index.
func TestTerminalStatusIsFinal(t *testing.T) {
	s := openStore(t, "", hooks{})
	op := newOp("final")
	op.Status = devices.Superseded
	if err := s.Save(op); err != nil {
		t.Fatal(err)
	}
	late := newOp("final")
	late.Status = devices.Accepted
	late.Attempts = 2
	if err := s.Save(late); err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.Lookup("final")
	if err != nil || !ok {
		t.Fatalf("Lookup: %v %v", ok, err)
	}
	if got.Status != devices.Superseded || got.Attempts != 0 {
		t.Errorf("after a late save: status %s attempts %d; want superseded, 0", got.Status, got.Attempts)
	}
	pending, err := s.Pending()
	if err != nil {
		t.Fatal(err)
	}
	if len(pending) != 0 {
		t.Errorf("Pending = %d ops; want 0", len(pending))
	}
}

// OnCommit hears every group commit's result: the error its callers got
// while commits fail, nil again once one succeeds.
func TestOnCommitReportsEachCommitsOutcome(t *testing.T) {
	diskFull := errors.New("write hearth.db: no space left on device")
	var failing atomic.Bool
	var got []error
	s, err := open(t.TempDir(), Options{OnCommit: func(err error) { got = append(got, err) }}, hooks{
		failCommit: func() error {
			if failing.Load() {
				return diskFull
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Save(newOp("before")); err != nil {
		t.Fatal(err)
	}
	failing.Store(true)
	for _, id := range []string{"full-1", "full-2"} {
		if err := s.Save(newOp(id)); !errors.Is(err, diskFull) {
			t.Fatalf("Save(%s) on a full disk: %v; want %v", id, err, diskFull)
		}
	}
	failing.Store(false)
	if err := s.Save(newOp("after")); err != nil {
		t.Fatal(err)
	}
	want := []error{nil, diskFull, diskFull, nil}
	if len(got) != len(want) {
		t.Fatalf("OnCommit heard %v; want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("commit %d: OnCommit(%v); want OnCommit(%v)", i, got[i], want[i])
		}
	}
	if _, found, _ := s.Lookup("full-1"); found {
		t.Error("an op whose commit failed was stored")
	}
}

// OnCommitTime hears how long each group commit took, with OnCommit, a
// commit held in its writer (a slow disk) included in full.
func TestOnCommitTimeMeasuresEachCommit(t *testing.T) {
	var mu sync.Mutex
	var took []time.Duration
	var held time.Duration // how long beforeCommit held the second commit
	release := make(chan struct{})
	commits := 0
	s, err := open(t.TempDir(), Options{OnCommitTime: func(d time.Duration) { mu.Lock(); took = append(took, d); mu.Unlock() }}, hooks{
		beforeCommit: func(int) {
			commits++ // the writer goroutine only
			if commits != 2 {
				return
			}
			began := time.Now()
			<-release
			mu.Lock()
			held = time.Since(began)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Save(newOp("first")); err != nil {
		t.Fatal(err)
	}
	saved := make(chan error, 1)
	go func() { saved <- s.Save(newOp("held")) }()
	// Released once the test has done something the commit must wait
	// for: a read of the first op, which bbolt serves beside the writer.
	if _, found, err := s.Lookup("first"); err != nil || !found {
		t.Fatalf("Lookup(first) = %v, %v", found, err)
	}
	close(release)
	if err := <-saved; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(took) != 2 {
		t.Fatalf("OnCommitTime heard %d commits; want 2", len(took))
	}
	if took[0] <= 0 {
		t.Errorf("first commit took %v; want > 0", took[0])
	}
	if took[1] < held {
		t.Errorf("held commit took %v; want at least the %v it was held", took[1], held)
	}
}
