package retry

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
)

// Next's checks, in order: canceled, permanent, not retryable, attempts,
// Retry-After (and its deadline), the backoff's deadline, budget. Each row
// fails one check and, where it can, the later ones too, so that the first
// failing check must be the one reported.
func TestNextOrderOfChecks(t *testing.T) {
	now := epoch
	deadline := now.Add(time.Minute)
	// Ceilings 1, 2, 4, 5, 5 s, no jitter: the wait is the ceiling.
	base := Policy{Backoff: Backoff{Base: s, Multiplier: 2, Cap: 5 * s, Jitter: None}, MaxAttempts: 3}
	withRetryOn := func(on ...Class) Policy { p := base; p.RetryOn = on; return p }
	withNever := func(never ...Class) Policy { p := base; p.NeverRetry = never; return p }
	status := func(code int, retryAfter string) error {
		return fmt.Errorf("hue: %w", &StatusError{Code: code, RetryAfter: retryAfter})
	}
	const (
		open  = iota // a budget with one retry left
		spent        // a budget with none
	)
	tests := []struct {
		name     string
		p        Policy
		f        Failure
		budget   int
		draws    []int64 // the stub Rand's draws
		want     Decision
		wantAsks []int64 // the n of each Int64N(n)
	}{
		{"canceled first, even when spent, permanent and past the deadline",
			base, Failure{Attempt: 3, Err: errors.Join(context.Canceled, &StatusError{Code: 400, RetryAfter: "600"}), Now: deadline, Deadline: deadline}, spent, nil,
			Decision{Reason: GiveUpCanceled, Class: Canceled}, nil},
		{"canceled wrapped", base, Failure{Attempt: 1, Err: fmt.Errorf("send: %w", context.Canceled), Now: now}, open, nil,
			Decision{Reason: GiveUpCanceled, Class: Canceled}, nil},
		{"permanent before attempts, Retry-After and budget",
			base, Failure{Attempt: 3, Err: status(400, "1"), Now: now, Deadline: deadline}, spent, nil,
			Decision{Reason: GiveUpPermanent, Class: "http_400"}, nil},
		{"permanent sentinel", base, Failure{Attempt: 1, Err: fmt.Errorf("z2m: %w", ErrInvalidPayload), Now: now}, open, nil,
			Decision{Reason: GiveUpPermanent, Class: InvalidPayload}, nil},
		{"permanent: other 4xx", base, Failure{Attempt: 1, Err: status(418, ""), Now: now}, open, nil,
			Decision{Reason: GiveUpPermanent, Class: "http_418"}, nil},
		{"permanent listed in NeverRetry is still permanent", withNever(GroupPermanent), Failure{Attempt: 1, Err: status(409, ""), Now: now}, open, nil,
			Decision{Reason: GiveUpPermanent, Class: "http_409"}, nil},
		{"NeverRetry before attempts", withNever(RateLimited), Failure{Attempt: 3, Err: ErrRateLimited, Now: now}, spent, nil,
			Decision{Reason: GiveUpNotRetryable, Class: RateLimited}, nil},
		{"NeverRetry beats RetryOn", func() Policy { p := withRetryOn(GroupTransient); p.NeverRetry = []Class{"http_503"}; return p }(),
			Failure{Attempt: 1, Err: status(503, "5"), Now: now}, open, nil,
			Decision{Reason: GiveUpNotRetryable, Class: "http_503"}, nil},
		{"RetryOn without the class", withRetryOn(Timeout), Failure{Attempt: 1, Err: ErrUnavailable, Now: now}, open, nil,
			Decision{Reason: GiveUpNotRetryable, Class: Unavailable}, nil},
		{"RetryOn http_409 does not retry a 503", withRetryOn("http_409"), Failure{Attempt: 1, Err: status(503, ""), Now: now}, open, nil,
			Decision{Reason: GiveUpNotRetryable, Class: "http_503"}, nil},
		{"RetryOn permanent does not retry a transient", withRetryOn(GroupPermanent), Failure{Attempt: 1, Err: ErrUnavailable, Now: now}, open, nil,
			Decision{Reason: GiveUpNotRetryable, Class: Unavailable}, nil},
		{"empty RetryOn retries nothing", withRetryOn([]Class{}...), Failure{Attempt: 1, Err: ErrUnavailable, Now: now}, open, nil,
			Decision{Reason: GiveUpNotRetryable, Class: Unavailable}, nil},
		{"RetryOn http_409 retries a 409", withRetryOn("http_409"), Failure{Attempt: 1, Err: status(409, ""), Now: now}, open, nil,
			Decision{Retry: true, Wait: s, Class: "http_409"}, nil},
		{"RetryOn permanent retries a 409", withRetryOn(GroupPermanent), Failure{Attempt: 2, Err: status(409, ""), Now: now}, open, nil,
			Decision{Retry: true, Wait: 2 * s, Class: "http_409"}, nil},
		{"attempts before Retry-After and budget", base, Failure{Attempt: 3, Err: status(503, "1"), Now: now}, spent, nil,
			Decision{Reason: GiveUpAttempts, Class: "http_503"}, nil},
		{"attempts past MaxAttempts", base, Failure{Attempt: 9, Err: ErrUnavailable, Now: now}, open, nil,
			Decision{Reason: GiveUpAttempts, Class: Unavailable}, nil},
		{"MaxAttempts 0 counts as 1", func() Policy { p := base; p.MaxAttempts = 0; return p }(), Failure{Attempt: 1, Err: ErrUnavailable, Now: now}, open, nil,
			Decision{Reason: GiveUpAttempts, Class: Unavailable}, nil},
		{"one attempt left", base, Failure{Attempt: 2, Err: ErrUnavailable, Now: now, Deadline: deadline}, open, nil,
			Decision{Retry: true, Wait: 2 * s, Class: Unavailable}, nil},

		{"Retry-After beats the backoff and its cap", base, Failure{Attempt: 1, Err: status(503, "30"), Now: now, Deadline: deadline}, open, nil,
			Decision{Retry: true, Wait: 30 * s, Class: "http_503", RetryAfter: true}, nil},
		{"Retry-After date", base, Failure{Attempt: 1, Err: status(429, now.Add(45*s).Format("Mon, 02 Jan 2006 15:04:05 GMT")), Now: now, Deadline: deadline}, open, nil,
			Decision{Retry: true, Wait: 45 * s, Class: "http_429", RetryAfter: true}, nil},
		{"Retry-After 0", base, Failure{Attempt: 1, Err: status(503, "0"), Now: now}, open, nil,
			Decision{Retry: true, Wait: 0, Class: "http_503", RetryAfter: true}, nil},
		{"Retry-After in the past", base, Failure{Attempt: 1, Err: status(503, "Sun, 06 Nov 1994 08:49:37 GMT"), Now: now}, open, nil,
			Decision{Retry: true, Wait: 0, Class: "http_503", RetryAfter: true}, nil},
		{"Retry-After skips the jitter draw", func() Policy { p := base; p.Jitter = Full; return p }(), Failure{Attempt: 1, Err: status(503, "7"), Now: now}, open, nil,
			Decision{Retry: true, Wait: 7 * s, Class: "http_503", RetryAfter: true}, nil},
		{"Retry-After clamps to DefaultMaxRetryAfter", base, Failure{Attempt: 1, Err: status(503, "86400"), Now: now}, open, nil,
			Decision{Retry: true, Wait: time.Hour, Class: "http_503", RetryAfter: true}, nil},
		{"Retry-After clamps to MaxRetryAfter", func() Policy { p := base; p.MaxRetryAfter = 10 * s; return p }(), Failure{Attempt: 1, Err: status(503, "30"), Now: now, Deadline: deadline}, open, nil,
			Decision{Retry: true, Wait: 10 * s, Class: "http_503", RetryAfter: true}, nil},
		{"Retry-After past the deadline", base, Failure{Attempt: 1, Err: status(503, "61"), Now: now, Deadline: deadline}, spent, nil,
			Decision{Reason: GiveUpRetryAfter, Class: "http_503", RetryAfter: true}, nil},
		{"Retry-After clamped to 1h, past the deadline", base, Failure{Attempt: 1, Err: status(503, "99999999999999999999"), Now: now, Deadline: deadline}, open, nil,
			Decision{Reason: GiveUpRetryAfter, Class: "http_503", RetryAfter: true}, nil},
		{"Retry-After ending at the deadline", base, Failure{Attempt: 1, Err: status(503, "60"), Now: now, Deadline: deadline}, open, nil,
			Decision{Reason: GiveUpRetryAfter, Class: "http_503", RetryAfter: true}, nil},
		{"Retry-After of 0 at the deadline", base, Failure{Attempt: 1, Err: status(503, "0"), Now: deadline, Deadline: deadline}, open, nil,
			Decision{Reason: GiveUpRetryAfter, Class: "http_503", RetryAfter: true}, nil},
		{"Retry-After ending 1s before the deadline", base, Failure{Attempt: 1, Err: status(503, "59"), Now: now, Deadline: deadline}, open, nil,
			Decision{Retry: true, Wait: 59 * s, Class: "http_503", RetryAfter: true}, nil},
		{"malformed Retry-After falls back to the backoff", base, Failure{Attempt: 2, Err: status(503, "soon"), Now: now, Deadline: deadline}, open, nil,
			Decision{Retry: true, Wait: 2 * s, Class: "http_503"}, nil},
		{"negative Retry-After falls back to the backoff", base, Failure{Attempt: 1, Err: status(503, "-5"), Now: now}, open, nil,
			Decision{Retry: true, Wait: s, Class: "http_503"}, nil},
		{"malformed Retry-After, backoff past the deadline", base, Failure{Attempt: 2, Err: status(503, "1.5"), Now: now, Deadline: now.Add(2 * s)}, open, nil,
			Decision{Reason: GiveUpDeadline, Class: "http_503"}, nil},

		{"backoff reaching the deadline", base, Failure{Attempt: 2, Err: ErrUnavailable, Now: now, Deadline: now.Add(2 * s)}, spent, nil,
			Decision{Reason: GiveUpDeadline, Class: Unavailable}, nil},
		{"backoff 1ns before the deadline", base, Failure{Attempt: 2, Err: ErrUnavailable, Now: now, Deadline: now.Add(2*s + 1)}, open, nil,
			Decision{Retry: true, Wait: 2 * s, Class: Unavailable}, nil},
		{"already past the deadline", func() Policy { p := base; p.Base = 0; return p }(), Failure{Attempt: 1, Err: ErrUnavailable, Now: deadline.Add(s), Deadline: deadline}, open, nil,
			Decision{Reason: GiveUpDeadline, Class: Unavailable}, nil},
		{"zero deadline: none", base, Failure{Attempt: 2, Err: ErrUnavailable, Now: now}, open, nil,
			Decision{Retry: true, Wait: 2 * s, Class: Unavailable}, nil},

		{"budget spent", base, Failure{Attempt: 1, Err: ErrUnavailable, Now: now, Deadline: deadline}, spent, nil,
			Decision{Reason: GiveUpBudget, Class: Unavailable}, nil},
		{"budget spent, with Retry-After", base, Failure{Attempt: 1, Err: status(503, "5"), Now: now, Deadline: deadline}, spent, nil,
			Decision{Reason: GiveUpBudget, Class: "http_503", RetryAfter: true}, nil},

		{"nil Err counts as Timeout", base, Failure{Attempt: 1, Now: now}, open, nil,
			Decision{Retry: true, Wait: s, Class: Timeout}, nil},
		{"nil Err and NeverRetry timeout", withNever(Timeout), Failure{Attempt: 1, Now: now}, open, nil,
			Decision{Reason: GiveUpNotRetryable, Class: Timeout}, nil},
		{"unknown error is transient", base, Failure{Attempt: 1, Err: errors.New("bridge said no"), Now: now}, open, nil,
			Decision{Retry: true, Wait: s, Class: Unknown}, nil},

		{"full jitter draws below the ceiling of retry f.Attempt", func() Policy { p := base; p.Jitter = Full; p.MaxAttempts = 5; return p }(),
			Failure{Attempt: 3, Err: ErrUnavailable, Now: now}, open, []int64{top},
			Decision{Retry: true, Wait: 4 * s, Class: Unavailable}, []int64{int64(4*s) + 1}},
		{"decorrelated jitter grows from f.Delay", func() Policy { p := base; p.Jitter = Decorrelated; return p }(),
			Failure{Attempt: 1, Err: ErrUnavailable, Delay: 3 * s, Now: now}, open, []int64{int64(3 * s)},
			Decision{Retry: true, Wait: 4 * s, Class: Unavailable}, []int64{int64(8*s) + 1}},
		{"server-provided without Retry-After waits Base", func() Policy { p := base; p.Strategy = ServerProvided; p.Base = 3 * s; return p }(),
			Failure{Attempt: 2, Err: status(503, ""), Now: now}, open, nil,
			Decision{Retry: true, Wait: 3 * s, Class: "http_503"}, nil},
	}
	for _, tc := range tests {
		var b *Budget
		switch tc.budget {
		case open:
			b = NewBudget(-1, 1, 10*s) // ratio 0, floor 1: one retry
		case spent:
			b = NewBudget(-1, -1, 10*s) // ratio 0, floor 0: none
		}
		r := newStub(t, tc.draws...)
		got := tc.p.Next(tc.f, r, b)
		if got != tc.want {
			t.Errorf("%s: Next = %+v, want %+v", tc.name, got, tc.want)
		}
		if !slices.Equal(r.asked, tc.wantAsks) {
			t.Errorf("%s: Next asked Int64N%v, want Int64N%v", tc.name, r.asked, tc.wantAsks)
		}
		// Only a retry spends the budget: a give-up for any other reason
		// leaves its one retry.
		if tc.budget == open {
			if left := b.TryRetry(tc.f.Now); left == tc.want.Retry {
				t.Errorf("%s: budget retry left after Next = %v, want %v", tc.name, left, !tc.want.Retry)
			}
		}
	}
}

