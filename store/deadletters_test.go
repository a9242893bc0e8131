package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// deadOp returns op id to device, ended with status and reason at t0
// plus minutes.
func deadOp(id, device string, status devices.Status, reason devices.Reason, minutes int) devices.Op {
	op := newOp(id)
	op.Device = device
	op.Status = status
	op.Reason = reason
	op.Attempts = 2
	op.UpdatedAt = t0.Add(time.Duration(minutes) * time.Minute)
	return op
}

// addDeadLetters adds ops, failing the test on error.
func addDeadLetters(t *testing.T, s *Store, ops ...devices.Op) {
	t.Helper()
	if err := s.AddDeadLetters(ops...); err != nil {
		t.Fatalf("AddDeadLetters: %v", err)
	}
}

// deadSeqs runs q and returns the Seqs it returned.
func deadSeqs(t *testing.T, s *Store, q DeadLetterQuery) []uint64 {
	t.Helper()
	got, err := s.DeadLetters(q)
	return seqsOf(t, fmt.Sprintf("DeadLetters(%+v)", q), got, err, deadLetterLog.seq)
}

func TestAddDeadLettersAssignsSeqsInOrderAndKeepsTheWholeOp(t *testing.T) {
	s := openStore(t, "", hooks{})
	full := deadOp("op-1", "thermostat", devices.Failed, devices.ReasonTimeout, 5)
	full.Seq = 41
	full.Principal = "alice"
	full.Detail = "no report within 5s"
	full.LastSentAt = t0.Add(4 * time.Minute)
	full.State = map[string]any{"occupied_heating_setpoint": float64(18)}
	addDeadLetters(t, s, full, deadOp("op-2", "thermostat", devices.Expired, devices.ReasonTTLElapsed, 6))
	addDeadLetters(t, s, deadOp("op-3", "thermostat", devices.Superseded, devices.ReasonNewerCommand, 7))

	got, err := s.DeadLetters(DeadLetterQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("DeadLetters returned %d, want 3: %+v", len(got), got)
	}
	for i, d := range got {
		if want := uint64(i + 1); d.Seq != want {
			t.Errorf("dead letter %d: Seq = %d, want %d", i, d.Seq, want)
		}
	}
	assertSameOp(t, got[0].Op, full) // its own Seq (41) included
	if got[1].OpID != "op-2" || got[1].Status != devices.Expired || got[2].OpID != "op-3" || got[2].Status != devices.Superseded {
		t.Errorf("dead letters 2 and 3 = %s/%s, %s/%s; want op-2/expired, op-3/superseded", got[1].OpID, got[1].Status, got[2].OpID, got[2].Status)
	}
}

func TestDeadLetterRecordsAreTheirJSONUnderBigEndianSeqKeys(t *testing.T) {
	s := openStore(t, "", hooks{})
	a := deadOp("a", "thermostat", devices.Expired, devices.ReasonTTLElapsed, 0)
	a.Seq = 7
	addDeadLetters(t, s, deadOp("z", "thermostat", devices.Failed, devices.ReasonTimeout, 0), a)
	keys, got := storedRecords(t, s, bucketDeadLetters, 2)
	if want := []string{"0000000000000001", "0000000000000002"}; !reflect.DeepEqual(keys, want) {
		t.Errorf("deadletters keys = %v, want %v", keys, want)
	}
	want, err := json.Marshal(devices.DeadLetter{Seq: 2, Op: a})
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("record 2 =\n%s\nwant devices.DeadLetter's JSON\n%s", got, want)
	}
}

