package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// bucketMeta holds the store's own records: under metaQuarantine the
// last quarantine (Quarantine's JSON in the record frame, see
// encodeQuarantine), until it is replaced by a later one; it is never
// pruned.
var (
	bucketMeta     = []byte("meta")
	metaQuarantine = []byte("quarantine")
)

// QuarantineSuffix begins the name a damaged hearth.db is moved to,
// followed by the UTC time of the quarantine in ISO 8601 basic format:
// hearth.db.corrupt-20261202T031500Z.
const QuarantineSuffix = ".corrupt-"

// PendingQuarantineName is the file a quarantine keeps beside hearth.db
// while it runs.
const PendingQuarantineName = FileName + ".quarantining"

// UnfinishedSuffix begins the name a store created by an interrupted
// quarantine is moved to.
const UnfinishedSuffix = ".unfinished-"

// Quarantine is the record of a damaged store that Open moved aside
// (Options.Quarantine): what it found, where the file went, what it
// copied into the fresh store, and whether an operator has acknowledged
// it (AckQuarantine). It is kept in the fresh store, so it survives
// restarts until a later quarantine replaces it.
type Quarantine struct {
	// At is when Open quarantined the file (Options.Now).
	At time.Time `json:"at"`
	// File is the path the damaged hearth.db was moved to; "" when there
	// was no file to move (hearth.db was missing although its marker
	// said a store existed).
	File string `json:"file,omitempty"`
	// Cause is the damage Open found: the ErrDamaged error's text.
	Cause string `json:"cause"`
	// Salvaged counts the records copied from the damaged file into the
	// fresh store: they read, decoded and, where they carry one, passed
	// their checksum.
	Salvaged Counts `json:"salvaged"`
	// Skipped counts the records found in the damaged file but not
	// trusted (failed to decode or failed their checksum); records on
	// pages that could not be read at all are not counted.
	Skipped Counts `json:"skipped"`
	// Ended is how many of the salvaged ops were still pending: each was
	// stored ended, failed with reason store_damaged, its delivery unknown,
	// so that nothing from a damaged store is sent again.
	Ended int `json:"ended"`
	// AckedAt and AckedBy say when and by whom the quarantine was
	// acknowledged (AckQuarantine); zero and "" until then.
	AckedAt time.Time `json:"acked_at,omitzero"`
	AckedBy string    `json:"acked_by,omitempty"`
}

// Counts counts records by kind.
type Counts struct {
	Ops         int `json:"ops"`
	Audit       int `json:"audit"`
	DeadLetters int `json:"dead_letters"`
	States      int `json:"states"`
}

// Acked reports whether an operator has acknowledged q.
func (q Quarantine) Acked() bool { return !q.AckedAt.IsZero() }

// Quarantine returns the store's last quarantine record, and false if the
// store was never quarantined. An acknowledged record is still returned
// (Acked tells).
func (s *Store) Quarantine() (Quarantine, bool, error) {
	var q Quarantine
	var found bool
	err := s.view(func(b buckets) error {
		v := b.tx.Bucket(bucketMeta).Get(metaQuarantine)
		if v == nil {
			return nil
		}
		found = true
		var err error
		q, err = decodeQuarantine(v)
		return err
	})
	return q, found && err == nil, err
}

// AckQuarantine records that by (a principal's name) acknowledged the
// last quarantine at at, and returns the record as stored. Acknowledging
// again keeps the first acknowledgement. It returns ErrNoQuarantine when
// the store was never quarantined.
func (s *Store) AckQuarantine(by string, at time.Time) (Quarantine, error) {
	var q Quarantine
	err := s.update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		v := meta.Get(metaQuarantine)
		if v == nil {
			return ErrNoQuarantine
		}
		var err error
		if q, err = decodeQuarantine(v); err != nil {
			return err
		}
		if q.Acked() {
			return nil
		}
		q.AckedAt, q.AckedBy = at.UTC(), by
		body, err := encodeQuarantine(q)
		if err != nil {
			return err
		}
		return meta.Put(metaQuarantine, body)
	})
	return q, err
}

// ErrNoQuarantine is AckQuarantine's error when there is nothing to
// acknowledge.
var ErrNoQuarantine = errors.New("the store was never quarantined")

