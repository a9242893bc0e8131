package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/devices"
)

// serviceBreaker is a service's circuit breaker and what the dispatcher
// keeps beside it.
type serviceBreaker struct {
	*breaker.Breaker
	mu      sync.Mutex
	changed chan struct{} // closed at each transition, then replaced
}

// watch returns a channel closed at the breaker's next transition.
func (b *serviceBreaker) watch() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.changed
}

func (b *serviceBreaker) signal() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.changed)
	b.changed = make(chan struct{})
}

// newBreaker builds s's breaker from s.Breaker, chaining its own
// OnStateChange after the dispatcher's.
func (d *Dispatcher) newBreaker(s *Service) *serviceBreaker {
	opts := *s.Breaker
	theirs := opts.OnStateChange
	sb := &serviceBreaker{changed: make(chan struct{})}
	opts.OnStateChange = func(from, to breaker.State, at time.Time) {
		d.log.Warn("circuit breaker", "service", s.Name, "from", from, "to", to, "at", at)
		d.publishServiceState(s.Name, to, at)
		sb.signal()
		if theirs != nil {
			theirs(from, to, at)
		}
	}
	sb.Breaker = breaker.New(opts)
	return sb
}

// serviceState is the retained payload of <prefix>/services/<service>/state.
type serviceState struct {
	State string    `json:"state"` // closed, open or half_open
	Since time.Time `json:"since"`
}

func (d *Dispatcher) serviceTopic(name string) string {
	return d.prefix + "/services/" + name + "/state"
}

func (d *Dispatcher) publishServiceState(name string, st breaker.State, since time.Time) {
	d.out.push(d.serviceTopic(name), serviceState{State: st.String(), Since: since.UTC()}, true)
}

// serviceStateMsg is s's breaker state as a retained message, for a
// republish sweep.
func (d *Dispatcher) serviceStateMsg(s *Service) outMsg {
	snap := s.breaker.Snapshot(d.now())
	b, _ := json.Marshal(serviceState{State: snap.State.String(), Since: snap.Since.UTC()})
	return outMsg{topic: d.serviceTopic(s.Name), payload: b, retained: true}
}

// runBreakerClock applies s's time-driven transitions (an open period
// ending, a probe missing its deadline) when they fall due, so that its
// state is published on time rather than at the next command. It waits on
// the clock only while one is due.
func (d *Dispatcher) runBreakerClock(ctx context.Context, s *Service) {
	for {
		changed := s.breaker.watch()
		next := s.breaker.Expire(d.now())
		if next.IsZero() {
			select {
			case <-changed:
				continue
			case <-ctx.Done():
				return
			}
		}
		timer := d.clock.NewTimer(next.Sub(d.now()))
		select {
		case <-timer.Chan():
		case <-changed:
		case <-ctx.Done():
			timer.Stop()
			return
		}
		timer.Stop()
	}
}

// admit asks t's service's breaker for a permit to send. While the breaker
// is open the command ends failed/breaker_open at once or, when the
// service holds, waits, reported queued, until the breaker lets it through
// within its TTL. ok is false when t ended or the deadline passed (the
// caller's loop ends it); stop when t ended or ctx is done.
func (q *deviceQueue) admit(ctx context.Context, t *task, deadline time.Time) (p *breaker.Permit, ok, stop bool) {
	b := q.svc.breaker
	if b == nil {
		return nil, true, false
	}
	queued := false
	for {
		changed := b.watch()
		now := q.d.now()
		p, err := b.Allow(now)
		if err == nil {
			return p, true, false
		}
		var open *breaker.OpenError
		errors.As(err, &open)
		if !q.svc.Hold {
			detail := fmt.Sprintf("the circuit breaker of service %s is %s", q.svc.Name, open.State)
			if !open.Until.IsZero() {
				detail += fmt.Sprintf(" until %s", open.Until.UTC().Format(time.RFC3339))
			}
			q.finish(t, devices.Failed, devices.ReasonBreakerOpen, detail, nil)
			return nil, false, true
		}
		if !queued {
			queued = true
			q.mu.Lock()
			r := t.op.Result()
			q.mu.Unlock()
			r.Status, r.Reason = devices.Queued, devices.ReasonBreakerOpen
			r.Detail = fmt.Sprintf("waiting for the circuit breaker of service %s to close", q.svc.Name)
			q.d.publishResult(r)
		}
		if !now.Before(deadline) {
			return nil, false, false
		}
		timer := q.d.clock.NewTimer(deadline.Sub(now))
		select {
		case <-changed:
		case <-timer.Chan():
		case <-t.cancel:
			timer.Stop()
			return nil, false, true
		case <-ctx.Done():
			timer.Stop()
			return nil, false, true
		}
		timer.Stop()
	}
}

// outcome is how an attempt's end counts for the breaker.
func (q *deviceQueue) outcome(err error, confirmed, linkChanged bool) breaker.Outcome {
	switch {
	case confirmed:
		return breaker.Success
	case linkChanged, err != nil && (notSent(err) || deliveryUnknown(err)):
		return breaker.Canceled // Hearth's own connection, not the service
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		// The send was abandoned (superseded, shutting down) or its
		// broker never acknowledged it: the service never saw it.
		return breaker.Canceled
	case err != nil && permanent(err):
		return breaker.Ignored // the command, not the service
	case err == nil && q.knownOffline():
		return breaker.Ignored // the device is known to be away: its silence says nothing of the bridge
	}
	return breaker.Failure
}

// knownOffline reports whether the bridge says the device is offline.
func (q *deviceQueue) knownOffline() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.available != nil && !*q.available
}
