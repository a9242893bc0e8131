// Package machine is the per-device command state machine: one device's
// accepted commands, in acceptance order, with the rules that decide which
// of them stay, which end, and when one may be delivered.
//
// It follows the shape of etcd's raft library: the machine implements only
// the rules, and takes everything that happens as input — a command
// accepted or superseded, a report, an availability, a node status, the
// time — and answers with what the caller is to do. It has no goroutines,
// no locks, no clock and no I/O: time comes in as arguments, and storing,
// sending and publishing are the caller's (the dispatcher's runner). A
// Device is not safe for concurrent use; its caller serialises the events
// of one device.
//
// What it holds today: the queue (order, supersede, restore after a failed
// store), the awake lease of a sleepy end device and the delivery plan of
// its commands, the device's reported state and availability. The
// attempts themselves (breaker, link, fresh read, send, confirmation) are
// still run by the dispatcher's worker.
package machine

import (
	"fmt"
	"slices"
	"time"

	"github.com/hearthd/hearth/devices"
)

// Device is the state machine of one device's commands. The zero value is
// not usable; see New.
type Device struct {
	dev devices.Device

	waiting []*Command // accepted, not being attempted, in acceptance order
	current *Command   // being attempted, or nil
	// pushed counts the commands accepted: their order.
	pushed uint64
	// places are the places of the commands Supersede ended, by op_id,
	// until their end is stored (Forget) or taken back (Restore).
	places map[string]place

	lease lease
	seen  seen
	// caps are the device's capabilities as its bridge describes them,
	// nil while unknown (see SetCapabilities).
	caps *devices.Capabilities
}

// Command is one accepted command in its device's machine. Op is the
// caller's to update while it attempts the command (attempts, times);
// the machine decides its place and whether it has ended.
type Command struct {
	Op devices.Op

	ended bool
	// order is the command's place in acceptance order: New numbers from
	// 1; Restore gives a command back its own.
	order uint64
	// delivered is the awake lease of a sleepy device in which the
	// command was last delivered (0: never): one delivery per lease.
	delivered uint64
	// turn is the awake lease in which a delivery of the command last
	// reached the device (0: never): a set left (Delivery.Sending) or a
	// request went unanswered (Delivery.Silent). The delivery order ranks
	// by it: a delivery the lease's end cut short before anything went
	// out did not have its turn.
	turn uint64
	// announced: its queued result for the current sleep is out.
	announced bool
	// unsent: an attempt is recorded but not handed to the bridge yet; a
	// command superseded now never reached the device, and its record
	// says so.
	unsent bool
	// firstStored: the intake stored the first attempt with the
	// acceptance, in one commit; Op says 0 attempts until that send is
	// recorded.
	firstStored bool
	// resumedUnsent: resumed after a restart with an attempt recorded,
	// and no send of it went out since: that attempt's delivery is
	// unknown.
	resumedUnsent bool
}

// place is where a command ended by Supersede stood, kept until the
// command that superseded it is stored, so that Restore can put it back
// as it was.
type place struct {
	order     uint64
	delivered uint64
	turn      uint64
	announced bool
}

// Kind says how a command came into the machine.
type Kind int

const (
	// Fresh is a command the intake just stored.
	Fresh Kind = iota
	// FirstStored is a command whose first attempt the intake stored in
	// the commit that accepted it: its first send needs no commit.
	FirstStored
	// Resumed is a command resumed from the store after a restart. Its
	// queued result counts as announced (the sender heard "accepted", and
	// "queued", before the restart), and an attempt it had recorded is
	// of unknown delivery until a send of it goes out.
	Resumed
)

// New returns the machine of dev, with no commands, no state heard, and
// a sleepy device asleep.
func New(dev devices.Device) *Device {
	return &Device{dev: dev}
}

// Accept queues op behind the device's earlier commands and returns it.
func (m *Device) Accept(op devices.Op, kind Kind) *Command {
	m.pushed++
	c := &Command{Op: op, order: m.pushed}
	switch kind {
	case FirstStored:
		c.firstStored = true
	case Resumed:
		c.announced, c.resumedUnsent = true, op.Attempts > 0
	}
	m.waiting = append(m.waiting, c)
	return c
}

// Replaces reports whether a newer target ends an older command of the
// device: when it covers it (devices.Target.Covers), or, on a sleepy
// device, when it names any of its attributes — only the newest target
// per attribute is kept, so that an older value is never written over a
// newer one at a later wake.
func (m *Device) Replaces(newer, older devices.Target) bool {
	return newer.Covers(older) || (m.dev.Sleep.Sleepy && sharesAttribute(newer, older))
}

