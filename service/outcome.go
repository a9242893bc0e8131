package service

import (
	"context"
	"errors"
	"time"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/publish"
)

// AttemptOutcome is how the end of an attempt through the service counts
// for its breaker. A confirmed attempt is a success. One Hearth's own
// connection lost (linkChanged: the link went down or was reset while it
// waited; err publish.NotSent or publish.DeliveryUnknown) or abandoned
// (context.Canceled or context.DeadlineExceeded: superseded, shutting
// down, or its broker never acknowledged it) counts neither way: the
// service never saw it. One the broker refused for good (publish.Refused:
// the command, not the service) or the silence of a device its bridge
// says is offline (deviceOffline: its silence says nothing of the bridge)
// is ignored. Anything else is a failure.
func AttemptOutcome(err error, confirmed, linkChanged, deviceOffline bool) breaker.Outcome {
	switch {
	case confirmed:
		return breaker.Success
	case linkChanged, err != nil && (publish.NotSent(err) || publish.DeliveryUnknown(err)):
		return breaker.Canceled
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return breaker.Canceled
	case err != nil && publish.Refused(err):
		return breaker.Ignored
	case err == nil && deviceOffline:
		return breaker.Ignored
	}
	return breaker.Failure
}

// TimeoutOutcome is how an attempt whose confirmation timed out counts
// for the breaker. The silence is the device's, not the service's, when
// the service passed on a live report of any device since the send
// (heardSinceSend: a bridge that is talking is not down, and one dead bulb
// must not open the breaker of every device behind it), when the link
// changed meanwhile (Hearth's connection), or when the bridge says the
// device is offline. A failure it returns is still the service's to
// prove: see Silence.
func TimeoutOutcome(linkChanged, heardSinceSend, deviceOffline bool) breaker.Outcome {
	if !linkChanged && heardSinceSend {
		return breaker.Ignored
	}
	return AttemptOutcome(nil, false, linkChanged, deviceOffline)
}

// ProbeOutcome is how p, a permit of device dev whose attempt ended with
// outcome o at now, counts. A probe's failure is spared (Ignored, and
// spared true) once per half-open period the bridge's own online began (a
// restart, Vouch), when a command of another device waits for the place
// (WaitForProbe): the bridge said it is up, and one device that did not
// answer is not enough to fail every other command of the service for an
// open period, so the next probe, to another device, decides. A bridge
// that said nothing (a half-open period that an open period's end began)
// gets no such spare: its one probe decides.
func (b *Breaker) ProbeOutcome(p *breaker.Permit, o breaker.Outcome, dev string, now time.Time) (_ breaker.Outcome, spared bool) {
	if !p.Probe() || o != breaker.Failure {
		return o, false
	}
	snap := b.Snapshot(now) // before b.mu: a transition's hook takes it
	if snap.State != breaker.HalfOpen || !b.Spare(dev, snap.Since) {
		return o, false
	}
	return breaker.Ignored, true
}
