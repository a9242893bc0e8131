package machine

import (
	"cmp"
	"slices"
	"time"

	"github.com/hearthd/hearth/devices"
)

// Sleepy end devices (issue 4). A battery device that sleeps listens only
// in short awake leases; its bridge or parent already holds messages and
// retries at the radio layer. So its commands stay queued while it sleeps,
// nothing is sent on a timer, and they are delivered at the next lease:
//
//   - a lease begins at any wake signal — a report from the device (a
//     check-in included), a node status awake or alive (Z-Wave JS UI), its
//     availability coming back from offline — and lasts the device's
//     awake window from the latest signal; once a bridge has said the
//     node is asleep, only its next awake begins a lease (the values a
//     gateway publishes from its cache are not the device); the lease
//     ends at once when the bridge says the node is asleep or dead, or
//     when a request to the device goes unanswered (EndLease);
//   - each command is delivered at most once per lease, those that last
//     reached the device longest ago first (a delivery the lease's end
//     cut short before anything went out does not count), then in
//     acceptance order;
//   - the newest target per attribute wins (see Replaces);
//   - a command whose TTL passes while it waits ends, and is never sent
//     late (Plan's Due).

// lease is a sleepy device's awake lease.
type lease struct {
	// until: the device listens until then.
	until time.Time
	// gen counts the leases: it grows when a wake signal finds the device
	// asleep, not when one extends a lease.
	gen uint64
	// nodeAsleep: the bridge last said the node is asleep; only its next
	// awake begins a lease.
	nodeAsleep bool
}

// Lease is a sleepy device's awake lease as it stands at a moment.
type Lease struct {
	Awake bool      // the device listens now
	Gen   uint64    // the lease's number; 0 before the first
	Until time.Time // when it ends
}

// Lease returns the awake lease at now.
func (m *Device) Lease(now time.Time) Lease {
	return Lease{Awake: now.Before(m.lease.until), Gen: m.lease.gen, Until: m.lease.until}
}

// NodeAsleep reports whether the bridge last said the node is asleep.
func (m *Device) NodeAsleep() bool { return m.lease.nodeAsleep }

// Wake takes a wake signal of the device at now: the awake lease lasts
// its awake window from now; a signal that finds the device asleep begins
// a new lease. It reports whether the signal counted: false for a device
// that is not sleepy, or whose bridge said its node is asleep.
func (m *Device) Wake(now time.Time) bool {
	if !m.dev.Sleep.Sleepy || m.lease.nodeAsleep {
		return false
	}
	if !now.Before(m.lease.until) {
		m.lease.gen++
	}
	if until := now.Add(m.dev.Sleep.AwakeWindow); until.After(m.lease.until) {
		m.lease.until = until
	}
	return true
}

// NodeStatus takes a node status the bridge reported at now (Z-Wave JS
// UI's node status): awake or alive is a wake signal, asleep ends the
// lease until the next awake, dead ends the lease. It reports whether a
// wake signal counted and whether the lease was ended.
func (m *Device) NodeStatus(s devices.NodeStatus, now time.Time) (woke, slept bool) {
	switch s {
	case devices.NodeAwake, devices.NodeAlive:
		m.lease.nodeAsleep = false
		return m.Wake(now), false
	case devices.NodeAsleep:
		m.lease.nodeAsleep = true
		m.lease.until = time.Time{}
		return false, true
	case devices.NodeDead:
		m.lease.until = time.Time{}
		return false, true
	}
	return false, false
}

// EndLease ends the lease gen at once: a request to the device went
// unanswered. A newer lease (a wake signal since) is left alone. It
// reports whether it ended one.
func (m *Device) EndLease(gen uint64) bool {
	if m.lease.gen != gen {
		return false
	}
	m.lease.until = time.Time{}
	return true
}

