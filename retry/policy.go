package retry

import (
	"fmt"
	"time"
)

// Policy is a service's whole retry policy: how many attempts, how long
// each waits, how they are spaced, until when, and which failures are
// worth another attempt.
type Policy struct {
	Backoff
	// MaxAttempts is the most attempts per command, the first included;
	// less than 1 counts as 1.
	MaxAttempts int
	// AttemptTimeout is how long one attempt waits for its outcome.
	AttemptTimeout time.Duration
	// Deadline bounds the time from a command's start to its last
	// attempt; 0 means only the command's own TTL bounds it, and a
	// Deadline never extends the TTL (see DeadlineFor).
	Deadline time.Duration
	// RetryOn lists the classes (or groups "transient", "permanent") worth
	// another attempt; nil means transient ones.
	RetryOn []Class
	// NeverRetry lists classes or groups never retried, even when RetryOn
	// matches them.
	NeverRetry []Class
	// MaxRetryAfter is the longest wait a Retry-After may ask for; 0 means
	// DefaultMaxRetryAfter (1 h). Longer values clamp to it.
	MaxRetryAfter time.Duration
}

// DeadlineFor returns the deadline of a command that started at start and
// must end by ttlDeadline: the earlier of ttlDeadline and start+Deadline.
// A zero ttlDeadline means no TTL.
func (p Policy) DeadlineFor(start, ttlDeadline time.Time) time.Time {
	if p.Deadline <= 0 {
		return ttlDeadline
	}
	if d := start.Add(p.Deadline); ttlDeadline.IsZero() || d.Before(ttlDeadline) {
		return d
	}
	return ttlDeadline
}

// Retryable reports whether a failure of class c is worth another attempt
// under p: it is listed in RetryOn (by default, it is transient) and not
// in NeverRetry. Canceled never is.
func (p Policy) Retryable(c Class) bool {
	if c == Canceled || c == "" {
		return false
	}
	on := p.RetryOn
	if on == nil {
		on = []Class{GroupTransient}
	}
	return c.in(on) && !c.in(p.NeverRetry)
}

// GiveUp is why a policy stops retrying: a short machine code that callers
// may use as a result reason.
type GiveUp string

const (
	// GiveUpCanceled: the attempt was canceled by the caller; it is not a
	// failure.
	GiveUpCanceled GiveUp = "canceled"
	// GiveUpPermanent: the failure's class is permanent and not listed in
	// RetryOn.
	GiveUpPermanent GiveUp = "permanent_error"
	// GiveUpNotRetryable: the policy does not retry the failure's class
	// (NeverRetry, or a RetryOn that omits it), or the class is no failure
	// at all (an HTTP 1xx–3xx status).
	GiveUpNotRetryable GiveUp = "not_retryable"
	// GiveUpAttempts: MaxAttempts attempts were made.
	GiveUpAttempts GiveUp = "attempts_exhausted"
	// GiveUpDeadline: the next attempt would start at or after the
	// deadline.
	GiveUpDeadline GiveUp = "deadline_exceeded"
	// GiveUpRetryAfter: the service asked to wait until the deadline or
	// past it.
	GiveUpRetryAfter GiveUp = "retry_after_exceeds_deadline"
	// GiveUpBudget: the service's retry budget is spent.
	GiveUpBudget GiveUp = "retry_budget_exhausted"
)

// Failure describes a failed attempt to Policy.Next.
type Failure struct {
	// Attempt is the number of the attempt that failed, from 1.
	Attempt int
	// Err is the attempt's error; nil means it timed out with no outcome
	// (class Timeout), such as a command no report confirmed.
	Err error
	// Delay is the wait before the failed attempt (0 before the first);
	// decorrelated jitter grows from it.
	Delay time.Duration
	// Now is the current time on the caller's clock.
	Now time.Time
	// Deadline is when the command must be done; the zero time means no
	// deadline.
	Deadline time.Time
}

// Decision is the verdict on a failure: retry after Wait, or give up for
// Reason. Wait is meaningful only when Retry is true; a caller never sleeps
// on a Decision that gives up.
type Decision struct {
	Retry bool
	// Wait is the delay before the next attempt, in [0, Cap], or, when
	// the service sent a valid Retry-After, its wait, in
	// [0, MaxRetryAfter].
	Wait time.Duration
	// Reason says why the policy gives up; "" when Retry.
	Reason GiveUp
	// Class is the failure's class.
	Class Class
	// RetryAfter reports that the service sent a valid Retry-After: Wait
	// came from it, or, on a give-up, the decision weighed it.
	RetryAfter bool
}

func (d Decision) String() string {
	if d.Retry {
		return fmt.Sprintf("retry in %v (%s)", d.Wait, d.Class)
	}
	return fmt.Sprintf("give up: %s (%s)", d.Reason, d.Class)
}

// Next decides what follows failure f, in this order: a cancellation gives
// up without counting as a failure; a class p does not retry gives up
// (permanent_error or not_retryable); MaxAttempts spent gives up; then the
// wait is the service's valid Retry-After if it sent one (giving up with
// retry_after_exceeds_deadline if the next attempt would start at or after
// f.Deadline), else p's backoff delay for retry f.Attempt (giving up with
// deadline_exceeded if the next attempt would start at or after
// f.Deadline); last, the retry must fit budget (nil allows all), else
// retry_budget_exhausted. r draws the jitter.
func (p Policy) Next(f Failure, r Rand, budget *Budget) Decision {
	class := Classify(f.Err)
	if f.Err == nil {
		class = Timeout
	}
	d := Decision{Class: class}
	switch {
	case class == Canceled:
		d.Reason = GiveUpCanceled
		return d
	case !p.Retryable(class) && class.Permanent():
		d.Reason = GiveUpPermanent
		return d
	case !p.Retryable(class):
		d.Reason = GiveUpNotRetryable
		return d
	case f.Attempt >= max(p.MaxAttempts, 1):
		d.Reason = GiveUpAttempts
		return d
	}
	if v, ok := RetryAfterOf(f.Err); ok {
		d.Wait, d.RetryAfter = ParseRetryAfter(v, f.Now, p.MaxRetryAfter)
	}
	if d.RetryAfter {
		if !f.Deadline.IsZero() && !f.Now.Add(d.Wait).Before(f.Deadline) {
			d.Wait, d.Reason = 0, GiveUpRetryAfter
			return d
		}
	} else {
		d.Wait = p.Delay(f.Attempt, f.Delay, r)
		if !f.Deadline.IsZero() && !f.Now.Add(d.Wait).Before(f.Deadline) {
			d.Wait, d.Reason = 0, GiveUpDeadline
			return d
		}
	}
	if !budget.TryRetry(f.Now) {
		d.Wait, d.Reason = 0, GiveUpBudget
		return d
	}
	d.Retry = true
	return d
}
