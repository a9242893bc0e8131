// Package store is Hearth's durable record: every accepted command (a
// devices.Op) with its pending index, the last confirmed state of every
// device, the terminal ops kept so that the same op_id sent again
// returns the stored result, the audit trail of safety-critical
// commands (devices.AuditEntry) and the dead-letter store of commands that
// ended without success (devices.DeadLetter), and the notify services'
// outbox of notifications not yet delivered (devices.OutboxNotification).
// It keeps them in one bbolt file, hearth.db, in the data directory.
//
// The package owns the file, its buckets and the encoding; callers see a
// few verbs. Ops are written with Save and read with Lookup and Pending;
// device states with SaveState and States; audit entries with AppendAudit
// and Audit; dead letters with AddDeadLetters and DeadLetters; the
// outbox with SaveNotifications, DeleteNotifications and Notifications
// (not salvaged by a quarantine); retention is
// PruneTerminal, PruneAudit and PruneDeadLetters.
// It never decides what a status means beyond devices.Status.Terminal, and
// it imports nothing of Hearth's but devices.
//
// # Durability and group commit
//
// Save, SaveState, AppendAudit and AddDeadLetters return only after their transaction is
// committed and fsync'd (bbolt's NoSync is false), which is what
// DESIGN.md's "nothing accepted is lost" asks for. One writer goroutine
// owns every write: it takes all requests waiting at that moment, applies
// them in arrival order in one read-write transaction, commits once and
// wakes each caller with the shared result. A lone caller commits at once;
// callers that arrive while a commit is in flight ride the next one. So
// throughput grows with the number of concurrent callers instead of being
// capped at one fsync (about 10 ms on an SD card) per call, and no caller
// waits on a timer, unlike bbolt's DB.Batch.
//
// # Opening a damaged file
//
// Open never panics on a damaged hearth.db and never starts empty over a
// store that existed (the marker file MarkerName says one did): it
// checks the file (size, zeros, bbolt's open, a walk of every key, the
// pending and ends indexes against ops, and Tx.Check) and returns an
// error wrapping ErrDamaged that names the file. A panic in bbolt on a
// later read, prune or commit is the same error, and every such finding
// of an open Store is also given to Options.OnDamage.
// docs/STORE.md, "Opening", has the table and the cost of the check.
//
// Records of ops, audit entries, dead letters, device states and the
// quarantine record carry a CRC-32C over bucket, key and JSON
// (checksum.go); a record that fails it is damage (ErrDamaged, naming the
// record) at every read and at open. Because it covers the key, a
// flipped key byte is caught at open; after Open, a lookup of the old
// key simply misses. Legacy records (no frame) must decode at open. With
// Options.Quarantine, Open moves a damaged file
// aside, salvages every record it can trust out of it into a fresh store
// (salvage.go: bbolt's cursors with recovery past bad pages, and a raw
// scan of every page, pagescan.go) and ends every salvaged op that had
// not ended as failed with reason store_damaged (Quarantine), in steps
// that a crash at any point leaves for the next Open to finish
// (quarantine.go).
//
// # Caveats
//
// A transaction that fails (disk full, I/O error) fails every request in its
// group; only encoding errors, which are found in the caller's goroutine
// before the request is queued, and a damaged stored record of one of the
// request's ops, found by the writer before it applies the request, fail
// a single caller. The ops of one Save
// call are committed together or not at all.
//
// Records are JSON. What Lookup, Pending and States return is decoded, not
// the caller's value: numbers in Target and State come back as float64,
// times keep their instant and offset but not their monotonic reading and
// location (compare them with time.Time.Equal), and an op's empty State map
// comes back nil.
//
// The store assigns Seq: the Seq of an op passed to Save is ignored. Read
// it back with Lookup or Pending.
//
// A stored terminal status is final: a later Save of that op_id is
// ignored, whatever it says, so a late write of an attempt can never reopen
// a command that already ended.
//
// Only one Store may have a data directory open at a time, in any process:
// bbolt takes an exclusive flock on hearth.db, and a second Open fails
// with ErrLocked after Options.LockTimeout. On Linux this holds within one
// process too, because flock is per open file description.
//
// The audit trail and the dead-letter store are append-only: entries are
// never changed, only pruned by age (PruneAudit, PruneDeadLetters), and
// their Seqs are never reused. A dead letter is a copy of its op: pruning
// or saving the op does not touch it.
//
// PruneTerminal reads every op, PruneAudit every audit entry and
// PruneDeadLetters every dead letter; run them now and then, not per
// command. bbolt reuses the pages it frees but never
// shrinks the file.
package store
