package service

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/hearthd/hearth/breaker"
)

// notSent, lostAck and refused are a publish's errors as protocols/mqtt
// returns them.
type (
	notSent struct{}
	lostAck struct{}
	refused struct{}
)

func (notSent) Error() string         { return "not connected" }
func (notSent) NotSent() bool         { return true }
func (lostAck) Error() string         { return "connection lost before the PUBACK" }
func (lostAck) DeliveryUnknown() bool { return true }
func (refused) Error() string         { return "PUBACK 0x87 not authorized" }
func (refused) Permanent() bool       { return true }

// What counts against a service's breaker: its own failures, never
// Hearth's connection, an abandoned send, a refused command or an offline
// device's silence.
func TestAttemptOutcomeCountsOnlyTheServicesFailures(t *testing.T) {
	for _, tc := range []struct {
		name                               string
		err                                error
		confirmed, linkChanged, devOffline bool
		want                               breaker.Outcome
	}{
		{"confirmed", nil, true, true, true, breaker.Success},
		{"link changed while it waited", nil, false, true, false, breaker.Canceled},
		{"not sent: the connection was down", fmt.Errorf("send: %w", notSent{}), false, false, false, breaker.Canceled},
		{"delivery unknown", lostAck{}, false, false, false, breaker.Canceled},
		{"abandoned: superseded or stopping", context.Canceled, false, false, false, breaker.Canceled},
		{"the broker never acknowledged it", fmt.Errorf("publish: %w", context.DeadlineExceeded), false, false, false, breaker.Canceled},
		{"refused for good: the command's fault", refused{}, false, false, false, breaker.Ignored},
		{"unconfirmed, the device said offline", nil, false, false, true, breaker.Ignored},
		{"unconfirmed", nil, false, false, false, breaker.Failure},
		{"a send error of the service", errors.New("HTTP 503"), false, false, false, breaker.Failure},
		{"a send error, the device offline", errors.New("HTTP 503"), false, false, true, breaker.Failure},
	} {
		if got := AttemptOutcome(tc.err, tc.confirmed, tc.linkChanged, tc.devOffline); got != tc.want {
			t.Errorf("%s: AttemptOutcome = %s, want %s", tc.name, got, tc.want)
		}
	}
}

// A timeout is the service's failure only if the service said nothing of
// any device since the send, the link held and the device is not offline.
func TestTimeoutIsTheServicesOnlyInItsSilence(t *testing.T) {
	for _, tc := range []struct {
		name                           string
		linkChanged, heard, devOffline bool
		want                           breaker.Outcome
	}{
		{"the service talked since the send", false, true, false, breaker.Ignored},
		{"the link changed", true, true, false, breaker.Canceled},
		{"the device is offline", false, false, true, breaker.Ignored},
		{"silence", false, false, false, breaker.Failure},
	} {
		if got := TimeoutOutcome(tc.linkChanged, tc.heard, tc.devOffline); got != tc.want {
			t.Errorf("%s: TimeoutOutcome = %s, want %s", tc.name, got, tc.want)
		}
	}
}
