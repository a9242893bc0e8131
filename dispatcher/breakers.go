package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/service"
)

// BreakerChange is one transition of a service's circuit breaker, as the
// OnBreakerChange hook sees it.
type BreakerChange struct {
	Service  string
	From, To breaker.State
	At       time.Time
	// Replay: the transition follows a bridge state the broker replayed
	// from its retained store, such as the status a service had before
	// Hearth started. Nothing should be moved because of it.
	Replay bool
}

// newBreaker builds s's breaker from s.Breaker; its OnStateChange and
// the dispatcher's OnBreakerChange see every transition before it is
// published.
func (d *Dispatcher) newBreaker(s *Service) *service.Breaker {
	opts := *s.Breaker
	theirs, theirTransition := opts.OnStateChange, opts.OnTransition
	opts.OnStateChange = nil
	opts.OnTransition = func(tr breaker.Transition) {
		from, to, at := tr.From, tr.To, tr.At
		level := slog.LevelInfo
		if to == breaker.Open {
			level = slog.LevelWarn // the service is down
		}
		d.log.Log(context.Background(), level, "circuit breaker", "service", s.Name, "from", from, "to", to, "at", at)
		// Theirs first: whoever acts on the transition (local
		// automations) knows of it before anyone reads it on MQTT.
		if theirs != nil {
			theirs(from, to, at)
		}
		if theirTransition != nil {
			theirTransition(tr)
		}
		if d.onBreaker != nil {
			d.onBreaker(BreakerChange{Service: s.Name, From: from, To: to, At: at, Replay: tr.Replay})
		}
		d.publishServiceState(s.Name, to, at)
	}
	return service.NewBreaker(opts)
}

// serviceState is the retained payload of <prefix>/services/<service>/state.
type serviceState struct {
	State string `json:"state"` // closed, open or half_open
	// Since is when the breaker took the state; left out for a breaker
	// that has been closed since Hearth started.
	Since time.Time `json:"since,omitzero"`
}

func (d *Dispatcher) serviceTopic(name string) string {
	return d.prefix + "/services/" + name + "/state"
}

func (d *Dispatcher) publishServiceState(name string, st breaker.State, since time.Time) {
	d.out.Push(d.serviceTopic(name), serviceState{State: st.String(), Since: since.UTC()}, true)
}

// republishServiceState pushes s's breaker state now, retained, for a
// republish sweep.
func (d *Dispatcher) republishServiceState(s *Service) {
	snap := s.breaker.Snapshot(d.now())
	d.publishServiceState(s.Name, snap.State, snap.Since)
}

// runBreakerClock applies s's time-driven transitions (an open period
// ending, a probe missing its deadline) when they fall due, so that its
// state is published on time rather than at the next command. It waits on
// the clock only while one is due.
func (d *Dispatcher) runBreakerClock(ctx context.Context, s *Service) {
	for {
		changed := s.breaker.Watch()
		now := d.now()
		due := s.breaker.DueOffline()
		if !due.IsZero() && !now.Before(due) {
			d.applyDeferredOffline(s, due)
			continue
		}
		next := s.breaker.Expire(now)
		if !due.IsZero() && (next.IsZero() || due.Before(next)) {
			next = due
		}
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

// applyDeferredOffline applies a replayed offline whose grace ended at
// due, if the bridge has not said online since: it was not old news.
func (d *Dispatcher) applyDeferredOffline(s *Service, due time.Time) {
	if !s.breaker.TakeDueOffline(due) {
		return // cancelled or replaced meanwhile
	}
	if s.link.Current() == service.Up {
		return
	}
	d.log.Info("bridge said offline before Hearth connected and has not said online since", "service", s.Name, "grace", BridgeStateGrace)
	s.breaker.Replay(func() { s.breaker.ReportHealth(false, due) })
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
		changed := b.Watch()
		now := q.d.now()
		p, err := b.Allow(now)
		if err == nil {
			if p.Probe() {
				b.Signal() // the clock goroutine must watch the probe's deadline
			}
			if !now.Before(deadline) {
				// Let through at or after the deadline (a held command
				// whose timer fired as the breaker let it go): too late
				// to send.
				q.release(p, breaker.Canceled)
				return nil, false, false // the loop ends it expired, and finish alerts
			}
			return p, true, false
		}
		var open *breaker.OpenError
		errors.As(err, &open)
		if open.State == breaker.HalfOpen && !q.svc.Hold {
			// A probe is out: its outcome decides, by its deadline at
			// the latest. Wait for it rather than fail: a closed breaker
			// lets this command go, a reopened one fails it then.
			if !now.Before(deadline) {
				return nil, false, false // the loop ends it expired
			}
			until := deadline
			if !open.Until.IsZero() && open.Until.Before(until) {
				until = open.Until
			}
			if stop := q.awaitProbe(ctx, t, changed, until); stop {
				return nil, false, true
			}
			continue
		}
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
			b.Held.Add(1)
			defer b.Held.Add(-1) // once: queued stays set

			q.mu.Lock()
			r := t.Op.Result()
			q.mu.Unlock()
			r.Status, r.Reason = devices.Queued, devices.ReasonBreakerOpen
			r.Detail = fmt.Sprintf("waiting for the circuit breaker of service %s to close", q.svc.Name)
			q.d.publishResult(r)
		}
		if !now.Before(deadline) {
			return nil, false, false // the loop ends it expired, and finish alerts
		}
		if q.pause(ctx, t, deadline, changed, nil) == waitStop {
			return nil, false, true
		}
	}
}

