package store

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// auditEntry returns an entry of the life of op on device, at t0 plus
// minutes.
func auditEntry(op, device string, minutes int, ev devices.AuditEvent) devices.AuditEntry {
	return devices.AuditEntry{
		At:        t0.Add(time.Duration(minutes) * time.Minute),
		Event:     ev,
		OpID:      op,
		Device:    device,
		Principal: "alice",
		Action:    "unlock",
	}
}

// appendAudit appends entries, failing the test on error.
func appendAudit(t *testing.T, s *Store, entries ...devices.AuditEntry) {
	t.Helper()
	if err := s.AppendAudit(entries...); err != nil {
		t.Fatalf("AppendAudit: %v", err)
	}
}

// auditSeqs runs q and returns the Seqs it returned.
func auditSeqs(t *testing.T, s *Store, q AuditQuery) []uint64 {
	t.Helper()
	got, err := s.Audit(q)
	return seqsOf(t, fmt.Sprintf("Audit(%+v)", q), got, err, auditLog.seq)
}

func TestAppendAuditAssignsSeqsInOrderAndRoundTripsEveryField(t *testing.T) {
	s := openStore(t, "", hooks{})
	full := devices.AuditEntry{
		Seq:       99, // ignored: the store assigns it
		At:        t0,
		Event:     devices.AuditCheck,
		OpID:      "op-1",
		Device:    "front_door",
		Principal: "alice",
		Action:    "unlock",
		Attempt:   2,
		Check:     devices.CheckState,
		Passed:    true,
		Status:    devices.Failed,
		Reason:    devices.Reason("jammed"),
		Detail:    `lock_state "locked"`,
	}
	appendAudit(t, s, full, auditEntry("op-1", "front_door", 1, devices.AuditSent))
	appendAudit(t, s, auditEntry("op-1", "front_door", 2, devices.AuditEnded))

	got, err := s.Audit(AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("Audit returned %d entries, want 3: %+v", len(got), got)
	}
	for i, e := range got {
		if want := uint64(i + 1); e.Seq != want {
			t.Errorf("entry %d: Seq = %d, want %d", i, e.Seq, want)
		}
	}
	want := full
	want.Seq = 1
	if !got[0].At.Equal(want.At) {
		t.Errorf("At = %v, want %v", got[0].At, want.At)
	}
	got[0].At = want.At
	if !reflect.DeepEqual(got[0], want) {
		t.Errorf("entry 1 =\n%+v\nwant\n%+v", got[0], want)
	}
	if got[1].Event != devices.AuditSent || got[2].Event != devices.AuditEnded {
		t.Errorf("events = %s, %s; want sent, ended", got[1].Event, got[2].Event)
	}
}

func TestAuditRecordsAreJSONWithSeqFirstUnderBigEndianSeqKeys(t *testing.T) {
	s := openStore(t, "", hooks{})
	appendAudit(t, s, auditEntry("a", "front_door", 0, devices.AuditAccepted), auditEntry("a", "front_door", 0, devices.AuditSent))
	keys, v := storedRecords(t, s, bucketAudit, 2)
	if want := []string{"0000000000000001", "0000000000000002"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("audit keys = %v, want %v", keys, want)
	}
	if want := `{"seq":2,"at":"2026-11-29T19:00:00.123456789+01:00","event":"sent",`; !bytes.HasPrefix(v, []byte(want)) || bytes.Count(v, []byte(`"seq"`)) != 1 {
		t.Errorf("record 2 = %s, want JSON starting %s with one seq", v, want)
	}
}

