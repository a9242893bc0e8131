package machine

import (
	"fmt"
	"strconv"
	"time"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
)

// MaxRiskyAttempts bounds the sends of a risky action (devices.Risky:
// unlocking, opening a garage door, disarming): each may act, so it reaches
// the device at most this many times, resends after a lost connection
// included, whatever the service's retry policy allows.
const MaxRiskyAttempts = 2

// RiskyCapped reports whether c is a risky action on dev (devices.Risky)
// that may have reached the device MaxRiskyAttempts times already (its
// recorded sends, which a restart keeps; Attempts for a record stored
// before sends were): it is sent no more, on any path, sleepy or not.
func RiskyCapped(dev devices.Device, c *Command) bool {
	return devices.Risky(dev, c.Op.Target) && max(c.Op.Sends, c.Op.Attempts) >= MaxRiskyAttempts
}

// MaxResends bounds the resends of one attempt whose delivery a flapping
// link left unknown; past it, the silence counts as the attempt's failure
// and the retry policy decides.
const MaxResends = 2

// Attempts is the retry loop of the command being attempted on an
// always-listening device, as data: what was tried, what the service's
// retry policy decided, and what comes next. The caller runs what Next
// asks for (the waits, the fresh read, the send, the wait for the
// confirming report) and says how it went; Attempts decides the rest.
//
// After every failed attempt — a send error, or no confirming report
// within the attempt timeout — the policy decides (retry.Policy.Next):
// retry after a wait, or give up with a reason.
type Attempts struct {
	c       *Command
	policy  retry.Policy // MaxAttempts capped for a risky action
	budget  *retry.Budget
	service string
	risky   bool // devices.Risky: a fresh read before every send, MaxRiskyAttempts sends
	guarded bool // a safety-critical device: a fresh read before the first send

	failure  error         // the last attempt's send error; nil: unconfirmed
	delay    time.Duration // the wait before the last attempt
	approved bool          // a retry was decided but not sent yet
	resend   bool          // the next send repeats the last attempt
	resends  int           // resends of the current attempt
	// resumed: the command was resumed after a restart with an attempt
	// recorded, whose outcome is unknown.
	resumed bool
	// resolve: a safety-critical command resumed after a restart is
	// resolved by a fresh read of the state before anything else: its
	// last send may or may not have acted, and it is never repeated
	// blind.
	resolve bool
	// free: the next policy decision is the first after a restart, and
	// its retry is not charged to the retry budget: the restart, not the
	// service, left the attempt's outcome unknown, and a dozen commands
	// resumed at once must not spend a budget sized for live failures.
	free bool
	// readBack: the last attempt went unconfirmed with the link steady;
	// the state is read before the policy decides (StepReadBack), when
	// readBackOn (ReadBackUnconfirmed).
	readBack, readBackOn bool
	// heardFirst: the next send is the first after a restart; if the
	// state heard since the start shows the target by then (a retained
	// replay that came during the backoff or the wait for the bridge), it
	// is not sent.
	heardFirst bool
}

// NewAttempts begins the attempts of c, the current command of a device
// (guarded: safety-critical) on service, under policy p and the service's
// retry budget (nil: none), at now.
func NewAttempts(c *Command, dev devices.Device, service string, p retry.Policy, budget *retry.Budget, now time.Time) *Attempts {
	a := &Attempts{c: c, policy: p, budget: budget, service: service,
		risky: devices.Risky(dev, c.Op.Target), guarded: dev.SafetyCritical()}
	if a.risky {
		a.policy.MaxAttempts = min(a.policy.MaxAttempts, MaxRiskyAttempts)
	}
	a.resumed = c.Op.Attempts > 0
	a.resolve = a.resumed && a.guarded
	if a.resumed {
		// Its first attempt was before the restart; the budget, kept in
		// memory, must count it again, or a later retry of it spends a
		// floor meant for quiet services.
		a.budget.FirstAttempt(now)
	}
	return a
}

// Risky reports whether the command is a risky action.
func (a *Attempts) Risky() bool { return a.risky }

// Policy returns the retry policy the attempts follow.
func (a *Attempts) Policy() retry.Policy { return a.policy }