// Supersede ends, in favour of op, every command of the device whose
// target op replaces (see Replaces), the one being attempted included, and
// returns them, oldest first, each ended superseded/newer_command at now.
// The caller stores and publishes them, then calls Forget, or, if op
// could not be stored, Restore. A send of the one being attempted that is
// already under way completes; no further attempt of it starts.
func (m *Device) Supersede(op devices.Op, now time.Time) []*Command {
	var ended []*Command
	if c := m.current; c != nil && !c.ended && m.Replaces(op.Target, c.Op.Target) {
		m.supersede(c, op.OpID, now)
		ended = append(ended, c)
	}
	keep := m.waiting[:0]
	for _, c := range m.waiting {
		if c.ended {
			continue // ended where it waited (a sleepy command's TTL): not ended twice
		}
		if m.Replaces(op.Target, c.Op.Target) {
			m.supersede(c, op.OpID, now)
			ended = append(ended, c)
			continue
		}
		keep = append(keep, c)
	}
	clear(m.waiting[len(keep):])
	m.waiting = keep
	return ended
}

// supersede ends c in favour of the op byOpID at now, keeping its place.
func (m *Device) supersede(c *Command, byOpID string, now time.Time) {
	if m.places == nil {
		m.places = map[string]place{}
	}
	m.places[c.Op.OpID] = place{c.order, c.delivered, c.turn, c.announced}
	c.ended = true
	if c.unsent {
		c.unsent = false
		c.Op.Attempts-- // recorded, never sent
		c.Op.Sends--
	}
	c.Op = SupersededBy(c.Op, byOpID, now)
	if c.resumedUnsent {
		c.Op.Detail = supersededDetail(byOpID, c.Op.Attempts, true)
	}
}

// Restore queues again ops (oldest first) that Supersede had ended, when
// the command that superseded them could not be stored: they are still
// accepted. Each goes back to its own place in acceptance order, with the
// lease it was delivered in and its announced queued result.
func (m *Device) Restore(ops []devices.Op) []*Command {
	out := make([]*Command, 0, len(ops))
	for _, op := range ops {
		op.Status, op.Reason, op.Detail = devices.Accepted, "", ""
		p := m.places[op.OpID]
		delete(m.places, op.OpID)
		c := &Command{Op: op, order: p.order, delivered: p.delivered, turn: p.turn, announced: p.announced}
		m.insert(c)
		out = append(out, c)
	}
	return out
}

// Forget drops the places of superseded commands whose end is stored:
// they will not be restored.
func (m *Device) Forget(opIDs ...string) {
	for _, id := range opIDs {
		delete(m.places, id)
	}
}

// insert puts c among the waiting commands by its order.
func (m *Device) insert(c *Command) {
	i := slices.IndexFunc(m.waiting, func(w *Command) bool { return w.order > c.order })
	if i < 0 {
		i = len(m.waiting)
	}
	m.waiting = slices.Insert(m.waiting, i, c)
}

// Next takes the oldest waiting command that has not ended as the one
// being attempted and returns it; nil when none waits. It is the always-
// listening device's order: one command at a time, in acceptance order.
func (m *Device) Next() *Command {
	for len(m.waiting) > 0 {
		c := m.waiting[0]
		m.waiting[0] = nil
		m.waiting = m.waiting[1:]
		if !c.ended {
			m.current = c
			return c
		}
	}
	return nil
}

// Current returns the command being attempted, or nil.
func (m *Device) Current() *Command { return m.current }

// Done says the attempts of the current command are over (it ended, or
// a sleepy device's delivery in one lease did).
func (m *Device) Done() { m.current = nil }

// Idle reports whether no command waits or is being attempted.
func (m *Device) Idle() bool { return len(m.waiting) == 0 && m.current == nil }

// Pending counts the commands accepted and not ended: those waiting and
// the one being attempted.
func (m *Device) Pending() int {
	n := 0
	for _, c := range m.waiting {
		if !c.ended {
			n++
		}
	}
	if m.current != nil && !m.current.ended {
		n++
	}
	return n
}

// Waiting returns the commands waiting, in acceptance order.
func (m *Device) Waiting() []*Command { return slices.Clone(m.waiting) }

