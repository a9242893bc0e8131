package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// FileName is the name of the database file inside the data directory.
const FileName = "hearth.db"

// DefaultLockTimeout is how long Open waits for the file lock when
// Options.LockTimeout is zero.
const DefaultLockTimeout = time.Second

var (
	// ErrLocked means another process (or another Store in this one) holds
	// the data directory's file lock. Open's error wraps it and names the
	// directory and file.
	ErrLocked = errors.New("data directory is locked by another process")

	// ErrClosed is returned by every method called after Close.
	ErrClosed = errors.New("store is closed")
)

// Buckets. Keys of ops are op_id bytes; keys of pending are the 8-byte
// big-endian Seq followed by the op_id, with empty values; keys of states
// are device IDs; keys of audit and deadletters are the entry's 8-byte
// big-endian Seq; keys of ends are an 8-byte big-endian sequence of
// their own, in the order ops were stored terminal, with the op_id as
// value (see LastEnded).
var (
	bucketOps         = []byte("ops")
	bucketPending     = []byte("pending")
	bucketStates      = []byte("states")
	bucketAudit       = []byte("audit")
	bucketDeadLetters = []byte("deadletters")
	bucketEnds        = []byte("ends")
)

// Options configures Open. Every zero value has a documented default.
type Options struct {
	// LockTimeout is how long Open waits for the exclusive lock on the
	// database file before it gives up with ErrLocked. Zero or negative
	// means DefaultLockTimeout (1s). bbolt polls the lock every 50 ms and
	// gives up once less than 50 ms of the timeout is left, so a value of
	// 50 ms or less tries once.
	LockTimeout time.Duration

	// OnCommit, if set, is called after every group commit with its
	// result: nil when the transaction was committed (and synced), or
	// bbolt's error when it was not, such as a full disk or an I/O
	// error ("file resize error: file too large"). Every caller in the
	// group got the same error (the store_error the dispatcher answers),
	// except that a Save whose op's stored record is damaged fails alone
	// (an error wrapping ErrDamaged, also given to OnDamage) while the
	// rest of its group is committed: that commit is reported nil.
	// It runs in the writer goroutine, before the group's callers are
	// woken, so it must be quick and must not call the Store. A nil
	// OnCommit is never called.
	OnCommit func(err error)
	// OnCommitTime, if set, is called after every group commit, with
	// OnCommit, with how long the commit took in real (monotonic) time:
	// its transaction, the fsync included, whether it succeeded or not.
	// It runs in the writer goroutine, so it must be quick and must not
	// call the Store.
	OnCommitTime func(took time.Duration)

	// OnDamage, if set, is called whenever a read, a prune or a commit
	// of the open Store finds damage: with the error (wrapping
	// ErrDamaged, naming the file and, for a record, which one) that the
	// call then returns to its caller. A record that fails its checksum,
	// a legacy record that does not decode, an index naming a missing
	// op, a panic inside bbolt on a bad page. It is called once per
	// finding, so a record read again is reported again. It runs in the
	// goroutine that found the damage (a reader's, or the writer's,
	// before the group's callers are woken), possibly in several at
	// once: it must be safe for concurrent use, must not block, and must
	// not call the Store. Open's own damage is Open's error, not
	// reported here. A nil OnDamage is never called.
	OnDamage func(err error)

	// Quarantine, if true, makes Open recover from a damaged store
	// instead of failing: when the file fails to open or check
	// (ErrDamaged), Open moves it to hearth.db.corrupt-<time> (or -2, …:
	// never replacing a file, never deleting it), creates a fresh store,
	// copies into it every record of the damaged file that can be read
	// and trusted (ops, audit entries, dead letters, device states; see
	// salvage.go), stores every copied op that had not ended as ended
	// (failed, reason devices.ReasonStoreDamaged, with a dead letter),
	// and records a Quarantine there (Store.Quarantine) for the caller
	// to announce. The steps are durable in order, and a
	// pending-quarantine file (PendingQuarantineName) is kept beside
	// the store until the last, so that after a crash at any point the
	// next Open with Quarantine finishes it (quarantine.go). A locked or
	// unreadable file is never quarantined. False: Open returns the
	// ErrDamaged error, and so it does while a pending-quarantine file
	// exists.
	Quarantine bool

	// Now is the clock of the quarantine's timestamp; nil means
	// time.Now.
	Now func() time.Time
}