// quarantine moves the damaged store at path aside (never deleting it),
// reads what it can trust out of the moved file (salvageFile), opens a
// fresh store in dir, records the Quarantine there, then writes the
// salvaged records and the Quarantine with its counts in one synced
// transaction (restore). The first record is written before the salvage's
// commit so that a crash during it leaves the quarantine known (with
// zero counts), never a silently empty store. cause is Open's ErrDamaged
// error. A salvage that fails to commit is said in the record's Cause;
// the fresh store opens anyway.
//
// A panic inside bolt.Open leaves its file open (openBolt closes it);
// the rename would work anyway on Linux, which renames open files.
func quarantine(dir string, opts Options, h hooks, cause error) (*Store, error) {
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	at := now().UTC()
	path := filepath.Join(dir, FileName)
	q := Quarantine{At: at, Cause: cause.Error()}
	moved, err := freeName(path + QuarantineSuffix + at.Format("20060102T150405Z"))
	if err != nil {
		return nil, fmt.Errorf("quarantine damaged store: %w (it was: %v)", err, cause)
	}
	switch err := moveNoReplace(path, moved); {
	case err == nil:
		q.File = moved
	case errors.Is(err, fs.ErrNotExist):
	default:
		return nil, fmt.Errorf("quarantine damaged store: %w (it was: %v)", err, cause)
	}
	if err := syncDir(dir); err != nil {
		return nil, fmt.Errorf("quarantine damaged store: %w", err)
	}
	var sv *salvage
	if q.File != "" {
		sv = salvageFile(q.File)
	}
	s, err := openFile(dir, opts, h, true) // a fresh file that fails again is no loop
	if err != nil {
		return nil, fmt.Errorf("open a fresh store after quarantining %s: %w", moved, err)
	}
	if err := s.recordQuarantine(q); err != nil {
		_ = s.Close()
		return nil, err
	}
	if sv == nil {
		return s, nil
	}
	for _, p := range sv.problems {
		q.Cause += "; salvage: " + p.Error()
	}
	if err := s.restore(sv, &q); err != nil {
		q.Salvaged, q.Skipped, q.Ended = Counts{}, Counts{}, 0
		q.Cause += "; salvage failed, nothing was copied: " + err.Error()
		if err := s.recordQuarantine(q); err != nil {
			_ = s.Close()
			return nil, err
		}
	}
	return s, nil
}

// encodeQuarantine returns q's record: its JSON in the record frame
// (checksum.go), under bucket meta and key quarantine.
func encodeQuarantine(q Quarantine) ([]byte, error) {
	body, err := json.Marshal(q)
	if err != nil {
		return nil, err
	}
	return frame(bucketMeta, metaQuarantine, body), nil
}

// decodeQuarantine decodes the stored quarantine record v: a v1 frame
// whose checksum matches, or a legacy plain JSON one (from before the
// frame). One that fails its checksum or does not decode is an error
// wrapping ErrDamaged (guarded names the file); Open's check runs it on
// the record, so such damage is quarantined rather than failing every
// start's read of it.
func decodeQuarantine(v []byte) (Quarantine, error) {
	var q Quarantine
	err := unframeJSON(bucketMeta, metaQuarantine, v, &q)
	if err != nil && !isRecordError(err) {
		err = &recordError{bucket: string(bucketMeta), key: string(metaQuarantine), what: "record does not decode: " + err.Error()}
	}
	return q, err
}

// recordQuarantine stores q as the last quarantine, synced.
func (s *Store) recordQuarantine(q Quarantine) error {
	body, err := encodeQuarantine(q)
	if err != nil {
		return err
	}
	return s.update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(metaQuarantine, body)
	})
}

// freeName returns base if no file has that name, else the first free
// one of base-2, base-3, …: a quarantine never replaces an earlier one's
// file (two in the same second share a timestamp).
func freeName(base string) (string, error) {
	for i := 1; i <= 1000; i++ {
		name := base
		if i > 1 {
			name = fmt.Sprintf("%s-%d", base, i)
		}
		switch _, err := os.Lstat(name); {
		case errors.Is(err, fs.ErrNotExist):
			return name, nil
		case err != nil:
			return "", err
		}
	}
	return "", fmt.Errorf("no free name for %s: 1000 taken", base)
}

// moveNoReplace renames from to to, failing with fs.ErrExist rather than
// replacing a file already named to. It links to first (which refuses an
// existing name) and then removes from; a crash in between leaves both
// names on the one file, which finishQuarantine recognises (os.SameFile).
// Where the filesystem has no hard links it renames after checking that
// to is free.
func moveNoReplace(from, to string) error {
	err := os.Link(from, to)
	switch {
	case err == nil:
		return os.Remove(from)
	case errors.Is(err, fs.ErrExist), errors.Is(err, fs.ErrNotExist):
		return err
	}
	if _, serr := os.Lstat(to); !errors.Is(serr, fs.ErrNotExist) {
		if serr == nil {
			return &fs.PathError{Op: "rename", Path: to, Err: fs.ErrExist}
		}
		return serr
	}
	return os.Rename(from, to)
}