// StepKind is what the caller is to do next.
type StepKind int

const (
	// StepEnd: end the command with Step's status, reason and detail.
	StepEnd StepKind = iota
	// StepStop: stop attempting, the command still pending (the policy's
	// Canceled: not a failure); it resumes at the next start.
	StepStop
	// StepResolve: a resumed safety-critical command. Wait for the device
	// to be online and the link ready, by Until, then read the state
	// fresh (strict for a risky action); call Resolved if it is not at
	// the target and the command goes on.
	StepResolve
	// StepAwaitResumed: wait, until the attempt's window ends, for the
	// attempt in flight before the restart to be confirmed; call Next
	// again if the window passes unconfirmed.
	StepAwaitResumed
	// StepBackoff: wait Wait, then call Next.
	StepBackoff
	// StepReadBack: the last attempt went unconfirmed. Read the state
	// (not strict), waiting for the answer no later than Until (the
	// policy's deadline, or the TTL if sooner): the target ends the
	// command succeeded with nothing sent; any other answer, or none,
	// leaves it to the policy: call Next. The read is no attempt: it
	// records none and takes no breaker permit.
	StepReadBack
	// StepAttempt: pass the gates (the device online, the breaker, the
	// link, the authorization) by Until, read the state fresh first if
	// Read (Strict: unknown state stops the send too), then BeforeSend,
	// record the attempt (a resend if Resend), send, and report the send
	// with Sent.
	StepAttempt
)

// Step is what Next asks for.
type Step struct {
	Kind StepKind
	// StepEnd:
	Status devices.Status
	Reason devices.Reason
	Detail string
	State  map[string]any // the confirmed state, when it succeeded
	// StepBackoff:
	Wait time.Duration
	// RetryAfter (StepBackoff): Wait is what the service asked for with
	// a Retry-After (retry.Decision.RetryAfter), not the policy's backoff.
	RetryAfter bool
	// StepResolve, StepAttempt: the gates must pass by Until;
	// StepReadBack: the read's answer must come by Until.
	Until time.Time
	// StepResolve, StepAttempt, StepReadBack: a fresh read, and when.
	Read, Strict bool
	When         string
	// StepAttempt: the send repeats the last attempt.
	Resend bool
	// StepAwaitResumed: how long the attempt in flight has, from its
	// send (the policy's attempt timeout).
	Timeout time.Duration
}

// Next decides, at now, what comes next for the command (its op as it
// stands), drawing jitter from r for a retry's backoff.
func (a *Attempts) Next(now time.Time, r retry.Rand) Step {
	op := a.c.Op
	p := a.policy
	if !now.Before(op.Deadline) {
		return Step{Kind: StepEnd, Status: devices.Expired, Reason: devices.ReasonTTLElapsed,
			Detail: fmt.Sprintf("the TTL passed after %d of %d attempts", op.Attempts, p.MaxAttempts)}
	}
	retryBy := p.DeadlineFor(op.AcceptedAt, op.Deadline)
	// The next send is a retry (a new attempt after the first, or a
	// resend of one): it must go by the policy's deadline.
	nextIsRetry := (!a.resend && op.Attempts > 0) || (a.resend && op.Attempts > 1)
	until := op.Deadline
	if nextIsRetry {
		until = retryBy // a retry must go by the policy's deadline
	}
	if a.approved && nextIsRetry && !now.Before(retryBy) {
		// A retry decided in time waited (for its backoff, the
		// connection, a fresh read) past the policy's deadline.
		return a.giveUp(op, retry.Decision{Reason: retry.GiveUpDeadline, Class: retry.Classify(a.failure)}, p.MaxAttempts)
	}
	if a.resolve {
		return Step{Kind: StepResolve, Until: op.Deadline, Read: true, Strict: a.risky, When: "after the restart"}
	}
	if op.Attempts > 0 && !a.approved {
		if a.resumed {
			// After a restart the attempt in flight may have acted: the
			// device's state decides, for the rest of the attempt's
			// window, before any resend.
			a.resumed, a.free, a.heardFirst = false, true, true
			return Step{Kind: StepAwaitResumed, Timeout: p.AttemptTimeout}
		}
		if a.readBack {
			// The set may have acted while its report never came (a
			// device that does not report after a set, a lost report):
			// the state read now decides before a blind resend.
			a.readBack = false
			return Step{Kind: StepReadBack, Until: retryBy, Read: true,
				When: fmt.Sprintf("after attempt %d went unconfirmed", op.Attempts)}
		}
		budget := a.budget
		if a.free {
			budget, a.free = nil, false
		}
		dec := p.Next(retry.Failure{Attempt: op.Attempts, Err: a.failure, Delay: a.delay, Now: now, Deadline: retryBy}, r, budget)
		if !dec.Retry {
			if dec.Reason == retry.GiveUpCanceled {
				return Step{Kind: StepStop} // not a failure: the op stays pending
			}
			return a.giveUp(op, dec, p.MaxAttempts)
		}
		a.approved, a.delay = true, dec.Wait
		return Step{Kind: StepBackoff, Wait: dec.Wait, RetryAfter: dec.RetryAfter}
	}
	return a.attempt(op, until)
}