// Store is an open data directory. Its methods are safe for concurrent use.
type Store struct {
	db   *bolt.DB
	path string
	// droppedNotes are the outbox records Open found damaged and deleted
	// (DroppedNotifications).
	droppedNotes []error

	mu      sync.Mutex
	wake    *sync.Cond // signalled when queue grows or closed is set
	queue   []*request // requests waiting for the next commit, in arrival order
	closed  bool
	stopped chan struct{} // closed when the writer goroutine has returned

	closeOnce sync.Once
	closeErr  error

	commits  atomic.Uint64 // read-write transactions run by the writer
	onCommit func(error)   // Options.OnCommit, or nil
	// onCommitTime is Options.OnCommitTime, or nil.
	onCommitTime func(time.Duration)
	onDamage     func(error) // Options.OnDamage, or nil
	hooks        hooks
}

// hooks let tests observe and hold the writer. They are set before the
// writer starts and never change.
type hooks struct {
	// queued runs in the caller's goroutine once its request joined the
	// queue, with the queue's length at that moment.
	queued func(n int)
	// beforeCommit runs in the writer goroutine with the number of
	// requests in a group, before its transaction begins.
	beforeCommit func(group int)
	// failCommit, if set, runs in the writer goroutine before each
	// transaction; a non-nil error fails the group's commit with it, as
	// a full disk would, without touching the file.
	failCommit func() error
	// closing runs in Close once new writes are refused, before it waits
	// for the writer.
	closing func()
	// quarantineStep runs after each durable step of a quarantine
	// ("pending", "moved", "fresh", "restored"); a non-nil error stops
	// the quarantine there, as a crash would, and Open returns it.
	quarantineStep func(step string) error
}

// request is one Save, SaveState, AppendAudit or AddDeadLetters call
// waiting for the writer. Its records are already encoded, so applying it can fail only on
// bbolt's own errors.
type request struct {
	ops   []encodedOp
	state *encodedState
	// records are audit entries' or dead letters' JSON without their
	// seq, in order; putRecord stores one in its seqLog's bucket.
	records   [][]byte
	putRecord func(buckets, []byte) error
	// apply, if set, runs last in the writer's transaction: the
	// notify outbox's writes (notifications.go).
	apply func(buckets) error
	done  chan error // buffered: the writer never blocks on a caller
}

// Open opens the store in dir, creating dir (mode 0700) and dir/hearth.db
// (mode 0600) if missing, and starts its writer goroutine. Close it when
// done.
//
// If another process holds the database, Open waits opts.LockTimeout and
// then returns an error that wraps ErrLocked and says which directory is
// in use. An unreadable file gives an error naming its path.
//
// Open never panics on a damaged file and never starts empty over a store
// that existed: a file that bbolt panics or fails on, that is shorter than
// its meta page says, that holds a record failing its checksum (naming
// the record: op "x": record fails its checksum), that fails Tx.Check,
// or that is all zeros, gives an error that wraps ErrDamaged and names
// the file, and so does a hearth.db that is missing
// or empty while its marker (MarkerName) exists. A missing hearth.db with
// no marker is a first start. Open writes the marker when it is missing,
// so a store from before the marker gets one at its first open.
func Open(dir string, opts Options) (*Store, error) {
	return open(dir, opts, hooks{})
}

func open(dir string, opts Options, h hooks) (*Store, error) {
	switch _, err := os.Lstat(filepath.Join(dir, PendingQuarantineName)); {
	case err == nil && opts.Quarantine:
		return resumeQuarantine(dir, opts, h)
	case err == nil:
		return nil, damaged(filepath.Join(dir, FileName), "a quarantine was interrupted (%s exists) and must be finished: open with Quarantine",
			filepath.Join(dir, PendingQuarantineName))
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("pending quarantine: %w", err)
	}
	s, err := openFile(dir, opts, h, nil)
	if err != nil && opts.Quarantine && errors.Is(err, ErrDamaged) {
		return quarantine(dir, opts, h, err)
	}
	return s, err
}

