package service

import (
	"slices"
	"sync"
	"time"

	"github.com/hearthd/hearth/breaker"
)

// Silence decides whether an attempt that timed out in a service's
// silence is the device's fault or the service's. An attempt whose
// timeout passed with no live report from the service since its send
// (and a device not known offline) is either a dead device behind a
// healthy bridge, or a dead bridge: the two look alike while nothing else
// is commanded or talks. So before it counts as the service's failure,
// Hearth asks another device of the service, one that answered before (a
// witness), to report its state: a bridge that passes on any live report
// in time is talking, and the attempt's silence is ignored; one that
// stays silent has failed, and so has the attempt.
//
// One witness read is out per service at a time; the attempts that time
// out while it is out wait for its answer. Once one found the service
// silent, further timeouts count as failures at once, without another
// read, until the service is heard from again. A service with no witness
// (one device, or only sleepy ones) counts every such timeout a failure.
//
// W is the caller's handle of a device (the dispatcher's device queue).
// The zero Silence has no witnesses. It is safe for concurrent use.
type Silence[W comparable] struct {
	mu sync.Mutex
	// witnesses are the devices of the service that may be asked, in
	// the order added.
	witnesses []W
	// last is the device the service last passed on a live report of.
	last W
	// out: a witness read is out; waiting are the permits its answer
	// decides; news is closed at the next live report, then replaced.
	out     bool
	waiting []*breaker.Permit
	news    chan struct{}
	// suspects are the devices whose timed-out attempts the read out
	// decides: never witnesses of each other (two bulbs on one wall
	// switch, both without power).
	suspects map[W]bool
	// silent: the last witness read found the service silent, and
	// nothing has been heard from it since (its heard count was
	// silentAt).
	silent   bool
	silentAt uint64
}

// AddWitness adds w, after those added before, to the devices that may
// be asked: one that answers a get of its state and never sleeps.
func (s *Silence[W]) AddWitness(w W) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.witnesses = append(s.witnesses, w)
}

// HeardFrom takes a live report of w passed on by the service.
func (s *Silence[W]) HeardFrom(w W) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = w
	s.silent = false
	if s.news != nil {
		close(s.news)
		s.news = nil
	}
}

// Waiting returns how many timed-out attempts wait for the answer of the
// witness read out now; 0 when none is out.
func (s *Silence[W]) Waiting() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.out {
		return 0
	}
	return len(s.waiting)
}

// Ask is a witness read to make, for the attempts that wait for its
// answer (Silence.TimedOut).
type Ask[W comparable] struct {
	// Candidates are the devices that may witness, best first: the one
	// the service last passed on a live report of, then the others in
	// the order added; never a suspect.
	Candidates []W
	// News is closed at the service's next live report.
	News <-chan struct{}
	// Heard is the service's count of live reports when the attempt
	// timed out: a count moved since says the service talked.
	Heard uint64

	s *Silence[W]
}

// TimedOut takes permit, of suspect's attempt that timed out with no live
// report from the service since its send; heard is the service's count of
// live reports then (Link.Heard). fail means the attempt counts as the
// service's failure at once, for the caller to release so: the service
// was found silent and has been since, or there is no witness to ask.
// Otherwise permit waits for a witness read's answer, and ask, when no
// read was out yet, is that read, for the caller to make (on a goroutine
// of its own, never under a lock the reports take) and end with Answer;
// while one is out, ask is nil.
func (s *Silence[W]) TimedOut(permit *breaker.Permit, suspect W, heard uint64) (fail bool, ask *Ask[W]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.silent && s.silentAt == heard {
		return true, nil // found silent, and silent since
	}
	if s.suspects == nil {
		s.suspects = map[W]bool{}
	}
	s.suspects[suspect] = true
	if s.out {
		s.waiting = append(s.waiting, permit)
		return false, nil
	}
	candidates := s.candidatesLocked()
	if len(candidates) == 0 {
		delete(s.suspects, suspect)
		return true, nil
	}
	s.out, s.silent = true, false
	s.waiting = append(s.waiting, permit)
	s.news = make(chan struct{})
	return false, &Ask[W]{Candidates: candidates, News: s.news, Heard: heard, s: s}
}

// candidatesLocked returns the witnesses that may be asked, best first;
// called with s.mu held.
func (s *Silence[W]) candidatesLocked() []W {
	var zero W
	var out []W
	ok := func(w W) bool {
		return w != zero && !s.suspects[w] && slices.Contains(s.witnesses, w) && !slices.Contains(out, w)
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

// Answer ends the read: every permit waiting for it is done with outcome
// at now — Ignored when the service talked, Failure when it did not (then
// further timeouts fail at once until it is heard from again), Canceled
// when Hearth stops. It returns how many attempts it decided.
func (a *Ask[W]) Answer(outcome breaker.Outcome, now time.Time) int {
	s := a.s
	s.mu.Lock()
	permits := s.waiting
	s.waiting, s.out = nil, false
	clear(s.suspects)
	if s.news == a.News {
		s.news = nil
	}
	if outcome == breaker.Failure {
		s.silent, s.silentAt = true, a.Heard
	}
	s.mu.Unlock()
	for _, p := range permits {
		p.Done(outcome, now)
	}
	return len(permits)
}
