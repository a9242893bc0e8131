package dispatcher

import (
	"context"
	"time"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/service"
)

// A service's silence (service.Silence): an attempt that timed out with
// no live report from the service since its send counts as the service's
// failure only if a witness, another device of the service that answers a
// get, stays silent too.

// witnessClass reports whether a device of class c answers a get of its
// state (Zigbee2MQTT reads the attribute from the device).
func witnessClass(c devices.Class) bool {
	switch c {
	case devices.Light, devices.Switch, devices.Cover:
		return true
	}
	return false
}

// maxWitnesses is how many devices one witness read asks: one dead
// witness (a bulb on the same wall switch as the suspect) must not make
// a talking service look silent.
const maxWitnesses = 3

// witnessTimeout is how long a witness read waits for the service to pass
// on any live report: half the attempt timeout, at most the read timeout.
func (svc *Service) witnessTimeout() time.Duration {
	read := svc.ReadTimeout
	if read <= 0 {
		read = DefaultReadTimeout
	}
	return max(min(svc.Policy.AttemptTimeout/2, read), time.Millisecond)
}

// failUnlessTalking releases permit, q's attempt that timed out with no
// live report from the service since its send, as a failure unless a
// witness read shows the service talking (service.Silence). It never
// waits: the read and its wait run on a goroutine of their own.
func (q *deviceQueue) failUnlessTalking(ctx context.Context, permit *breaker.Permit) {
	if permit == nil {
		return
	}
	svc := q.svc
	if permit.Probe() || svc.silence == nil {
		q.release(permit, breaker.Failure) // the breaker ends a probe at its deadline
		return
	}
	heard := svc.link.Heard.Load()
	fail, ask := svc.silence.TimedOut(permit, q, heard)
	switch {
	case fail:
		q.release(permit, breaker.Failure)
	case ask != nil:
		d := q.d
		d.workers.Go(func() { d.askWitness(ctx, svc, q, ask) })
	}
}

// askWitness asks up to maxWitnesses of ask's candidates (the best
// witnesses of svc, not known offline) for their state on suspect's
// behalf, waits up to the witness timeout for any live report of svc
// (ask.News closed, or its heard count moved from ask.Heard), and answers
// for the waiting permits: ignored if the service talked, failed if not
// (or if no read could be asked), canceled if ctx ended.
func (d *Dispatcher) askWitness(ctx context.Context, svc *Service, suspect *deviceQueue, ask *service.Ask[*deviceQueue]) {
	timeout := svc.witnessTimeout()
	timer := d.clock.NewTimer(timeout)
	defer timer.Stop()
	var asked []string
	var err error
	for _, w := range ask.Candidates {
		if len(asked) == maxWitnesses {
			break
		}
		if w.knownOffline() {
			continue
		}
		readCtx, cancel := context.WithTimeout(ctx, svc.bound)
		rerr := svc.Bridge.Read(readCtx, w.dev.Device, devices.Target{"state": ""})
		cancel()
		if rerr != nil {
			err = rerr
			continue
		}
		asked = append(asked, w.dev.ID)
	}
	d.log.Info("an attempt timed out in the service's silence: asking witnesses", "service", svc.Name, "device", suspect.dev.ID, "witnesses", asked, "timeout", timeout, "err", err)
	outcome := breaker.Failure
	if len(asked) > 0 {
		select {
		case <-ask.News:
		case <-timer.Chan():
		case <-ctx.Done():
		}
		switch {
		case ctx.Err() != nil:
			outcome = breaker.Canceled
		case svc.link.Heard.Load() != ask.Heard:
			outcome = breaker.Ignored
		}
	}
	n := ask.Answer(outcome, d.now())
	d.log.Info("witnesses answered", "service", svc.Name, "witnesses", asked, "talking", outcome == breaker.Ignored, "attempts", n)
}
