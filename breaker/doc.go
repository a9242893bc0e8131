// Package breaker is a circuit breaker for one service (a bridge or a
// cloud service): the state machine that decides whether a call to the
// service may go out now, or must fail fast because the service is known
// to be broken. The caller makes one Breaker per service, so one
// service's failures never affect another's.
//
// A breaker is closed (calls go out), open (calls fail fast with an
// *OpenError) or half-open (a few probe calls test the service):
//
//	closed ──trip──▶ open ──OpenFor(trips) elapsed──▶ half_open ──SuccessesToClose probe successes──▶ closed
//	                  ▲                                   │
//	                  └── a probe fails or misses its ────┘
//	                      deadline: the next, longer, open
//
// It trips on FailureThreshold consecutive failures, or on a failure ratio
// of at least FailureRatio over the last Window once MinCalls outcomes
// fall within it. Each trip without a successful close in between opens
// it for longer: Options.OpenFor(trips). ReportHealth lets the service's
// own availability (a bridge's online/offline state) force it open and,
// once back online, half-open.
//
// The caller asks Allow for a *Permit before each call and reports the
// call's Outcome with Permit.Done: Success and Failure count; Ignored (a
// failure that says nothing about the service's health, such as a
// permanent error for an invalid payload) and Canceled count neither way.
// Classifying an error is the caller's decision.
//
// It owns no goroutines, timers or clocks, never sleeps, and imports
// nothing of Hearth's: every method takes the current time from the
// caller's clock (clockwork.Clock.Now in the daemon, a fixed time in
// tests), and time-driven transitions — an open period ending, a probe
// missing its deadline — happen lazily, on the first call at or after
// their time. Expire applies them and returns when the next one falls due,
// for a caller that wants OnStateChange on time.
//
// This is the breaker of Michael Nygard's "Release It!" (2007), shaped
// like sony/gobreaker: settings whose zero values have documented
// defaults, an OnStateChange hook, and a generation counter that discards
// the outcomes of calls started before a state change.
//
// # Caveats
//
//   - Time must not go back. A time earlier than one the breaker has
//     already seen counts as that one, so goroutines whose clock readings
//     reach the breaker out of order do no harm.
//   - The outcome of a call allowed before the latest state change is
//     discarded: a success that started before a trip does not close the
//     breaker, and a failure that started before a close does not count
//     against the fresh closed period.
//   - A probe whose deadline passed has already counted as a failure and
//     reopened the breaker; its late outcome is discarded.
//   - OnStateChange runs after the breaker's lock is released, in the order
//     of the transitions, one call at a time; it may call the breaker. It
//     may run on the goroutine of another call than the one that caused
//     the transition, and before that call returns.
package breaker