func TestDeadLetterFiltersCombineExactMatches(t *testing.T) {
	s := openStore(t, "", hooks{})
	addDeadLetters(t, s,
		deadOp("op-1", "thermostat", devices.Superseded, devices.ReasonNewerCommand, 0), // 1
		deadOp("op-2", "thermostat", devices.Expired, devices.ReasonTTLElapsed, 10),     // 2
		deadOp("op-3", "hall_light", devices.Failed, devices.ReasonTimeout, 20),         // 3
		deadOp("op-4", "thermostat", devices.Failed, devices.ReasonTimeout, 30),         // 4
		deadOp("op-5", "hall_light", devices.Failed, devices.ReasonBreakerOpen, 40),     // 5
	)
	runSeqCases(t, []seqCase[DeadLetterQuery]{
		{"everything", DeadLetterQuery{}, []uint64{1, 2, 3, 4, 5}},
		{"device", DeadLetterQuery{Device: "thermostat"}, []uint64{1, 2, 4}},
		{"status", DeadLetterQuery{Status: devices.Failed}, []uint64{3, 4, 5}},
		{"reason", DeadLetterQuery{Reason: devices.ReasonTimeout}, []uint64{3, 4}},
		{"device and status", DeadLetterQuery{Device: "hall_light", Status: devices.Failed}, []uint64{3, 5}},
		{"status and reason, none", DeadLetterQuery{Status: devices.Expired, Reason: devices.ReasonTimeout}, []uint64{}},
		{"since is inclusive", DeadLetterQuery{Since: t0.Add(30 * time.Minute)}, []uint64{4, 5}},
		{"device and since", DeadLetterQuery{Device: "thermostat", Since: t0.Add(time.Minute)}, []uint64{2, 4}},
		{"unknown device", DeadLetterQuery{Device: "nope"}, []uint64{}},
		{"after", DeadLetterQuery{After: 3}, []uint64{4, 5}},
		{"after and status", DeadLetterQuery{After: 3, Status: devices.Failed}, []uint64{4, 5}},
		{"after the last", DeadLetterQuery{After: 5}, []uint64{}},
		{"after the largest seq", DeadLetterQuery{After: math.MaxUint64}, []uint64{}},
		{"limit", DeadLetterQuery{Limit: 2}, []uint64{1, 2}},
		{"limit counts matches only", DeadLetterQuery{Device: "hall_light", Limit: 1}, []uint64{3}},
		{"newest", DeadLetterQuery{Newest: true, Limit: 2}, []uint64{4, 5}},
		{"newest with filter", DeadLetterQuery{Newest: true, Device: "thermostat", Limit: 2}, []uint64{2, 4}},
		{"newest after a cursor", DeadLetterQuery{Newest: true, After: 3, Limit: 10}, []uint64{4, 5}},
		{"newest after the last", DeadLetterQuery{Newest: true, After: 5}, []uint64{}},
	}, func(t *testing.T, q DeadLetterQuery) []uint64 { return deadSeqs(t, s, q) })
}

func TestDeadLettersPageForwardWithTheLastSeqAsCursor(t *testing.T) {
	s := openStore(t, "", hooks{})
	var ops []devices.Op
	for i := range 250 {
		ops = append(ops, deadOp(fmt.Sprintf("op-%d", i), "thermostat", devices.Expired, devices.ReasonTTLElapsed, i))
	}
	addDeadLetters(t, s, ops...)

	pages := pageForward(DefaultDeadLetterLimit, func(after uint64) []uint64 { return deadSeqs(t, s, DeadLetterQuery{After: after}) })
	want := [][]uint64{seqRange(1, 100), seqRange(101, 200), seqRange(201, 250)}
	if !reflect.DeepEqual(pages, want) {
		t.Errorf("pages of %v dead letters, want 100, 100, 50 in order", lens(pages))
	}

	// Polling with the last cursor picks up what is added next.
	addDeadLetters(t, s, deadOp("op-new", "thermostat", devices.Failed, devices.ReasonTimeout, 300))
	if got := deadSeqs(t, s, DeadLetterQuery{After: 250}); !reflect.DeepEqual(got, []uint64{251}) {
		t.Errorf("after 250: %v, want [251]", got)
	}
}

func TestDeadLetterLimitDefaultsTo100AndIsCappedAt1000(t *testing.T) {
	s := openStore(t, "", hooks{})
	ops := make([]devices.Op, 1005)
	for i := range ops {
		ops[i] = deadOp(fmt.Sprintf("op-%d", i), "thermostat", devices.Expired, devices.ReasonTTLElapsed, i)
	}
	addDeadLetters(t, s, ops...)
	tests := []struct {
		q    DeadLetterQuery
		want []uint64
	}{
		{DeadLetterQuery{}, seqRange(1, 100)},
		{DeadLetterQuery{Limit: 1}, []uint64{1}},
		{DeadLetterQuery{Limit: 1000}, seqRange(1, 1000)},
		{DeadLetterQuery{Limit: 1001}, seqRange(1, 1000)},
		{DeadLetterQuery{Limit: 5000, Newest: true}, seqRange(6, 1005)},
		{DeadLetterQuery{Newest: true}, seqRange(906, 1005)},
	}
	for _, tt := range tests {
		if got := deadSeqs(t, s, tt.q); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("DeadLetters(%+v) returned %d, %d…%d, want %d…%d", tt.q, len(got), got[0], got[len(got)-1], tt.want[0], tt.want[len(tt.want)-1])
		}
	}
	if _, err := s.DeadLetters(DeadLetterQuery{Limit: -1}); err == nil || err.Error() != "dead letter query: negative limit -1" {
		t.Errorf("DeadLetters with limit -1: %v, want dead letter query: negative limit -1", err)
	}
}

