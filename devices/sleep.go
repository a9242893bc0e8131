package devices

import "time"

// Sleep is how a battery device sleeps (issue 4): a sleepy end device
// (Zigbee) or a Z-Wave node with a wake-up interval listens only now and
// then, and its bridge or parent holds messages for it meanwhile.
type Sleep struct {
	// Sleepy marks a device that is not always listening: commands to it
	// wait, queued, for its next awake lease instead of being retried on a
	// timer.
	Sleepy bool
	// WakeInterval is how often the device wakes (Z-Wave's wake-up
	// interval, a Zigbee device's check-in interval): the default TTL of
	// its commands. Positive when Sleepy.
	WakeInterval time.Duration
	// AwakeWindow is how long the device listens after a wake signal (a
	// check-in, a wake-up notification, any message from it).
	AwakeWindow time.Duration
}

// NodeStatus is what a bridge that knows its nodes' sleep (Z-Wave JS UI's
// node status topic) says of one node.
type NodeStatus string

// Node statuses, as Z-Wave JS names them.
const (
	// NodeAlive: a listening node that answers.
	NodeAlive NodeStatus = "alive"
	// NodeAwake: a sleepy node has woken up (its wake-up notification) and
	// listens for the moment: an awake lease begins.
	NodeAwake NodeStatus = "awake"
	// NodeAsleep: a sleepy node went back to sleep: its awake lease ends
	// at once, and nothing is sent to it, nor retried, until it wakes.
	NodeAsleep NodeStatus = "asleep"
	// NodeDead: the node does not answer; it is offline.
	NodeDead NodeStatus = "dead"
)

// Transport is what a protocol's transport already does for Hearth, as its
// adapter declares it (issue 4 item 5), so that Hearth stacks no retries
// of its own on top of the radio's.
type Transport struct {
	// RadioRetries: the radio layer retries a frame itself (Zigbee's MAC
	// and APS retries, Z-Wave's routing and retransmission).
	RadioRetries bool
	// WakeUpQueue: the bridge holds commands for a sleeping node until it
	// wakes (Z-Wave's wake-up queue); without it a message to a sleeping
	// device may be lost (a Zigbee parent buffers for seconds only).
	WakeUpQueue bool
	// ReportsState: the bridge reports a device's state after a change,
	// which is how Hearth confirms a command.
	ReportsState bool
}

// DefaultAttempts is the attempt count that fits t: 2 where the transport
// retries at the radio layer (one attempt of Hearth's own beyond the
// radio's), 3 where it does not.
func (t Transport) DefaultAttempts() int {
	if t.RadioRetries {
		return 2
	}
	return 3
}
