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
	// File is the path the damaged hearth.db was moved to: the first
	// free one of hearth.db.corrupt-<time>, -2, …; "" when there was no
	// file to move (hearth.db was missing although its marker said a
	// store existed).
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

// pendingQuarantine is the content of PendingQuarantineName: what a
// quarantine under way has decided, written durably before it touches
// hearth.db, so that the next Open can finish it after a crash.
type pendingQuarantine struct {
	At time.Time `json:"at"`
	// File is where hearth.db is (being) moved; "" when there was no
	// hearth.db to move.
	File  string `json:"file,omitempty"`
	Cause string `json:"cause"`
}

// quarantine moves the damaged store in dir aside and opens a fresh one,
// in steps each durable before the next, so that a crash at any point
// leaves the next Open to finish it (finishQuarantine), never a silently
// empty store and never a lost salvage:
//
//  1. the pending-quarantine file (PendingQuarantineName: when, the
//     name hearth.db goes to, the cause), written temp → fsync → rename
//     → directory fsync. The name is the first free one of
//     hearth.db.corrupt-<time>, -2, … (freeName);
//  2. then finishQuarantine: the move, the salvage, the fresh store with
//     the record in its first commit, the salvaged records, and the
//     removal of the pending file.
//
// cause is Open's ErrDamaged error.
func quarantine(dir string, opts Options, h hooks, cause error) (*Store, error) {
	at := clock(opts)().UTC()
	path := filepath.Join(dir, FileName)
	p := pendingQuarantine{At: at, Cause: cause.Error()}
	switch _, err := os.Lstat(path); {
	case err == nil:
		if p.File, err = freeName(path + QuarantineSuffix + at.Format("20060102T150405Z")); err != nil {
			return nil, fmt.Errorf("quarantine damaged store: %w (it was: %v)", err, cause)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("quarantine damaged store: %w (it was: %v)", err, cause)
	}
	body, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	if err := writeDurably(dir, PendingQuarantineName, body); err != nil {
		return nil, fmt.Errorf("quarantine damaged store: %w (it was: %v)", err, cause)
	}
	if err := h.step("pending"); err != nil {
		return nil, err
	}
	return finishQuarantine(dir, opts, h, p, false)
}

func clock(opts Options) func() time.Time {
	if opts.Now != nil {
		return opts.Now
	}
	return time.Now
}

func (h hooks) step(name string) error {
	if h.quarantineStep != nil {
		return h.quarantineStep(name)
	}
	return nil
}

// resumeQuarantine finishes the quarantine whose pending file Open found
// in dir: the last one was interrupted (a crash). An unreadable pending
// file is damage too: whatever hearth.db is (the damaged file or a fresh
// store of the interrupted quarantine, which served nothing), it is
// moved aside and salvaged.
func resumeQuarantine(dir string, opts Options, h hooks) (*Store, error) {
	pending := filepath.Join(dir, PendingQuarantineName)
	b, err := os.ReadFile(pending)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", pending, err)
	}
	var p pendingQuarantine
	if err := json.Unmarshal(b, &p); err != nil || p.At.IsZero() {
		at := clock(opts)().UTC()
		p = pendingQuarantine{At: at, Cause: fmt.Sprintf("an interrupted quarantine left %s unreadable (%v)", pending, err)}
		path := filepath.Join(dir, FileName)
		if _, err := os.Lstat(path); err == nil {
			if p.File, err = freeName(path + QuarantineSuffix + at.Format("20060102T150405Z")); err != nil {
				return nil, err
			}
		}
	}
	return finishQuarantine(dir, opts, h, p, true)
}

// finishQuarantine carries out the pending quarantine p, from wherever a
// crash stopped it (resumed: this is a later Open). Each step is done
// or found done:
//
//  1. hearth.db is moved to p.File (moveNoReplace; directory fsync'd).
//     When p.File already exists, the move was done and hearth.db, if
//     any, is a fresh store the interrupted quarantine created: it held
//     nothing served, and it is moved aside to
//     hearth.db.unfinished-<time> (never deleted), or, if it is p.File's
//     own second name (a crash inside the move), unlinked;
//  2. the salvage reads p.File (salvageFile);
//  3. the fresh store is created with the quarantine record (zero
//     counts) in its first commit;
//  4. the salvaged records and the record with its counts, in one synced
//     commit (restore);
//  5. the pending file is removed (directory fsync'd).
//
// A crash before 5 makes the next Open do it again from 1.
func finishQuarantine(dir string, opts Options, h hooks, p pendingQuarantine, resumed bool) (*Store, error) {
	path := filepath.Join(dir, FileName)
	q := Quarantine{At: p.At, File: p.File, Cause: p.Cause}
	if resumed {
		q.Cause += fmt.Sprintf("; the quarantine was interrupted and finished at %s", clock(opts)().UTC().Format(time.RFC3339))
	}
	fail := func(err error) (*Store, error) {
		return nil, fmt.Errorf("quarantine damaged store: %w (it was: %s)", err, p.Cause)
	}
	movedExists := false
	if p.File != "" {
		switch _, err := os.Lstat(p.File); {
		case err == nil:
			movedExists = true
		case !errors.Is(err, fs.ErrNotExist):
			return fail(err)
		}
	}
	if !movedExists && p.File != "" {
		switch err := moveNoReplace(path, p.File); {
		case err == nil:
		case errors.Is(err, fs.ErrNotExist):
			q.File = "" // nothing to move any more
			q.Cause += "; the damaged file is gone"
		default:
			return fail(err)
		}
	} else {
		aside, err := moveAside(path, p.File, clock(opts)().UTC())
		if err != nil {
			return fail(err)
		}
		if aside != "" {
			q.Cause += "; the store the interrupted quarantine had created was moved to " + aside
		}
	}
	if err := syncDir(dir); err != nil {
		return fail(err)
	}
	if err := h.step("moved"); err != nil {
		return nil, err
	}
	var sv *salvage
	if q.File != "" {
		sv = salvageFile(q.File)
	}
	s, err := openFile(dir, opts, h, &q) // a fresh file that fails again is no loop
	if err != nil {
		return nil, fmt.Errorf("open a fresh store after quarantining %s: %w", q.File, err)
	}
	if err := h.step("fresh"); err != nil {
		_ = s.Close()
		return nil, err
	}
	if sv != nil {
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
	}
	if err := h.step("restored"); err != nil {
		_ = s.Close()
		return nil, err
	}
	if err := os.Remove(filepath.Join(dir, PendingQuarantineName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		_ = s.Close()
		return fail(err)
	}
	if err := syncDir(dir); err != nil {
		_ = s.Close()
		return fail(err)
	}
	return s, nil
}

// moveAside moves the store an interrupted quarantine created at path
// to the first free hearth.db.unfinished-<at> name and returns that
// name; "" if there is no file at path, or if it is moved's other name
// (a crash between moveNoReplace's link and unlink), which it unlinks.
func moveAside(path, moved string, at time.Time) (string, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if moved != "" {
		if mi, err := os.Lstat(moved); err == nil && os.SameFile(fi, mi) {
			return "", os.Remove(path)
		}
	}
	aside, err := freeName(path + UnfinishedSuffix + at.Format("20060102T150405Z"))
	if err != nil {
		return "", err
	}
	return aside, moveNoReplace(path, aside)
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
