package dispatcher

import (
	"time"

	"github.com/hearthd/hearth/devices"
)

// End is one command's end, as Options.OnEnd hears it: once per command,
// just before its terminal result is queued for publishing, so that
// whoever hears the result finds the end counted.
type End struct {
	// Op is the command's record as it ended: a terminal Status, its
	// Reason, Attempts, AcceptedAt, LastSentAt (zero if nothing was
	// sent) and UpdatedAt (when it ended), all on the dispatcher's clock.
	// A command rejected at the intake was never stored: its Op holds
	// only the result's fields (AcceptedAt zero, UpdatedAt the
	// rejection's time).
	Op devices.Op
	// Device is the configured device the command was for; the zero
	// Device (Service "") for a device not in the configuration.
	Device devices.Device
	// SafetyAlert reports that the end raised the notification of a
	// safety-critical command not carried out (failed or expired, or
	// rejected unauthorized or stale_command, on a lock, an alarm, a
	// valve or a safety: critical cover).
	SafetyAlert bool
}

// Attempt is one attempt sent, as Options.OnAttempt hears it.
type Attempt struct {
	// Device is the device the attempt was sent to.
	Device devices.Device
	// Number is the attempt's number: 1 for the first.
	Number int
	// At is when it was recorded as sent (devices.Op.LastSentAt), on the
	// dispatcher's clock.
	At time.Time
	// Resend reports that it was the same attempt sent again, after a
	// connection loss left its delivery unknown: not a new attempt.
	Resend bool
	// Err is what the bridge answered the send: nil when it took it.
	Err error
}

// ended tells OnEnd that op, a command to dev (the zero Device if none is
// configured under op.Device), has ended. Call it once per command, just
// before its terminal result is published.
func (d *Dispatcher) ended(dev devices.Device, op devices.Op) {
	if d.onEnd == nil {
		return
	}
	d.onEnd(End{Op: op, Device: dev, SafetyAlert: devices.NotCarriedOut(dev, op)})
}

// endedOn is ended for op to whichever configured device op.Device
// names.
func (d *Dispatcher) endedOn(op devices.Op) {
	var dev devices.Device
	if q, ok := d.devices[op.Device]; ok {
		dev = q.dev.Device
	}
	d.ended(dev, op)
}

// rejected is ended for a request rejected at the intake (r), which no
// record holds.
func (d *Dispatcher) rejected(r devices.Result) {
	d.endedOn(devices.Op{OpID: r.OpID, Device: r.Device, Target: r.Target, Status: r.Status,
		Reason: r.Reason, Detail: r.Detail, Attempts: r.Attempts, UpdatedAt: r.At})
}

// sentAttempt tells OnAttempt of the attempt of op that was just sent
// (the bridge answered err).
func (q *deviceQueue) sentAttempt(op devices.Op, resend bool, err error) {
	if q.d.onAttempt == nil {
		return
	}
	q.d.onAttempt(Attempt{Device: q.dev.Device, Number: op.Attempts, At: op.LastSentAt, Resend: resend, Err: err})
}

// retryAfter tells OnRetryAfter that service waits wait, as it asked with
// a Retry-After.
func (d *Dispatcher) retryAfter(service string, wait time.Duration) {
	if d.onRetryAfter != nil {
		d.onRetryAfter(service, wait)
	}
}