// End ends c with a terminal status at now, unless it has ended already
// (a newer command superseded it first); it returns c's op as ended, and
// whether this call ended it.
func (m *Device) End(c *Command, status devices.Status, reason devices.Reason, detail string, state map[string]any, now time.Time) (devices.Op, bool) {
	if c.ended {
		return c.Op, false
	}
	c.ended = true
	c.Op.Status, c.Op.Reason, c.Op.Detail = status, reason, detail
	c.Op.State = state
	c.Op.UpdatedAt = now
	return c.Op, true
}

// Ended reports whether c has a terminal status.
func (c *Command) Ended() bool { return c.ended }

// TakeFirstStored reports whether c's first attempt was stored with its
// acceptance and this is the first send (not a resend) of attempt 1, and
// clears the mark: only that one send skips its commit.
func (c *Command) TakeFirstStored(resend bool) bool {
	stored := c.firstStored && !resend && c.Op.Attempts == 1
	c.firstStored = false
	return stored
}

// ResumedUnsent reports whether c was resumed with an attempt recorded
// and no send of it has gone out since: that attempt's delivery is
// unknown.
func (c *Command) ResumedUnsent() bool { return c.resumedUnsent }

// RecordAttempt records on c the attempt about to be sent at now: a new
// one, or (resend) the last one again; either is one more send
// (devices.Op.Sends). It returns c's op before and after.
// The caller stores the record before the send: after a crash, a stored
// attempt says the outcome of that send is unknown.
func (c *Command) RecordAttempt(resend bool, now time.Time) (prev, op devices.Op) {
	prev = c.Op
	if !resend {
		c.Op.Attempts++
		c.unsent = true
	}
	c.Op.Sends = max(c.Op.Sends, prev.Attempts) + 1
	c.Op.LastSentAt = now
	c.Op.UpdatedAt = now
	return prev, c.Op
}

// Sending records that the recorded attempt is being handed to the
// bridge now: a supersede from here on finds it sent.
func (c *Command) Sending() { c.unsent = false }

// SentSinceResume records that a send of c went out since the start: its
// attempts are no longer of unknown delivery.
func (c *Command) SentSinceResume() { c.resumedUnsent = false }

// Unsent takes back an attempt that never left Hearth: the record goes
// back to prev's attempts and send time. It reports false, doing nothing,
// when c has ended.
func (c *Command) Unsent(prev devices.Op) bool {
	if c.ended {
		return false
	}
	c.unsent = false
	c.Op.Attempts, c.Op.Sends, c.Op.LastSentAt = prev.Attempts, prev.Sends, prev.LastSentAt
	return true
}

// Lost takes back an attempt whose send may have reached the device but
// whose delivery is unknown (the connection went before the bridge's
// broker acknowledged it), where the caller gives the attempt back (a
// sleepy device's next lease tries again): the record goes back to
// prev's attempts and send time, but the send stays counted
// (devices.Op.Sends), for it may have acted. It reports false, doing
// nothing, when c has ended.
func (c *Command) Lost(prev devices.Op) bool {
	sends := c.Op.Sends
	if !c.Unsent(prev) {
		return false
	}
	c.Op.Sends = sends
	return true
}

// SupersededBy returns op ended in favour of the op byOpID at now. Its
// detail says whether a set of it went out first: op.Attempts counts the
// sends made, so 0 means the device never received it.
func SupersededBy(op devices.Op, byOpID string, now time.Time) devices.Op {
	op.Status = devices.Superseded
	op.Reason = devices.ReasonNewerCommand
	op.Detail = supersededDetail(byOpID, op.Attempts, false)
	op.UpdatedAt = now
	return op
}

// supersededDetail is the detail of a command superseded by the op byOpID
// after sent attempts: "superseded by op_id X before it was sent", or
// "superseded by op_id X after 1 attempt was sent" ("after 2 attempts
// were sent"). unknown: the last of those attempts was recorded before a
// restart and not sent again since, so whether it went out is unknown.
func supersededDetail(byOpID string, sent int, unknown bool) string {
	d := "superseded by op_id " + byOpID
	switch {
	case sent == 0:
		return d + " before it was sent"
	case unknown:
		return fmt.Sprintf("%s after %d %s, the last recorded before a restart (its delivery unknown)", d, sent, plural(sent, "attempt", "attempts"))
	case sent == 1:
		return d + " after 1 attempt was sent"
	default:
		return fmt.Sprintf("%s after %d attempts were sent", d, sent)
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// sharesAttribute reports whether a and b name a state attribute in
// common.
func sharesAttribute(a, b devices.Target) bool {
	for _, k := range a.Attributes() {
		if _, ok := b[k]; ok {
			return true
		}
	}
	return false
}