func TestAuditFiltersCombineExactMatches(t *testing.T) {
	s := openStore(t, "", hooks{})
	bob := auditEntry("op-2", "garage", 10, devices.AuditAccepted)
	bob.Principal = "bob"
	appendAudit(t, s,
		auditEntry("op-1", "front_door", 0, devices.AuditAccepted), // 1
		auditEntry("op-1", "front_door", 1, devices.AuditSent),     // 2
		bob, // 3
		auditEntry("op-3", "front_door", 20, devices.AuditAccepted), // 4
		auditEntry("op-1", "front_door", 30, devices.AuditEnded),    // 5
	)
	runSeqCases(t, []seqCase[AuditQuery]{
		{"everything", AuditQuery{}, []uint64{1, 2, 3, 4, 5}},
		{"device", AuditQuery{Device: "front_door"}, []uint64{1, 2, 4, 5}},
		{"op_id", AuditQuery{OpID: "op-1"}, []uint64{1, 2, 5}},
		{"principal", AuditQuery{Principal: "bob"}, []uint64{3}},
		{"since is inclusive", AuditQuery{Since: t0.Add(20 * time.Minute)}, []uint64{4, 5}},
		{"device and since", AuditQuery{Device: "front_door", Since: t0.Add(time.Minute)}, []uint64{2, 4, 5}},
		{"device and principal, none", AuditQuery{Device: "front_door", Principal: "bob"}, []uint64{}},
		{"unknown device", AuditQuery{Device: "nope"}, []uint64{}},
		{"after", AuditQuery{After: 3}, []uint64{4, 5}},
		{"after and op_id", AuditQuery{After: 1, OpID: "op-1"}, []uint64{2, 5}},
		{"after the last", AuditQuery{After: 5}, []uint64{}},
		{"after the largest seq", AuditQuery{After: ^uint64(0)}, []uint64{}},
		{"limit", AuditQuery{Limit: 2}, []uint64{1, 2}},
		{"limit counts matches only", AuditQuery{Device: "front_door", Limit: 3}, []uint64{1, 2, 4}},
		{"newest", AuditQuery{Newest: true, Limit: 2}, []uint64{4, 5}},
		{"newest with filter", AuditQuery{Newest: true, OpID: "op-1", Limit: 2}, []uint64{2, 5}},
		{"newest after a cursor", AuditQuery{Newest: true, After: 3, Limit: 10}, []uint64{4, 5}},
		{"newest after the last", AuditQuery{Newest: true, After: 5}, []uint64{}},
	}, func(t *testing.T, q AuditQuery) []uint64 { return auditSeqs(t, s, q) })
}

func TestAuditPagesForwardWithTheLastSeqAsCursor(t *testing.T) {
	s := openStore(t, "", hooks{})
	var entries []devices.AuditEntry
	for i := range 250 {
		entries = append(entries, auditEntry(fmt.Sprintf("op-%d", i), "front_door", i, devices.AuditAccepted))
	}
	appendAudit(t, s, entries...)

	pages := pageForward(DefaultAuditLimit, func(after uint64) []uint64 { return auditSeqs(t, s, AuditQuery{After: after}) })
	want := [][]uint64{seqRange(1, 100), seqRange(101, 200), seqRange(201, 250)}
	if !reflect.DeepEqual(pages, want) {
		t.Errorf("pages of %v entries, want 100, 100, 50 in order", lens(pages))
	}

	// Polling with the last cursor picks up what is appended next.
	appendAudit(t, s, auditEntry("op-new", "front_door", 300, devices.AuditAccepted))
	if got := auditSeqs(t, s, AuditQuery{After: 250}); !reflect.DeepEqual(got, []uint64{251}) {
		t.Errorf("after 250: %v, want [251]", got)
	}
}

