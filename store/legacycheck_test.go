package store

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// legacyRecordsStore returns a data directory whose store holds records
// from before the frame, as a Hearth of then wrote them: a pending op
// (with its pending key), an ended one, an audit entry, a dead letter
// and a device state.
func legacyRecordsStore(t *testing.T) string {
	t.Helper()
	dir := indexedStore(t)
	db, err := bolt.Open(filepath.Join(dir, FileName), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, p := range []struct {
			bucket, key []byte
			v           string
		}{
			{bucketOps, []byte("legacy-pending"), `{"seq":900,"op_id":"legacy-pending","device":"hall_light","target":{"state":"ON"},"accepted_at":"2026-01-01T00:00:00Z","deadline":"2026-01-01T00:00:30Z","status":"accepted","attempts":0,"updated_at":"2026-01-01T00:00:00Z"}`},
			{bucketPending, pendingKeyBytes(900, "legacy-pending"), ``},
			{bucketOps, []byte("legacy-ended"), `{"seq":901,"op_id":"legacy-ended","device":"hall_light","target":{"state":"OFF"},"accepted_at":"2026-01-01T00:00:00Z","deadline":"2026-01-01T00:00:30Z","status":"succeeded","attempts":1,"updated_at":"2026-01-01T00:00:01Z"}`},
			{bucketAudit, seqKey(5), `{"seq":5,"at":"2026-01-01T00:00:00Z","event":"accepted","op_id":"legacy-ended","device":"front_door"}`},
			{bucketDeadLetters, seqKey(6), `{"seq":6,"op_seq":77,"op_id":"legacy-dead","device":"hall_light","status":"failed","reason":"retry_budget_exhausted","at":"2026-01-01T00:00:00Z"}`},
			{bucketStates, []byte("porch_light"), `{"state":{"state":"ON"},"at":"2026-01-01T00:00:00Z"}`},
		} {
			if err := tx.Bucket(p.bucket).Put(p.key, []byte(p.v)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A record from before the frame has no checksum: at open it must decode
// as its bucket's type, under its key, or it is damage, quarantined,
// rather than an error at every start or at every prune.
func TestOpenDecodesLegacyRecords(t *testing.T) {
	// The undamaged store opens and reads.
	dir := legacyRecordsStore(t)
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatalf("Open of undamaged legacy records: %v", err)
	}
	if _, err := s.Pending(); err != nil {
		t.Errorf("Pending: %v", err)
	}
	s.Close()

	for _, c := range []struct {
		name, old, new, want string
	}{
		{"pending op not JSON", `"target":{"state":"ON"}`, `"target":{#state":"ON"}`, `op "legacy-pending": legacy record does not decode`},
		{"ended op bad time", `"updated_at":"2026-01-01T00:00:01Z"`, `"updated_at":"2026-01-01T00:00:01#"`, `op "legacy-ended": legacy record does not decode`},
		{"op under another op_id", `"op_id":"legacy-ended"`, `"op_id":"legacy-endex"`, `op "legacy-ended": legacy record does not decode`},
		{"audit entry of another seq", `{"seq":5,"at"`, `{"seq":7,"at"`, `audit entry seq 5: legacy record does not decode`},
		{"dead letter not JSON", `"op_seq":77,`, `"op_seq":77;`, `dead letter seq 6: legacy record does not decode`},
		{"state not JSON", `{"state":{"state":"ON"},"at":"2026-01-01T00:00:00Z"}`, `{"state":{"state":"ON"},"at":"2026-01-01T00:00:00Z"]`, `state of "porch_light": legacy record does not decode`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := legacyRecordsStore(t)
			rewriteAll(t, dir, []byte(c.old), []byte(c.new))
			_, err := Open(dir, Options{})
			if !errors.Is(err, ErrDamaged) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open: %v; want ErrDamaged naming %q", err, c.want)
			}
			s, err := Open(dir, Options{Quarantine: true, Now: func() time.Time { return t0 }})
			if err != nil {
				t.Fatalf("Open with Quarantine: %v", err)
			}
			defer s.Close()
			if _, ok, _ := s.Quarantine(); !ok {
				t.Error("not quarantined")
			}
			if _, err := s.Pending(); err != nil {
				t.Errorf("Pending: %v", err)
			}
			if _, err := s.PruneTerminal(t0.Add(time.Hour)); err != nil {
				t.Errorf("PruneTerminal: %v", err)
			}
		})
	}
}