// openFile opens dir's store. A non-nil fresh is a quarantine that has
// just moved hearth.db aside: a new hearth.db is allowed although the
// marker says a store existed, and fresh is stored as the quarantine
// record in the same commit that creates the buckets, its first.
func openFile(dir string, opts Options, h hooks, fresh *Quarantine) (*Store, error) {
	timeout := opts.LockTimeout
	if timeout <= 0 {
		timeout = DefaultLockTimeout
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	path := filepath.Join(dir, FileName)
	marker := filepath.Join(dir, MarkerName)
	hasMarker, err := precheck(path, marker)
	if fresh != nil && errors.Is(err, ErrDamaged) {
		if _, serr := os.Stat(path); errors.Is(serr, fs.ErrNotExist) {
			err = nil
		}
	}
	if err != nil {
		return nil, err
	}
	db, err := openBolt(path, &bolt.Options{Timeout: timeout})
	if err != nil {
		return nil, boltOpenError(dir, path, err)
	}
	badNotes, err := check(db, path)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	err = guarded(path, func() error {
		return db.Update(func(tx *bolt.Tx) error {
			for _, name := range [][]byte{bucketOps, bucketPending, bucketStates, bucketAudit, bucketDeadLetters, bucketEnds, bucketMeta, bucketNotifications} {
				if _, err := tx.CreateBucketIfNotExists(name); err != nil {
					return fmt.Errorf("bucket %s: %w", name, err)
				}
			}
			for _, bad := range badNotes {
				if err := tx.Bucket(bucketNotifications).Delete(bad.key); err != nil {
					return fmt.Errorf("delete damaged %s: %w", recordName(bucketNotifications, bad.key), err)
				}
			}
			if fresh == nil {
				return nil
			}
			body, err := encodeQuarantine(*fresh)
			if err != nil {
				return err
			}
			return tx.Bucket(bucketMeta).Put(metaQuarantine, body)
		})
	})
	if err != nil {
		_ = db.Close()
		if errors.Is(err, ErrDamaged) {
			return nil, err
		}
		return nil, fmt.Errorf("database file %s: %w", path, err)
	}
	if !hasMarker {
		// After hearth.db is initialised and synced, so that a crash in
		// between leaves a store without a marker (opened as an upgrade),
		// never a marker without a store.
		if err := writeMarker(dir, marker); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	s := &Store{db: db, path: path, stopped: make(chan struct{}), onCommit: opts.OnCommit, onCommitTime: opts.OnCommitTime, onDamage: opts.OnDamage, hooks: h}
	for _, bad := range badNotes {
		s.droppedNotes = append(s.droppedNotes, bad.err)
	}
	s.wake = sync.NewCond(&s.mu)
	go s.writer()
	return s, nil
}

// openBolt runs bolt.Open under guarded. A panic inside bolt.Open (an
// invalid freelist page) leaves bbolt's file open with its flock held;
// openBolt closes that file, so the lock is released for the salvage's
// read-only open of the same file (a shared flock, which the leaked
// exclusive one would refuse). Its mapping, if any, stays until exit. The
// quarantine's rename would work on Linux even with the file still open:
// a rename does not care about open descriptors or flocks.
func openBolt(path string, o *bolt.Options) (*bolt.DB, error) {
	var f *os.File
	o.OpenFile = func(name string, flag int, perm os.FileMode) (*os.File, error) {
		var err error
		f, err = os.OpenFile(name, flag, perm)
		return f, err
	}
	var db *bolt.DB
	err := guarded(path, func() error {
		var err error
		db, err = bolt.Open(path, 0o600, o)
		return err
	})
	if db == nil && f != nil {
		_ = f.Close() // already closed unless bolt.Open panicked
	}
	return db, err
}

func openError(dir, path string, err error) error {
	if errors.Is(err, berrors.ErrTimeout) {
		return &lockedError{dir: dir, path: path, err: err}
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Path == path {
		return err // already names the file
	}
	return fmt.Errorf("database file %s is unreadable: %w", path, err)
}

// lockedError is Open's error when the file lock is held: plain words for
// the operator, ErrLocked and bbolt's ErrTimeout for errors.Is.
type lockedError struct {
	dir, path string
	err       error
}

func (e *lockedError) Error() string {
	return fmt.Sprintf("data directory %q is in use by another hearthd (lock on %s held); stop it or use -data-dir", e.dir, e.path)
}

func (e *lockedError) Unwrap() []error { return []error{ErrLocked, e.err} }

// Path returns the database file's path: dir/hearth.db.
func (s *Store) Path() string { return s.path }

// Close stops taking writes, waits until every request already queued is
// committed and its caller woken, and closes the file, releasing the lock.
// Calling it again returns the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.wake.Signal()
		s.mu.Unlock()
		if s.hooks.closing != nil {
			s.hooks.closing()
		}
		<-s.stopped
		s.closeErr = s.db.Close()
	})
	return s.closeErr
}