// attempt is the step of the next send.
func (a *Attempts) attempt(op devices.Op, until time.Time) Step {
	s := Step{Kind: StepAttempt, Until: until, Resend: a.resend}
	// Before every send of a risky action, the first and every resend
	// included: a fresh read of the device's state; already there, or
	// unknown, nothing is sent. Before the first send of a safe one to a
	// safety-critical device: a read too, so that a door already closed
	// is not driven again; unknown state does not stop it.
	if a.risky || (a.guarded && op.Attempts == 0 && !a.resend) {
		s.Read, s.Strict, s.When = true, a.risky, fmt.Sprintf("before attempt %d", op.Attempts+1)
	}
	return s
}

// Resolved says the fresh read after the restart found the device not at
// the target: the last attempt failed; the policy decides on the next,
// which is read again before its send. That decision is the first after
// the restart: free of the retry budget, as for any resumed command.
func (a *Attempts) Resolved() { a.resolve, a.resumed, a.free = false, false, true }

// BeforeSend is the last word before the send, once the gates passed: a
// risky action that may have reached the device MaxRiskyAttempts times
// (its recorded sends, which a restart keeps) ends
// (ok false, with the step that ends it); otherwise, on the first send
// after a restart, heard reports whether the state heard since the start
// shows the target already — then nothing is sent and the command
// succeeds.
func (a *Attempts) BeforeSend() (end Step, ok, heard bool) {
	if a.risky && max(a.c.Op.Sends, a.c.Op.Attempts) >= MaxRiskyAttempts {
		return a.giveUp(a.c.Op, retry.Decision{Reason: retry.GiveUpAttempts}, MaxRiskyAttempts), false, false
	}
	heard, a.heardFirst = a.heardFirst, false
	return Step{}, true, heard
}

// SendResult is how a send went.
type SendResult int

const (
	// NotSent: nothing left Hearth (the connection was down); the caller
	// takes the recorded attempt back and waits for the reconnect.
	NotSent SendResult = iota
	// DeliveryUnknown: the connection went while the send waited for its
	// acknowledgement; the same attempt is sent again after the
	// reconnect.
	DeliveryUnknown
	// SendFailed: the bridge refused the send; the policy decides.
	SendFailed
	// Sent: the bridge took the send; the caller waits for the report.
	Sent
)

func (r SendResult) String() string {
	switch r {
	case NotSent:
		return "not_sent"
	case DeliveryUnknown:
		return "delivery_unknown"
	case SendFailed:
		return "send_failed"
	case Sent:
		return "sent"
	}
	return "SendResult(" + strconv.Itoa(int(r)) + ")"
}