func TestDeadLettersSurviveReopenAndSeqsAreNeverReused(t *testing.T) {
	s := openStore(t, "", hooks{})
	addDeadLetters(t, s,
		deadOp("a", "thermostat", devices.Superseded, devices.ReasonNewerCommand, 0),
		deadOp("b", "thermostat", devices.Expired, devices.ReasonTTLElapsed, 120),
	)

	s = reopen(t, s)
	got, err := s.DeadLetters(DeadLetterQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Seq != 1 || got[0].OpID != "a" || got[1].Seq != 2 || got[1].OpID != "b" || !got[1].UpdatedAt.Equal(t0.Add(2*time.Hour)) {
		t.Errorf("after reopen: %+v, want seq 1 op a, seq 2 op b ended at %v", got, t0.Add(2*time.Hour))
	}
	if n, err := s.PruneDeadLetters(t0.Add(3 * time.Hour)); n != 2 || err != nil {
		t.Fatalf("PruneDeadLetters = %d, %v; want 2, nil", n, err)
	}

	s = reopen(t, s)
	addDeadLetters(t, s, deadOp("c", "thermostat", devices.Failed, devices.ReasonTimeout, 200))
	if got, want := deadSeqs(t, s, DeadLetterQuery{}), []uint64{3}; !reflect.DeepEqual(got, want) {
		t.Errorf("Seqs after prune and reopen = %v, want %v (never reused)", got, want)
	}
}

func TestPruneDeadLettersDeletesThoseEndedBeforeTheCutoffOnly(t *testing.T) {
	s := openStore(t, "", hooks{})
	addDeadLetters(t, s,
		deadOp("a", "thermostat", devices.Expired, devices.ReasonTTLElapsed, 0),       // 1
		deadOp("b", "thermostat", devices.Expired, devices.ReasonTTLElapsed, 60),      // 2: at the cutoff, kept
		deadOp("c", "hall_light", devices.Failed, devices.ReasonTimeout, 59),          // 3: out of time order, still pruned
		deadOp("d", "hall_light", devices.Superseded, devices.ReasonNewerCommand, 61), // 4
	)
	n, err := s.PruneDeadLetters(t0.Add(time.Hour))
	if n != 2 || err != nil {
		t.Fatalf("PruneDeadLetters = %d, %v; want 2, nil", n, err)
	}
	if got, want := deadSeqs(t, s, DeadLetterQuery{}), []uint64{2, 4}; !reflect.DeepEqual(got, want) {
		t.Errorf("after prune: %v, want %v", got, want)
	}
	if n, err := s.PruneDeadLetters(t0.Add(time.Hour)); n != 0 || err != nil {
		t.Errorf("second PruneDeadLetters = %d, %v; want 0, nil", n, err)
	}
}

func TestAddDeadLettersRefusesWhatIsNoDeadLetterAndStoresNothing(t *testing.T) {
	s := openStore(t, "", hooks{})
	good := deadOp("good", "thermostat", devices.Expired, devices.ReasonTTLElapsed, 0)
	noTime := deadOp("no-time", "thermostat", devices.Failed, devices.ReasonTimeout, 0)
	noTime.UpdatedAt = time.Time{}
	unencodable := deadOp("nan", "thermostat", devices.Failed, devices.ReasonTimeout, 0)
	unencodable.Target = devices.Target{"occupied_heating_setpoint": math.NaN()}
	tests := []struct {
		ops  []devices.Op
		want string
	}{
		{[]devices.Op{good, newOp("pending")}, `add dead letter 1 (op "pending"): status "accepted" is not terminal`},
		{[]devices.Op{deadOp("queued", "thermostat", devices.Queued, "", 0)}, `add dead letter 0 (op "queued"): status "queued" is not terminal`},
		{[]devices.Op{deadOp("done", "thermostat", devices.Succeeded, "", 0), good}, `add dead letter 0 (op "done"): status succeeded is not a dead letter's (failed, expired or superseded)`},
		{[]devices.Op{good, deadOp("refused", "thermostat", devices.Rejected, devices.ReasonUnauthorized, 0)}, `add dead letter 1 (op "refused"): status rejected is not a dead letter's (failed, expired or superseded)`},
		{[]devices.Op{good, deadOp("", "thermostat", devices.Failed, devices.ReasonTimeout, 0)}, `add dead letter 1 (op ""): empty op_id`},
		{[]devices.Op{noTime}, `add dead letter 0 (op "no-time"): zero updated_at`},
		{[]devices.Op{good, good, unencodable}, `add dead letter 2 (op "nan"): encode: json: error calling MarshalJSON for type devices.DeadLetter: json: unsupported value: NaN`},
	}
	for _, tt := range tests {
		if err := s.AddDeadLetters(tt.ops...); err == nil || err.Error() != tt.want {
			t.Errorf("AddDeadLetters: %v, want %s", err, tt.want)
		}
	}
	if err := s.AddDeadLetters(); err != nil {
		t.Errorf("AddDeadLetters(): %v, want nil", err)
	}
	if got := deadSeqs(t, s, DeadLetterQuery{}); len(got) != 0 {
		t.Errorf("stored %v, want nothing", got)
	}
	if got := s.commits.Load(); got != 0 {
		t.Errorf("commits = %d, want 0", got)
	}
}

func TestAddDeadLettersSharesGroupCommitsWithSave(t *testing.T) {
	s := sharesGroupCommitWithSave(t, "AddDeadLetters", func(s *Store) error {
		return s.AddDeadLetters(deadOp("op-0", "hall_light", devices.Expired, devices.ReasonTTLElapsed, 1))
	})
	if got := deadSeqs(t, s, DeadLetterQuery{}); !reflect.DeepEqual(got, []uint64{1}) {
		t.Errorf("dead letter Seqs = %v, want [1]", got)
	}
}

func TestCorruptDeadLetterIsAnErrorNamingItsSeq(t *testing.T) {
	s := openStore(t, "", hooks{})
	addDeadLetters(t, s,
		deadOp("a", "thermostat", devices.Expired, devices.ReasonTTLElapsed, 0),
		deadOp("b", "thermostat", devices.Expired, devices.ReasonTTLElapsed, 1),
		deadOp("c", "thermostat", devices.Expired, devices.ReasonTTLElapsed, 2),
	)
	s = corrupt(t, s, bucketDeadLetters, map[uint64]string{
		2: `{"seq":2,"op_id":`,
		3: `{"seq":7,"op_id":"c","status":"expired","updated_at":"2026-11-29T19:00:00Z"}`,
	})
	if _, err := s.DeadLetters(DeadLetterQuery{After: 1}); err == nil || !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "dead letter seq 2: legacy record does not decode") {
		t.Errorf("DeadLetters after 1: %v, want damage naming dead letter seq 2", err)
	}
	if _, err := s.DeadLetters(DeadLetterQuery{After: 2}); err == nil || !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "dead letter seq 3: legacy record does not decode: record says seq 7") {
		t.Errorf("DeadLetters after 2: %v, want damage naming dead letter seq 3", err)
	}
	if got, want := deadSeqs(t, s, DeadLetterQuery{Limit: 1}), []uint64{1}; !reflect.DeepEqual(got, want) {
		t.Errorf("dead letters before the corrupt one: %v, want %v", got, want)
	}
	if n, err := s.PruneDeadLetters(t0.Add(time.Hour)); n != 0 || err == nil || !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), "dead letter seq 2: legacy record does not decode") {
		t.Errorf("PruneDeadLetters = %d, %v; want 0 and an error naming seq 2", n, err)
	}
	if got, want := deadSeqs(t, s, DeadLetterQuery{Limit: 1}), []uint64{1}; !reflect.DeepEqual(got, want) {
		t.Errorf("after the failed prune: %v, want %v (nothing deleted)", got, want)
	}
}