func TestAuditLimitDefaultsTo100AndIsCappedAt1000(t *testing.T) {
	s := openStore(t, "", hooks{})
	entries := make([]devices.AuditEntry, 1005)
	for i := range entries {
		entries[i] = auditEntry("op", "front_door", i, devices.AuditCheck)
	}
	appendAudit(t, s, entries...)
	tests := []struct {
		q    AuditQuery
		want []uint64
	}{
		{AuditQuery{}, seqRange(1, 100)},
		{AuditQuery{Limit: 1}, []uint64{1}},
		{AuditQuery{Limit: 1000}, seqRange(1, 1000)},
		{AuditQuery{Limit: 1001}, seqRange(1, 1000)},
		{AuditQuery{Limit: 5000, Newest: true}, seqRange(6, 1005)},
		{AuditQuery{Newest: true}, seqRange(906, 1005)},
	}
	for _, tt := range tests {
		got := auditSeqs(t, s, tt.q)
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Audit(%+v) returned %d entries %d…%d, want %d…%d", tt.q, len(got), got[0], got[len(got)-1], tt.want[0], tt.want[len(tt.want)-1])
		}
	}
	if _, err := s.Audit(AuditQuery{Limit: -1}); err == nil || !strings.Contains(err.Error(), "negative limit -1") {
		t.Errorf("Audit with limit -1: %v, want an error naming the negative limit", err)
	}
}

func TestAuditSeqKeepsGrowingAcrossReopenAndPrune(t *testing.T) {
	s := openStore(t, "", hooks{})
	appendAudit(t, s, auditEntry("a", "front_door", 0, devices.AuditAccepted), auditEntry("a", "front_door", 1, devices.AuditEnded))
	if n, err := s.PruneAudit(t0.Add(time.Hour)); n != 2 || err != nil {
		t.Fatalf("PruneAudit = %d, %v; want 2, nil", n, err)
	}

	s = reopen(t, s)
	appendAudit(t, s, auditEntry("b", "front_door", 2, devices.AuditAccepted))
	appendAudit(t, s, auditEntry("b", "front_door", 3, devices.AuditEnded))
	if got, want := auditSeqs(t, s, AuditQuery{}), []uint64{3, 4}; !reflect.DeepEqual(got, want) {
		t.Errorf("Seqs after reopen = %v, want %v (never reused)", got, want)
	}
}

func TestAuditEntriesSurviveReopen(t *testing.T) {
	s := openStore(t, "", hooks{})
	appendAudit(t, s, auditEntry("a", "front_door", 0, devices.AuditAccepted))
	s = reopen(t, s)
	got, err := s.Audit(AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Seq != 1 || got[0].OpID != "a" || !got[0].At.Equal(t0) {
		t.Errorf("after reopen: %+v, want seq 1, op a, at %v", got, t0)
	}
}

func TestPruneAuditDeletesEntriesBeforeTheCutoffOnly(t *testing.T) {
	s := openStore(t, "", hooks{})
	appendAudit(t, s,
		auditEntry("a", "front_door", 0, devices.AuditAccepted),  // 1
		auditEntry("b", "front_door", 60, devices.AuditAccepted), // 2: at the cutoff, kept
		auditEntry("a", "front_door", 59, devices.AuditEnded),    // 3: out of time order, still pruned
		auditEntry("b", "front_door", 61, devices.AuditEnded),    // 4
	)
	n, err := s.PruneAudit(t0.Add(time.Hour))
	if n != 2 || err != nil {
		t.Fatalf("PruneAudit = %d, %v; want 2, nil", n, err)
	}
	if got, want := auditSeqs(t, s, AuditQuery{}), []uint64{2, 4}; !reflect.DeepEqual(got, want) {
		t.Errorf("after prune: %v, want %v", got, want)
	}
	if n, err := s.PruneAudit(t0.Add(time.Hour)); n != 0 || err != nil {
		t.Errorf("second PruneAudit = %d, %v; want 0, nil", n, err)
	}
}

func TestCorruptAuditRecordIsAnErrorNamingItsSeq(t *testing.T) {
	s := openStore(t, "", hooks{})
	appendAudit(t, s,
		auditEntry("a", "front_door", 0, devices.AuditAccepted),
		auditEntry("a", "front_door", 1, devices.AuditSent),
		auditEntry("a", "front_door", 2, devices.AuditEnded),
	)
	s = corrupt(t, s, bucketAudit, map[uint64]string{
		2: `{"seq":2,"at":`,
		3: `{"seq":7,"at":"2026-11-29T19:00:00Z","event":"ended"}`,
	})
	for name, q := range map[string]AuditQuery{"forward": {}, "newest": {Newest: true, After: 1}, "filtered": {Device: "nope"}} {
		if _, err := s.Audit(q); err == nil || !strings.Contains(err.Error(), "audit entry seq ") {
			t.Errorf("Audit %s: %v, want an error naming the entry's seq", name, err)
		}
	}
	if _, err := s.Audit(AuditQuery{After: 1}); err == nil || !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "audit entry seq 2: legacy record does not decode") {
		t.Errorf("Audit after 1: %v, want damage naming audit entry seq 2", err)
	}
	if _, err := s.Audit(AuditQuery{After: 2}); err == nil || !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "audit entry seq 3: legacy record does not decode: record says seq 7") {
		t.Errorf("Audit after 2: %v, want damage naming audit entry seq 3", err)
	}
	if got, want := auditSeqs(t, s, AuditQuery{Limit: 1}), []uint64{1}; !reflect.DeepEqual(got, want) {
		t.Errorf("entries before the corrupt one: %v, want %v", got, want)
	}
	if n, err := s.PruneAudit(t0.Add(time.Hour)); n != 0 || err == nil || !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "audit entry seq 2: legacy record does not decode") {
		t.Errorf("PruneAudit = %d, %v; want 0 and an error naming seq 2", n, err)
	}
	if got, want := auditSeqs(t, s, AuditQuery{Limit: 1}), []uint64{1}; !reflect.DeepEqual(got, want) {
		t.Errorf("after the failed prune: %v, want %v (nothing deleted)", got, want)
	}
}

