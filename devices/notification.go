package devices

import (
	"encoding/json"
	"time"
)

// OutboxNotification is a notification waiting in one notify service's
// outbox: stored before it is queued for sending, and deleted once it is
// delivered, given up, expired or dropped from a full queue, so that one
// still waiting when Hearth stops (a kill -9, a power cut) is sent after
// the restart. One notification sent to two notify services is two
// entries with the same ID.
//
// Its JSON, as the store keeps it:
//
//	{"seq":7,"id":"01J…","service":"ntfy","device":"front_door","op_id":"…",
//	 "queued_at":"…","deadline":"…","payload":{"id":"01J…","title":…}}
type OutboxNotification struct {
	// Seq orders the entries as they were stored; the store assigns it.
	Seq uint64 `json:"seq"`
	// ID is the notification's id (a ULID), the "id" of its Payload: the
	// same for every notify service it goes to.
	ID string `json:"id"`
	// Service is the notify service it is for.
	Service string `json:"service"`
	// Device and OpID name the command it is about, if any (for logs).
	Device string `json:"device,omitempty"`
	OpID   string `json:"op_id,omitempty"`
	// QueuedAt is when it was queued; Deadline is QueuedAt plus the notify
	// TTL, after which it is not worth delivering.
	QueuedAt time.Time `json:"queued_at"`
	Deadline time.Time `json:"deadline"`
	// Payload is what is sent: the notification as JSON.
	Payload json.RawMessage `json:"payload"`
}