// submit queues r for the next group commit and waits for its result.
func (s *Store) submit(r *request) error {
	r.done = make(chan error, 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.queue = append(s.queue, r)
	n := len(s.queue)
	s.wake.Signal()
	s.mu.Unlock()
	if s.hooks.queued != nil {
		s.hooks.queued(n)
	}
	return <-r.done
}

// writer is the only goroutine that writes. Each turn it takes every
// request queued so far and commits them in one transaction; requests that
// arrive meanwhile wait for the next turn. It returns once the store is
// closed and the queue is empty.
func (s *Store) writer() {
	defer close(s.stopped)
	for {
		s.mu.Lock()
		for len(s.queue) == 0 && !s.closed {
			s.wake.Wait()
		}
		group := s.queue
		s.queue = nil
		s.mu.Unlock()
		if len(group) == 0 {
			return // closed and drained
		}
		began := time.Now()
		failed, err := s.commit(group)
		if s.onCommitTime != nil {
			s.onCommitTime(time.Since(began))
		}
		if s.onCommit != nil {
			s.onCommit(err)
		}
		for i, r := range group {
			if failed[i] != nil {
				r.done <- failed[i]
			} else {
				r.done <- err
			}
		}
	}
}

// commit applies group in arrival order in one read-write transaction
// and returns its result (err) and the requests that failed alone
// (failed). Before applying a request it reads the stored
// record of each of its ops (oldHead), in the same transaction: a request
// one of whose ops' record is damaged (or does not decode) is not applied,
// its error is failed[i] (i its index in group), and the rest of the group
// is committed; err is then nil. Any other error fails the whole group.
func (s *Store) commit(group []*request) (failed []error, err error) {
	failed = make([]error, len(group))
	if s.hooks.beforeCommit != nil {
		s.hooks.beforeCommit(len(group))
	}
	s.commits.Add(1)
	if s.hooks.failCommit != nil {
		if err := s.hooks.failCommit(); err != nil {
			return failed, err
		}
	}
	err = s.update(func(tx *bolt.Tx) error {
		b := txBuckets(tx)
	requests:
		for i, r := range group {
			for _, op := range r.ops {
				if _, _, err := b.oldHead(op.id); err != nil {
					if isRecordError(err) {
						err = &damagedError{path: s.path, cause: err}
						s.reportDamage(err)
					}
					failed[i] = err
					continue requests
				}
			}
			for _, op := range r.ops {
				if err := b.putOp(op); err != nil {
					return err
				}
			}
			if r.state != nil {
				if err := b.states.Put(r.state.key, r.state.value); err != nil {
					return fmt.Errorf("save state of %s: %w", r.state.key, err)
				}
			}
			for _, body := range r.records {
				if err := r.putRecord(b, body); err != nil {
					return err
				}
			}
			if r.apply != nil {
				if err := r.apply(b); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return failed, err
}

// view runs fn in a read-only transaction, reporting ErrClosed after
// Close, and damage to OnDamage.
func (s *Store) view(fn func(b buckets) error) error {
	err := guarded(s.path, func() error {
		return s.db.View(func(tx *bolt.Tx) error {
			return fn(txBuckets(tx))
		})
	})
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	s.reportDamage(err)
	return err
}

// update runs fn in a read-write transaction; a panic in bbolt is an
// error wrapping ErrDamaged, and the transaction is rolled back. Damage
// is reported to OnDamage.
func (s *Store) update(fn func(tx *bolt.Tx) error) error {
	err := guarded(s.path, func() error { return s.db.Update(fn) })
	s.reportDamage(err)
	return err
}

// reportDamage calls OnDamage with err if err wraps ErrDamaged.
func (s *Store) reportDamage(err error) {
	if s.onDamage != nil && errors.Is(err, ErrDamaged) {
		s.onDamage(err)
	}
}

// buckets are the store's buckets within one transaction.
type buckets struct {
	tx                                      *bolt.Tx
	ops, pending, states, audit, dead, ends *bolt.Bucket
	// notes is the notify outbox (notifications.go).
	notes *bolt.Bucket
}

// txBuckets returns the store's buckets in tx.
func txBuckets(tx *bolt.Tx) buckets {
	return buckets{
		tx:      tx,
		ops:     tx.Bucket(bucketOps),
		pending: tx.Bucket(bucketPending),
		states:  tx.Bucket(bucketStates),
		audit:   tx.Bucket(bucketAudit),
		dead:    tx.Bucket(bucketDeadLetters),
		ends:    tx.Bucket(bucketEnds),
		notes:   tx.Bucket(bucketNotifications),
	}
}

// seqKey is the key of a record in a bucket kept in Seq order (audit,
// deadletters): its Seq, 8 bytes big-endian, so that keys sort in Seq
// order.
func seqKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(make([]byte, 0, 8), seq)
}

// seqKeyName names a key in errors: its Seq, or its bytes in hex if it
// is not 8 bytes long.
func seqKeyName(k []byte) string {
	if len(k) != 8 {
		return fmt.Sprintf("with key %x", k)
	}
	return fmt.Sprintf("seq %d", binary.BigEndian.Uint64(k))
}
