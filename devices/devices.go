package devices

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Class is what kind of device a device is. It decides which attributes a
// command may name and how a reported state confirms a target.
type Class string

// The device classes of DESIGN.md. Commands are validated for Light, Switch,
// Lock and Cover; the other classes are recognised in config but take no
// commands yet.
const (
	Light   Class = "light"
	Switch  Class = "switch"
	Lock    Class = "lock"
	Cover   Class = "cover"
	Climate Class = "climate"
	Valve   Class = "valve"
	Alarm   Class = "alarm"
	Sensor  Class = "sensor"
)

// Classes lists every known class, in documentation order.
var Classes = []Class{Light, Switch, Lock, Cover, Climate, Valve, Alarm, Sensor}

// SafetyCritical reports whether commands to devices of class c guard
// people or property: a lock, an alarm or a valve (DESIGN.md principle 6).
// Such a command is never dropped silently.
func (c Class) SafetyCritical() bool {
	switch c {
	case Lock, Alarm, Valve:
		return true
	}
	return false
}

// ParseClass returns the class named s, or an error listing the known ones.
func ParseClass(s string) (Class, error) {
	for _, c := range Classes {
		if string(c) == s {
			return c, nil
		}
	}
	names := make([]string, len(Classes))
	for i, c := range Classes {
		names[i] = string(c)
	}
	return "", fmt.Errorf("unknown class %q (known: %s)", s, strings.Join(names, ", "))
}

// Device is one configured device.
type Device struct {
	// ID is Hearth's name for the device: the <device> level of
	// hearth/<device>/set. It is a single MQTT topic level.
	ID string
	// Service names the bridge or service that reaches the device.
	Service string
	// Class is the kind of device.
	Class Class
	// Address is the device's name on its bridge, for example Zigbee2MQTT's
	// friendly_name. It defaults to ID.
	Address string
	// Safety is SafetyCritical for a device whose commands guard people or
	// property although its class does not say so (a garage door on a
	// cover); see Device.SafetyCritical and Risky.
	Safety Safety
	// Sleep is how the device sleeps; the zero value is a device that is
	// always listening (mains-powered, or a router).
	Sleep Sleep
	// Offline is what becomes of its commands while its bridge reports it
	// offline; the zero value takes the default of OnOffline.
	Offline Offline
}

// ValidID reports whether id can be a device ID: a non-empty MQTT topic
// level without wildcards ('+', '#'), separators ('/') or control
// characters, at most 64 bytes, and not a name Hearth reserves for its own
// topics ("bridge", "services", "notifications").
func ValidID(id string) error {
	if id == "" {
		return fmt.Errorf("empty device id")
	}
	if len(id) > 64 {
		return fmt.Errorf("device id %q is longer than 64 bytes", id)
	}
	switch id {
	case "bridge", "services", "notifications":
		return fmt.Errorf("device id %q is reserved for hearth's own topics", id)
	}
	if !utf8.ValidString(id) {
		return fmt.Errorf("device id %q is not valid UTF-8", id)
	}
	for _, r := range id {
		if r == '/' || r == '+' || r == '#' || r < 0x20 || r == 0x7f {
			return fmt.Errorf("device id %q contains %q, which cannot stand in one MQTT topic level", id, r)
		}
	}
	return nil
}

// Status is where a command stands, as published on hearth/<device>/result.
type Status string

// Statuses of DESIGN.md. Accepted and Queued are interim; the rest are
// terminal: a command ends in exactly one of them.
const (
	Accepted   Status = "accepted"
	Queued     Status = "queued"
	Succeeded  Status = "succeeded"
	Failed     Status = "failed"
	Expired    Status = "expired"
	Superseded Status = "superseded"
	Rejected   Status = "rejected"
)

// Terminal reports whether s ends a command.
func (s Status) Terminal() bool {
	switch s {
	case Succeeded, Failed, Expired, Superseded, Rejected:
		return true
	}
	return false
}

// Reason is a short machine code that says why a command ended as it did.
type Reason string

