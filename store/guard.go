package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// MarkerName is the name of the marker file Open keeps beside hearth.db
// once a store was created there: it says that a store existed, so that
// a hearth.db found missing, empty or all zeros is damage, never a
// first start.
const MarkerName = FileName + ".marker"

// ErrDamaged means hearth.db cannot be trusted: bbolt panicked or failed
// on it, Tx.Check found an inconsistency, the file is shorter than its
// meta page says, or it is missing, empty or all zeros although the
// marker says a store existed. Open's error (and a read's, if bbolt
// panics later) wraps it and names the file.
var ErrDamaged = errors.New("store is damaged")

// damagedError is ErrDamaged with the file and what was found.
type damagedError struct {
	path  string
	cause error
}

func (e *damagedError) Error() string {
	return fmt.Sprintf("database file %s is damaged: %v", e.path, e.cause)
}

func (e *damagedError) Unwrap() []error { return []error{ErrDamaged, e.cause} }

func damaged(path string, format string, args ...any) error {
	return &damagedError{path: path, cause: fmt.Errorf(format, args...)}
}

// guarded runs fn, turning a panic, or a memory fault on bbolt's mmap
// (a page past the end of a truncated file), into an error that wraps
// ErrDamaged and names path; a record that fails its checksum
// (*recordError) gets path named too. bbolt's Update and View roll their
// transaction back on a panic before it reaches here, so the DB stays
// usable; a panic inside bolt.Open may leave its file open (openBolt
// closes it).
func guarded(path string, fn func() error) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if p := recover(); p != nil {
			err = damaged(path, "bbolt panicked: %v", p)
		}
	}()
	err = fn()
	var de *damagedError
	if isRecordError(err) && !errors.As(err, &de) {
		err = &damagedError{path: path, cause: err}
	}
	return err
}

// precheck looks at dir's files before bbolt sees them. It returns
// whether the marker exists, or ErrDamaged when hearth.db is missing or
// empty although the marker exists, or all zeros.
func precheck(path, marker string) (hasMarker bool, err error) {
	switch _, err := os.Stat(marker); {
	case err == nil:
		hasMarker = true
	case !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("store marker: %w", err)
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		if hasMarker {
			return true, damaged(path, "file is missing, but %s says a store existed", marker)
		}
		return false, nil // first start
	}
	if err != nil {
		return hasMarker, err // a PathError names the file
	}
	defer f.Close()
	// 64 KiB covers both meta pages at any page size up to 32 KiB.
	head := make([]byte, 64<<10)
	n, err := io.ReadFull(f, head)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return hasMarker, fmt.Errorf("read database file %s: %w", path, err)
	}
	switch {
	case n == 0 && hasMarker:
		return true, damaged(path, "file is empty, but %s says a store existed", marker)
	case n == 0:
		return false, nil // created but never initialised: first start
	case allZero(head[:n]):
		return hasMarker, damaged(path, "its first %d bytes are all zeros", n)
	}
	return hasMarker, nil
}

func allZero(b []byte) bool {
	return len(bytes.Trim(b, "\x00")) == 0
}

// boltOpenError classifies an error of bolt.Open: a held lock, a file
// that cannot be read, or a file that is not a valid bbolt database.
func boltOpenError(dir, path string, err error) error {
	switch {
	case errors.Is(err, berrors.ErrTimeout):
		return &lockedError{dir: dir, path: path, err: err}
	case errors.Is(err, ErrDamaged):
		return err
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch),
		errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrInvalidMapping):
		return &damagedError{path: path, cause: err}
	}
	return openError(dir, path, err)
}