// A whole command under a policy: exponential ×2 from 1 s, cap 5 s, no
// jitter, 5 attempts, against a service that keeps failing.
func TestNextSequence(t *testing.T) {
	p := Policy{Backoff: Backoff{Base: s, Multiplier: 2, Cap: 5 * s, Jitter: None}, MaxAttempts: 5}
	now := epoch
	var waits []time.Duration
	var last Decision
	for attempt := 1; ; attempt++ {
		last = p.Next(Failure{Attempt: attempt, Err: ErrUnavailable, Now: now}, nil, nil)
		if !last.Retry {
			break
		}
		waits = append(waits, last.Wait)
		now = now.Add(last.Wait)
	}
	if want := []time.Duration{s, 2 * s, 4 * s, 5 * s}; !slices.Equal(waits, want) {
		t.Errorf("waits = %v, want %v", waits, want)
	}
	if last.Reason != GiveUpAttempts {
		t.Errorf("last decision = %v, want give up for %s", last, GiveUpAttempts)
	}
}

func TestRetryable(t *testing.T) {
	tests := []struct {
		name string
		p    Policy
		c    Class
		want bool
	}{
		{"default: transient", Policy{}, Unavailable, true},
		{"default: unknown", Policy{}, Unknown, true},
		{"default: 507", Policy{}, "http_507", true},
		{"default: not permanent", Policy{}, "http_409", false},
		{"default: not a success code", Policy{}, "http_200", false},
		{"canceled never, even listed", Policy{RetryOn: []Class{Canceled, GroupTransient, GroupPermanent}}, Canceled, false},
		{"no class never", Policy{RetryOn: []Class{GroupTransient}}, "", false},
		{"listed class", Policy{RetryOn: []Class{"http_409"}}, "http_409", true},
		{"permanent group", Policy{RetryOn: []Class{GroupPermanent}}, Unauthorized, true},
		{"NeverRetry by group", Policy{NeverRetry: []Class{GroupTransient}}, Timeout, false},
		{"NeverRetry by class", Policy{NeverRetry: []Class{Timeout}}, Unavailable, true},
	}
	for _, tc := range tests {
		if got := tc.p.Retryable(tc.c); got != tc.want {
			t.Errorf("%s: Retryable(%q) = %v, want %v", tc.name, tc.c, got, tc.want)
		}
	}
}

