package dispatcher

import (
	"context"
	"time"

	"github.com/hearthd/hearth/devices"
)

// Journal is the durable record of commands and device state.
type Journal interface {
	// Save stores ops durably (synced) before it returns. A stored
	// terminal status is final: later saves of that op are ignored.
	Save(ops ...devices.Op) error
	// Lookup returns the stored op with that op_id.
	Lookup(opID string) (devices.Op, bool, error)
	// Pending returns every non-terminal op in acceptance order.
	Pending() ([]devices.Op, error)
	// SaveState stores a device's last reported state.
	SaveState(device string, state map[string]any, at time.Time) error
}

// EndedJournal is a Journal that can also list the ops it stored terminal
// most recently (the store's LastEnded): Run republishes their results,
// so that a result stored but not yet published when Hearth stopped
// (killed, power lost, broker away) still reaches subscribers.
type EndedJournal interface {
	// LastEnded returns, oldest first, at most limit of the ops stored
	// terminal last, those that ended no more than window before the
	// last one.
	LastEnded(window time.Duration, limit int) ([]devices.Op, error)
}

// Bridge delivers a target to a device through one service.
type Bridge interface {
	// Send hands target to the service for dev. A nil error means the
	// service has it, never that the device acted on it. An error with a
	// method NotSent() bool that returns true means nothing left Hearth
	// (its MQTT connection is down): that costs no attempt, and the
	// command waits for the connection instead. An error with a method
	// DeliveryUnknown() bool that returns true means the connection was
	// lost before the service acknowledged the send: the same attempt is
	// sent again, with the same op_id, once the connection is back.
	Send(ctx context.Context, dev devices.Device, target devices.Target) error
	// Read asks the service to have dev report the current values of the
	// attributes target names (for Zigbee2MQTT, a /get). A nil error means
	// the request left Hearth; the answer, if any, arrives as an ordinary
	// state report. The dispatcher reads before every attempt at a risky
	// action (devices.Risky) and treats a missing answer as unknown state.
	Read(ctx context.Context, dev devices.Device, target devices.Target) error
}

// deviceWills reports whether b's devices each reach the broker as their
// own MQTT client with its own will (a Tasmota's LWT, a Shelly's
// <id>/online): b has a method DeviceWills() bool that returns true.
// Such a device hears nothing before it connected and said it is online,
// even while its service is up because another of its devices said so:
// a message sent to it before then is lost.
func deviceWills(b Bridge) bool {
	w, ok := b.(interface{ DeviceWills() bool })
	return ok && w.DeviceWills()
}

// Authorizer decides who may command what (issue 5's principals). It is
// asked at acceptance, where a refusal rejects the command with reason
// unauthorized, and again before every attempt, where a refusal (a
// permission revoked since) ends the command failed/unauthorized with
// nothing sent. It must be safe for concurrent use and must not block.
type Authorizer interface {
	// Authorize returns nil when principal may send target to dev, and
	// otherwise an error whose message says why not, for the result's
	// detail. principal is "" for an unauthenticated sender.
	Authorize(principal string, dev devices.Device, target devices.Target) error
}

// DeadLetters keeps the dead-letter store: every accepted command that
// ended without success and will never be attempted again (expired,
// failed, or superseded before it reached a sleeping device), for an
// operator to look at.
type DeadLetters interface {
	// AddDeadLetters stores ops, terminal, durably.
	AddDeadLetters(ops ...devices.Op) error
}

// DeadLetterSaver is a DeadLetters that also stores the ops' own records,
// with their dead letters, in one commit (*store.Store is one). When
// Options.DeadLetters is one, a command that ends failed or expired is
// stored with its dead letter in that one commit, and a crash keeps both
// or neither.
type DeadLetterSaver interface {
	SaveDeadLetters(ops ...devices.Op) error
}

// AuditLog keeps the audit trail of safety-critical commands.
type AuditLog interface {
	// AppendAudit stores entries durably, in order, assigning each its
	// Seq.
	AppendAudit(entries ...devices.AuditEntry) error
}

// Reports are the bridge callbacks the dispatcher implements: each
// protocol adapter declares its own Sink, a subset of these, and the
// dispatcher (or a wrapper of it) is passed to it.
type Reports interface {
	Report(device string, state map[string]any, retained bool)
	Availability(device string, online bool)
	BridgeState(service string, online, retained bool)
	NodeStatus(device string, status devices.NodeStatus, retained bool)
	// Capabilities takes a device's capabilities as its bridge describes
	// them, nil for unknown.
	Capabilities(device string, caps *devices.Capabilities)
}

var _ Reports = (*Dispatcher)(nil)