// Reasons published in results.
const (
	// Rejections: the command was never accepted and nothing was sent.
	ReasonInvalidPayload   Reason = "invalid_payload"   // not JSON, or not an object or string
	ReasonPayloadTooLarge  Reason = "payload_too_large" // over MaxPayloadBytes
	ReasonUnknownDevice    Reason = "unknown_device"    // no such device in config
	ReasonUnknownAttribute Reason = "unknown_attribute" // the class has no such attribute
	ReasonInvalidValue     Reason = "invalid_value"     // wrong type or not one of the allowed values
	ReasonOutOfRange       Reason = "out_of_range"      // a number outside the attribute's range
	ReasonRelativeCommand  Reason = "relative_command"  // TOGGLE, *_step, *_move: not absolute state
	ReasonRetainedCommand  Reason = "retained_command"  // the command message had the retain flag
	ReasonInvalidOpID      Reason = "invalid_op_id"     // empty, over 64 bytes, or not printable
	ReasonOpIDConflict     Reason = "op_id_conflict"    // the op_id belongs to a command for another device
	ReasonInvalidTTL       Reason = "invalid_ttl"       // does not parse, or not positive
	ReasonInvalidIssuedAt  Reason = "invalid_issued_at" // not RFC 3339
	ReasonUnsupported      Reason = "unsupported"       // the class or service takes no commands
	// ReasonStaleCommand: a risky action (see Risky) without issued_at
	// that the transport delivered from a backlog kept while Hearth was
	// away (an external broker's MQTT session): its age is unknown, and a
	// risky action is never carried out on an unknown age. Also any
	// command whose issued_at is before the store was quarantined, within
	// the dedup window after it: its op_id may have run before, and the
	// record that would say so is lost.
	ReasonStaleCommand Reason = "stale_command"

	// Outcomes of accepted commands.
	ReasonTimeout        Reason = "timeout"         // no confirming report within the attempts
	ReasonTTLElapsed     Reason = "ttl_elapsed"     // the TTL passed before the command could finish
	ReasonNewerCommand   Reason = "newer_command"   // a newer command for the same attributes arrived
	ReasonSendFailed     Reason = "send_failed"     // the bridge could not be reached within the attempts
	ReasonPermanentError Reason = "permanent_error" // the bridge refused the command for good
	// ReasonDeadlineExceeded: the next attempt would start after the
	// service's retry deadline or the command's TTL.
	ReasonDeadlineExceeded Reason = "deadline_exceeded"
	// ReasonRetryAfterExceedsDeadline: the service asked (Retry-After) to
	// wait past the command's deadline.
	ReasonRetryAfterExceedsDeadline Reason = "retry_after_exceeds_deadline"
	// ReasonRetryBudgetExhausted: the service's retry budget is spent, so
	// the failure is not retried.
	ReasonRetryBudgetExhausted Reason = "retry_budget_exhausted"
	// ReasonBreakerOpen: the service's circuit breaker is open: the
	// command failed fast (or, queued, waits for it to close).
	ReasonBreakerOpen Reason = "breaker_open"
	// ReasonNotRetryable: the service's retry policy does not retry this
	// class of failure (never_retry, or a retry_on without it).
	ReasonNotRetryable Reason = "not_retryable"
	// ReasonStateUnknown: before a risky attempt (see Risky) the device's
	// current state could not be read fresh, or was not a known state
	// (a jammed bolt, a null lock_state): nothing was sent, since unknown
	// is never taken as unlocked or open.
	ReasonStateUnknown Reason = "state_unknown"
	ReasonStoreError   Reason = "store_error" // the command could not be stored, so it was not accepted
	// ReasonStoreDamaged: the command was pending in a store that was
	// found damaged and quarantined at start; its record was salvaged,
	// but whether its last attempt reached the device is unknown, so it
	// is ended failed and never sent again from the damaged record.
	ReasonStoreDamaged Reason = "store_damaged"
	// ReasonUnauthorized: the principal that sent the command may not
	// command this device this way: at acceptance (rejected), or when the
	// permission was revoked before an attempt (failed, nothing sent).
	ReasonUnauthorized Reason = "unauthorized"
	// ReasonJammed: after a send, the device reported that it could not
	// reach the target (a lock's lock_state jammed or not_fully_locked):
	// the command fails at once, with no automatic retry.
	ReasonJammed Reason = "jammed"
	// ReasonDeviceOffline: the device's bridge reports the device
	// offline (Zigbee2MQTT's availability, a dead Z-Wave node): the
	// command failed at once with no attempt sent, or, with status queued,
	// waits for it to come back within its TTL (see Device.OnOffline).
	ReasonDeviceOffline Reason = "device_offline"
	// ReasonAsleep (with status queued): the device is a sleepy one and
	// asleep; the command waits for its next wake.
	ReasonAsleep Reason = "asleep"
	// ReasonUnverified: a command to a sleepy device was sent at a wake,
	// but no report confirmed it before its TTL ran out: it may or may not
	// have been applied, so it is not succeeded.
	ReasonUnverified Reason = "unverified"
)

// Result is one message on hearth/<device>/result: where a command stands.
// Field names are the external contract of DESIGN.md.
type Result struct {
	OpID     string         `json:"op_id"`
	Device   string         `json:"device"`
	Status   Status         `json:"status"`
	Reason   Reason         `json:"reason,omitempty"`
	Detail   string         `json:"detail,omitempty"`
	Attempts int            `json:"attempts"`
	Target   Target         `json:"target,omitempty"`
	State    map[string]any `json:"state,omitempty"`
	At       time.Time      `json:"at"`
}
