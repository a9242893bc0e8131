package devices

import "time"

// AuditEvent is what an AuditEntry records.
type AuditEvent string

// Audit events, in the order a command meets them.
const (
	// AuditRejected: the command was refused at intake (Reason says why);
	// nothing was stored or sent.
	AuditRejected AuditEvent = "rejected"
	// AuditAccepted: the command was stored and queued.
	AuditAccepted AuditEvent = "accepted"
	// AuditCheck: one check before an attempt (Check, Passed, Detail).
	AuditCheck AuditEvent = "check"
	// AuditSent: an attempt was handed to the bridge (Attempt).
	AuditSent AuditEvent = "sent"
	// AuditEnded: the command reached a terminal status (Status, Reason).
	AuditEnded AuditEvent = "ended"
	// AuditStoreAcked is no command's: an operator (Principal; "" when
	// the HTTP API is open) acknowledged the quarantine of a damaged
	// store (Detail names it); OpID and Device are empty.
	AuditStoreAcked AuditEvent = "store_quarantine_acked"
)

// Checks made before an attempt at a safety-critical command, in order.
const (
	// CheckAuthorization: the principal may still send this command.
	CheckAuthorization = "authorization"
	// CheckFreshness: the command's TTL has not passed.
	CheckFreshness = "freshness"
	// CheckState: a fresh read of the device's state (Detail shows it).
	CheckState = "state"
)

// AuditEntry is one step in the life of a safety-critical command: who
// sent it, each check before each attempt and its result, each send, and
// the outcome. The store keeps them in order (Seq) and serves them on GET
// /api/v1/audit.
type AuditEntry struct {
	// Seq orders entries; the store assigns it.
	Seq       uint64     `json:"seq"`
	At        time.Time  `json:"at"`
	Event     AuditEvent `json:"event"`
	OpID      string     `json:"op_id"`
	Device    string     `json:"device"`
	Principal string     `json:"principal,omitempty"`
	// Action is the command's action (see Action): unlock, open, lock, ….
	Action string `json:"action,omitempty"`
	// Attempt is the attempt a check or send belongs to, from 1.
	Attempt int `json:"attempt,omitempty"`
	// Check and Passed are set for AuditCheck.
	Check  string `json:"check,omitempty"`
	Passed bool   `json:"passed,omitempty"`
	// Status and Reason are set for AuditRejected and AuditEnded.
	Status Status `json:"status,omitempty"`
	Reason Reason `json:"reason,omitempty"`
	// Detail says in words what happened.
	Detail string `json:"detail,omitempty"`
}

// NewAuditEntry returns the entry of event ev about op, a command to dev,
// at now.
func NewAuditEntry(dev Device, op Op, ev AuditEvent, now time.Time) AuditEntry {
	return AuditEntry{
		At:        now,
		Event:     ev,
		OpID:      op.OpID,
		Device:    op.Device,
		Principal: op.Principal,
		Action:    Action(dev, op.Target),
	}
}

// CheckAudit returns the entry of one check (CheckAuthorization, …)
// before attempt op.Attempts+1 of op, at now.
func CheckAudit(dev Device, op Op, check string, passed bool, detail string, now time.Time) AuditEntry {
	e := NewAuditEntry(dev, op, AuditCheck, now)
	e.Attempt, e.Check, e.Passed, e.Detail = op.Attempts+1, check, passed, detail
	return e
}

// EndAudit returns the entry of op's outcome (its status, reason and
// detail), or of its rejection, at now.
func EndAudit(dev Device, op Op, now time.Time) AuditEntry {
	ev := AuditEnded
	if op.Status == Rejected {
		ev = AuditRejected
	}
	e := NewAuditEntry(dev, op, ev, now)
	e.Attempt, e.Status, e.Reason, e.Detail = op.Attempts, op.Status, op.Reason, op.Detail
	return e
}