func TestDeadLetterMethodsFailAfterClose(t *testing.T) {
	s := closedStore(t)
	checks := map[string]error{
		"AddDeadLetters":   s.AddDeadLetters(deadOp("a", "thermostat", devices.Expired, devices.ReasonTTLElapsed, 0)),
		"AddDeadLetters()": s.AddDeadLetters(),
	}
	_, checks["DeadLetters"] = s.DeadLetters(DeadLetterQuery{})
	_, checks["PruneDeadLetters"] = s.PruneDeadLetters(t0)
	for name, err := range checks {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", name, err)
		}
	}
}

// A dead letter of an op given without its Seq (the dispatcher's copy
// predates the store's numbering) carries the stored record's Seq.
func TestDeadLetterTakesTheStoredOpsSeq(t *testing.T) {
	s := openStore(t, "", hooks{})
	op := devices.Op{OpID: "numbered", Device: "thermostat", Target: devices.Target{"state": "ON"}, Status: devices.Accepted,
		AcceptedAt: time.Unix(100, 0).UTC(), Deadline: time.Unix(200, 0).UTC(), UpdatedAt: time.Unix(100, 0).UTC()}
	if err := s.Save(op); err != nil {
		t.Fatal(err)
	}
	stored, _, err := s.Lookup("numbered")
	if err != nil || stored.Seq == 0 {
		t.Fatalf("stored op: seq %d, %v; want a seq", stored.Seq, err)
	}
	op.Status, op.Reason, op.UpdatedAt = devices.Expired, devices.ReasonTTLElapsed, time.Unix(200, 0).UTC()
	if err := s.AddDeadLetters(op); err != nil {
		t.Fatal(err)
	}
	dead, err := s.DeadLetters(DeadLetterQuery{})
	if err != nil || len(dead) != 1 || dead[0].Op.Seq != stored.Seq {
		t.Errorf("dead letters %+v, %v; want one whose op seq is %d", dead, err, stored.Seq)
	}
}