// Sent records how the send of the attempt recorded in op went (err: the
// send's error, for SendFailed) and returns what the log says of it:
// "sent", "resent" or "send_error".
func (a *Attempts) Sent(res SendResult, err error) string {
	op := a.c.Op
	switch res {
	case NotSent:
		return ""
	case DeliveryUnknown:
		if op.Attempts == 1 && !a.resend {
			a.budget.FirstAttempt(op.LastSentAt)
		}
		a.resend, a.approved = true, true
		return ""
	}
	if op.Attempts == 1 && !a.resend {
		a.budget.FirstAttempt(op.LastSentAt)
	}
	outcome := "sent"
	switch {
	case res == SendFailed:
		outcome = "send_error"
	case a.resend:
		outcome = "resent"
	}
	if !a.resend {
		a.resends = 0 // a new attempt
	}
	a.approved, a.resumed, a.resend, a.failure = false, false, false, nil
	if res == SendFailed {
		a.failure = err
	}
	return outcome
}

// Delay is the wait before the last attempt, for the log.
func (a *Attempts) Delay() time.Duration { return a.delay }

// Unconfirmed says no report confirmed the attempt within its timeout;
// changed: the link went down or a new session began meanwhile, so the
// set or its report may be lost and the silence says nothing about the
// device. It reports whether the same attempt is sent again (with the
// same op_id: an absolute target makes that harmless), up to MaxResends
// times; otherwise Next first asks for a read-back of the state
// (StepReadBack) if ReadBackUnconfirmed was called, then the policy
// decides.
func (a *Attempts) Unconfirmed(changed bool) (resend bool) {
	if changed && a.resends < MaxResends {
		a.resend, a.approved = true, true // no new attempt: no policy decision
		a.resends++
		return true
	}
	a.readBack = a.readBackOn
	return false
}

// ReadBackUnconfirmed makes every attempt that goes unconfirmed with the
// link steady be followed by a read of the state (StepReadBack) before
// the policy decides: for a device, or a bridge, that does not report
// after a set. Off by default.
func (a *Attempts) ReadBackUnconfirmed() { a.readBackOn = true }

// Failed says the bridge, having taken the send, reported that it failed
// (Zigbee2MQTT's publish error on its bridge/logging topic): the attempt
// ends at once as a send failure with err, and the policy decides at
// Next, with no read-back.
func (a *Attempts) Failed(err error) {
	a.failure, a.readBack = err, false
}

// giveUp is the step that ends the command failed, by dec, after at most
// maxAttempts.
func (a *Attempts) giveUp(op devices.Op, dec retry.Decision, maxAttempts int) Step {
	reason, detail := GiveUp(op, dec, a.failure, maxAttempts, a.service)
	return Step{Kind: StepEnd, Status: devices.Failed, Reason: reason, Detail: detail}
}

// GiveUp returns the reason and detail of a command op that ends failed
// because its retry policy gave up (dec), after failure (the last send's
// error; nil: no report confirmed it) and at most maxAttempts, on
// service.
func GiveUp(op devices.Op, dec retry.Decision, failure error, maxAttempts int, service string) (devices.Reason, string) {
	last := fmt.Sprintf("no report showed the target after attempt %d", op.Attempts)
	lastReason := devices.ReasonTimeout
	if failure != nil {
		last = fmt.Sprintf("attempt %d could not be sent: %v", op.Attempts, failure)
		lastReason = devices.ReasonSendFailed
	}
	switch dec.Reason {
	case retry.GiveUpPermanent:
		return devices.ReasonPermanentError, fmt.Sprintf("%s; a %s failure is permanent", last, dec.Class)
	case retry.GiveUpNotRetryable:
		return devices.ReasonNotRetryable, fmt.Sprintf("%s; the service's retry policy does not retry %s", last, dec.Class)
	case retry.GiveUpAttempts:
		return lastReason, fmt.Sprintf("%s of %d", last, maxAttempts)
	case retry.GiveUpDeadline:
		return devices.ReasonDeadlineExceeded, fmt.Sprintf("%s; the next attempt would start after the deadline", last)
	case retry.GiveUpRetryAfter:
		return devices.ReasonRetryAfterExceedsDeadline, fmt.Sprintf("%s; the service asked to wait past the deadline", last)
	case retry.GiveUpBudget:
		return devices.ReasonRetryBudgetExhausted, fmt.Sprintf("%s; the retry budget of service %s is spent", last, service)
	default:
		return lastReason, fmt.Sprintf("%s; %s", last, dec.Reason)
	}
}
