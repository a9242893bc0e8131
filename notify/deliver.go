package notify

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/retry"
)

// Run delivers until ctx is done: one worker per notify service and,
// with an Outbox, the saver that stores what Enqueue takes. It returns
// once they all have; what is still queued then stays in the outbox, for
// the next start (Close stores what was raised meanwhile).
func (qs *Queues) Run(ctx context.Context) {
	var wg sync.WaitGroup
	if qs.outbox != nil && len(qs.queues) > 0 {
		wg.Go(func() { qs.runSaver(ctx) })
	}
	for _, q := range qs.queues {
		wg.Go(func() { qs.work(ctx, q) })
	}
	wg.Wait()
}

// work delivers q's notifications one at a time, oldest first, until ctx
// is done, deleting each from the outbox once it ends. What is still
// queued then stays in the outbox; without an outbox it is lost.
func (qs *Queues) work(ctx context.Context, q *queue) {
	for {
		n, ok := q.next(ctx)
		if !ok {
			if left := q.len(); left > 0 {
				if qs.outbox == nil {
					qs.log.Warn("stopping: queued notifications are dropped (notifications are not stored)", "service", q.svc.Name, "count", left)
				} else {
					qs.log.Info("stopping: queued notifications stay stored and are sent after the restart", "service", q.svc.Name, "count", left)
				}
			}
			return
		}
		if qs.deliver(ctx, q, n) {
			qs.forget(q, n)
		}
	}
}

// stoppingNote says, in a log line at shutdown, what becomes of a
// notification not yet delivered.
func (qs *Queues) stoppingNote() string {
	if qs.outbox == nil {
		return "stopping: notification dropped undelivered (notifications are not stored)"
	}
	return "stopping: notification not delivered yet; it stays stored and is sent after the restart"
}

// deliver sends n to q's service through its breaker and retry policy, as
// a device's attempts go: admit through the breaker (failing fast while it
// is open, or waiting for it with Hold), send within the attempt timeout,
// report the outcome to the breaker, and on a failure ask the policy
// (which honours Retry-After, permanent errors, max attempts, the retry
// budget and n's deadline) whether and when to try again, waiting on the
// injected clock. It returns true when n is delivered or given up
// (logged at ERROR), false when ctx is done first.
func (qs *Queues) deliver(ctx context.Context, q *queue, n *notification) (ended bool) {
	s := q.svc
	p := s.Policy
	retryBy := p.DeadlineFor(n.queuedAt, n.deadline)
	log := qs.log.With("service", s.Name, "id", n.id, "device", n.device, "op_id", n.opID)
	var (
		attempts int
		last     error
		delay    time.Duration
	)
	fail := func(reason string, class retry.Class) {
		q.failed.Add(1)
		if reason == reasonExpired {
			q.expired.Add(1)
		}
		log.Error("notification not delivered", "reason", reason, "class", class, "attempts", attempts, "queued_at", n.queuedAt, "err", last)
	}
	for {
		if attempts > 0 {
			dec := p.Next(retry.Failure{Attempt: attempts, Err: last, Delay: delay, Now: qs.clock.Now(), Deadline: retryBy}, qs.rand, s.Budget)
			if !dec.Retry {
				if dec.Reason == retry.GiveUpCanceled {
					log.Warn(qs.stoppingNote(), "attempts", attempts)
					return false
				}
				fail(string(dec.Reason), dec.Class)
				return true
			}
			delay = dec.Wait
			if dec.RetryAfter && qs.onRetryAfter != nil {
				qs.onRetryAfter(s.Name, delay)
			}
			log.Info("notification retry", "attempt", attempts+1, "delay", delay, "class", dec.Class, "retry_after", dec.RetryAfter)
			if !qs.sleep(ctx, delay) {
				log.Warn(qs.stoppingNote(), "attempts", attempts)
				return false
			}
		}
		if !qs.clock.Now().Before(n.deadline) {
			fail(reasonExpired, retry.Classify(last))
			return true
		}
		permit, err := qs.admit(ctx, s, n.deadline)
		switch {
		case ctx.Err() != nil:
			log.Warn(qs.stoppingNote(), "attempts", attempts)
			return false
		case errors.Is(err, breaker.ErrOpen):
			last = err
			fail(reasonBreakerOpen, "")
			return true
		case err != nil: // held until the deadline
			last = err
			fail(reasonExpired, "")
			return true
		}
		timeout := p.AttemptTimeout
		if permit.Probe() {
			// A probe has no outcome after its deadline.
			timeout = min(timeout, permit.Deadline().Sub(qs.clock.Now()))
		}
		sentAt := qs.clock.Now()
		sendCtx, cancel := context.WithTimeout(ctx, timeout)
		err = s.Notifier.Notify(sendCtx, n.payload)
		cancel()
		attempts++
		if attempts == 1 {
			s.Budget.FirstAttempt(sentAt)
		}
		qs.release(s, permit, outcome(err))
		result := "delivered"
		if err != nil {
			result = "failed"
		}
		log.Info("notification attempt", "attempt", attempts, "max_attempts", p.MaxAttempts, "delay", delay,
			"probe", permit.Probe(), "outcome", result, "class", retry.Classify(err), "err", err)
		if err == nil {
			q.delivered.Add(1)
			return true
		}
		last = err
	}
}