func TestAppendAuditRefusesZeroTimeOrEmptyEventAndStoresNothing(t *testing.T) {
	s := openStore(t, "", hooks{})
	noTime := auditEntry("a", "front_door", 0, devices.AuditAccepted)
	noTime.At = time.Time{}
	noEvent := auditEntry("b", "front_door", 0, "")
	good := auditEntry("c", "front_door", 0, devices.AuditAccepted)
	tests := []struct {
		entries []devices.AuditEntry
		want    string
	}{
		{[]devices.AuditEntry{good, noTime}, `append audit entry 1 (op "a"): zero time`},
		{[]devices.AuditEntry{noEvent, good}, `append audit entry 0 (op "b"): empty event`},
	}
	for _, tt := range tests {
		if err := s.AppendAudit(tt.entries...); err == nil || err.Error() != tt.want {
			t.Errorf("AppendAudit: %v, want %s", err, tt.want)
		}
	}
	if err := s.AppendAudit(); err != nil {
		t.Errorf("AppendAudit(): %v, want nil", err)
	}
	if got := auditSeqs(t, s, AuditQuery{}); len(got) != 0 {
		t.Errorf("stored %v, want nothing", got)
	}
	if got := s.commits.Load(); got != 0 {
		t.Errorf("commits = %d, want 0", got)
	}
}

func TestAppendAuditSharesGroupCommitsWithSave(t *testing.T) {
	s := sharesGroupCommitWithSave(t, "AppendAudit", func(s *Store) error {
		return s.AppendAudit(auditEntry("op-0", "hall_light", 0, devices.AuditAccepted))
	})
	if got := auditSeqs(t, s, AuditQuery{}); !reflect.DeepEqual(got, []uint64{1}) {
		t.Errorf("audit Seqs = %v, want [1]", got)
	}
}

func TestAuditMethodsFailAfterClose(t *testing.T) {
	s := closedStore(t)
	checks := map[string]error{
		"AppendAudit":   s.AppendAudit(auditEntry("a", "front_door", 0, devices.AuditAccepted)),
		"AppendAudit()": s.AppendAudit(),
	}
	_, checks["Audit"] = s.Audit(AuditQuery{})
	_, checks["PruneAudit"] = s.PruneAudit(t0)
	for name, err := range checks {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}
