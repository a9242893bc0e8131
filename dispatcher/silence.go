package dispatcher

import (
	"context"
	"slices"
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
	// suspects are the devices whose timed-out attempts the read out
	// decides: never witnesses of each other (two bulbs on one wall
	// switch, both without power).
	suspects map[*deviceQueue]bool
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

// maxWitnesses is how many devices one witness read asks: one dead
// witness (a bulb on the same wall switch as the suspect) must not make
// a talking service look silent.
const maxWitnesses = 3

// candidatesLocked returns the devices that may witness for the suspects,
// best first: the device last heard from, then the others in Options
// order; never a suspect. Called with s.mu held.
func (s *silence) candidatesLocked() []*deviceQueue {
	var out []*deviceQueue
	ok := func(w *deviceQueue) bool {
		return w != nil && !s.suspects[w] && witnessClass(w.dev.Class) && !w.dev.Sleep.Sleepy && !slices.Contains(out, w)
	}
	if ok(s.last) {
		out = append(out, s.last)
	}
	for _, w := range s.witnesses {
		if ok(w) {
			out = append(out, w)
		}
	}
	return out
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
	heard := svc.link.Heard.Load()
	s.mu.Lock()
	if s.silent && s.silentAt == heard {
		s.mu.Unlock()
		q.release(permit, breaker.Failure) // found silent, and silent since
		return
	}
	if s.suspects == nil {
		s.suspects = map[*deviceQueue]bool{}
	}
	s.suspects[q] = true
	if s.out {
		s.waiting = append(s.waiting, permit)
		s.mu.Unlock()
		return
	}
	candidates := s.candidatesLocked()
	if len(candidates) == 0 {
		delete(s.suspects, q)
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
	d.workers.Go(func() { d.askWitness(ctx, svc, q, candidates, heard, news) })
}

// askWitness asks up to maxWitnesses of candidates (the best witnesses
// of svc, not known offline) for their state on suspect's behalf, waits
// up to the witness timeout for any live report of svc (news closed, or
// its heard count moved from heard), and releases the waiting permits:
// ignored if the service talked, failed if not (or if no read could be
// asked), canceled if ctx ended.
func (d *Dispatcher) askWitness(ctx context.Context, svc *Service, suspect *deviceQueue, candidates []*deviceQueue, heard uint64, news <-chan struct{}) {
	s := svc.silence
	timeout := svc.witnessTimeout()
	timer := d.clock.NewTimer(timeout)
	defer timer.Stop()
	var asked []string
	var err error
	for _, w := range candidates {
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
		case <-news:
		case <-timer.Chan():
		case <-ctx.Done():
		}
		switch {
		case ctx.Err() != nil:
			outcome = breaker.Canceled
		case svc.link.Heard.Load() != heard:
			outcome = breaker.Ignored
		}
	}
	s.mu.Lock()
	permits := s.waiting
	s.waiting, s.out = nil, false
	clear(s.suspects)
	if s.news == news {
		s.news = nil
	}
	if outcome == breaker.Failure {
		s.silent, s.silentAt = true, heard
	}
	s.mu.Unlock()
	d.log.Info("witnesses answered", "service", svc.Name, "witnesses", asked, "talking", outcome == breaker.Ignored, "attempts", len(permits))
	now := d.now()
	for _, p := range permits {
		p.Done(outcome, now)
	}
}
