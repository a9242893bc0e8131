package devices

import "time"

// Op is one accepted command and where it stands: the record Hearth stores
// before it says "accepted", updates after every attempt, and resumes after
// a restart.
type Op struct {
	// OpID is the operation ID, the caller's or one Hearth generated.
	OpID string `json:"op_id"`
	// Device is the device ID.
	Device string `json:"device"`
	// Target is the validated target state.
	Target Target `json:"target"`
	// Principal is who sent the command, as authenticated (an MQTT
	// username of the embedded broker, an HTTP bearer token's principal,
	// "automation" for a local automation); "" when Hearth has no
	// principals configured or the sender was not authenticated.
	Principal string `json:"principal,omitempty"`
	// Seq orders ops by acceptance; the store assigns it on first save.
	Seq uint64 `json:"seq"`
	// AcceptedAt is when Hearth accepted the command.
	AcceptedAt time.Time `json:"accepted_at"`
	// IssuedAt is when the caller issued it, zero if not given.
	IssuedAt time.Time `json:"issued_at,omitzero"`
	// Deadline is when the TTL runs out: IssuedAt (or AcceptedAt) + TTL.
	Deadline time.Time `json:"deadline"`
	// Status, Reason and Detail say where the command stands.
	Status Status `json:"status"`
	Reason Reason `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
	// Attempts counts the attempts so far.
	Attempts int `json:"attempts"`
	// Sends counts the sends recorded so far, the resends of an attempt
	// whose delivery a lost connection left unknown included: how often
	// the target may have reached the device. It is stored with every
	// attempt, so that a restart does not forget a resend (a risky
	// action's sends are capped). Records stored before it was kept
	// have 0; Attempts then counts.
	Sends int `json:"sends,omitempty"`
	// LastSentAt is when the last attempt was sent, zero if none was.
	LastSentAt time.Time `json:"last_sent_at,omitzero"`
	// State is the confirmed state when the command succeeded.
	State map[string]any `json:"state,omitempty"`
	// UpdatedAt is when the record last changed.
	UpdatedAt time.Time `json:"updated_at"`
}

// Result returns the op as a message for hearth/<device>/result.
func (o Op) Result() Result {
	return Result{
		OpID:     o.OpID,
		Device:   o.Device,
		Status:   o.Status,
		Reason:   o.Reason,
		Detail:   o.Detail,
		Attempts: o.Attempts,
		Target:   o.Target,
		State:    o.State,
		At:       o.UpdatedAt,
	}
}