// awaitProbe waits, while a half-open breaker's probe is out, until the
// breaker changes (changed: a transition, or the probe's place freed) or
// until; stop means t ended or ctx is done. While it waits the command
// counts as a candidate for the next probe (see service.Breaker.Spare).
func (q *deviceQueue) awaitProbe(ctx context.Context, t *task, changed <-chan struct{}, until time.Time) (stop bool) {
	b := q.svc.breaker
	b.WaitForProbe(q.dev.ID, 1)
	defer b.WaitForProbe(q.dev.ID, -1)
	q.d.log.Info("waiting for the half-open breaker's probe", "op_id", t.opID, "device", q.dev.ID, "service", q.svc.Name, "until", until)
	return q.pause(ctx, t, until, changed, nil) == waitStop
}

// probeOutcome is how a probe of q that timed out with outcome o counts
// (service.Breaker.ProbeOutcome: a spared failure is ignored).
func (q *deviceQueue) probeOutcome(p *breaker.Permit, o breaker.Outcome) breaker.Outcome {
	if !p.Probe() {
		return o
	}
	o, spared := q.svc.breaker.ProbeOutcome(p, o, q.dev.ID, q.d.now())
	if spared {
		q.d.log.Info("probe unconfirmed after the bridge said online; the next probe, to another device, decides", "device", q.dev.ID, "service", q.svc.Name)
	}
	return o
}

// probeVerdictLead is how long before a probe's deadline its attempt
// stops waiting for a confirmation (at most a tenth of the time left), so
// that the dispatcher's verdict on its silence (timeoutOutcome,
// probeOutcome) reaches the breaker before the breaker's own deadline
// counts it failed.
const probeVerdictLead = 250 * time.Millisecond

// release reports the outcome of p, t's permit (nil without a breaker).
// A probe's end frees a place that held commands may take, though the
// breaker's state need not change, so they are woken.
func (q *deviceQueue) release(p *breaker.Permit, o breaker.Outcome) {
	if p == nil {
		return
	}
	p.Done(o, q.d.now())
	if p.Probe() {
		q.svc.breaker.Signal()
	}
}

// outcome is how an attempt's end counts for the breaker
// (service.AttemptOutcome).
func (q *deviceQueue) outcome(err error, confirmed, linkChanged bool) breaker.Outcome {
	return service.AttemptOutcome(err, confirmed, linkChanged, q.knownOffline())
}

// timeoutOutcome is how an attempt that timed out counts for the breaker
// (service.TimeoutOutcome); heardAtSend is the service's heard count when
// it was sent.
func (q *deviceQueue) timeoutOutcome(linkChanged bool, heardAtSend uint64) breaker.Outcome {
	return service.TimeoutOutcome(linkChanged, q.svc.link.Heard.Load() != heardAtSend, q.knownOffline())
}

// releaseTimedOut releases the permit of an attempt that timed out, whose
// outcome timeoutOutcome said: a failure only if a witness read does not
// show the service talking (failUnlessTalking), anything else at once.
func (q *deviceQueue) releaseTimedOut(ctx context.Context, p *breaker.Permit, o breaker.Outcome) {
	if o == breaker.Failure {
		q.failUnlessTalking(ctx, p)
		return
	}
	q.release(p, o)
}

// knownOffline reports whether the bridge says the device is offline.
func (q *deviceQueue) knownOffline() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	offline, _ := q.m.Offline()
	return offline
}

// BreakerStatus is a service's circuit breaker as the status endpoints
// and /readyz show it.
type BreakerStatus struct {
	Service string `json:"service"`
	State   string `json:"state"` // closed, open or half_open
	// Since is when it took the state; zero (left out) for a breaker
	// closed since Hearth started.
	Since time.Time `json:"since,omitzero"`
	// Until is when the breaker next changes on its own: the end of an
	// open period, or a half-open probe's deadline. Zero when nothing is
	// due, such as while the service says it is offline.
	Until   time.Time `json:"until,omitzero"`
	Offline bool      `json:"offline"` // the service says it is offline
	// Bridge is what the bridge last said of itself since Hearth's
	// connection began: online, offline, or unknown (nothing yet).
	Bridge  string `json:"bridge"`
	Trips   int    `json:"trips"`   // since it last closed
	Watched bool   `json:"watched"` // the service is watched only: Hearth sends it no commands
	// Notify: the service is a notify service (Service.Notifier), which
	// receives notifications, not commands; left out when false.
	Notify bool `json:"notify,omitempty"`
}

// Breakers returns the state of every service's breaker, in Options
// order; services without one are left out.
func (d *Dispatcher) Breakers() []BreakerStatus {
	now := d.now()
	var out []BreakerStatus
	for _, name := range d.serviceNames {
		s := d.services[name]
		if s.breaker == nil {
			continue
		}
		snap := s.breaker.Snapshot(now)
		out = append(out, BreakerStatus{
			Service: name, State: snap.State.String(), Since: snap.Since.UTC(),
			Until: snap.Until.UTC(), Offline: snap.Offline, Bridge: s.link.Current().String(), Trips: snap.Trips, Watched: s.Bridge == nil && s.Notifier == nil, Notify: s.Notifier != nil,
		})
	}
	return out
}