// DeadlineFor is the earlier of the TTL's deadline and start+Deadline: a
// policy's Deadline shortens a command's life, never extends it.
func TestDeadlineFor(t *testing.T) {
	start := epoch
	ttl := start.Add(time.Minute)
	tests := []struct {
		name     string
		deadline time.Duration
		want     time.Time
	}{
		{"no Deadline: the TTL", 0, ttl},
		{"negative Deadline: the TTL", -s, ttl},
		{"shorter than the TTL", 30 * s, start.Add(30 * s)},
		{"equal to the TTL", time.Minute, ttl},
		{"longer than the TTL never extends it", time.Hour, ttl},
	}
	for _, tc := range tests {
		p := Policy{Deadline: tc.deadline}
		if got := p.DeadlineFor(start, ttl); !got.Equal(tc.want) {
			t.Errorf("%s: DeadlineFor(start, start+1m) with Deadline %v = start+%v, want start+%v", tc.name, tc.deadline, got.Sub(start), tc.want.Sub(start))
		}
	}
	// Without a TTL, the policy's Deadline alone bounds the command.
	if got := (Policy{Deadline: 30 * s}).DeadlineFor(start, time.Time{}); !got.Equal(start.Add(30 * s)) {
		t.Errorf("DeadlineFor(start, no TTL) with Deadline 30s = %v, want start+30s", got)
	}
	if got := (Policy{}).DeadlineFor(start, time.Time{}); !got.IsZero() {
		t.Errorf("DeadlineFor(start, no TTL) without Deadline = %v, want the zero time (no deadline)", got)
	}
}

func TestDecisionString(t *testing.T) {
	tests := []struct {
		d    Decision
		want string
	}{
		{Decision{Retry: true, Wait: 2 * s, Class: Unavailable}, "retry in 2s (unavailable)"},
		{Decision{Reason: GiveUpPermanent, Class: "http_400"}, "give up: permanent_error (http_400)"},
	}
	for _, tc := range tests {
		if got := tc.d.String(); got != tc.want {
			t.Errorf("%+v.String() = %q, want %q", tc.d, got, tc.want)
		}
	}
}
