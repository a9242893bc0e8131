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