// Plan is what a sleepy device's commands call for at a moment.
type Plan struct {
	Lease
	// Pending are the commands that wait, ended ones dropped, in
	// acceptance order.
	Pending []*Command
	// Due are the pending commands whose TTL has passed: the caller ends
	// them (never sent late).
	Due []*Command
	// Eligible are, while the device is awake, the pending commands not
	// delivered in this lease, in delivery order: those that last
	// reached the device longest ago first (never before all), then in
	// acceptance order, so that a command whose silence ends every lease
	// does not go first at every wake and starve the others, and one
	// taken at a lease's very end, too late for its set to leave, keeps
	// its turn for the next. (Two commands of a sleepy
	// device never share an attribute, see Replaces: no order among them
	// writes an older value last.)
	Eligible []*Command
	// Wake is when to plan again if nothing else happens: the earliest
	// deadline still ahead, or the lease's end if every pending command
	// was delivered in it; zero for never.
	Wake time.Time
}

// Plan drops the ended commands from the waiting ones and says, at now,
// which are due, which may be delivered, and when to look again.
func (m *Device) Plan(now time.Time) Plan {
	keep := m.waiting[:0]
	for _, c := range m.waiting {
		if !c.ended {
			keep = append(keep, c)
		}
	}
	clear(m.waiting[len(keep):])
	m.waiting = keep
	p := Plan{Lease: m.Lease(now), Pending: slices.Clone(m.waiting)}
	for _, c := range p.Pending {
		delivered := c.delivered == p.Gen && p.Gen > 0
		switch {
		case !now.Before(c.Op.Deadline):
			p.Due = append(p.Due, c)
		case p.Awake && !delivered:
			p.Eligible = append(p.Eligible, c)
		}
		if now.Before(c.Op.Deadline) && (p.Wake.IsZero() || c.Op.Deadline.Before(p.Wake)) {
			p.Wake = c.Op.Deadline
		}
	}
	slices.SortStableFunc(p.Eligible, func(a, b *Command) int {
		return cmp.Or(cmp.Compare(a.turn, b.turn), cmp.Compare(a.order, b.order))
	})
	if len(p.Eligible) == 0 && p.Awake && len(p.Pending) > 0 && (p.Wake.IsZero() || p.Until.Before(p.Wake)) {
		// Every command was delivered in this lease: look again when it
		// ends, to say they wait for the next.
		p.Wake = p.Until
	}
	return p
}

// Announce marks c's queued result for the current sleep as out and
// returns its op; false when c has ended or was announced already.
func (m *Device) Announce(c *Command) (devices.Op, bool) {
	if c.ended || c.announced {
		return devices.Op{}, false
	}
	c.announced = true
	return c.Op, true
}

// Turn says whether a command may be delivered in a lease now.
type Turn int

const (
	// Deliver: c is now the command being attempted, in this lease.
	Deliver Turn = iota
	// Skip: c has ended; go on with the next.
	Skip
	// LeaseOver: the lease has ended; the rest wait for the next.
	LeaseOver
)

// Deliver takes c, a pending command of a sleepy device, as the one being
// attempted in the lease gen at now, if that lease still runs.
func (m *Device) Deliver(c *Command, gen uint64, now time.Time) Turn {
	if c.ended {
		return Skip
	}
	if !now.Before(m.lease.until) || m.lease.gen != gen {
		return LeaseOver
	}
	if i := slices.Index(m.waiting, c); i >= 0 {
		m.waiting = slices.Delete(m.waiting, i, i+1)
	}
	m.current = c
	c.delivered = gen
	return Deliver
}

// Delivered ends c's delivery in its lease at now: if c is still pending
// and its TTL has not passed, it goes back to its place in acceptance
// order, queued again for the next lease (its queued result to be said
// again). due reports that its TTL passed: the caller ends it at once.
func (m *Device) Delivered(c *Command, now time.Time) (due bool) {
	if m.current == c {
		m.current = nil
	}
	if c.ended {
		return false
	}
	if !now.Before(c.Op.Deadline) {
		return true
	}
	c.announced = false
	m.insert(c)
	return false
}
