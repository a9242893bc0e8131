package mqtt

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: a
// Conn's loops, paho's workers and the broker's must all end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