// errHeldTooLong says a held notification's deadline passed while its
// service's breaker stayed open.
var errHeldTooLong = errors.New("the circuit breaker stayed open until the notification's deadline")

// admit asks s's breaker for a permit (nil without one). While the
// breaker is open it returns the *breaker.OpenError at once or, when s
// holds, waits until the breaker lets it through before deadline
// (errHeldTooLong after) or ctx is done (ctx's error).
func (qs *Queues) admit(ctx context.Context, s Service, deadline time.Time) (*breaker.Permit, error) {
	g := s.Gate
	if g == nil {
		return nil, nil
	}
	for {
		changed := g.Watch()
		now := qs.clock.Now()
		p, err := g.Allow(now)
		if err == nil {
			if p.Probe() {
				g.Signal() // the breaker's clock must watch the probe's deadline
			}
			if !now.Before(deadline) {
				// Let through as the hold's timer fired: too late.
				qs.release(s, p, breaker.Canceled)
				return nil, errHeldTooLong
			}
			return p, nil
		}
		if !s.Hold {
			return nil, err
		}
		if !now.Before(deadline) {
			return nil, errHeldTooLong
		}
		timer := qs.clock.NewTimer(deadline.Sub(now))
		select {
		case <-changed:
		case <-timer.Chan():
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		}
		timer.Stop()
	}
}

// release reports the outcome of p (nil without a breaker); a probe's
// end frees a place, so waiters are woken.
func (qs *Queues) release(s Service, p *breaker.Permit, o breaker.Outcome) {
	if p == nil {
		return
	}
	p.Done(o, qs.clock.Now())
	if p.Probe() {
		s.Gate.Signal()
	}
}

// outcome is how a send's end counts for the breaker: delivered is a
// success; Hearth's own cancellation (shutting down) neither way; a
// permanent error (401, 404: the request, not the service's health) or a
// status that is no failure (a 3xx) is ignored; anything else (timeouts,
// refused connections, 429, 5xx) is a failure.
func outcome(err error) breaker.Outcome {
	if err == nil {
		return breaker.Success
	}
	switch c := retry.Classify(err); {
	case c == retry.Canceled:
		return breaker.Canceled
	case c.Permanent() || !c.Transient():
		return breaker.Ignored
	}
	return breaker.Failure
}

// sleep waits wait on the clock; false if ctx ended first.
func (qs *Queues) sleep(ctx context.Context, wait time.Duration) bool {
	if wait <= 0 {
		return ctx.Err() == nil
	}
	timer := qs.clock.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.Chan():
		return true
	case <-ctx.Done():
		return false
	}
}