// check verifies the open db: the file holds every page its meta page
// counts, every bucket and key can be walked and every record of the
// checksummed buckets passes its checksum (in this goroutine, under
// guarded, so that a bad page is an error), the quarantine record
// passes its checksum and decodes, the pending and ends
// indexes agree with ops (indexCheck), then bbolt's Tx.Check, which
// also finds pages both used and free or neither. Tx.Check runs in a
// goroutine of bbolt's that guarded cannot cover; the walk before it reads
// the same pages, so damage it would panic on is found first. Open waits
// for it to the end: a check left running beside the writer would race
// with it inside bbolt (Tx.Check reads the freelist without its lock).
func check(db *bolt.DB, path string) (badNotes []droppedNotification, _ error) {
	tx, err := db.Begin(false)
	if err != nil {
		return nil, err
	}
	finished := false
	defer func() {
		if finished {
			_ = tx.Rollback()
		}
	}()
	err = guarded(path, func() error {
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		if tx.Size() > info.Size() {
			return damaged(path, "file is %d bytes, its meta page says %d: truncated", info.Size(), tx.Size())
		}
		ic, err := collectIndexes(tx)
		if err != nil {
			return err
		}
		err = tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			switch {
			case bytes.Equal(name, bucketOps):
				return verify(name, b, ic.op)
			case isChecksummed(name):
				return verify(name, b, nil)
			case bytes.Equal(name, bucketNotifications):
				var err error
				badNotes, err = verifyNotifications(b)
				return err
			case bytes.Equal(name, bucketMeta):
				if err := walk(b); err != nil {
					return err
				}
				if v := b.Get(metaQuarantine); v != nil {
					_, err := decodeQuarantine(v)
					return err
				}
				return nil
			}
			return walk(b)
		})
		if err != nil {
			return err
		}
		return ic.finish()
	})
	if err != nil {
		finished = true
		var de *damagedError
		if !errors.As(err, &de) {
			err = &damagedError{path: path, cause: err}
		}
		return nil, err
	}
	finished = true
	var problems []error
	for err := range tx.Check() {
		if len(problems) < 10 {
			problems = append(problems, err)
		}
	}
	if len(problems) > 0 {
		return nil, &damagedError{path: path, cause: fmt.Errorf("bbolt check: %w", errors.Join(problems...))}
	}
	return badNotes, nil
}

// walk reads every key of b and of its nested buckets.
func walk(b *bolt.Bucket) error {
	return b.ForEach(func(k, v []byte) error {
		if v == nil {
			if nested := b.Bucket(k); nested != nil {
				return walk(nested)
			}
		}
		return nil
	})
}

// verify reads every record of the checksummed bucket named name and
// checks its frame (unframe); a legacy record (no frame, no checksum)
// must decode as its bucket's type under its key (decodeCandidate: an op
// naming that op_id, an audit entry or dead letter of that Seq, a
// state). The first that fails is a *recordError. Then each record's
// key and JSON go to each, if not nil.
func verify(name []byte, b *bolt.Bucket, each func(k, body []byte) error) error {
	return b.ForEach(func(k, v []byte) error {
		if v == nil {
			if nested := b.Bucket(k); nested != nil {
				return walk(nested)
			}
		}
		if len(v) > 0 && v[0] == '{' {
			if _, err := decodeCandidate(name, k, v); err != nil {
				if isRecordError(err) {
					return err // already names the record
				}
				return legacyError(name, k, err)
			}
		}
		body, err := unframe(name, k, v)
		if err != nil || each == nil {
			return err
		}
		return each(k, body)
	})
}

// legacyError is the damage of a legacy record that does not decode: it
// has no checksum, so that is the only sign of a changed byte.
func legacyError(bucket, key []byte, err error) error {
	return &recordError{bucket: string(bucket), key: string(key), what: "legacy record does not decode: " + err.Error()}
}

// writeMarker creates dir's marker (writeDurably).
func writeMarker(dir, marker string) error {
	msg := fmt.Sprintf("hearth store created %s; if %s is missing, empty or all zeros, it is damaged\n",
		time.Now().UTC().Format(time.RFC3339), FileName)
	if err := writeDurably(dir, filepath.Base(marker), []byte(msg)); err != nil {
		return fmt.Errorf("store marker %s: %w", marker, err)
	}
	return nil
}

// writeDurably creates dir/name holding data: a temp file, fsync'd,
// renamed into place, then the directory fsync'd, so that after a crash
// the file is either absent or complete, and durable once it returns.
func writeDurably(dir, name string, data []byte) error {
	tmp, err := os.CreateTemp(dir, name+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, name))
	}
	if err == nil {
		err = syncDir(dir)
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