// SaveDeadLetters stores an ended op's record and its dead letter in one
// commit, so that a crash leaves both or neither; an op that is no dead
// letter stores nothing.
func TestSaveDeadLettersStoresTheEndAndTheDeadLetterInOneCommit(t *testing.T) {
	s := openStore(t, "", hooks{})
	op := devices.Op{OpID: "ended", Device: "thermostat", Target: devices.Target{"state": "ON"}, Status: devices.Accepted,
		AcceptedAt: time.Unix(100, 0).UTC(), Deadline: time.Unix(200, 0).UTC(), UpdatedAt: time.Unix(100, 0).UTC()}
	if err := s.Save(op); err != nil {
		t.Fatal(err)
	}
	op.Status, op.Reason, op.UpdatedAt = devices.Failed, devices.ReasonTimeout, time.Unix(150, 0).UTC()
	before := s.commits.Load()
	if err := s.SaveDeadLetters(op); err != nil {
		t.Fatal(err)
	}
	if n := s.commits.Load() - before; n != 1 {
		t.Errorf("%d commits; want 1", n)
	}
	stored, _, err := s.Lookup("ended")
	if err != nil || stored.Status != devices.Failed {
		t.Errorf("stored op: %s (%v); want failed", stored.Status, err)
	}
	if pending, _ := s.Pending(); len(pending) != 0 {
		t.Errorf("pending %+v; want none", pending)
	}
	dead, err := s.DeadLetters(DeadLetterQuery{})
	if err != nil || len(dead) != 1 || dead[0].OpID != "ended" || dead[0].Op.Seq != stored.Seq {
		t.Errorf("dead letters %+v (%v); want the ended op, with its seq %d", dead, err, stored.Seq)
	}

	alive := op
	alive.OpID, alive.Status = "alive", devices.Accepted
	if err := s.SaveDeadLetters(alive); err == nil {
		t.Error("SaveDeadLetters of an op not ended: no error")
	}
	if _, found, _ := s.Lookup("alive"); found {
		t.Error("an op refused as a dead letter was stored")
	}
}

// A principal's dead letters are those of the commands it sent
// (devices.Op.Principal): GET /api/v1/deadletters shows a principal that
// may not read every principal's commands only its own.
func TestDeadLettersOfOnePrincipal(t *testing.T) {
	s := openStore(t, "", hooks{})
	byPrincipal := func(op devices.Op, principal string) devices.Op { op.Principal = principal; return op }
	addDeadLetters(t, s,
		byPrincipal(deadOp("op-1", "front_door", devices.Failed, devices.ReasonTimeout, 0), "phone"),   // 1
		byPrincipal(deadOp("op-2", "front_door", devices.Failed, devices.ReasonTimeout, 10), "tablet"), // 2
		deadOp("op-3", "hall_light", devices.Expired, devices.ReasonTTLElapsed, 20),                    // 3: no principal
		byPrincipal(deadOp("op-4", "hall_light", devices.Failed, devices.ReasonTimeout, 30), "tablet"), // 4
	)
	runSeqCases(t, []seqCase[DeadLetterQuery]{
		{"everyone's", DeadLetterQuery{}, []uint64{1, 2, 3, 4}},
		{"the tablet's", DeadLetterQuery{Principal: "tablet"}, []uint64{2, 4}},
		{"the tablet's newest", DeadLetterQuery{Principal: "tablet", Newest: true, Limit: 1}, []uint64{4}},
		{"the phone's on front_door", DeadLetterQuery{Principal: "phone", Device: "front_door"}, []uint64{1}},
		{"nobody's", DeadLetterQuery{Principal: "stranger"}, []uint64{}},
	}, func(t *testing.T, q DeadLetterQuery) []uint64 { return deadSeqs(t, s, q) })
}
