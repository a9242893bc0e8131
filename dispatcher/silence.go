package dispatcher

import (
	"context"
	"sync"
	"time"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/devices"
)

// silence decides whether an attempt that timed out in a service's
// silence is the device's fault or the service's. An attempt whose
// timeout passed with no live report from the service since its send
// (and a device not known offline) is either a dead device behind a
// healthy bridge, or a dead bridge: the two look alike while nothing else
// is commanded or talks. So before it counts as the service's failure,
// Hearth asks another device of the service, one that answered before (a
// witness), to report its state: a bridge that passes on any live report
// within witnessTimeout is talking, and the attempt's silence is ignored;
// one that stays silent has failed, and so has the attempt.
//
// One witness read is out per service at a time; the attempts that time
// out while it is out wait for its answer. Once one found the service
// silent, further timeouts count as failures at once, without another
// read, until the service is heard from again. A service with no witness
// (one device, or only sleepy ones) counts every such timeout a failure,
// as before, and so does a probe: the breaker ends a probe at its
// deadline.
type silence struct {
	// witnesses are the devices of the service that may be asked: ones
	// that answer a get (lights, switches, covers) and never sleep, in
	// Options order.
	witnesses []*deviceQueue

	mu sync.Mutex
	// last is the device the service last passed on a live report of.
	last *deviceQueue
	// out: a witness read is out; waiting are the permits its answer
	// decides; news is closed at the next live report, then replaced.
	out     bool
	waiting []*breaker.Permit
	news    chan struct{}
	// silent: the last witness read found the service silent, and
	// nothing has been heard from it since (its heard count was
	// silentAt).
	silent   bool
	silentAt uint64
}

// witnessClass reports whether a device of class c answers a get of its
// state (Zigbee2MQTT reads the attribute from the device).
func witnessClass(c devices.Class) bool {
	switch c {
	case devices.Light, devices.Switch, devices.Cover:
		return true
	}
	return false
}

// heardFrom takes a live report of q passed on by the service.
func (s *silence) heardFrom(q *deviceQueue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = q
	s.silent = false
	if s.news != nil {
		close(s.news)
		s.news = nil
	}
}

// witnessLocked returns a witness other than suspect: the device last
// heard from, if it may be asked, else the first that may; nil if none.
// Called with s.mu held.
func (s *silence) witnessLocked(suspect *deviceQueue) *deviceQueue {
	if w := s.last; w != nil && w != suspect && witnessClass(w.dev.Class) && !w.dev.Sleep.Sleepy {
		return w
	}
	for _, w := range s.witnesses {
		if w != suspect {
			return w
		}
	}
	return nil
}

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
// witness read shows the service talking (see silence). It never waits:
// the read and its wait run on a goroutine of their own.
func (q *deviceQueue) failUnlessTalking(ctx context.Context, permit *breaker.Permit) {
	if permit == nil {
		return
	}
	svc := q.svc
	s := svc.silence
	if permit.Probe() || s == nil {
		q.release(permit, breaker.Failure)
		return
	}
	heard := svc.link.heard.Load()
	s.mu.Lock()
	if s.silent && s.silentAt == heard {
		s.mu.Unlock()
		q.release(permit, breaker.Failure) // found silent, and silent since
		return
	}
	if s.out {
		s.waiting = append(s.waiting, permit)
		s.mu.Unlock()
		return
	}
	w := s.witnessLocked(q)
	if w == nil {
		s.mu.Unlock()
		q.release(permit, breaker.Failure)
		return
	}
	s.out, s.silent = true, false
	s.waiting = append(s.waiting, permit)
	news := make(chan struct{})
	s.news = news
	s.mu.Unlock()
	d := q.d
	d.workers.Go(func() { d.askWitness(ctx, svc, q, w, heard, news) })
}

// askWitness asks w, a witness of svc, for its state on suspect's behalf,
// waits up to the witness timeout for any live report of svc (news closed,
// or its heard count moved from heard), and releases the waiting permits:
// ignored if the service talked, failed if not (or if the read could not
// be asked), canceled if ctx ended.
func (d *Dispatcher) askWitness(ctx context.Context, svc *Service, suspect, w *deviceQueue, heard uint64, news <-chan struct{}) {
	s := svc.silence
	timeout := svc.witnessTimeout()
	timer := d.clock.NewTimer(timeout)
	defer timer.Stop()
	readCtx, cancel := context.WithTimeout(ctx, sendTimeout)
	err := svc.Bridge.Read(readCtx, w.dev.Device, devices.Target{"state": ""})
	cancel()
	d.log.Info("an attempt timed out in the service's silence: asking a witness", "service", svc.Name, "device", suspect.dev.ID, "witness", w.dev.ID, "timeout", timeout, "err", err)
	outcome := breaker.Failure
	if err == nil {
		select {
		case <-news:
		case <-timer.Chan():
		case <-ctx.Done():
		}
		switch {
		case ctx.Err() != nil:
			outcome = breaker.Canceled
		case svc.link.heard.Load() != heard:
			outcome = breaker.Ignored
		}
	}
	s.mu.Lock()
	permits := s.waiting
	s.waiting, s.out = nil, false
	if s.news == news {
		s.news = nil
	}
	if outcome == breaker.Failure {
		s.silent, s.silentAt = true, heard
	}
	s.mu.Unlock()
	d.log.Info("witness answered", "service", svc.Name, "witness", w.dev.ID, "talking", outcome == breaker.Ignored, "attempts", len(permits))
	now := d.now()
	for _, p := range permits {
		p.Done(outcome, now)
	}
}
