package machine

import (
	"fmt"
	"maps"
	"time"

	"github.com/hearthd/hearth/devices"
)

// seen is what the device's bridge has said of it.
type seen struct {
	// state is the last reported state, merged, including what was
	// restored from the store at the start.
	state map[string]any
	// heard is the state reported since this process started, merged,
	// retained replays included; unlike state, nothing restored.
	heard map[string]any
	// available is the last availability; nil if never reported.
	available *bool
	// offlineSince is when the bridge last said the device went offline.
	offlineSince time.Time
	// freshReading: the fresh read after the start was sent and no live
	// report has come since.
	freshReading bool
}

// Report is what a state report means for the device.
type Report struct {
	// News: a live report from the device itself; it may confirm an
	// attempt. A retained report (the broker's replay on subscribe) is
	// not news, nor is what a bridge publishes for a node it says is
	// asleep (from its cache).
	News bool
	// Woke: the report was a wake signal of a sleepy device (Wake).
	Woke bool
	// Answered: it answered the fresh read after the start.
	Answered bool
	// Mirror is the device's state after it, merged: a copy for the
	// caller to publish.
	Mirror map[string]any
}

// Report takes a state report of the device at now. retained: the broker
// kept it from before and replayed it on subscribe.
func (m *Device) Report(state map[string]any, retained bool, now time.Time) Report {
	s := &m.seen
	if s.state == nil {
		s.state = make(map[string]any, len(state))
	}
	maps.Copy(s.state, state)
	var r Report
	r.Mirror = maps.Clone(s.state)
	if !retained {
		r.Woke = m.Wake(now) // any message from the device: it is awake
	}
	r.News = !retained && !m.lease.nodeAsleep
	if r.News || retained {
		if s.heard == nil {
			s.heard = make(map[string]any, len(state))
		}
		maps.Copy(s.heard, state)
	}
	if r.News && s.freshReading {
		s.freshReading, r.Answered = false, true
	}
	return r
}

// Restored sets the state kept in the store from before the start: the
// mirror's, not heard (see HeardAt).
func (m *Device) Restored(state map[string]any) { m.seen.state = maps.Clone(state) }

// State returns a copy of the device's state, nil if none is known.
func (m *Device) State() map[string]any {
	if m.seen.state == nil {
		return nil
	}
	return maps.Clone(m.seen.state)
}

// SetCapabilities takes what the device's bridge says it can do (nil:
// unknown); the state heard is judged by them (devices.SatisfiedBy).
func (m *Device) SetCapabilities(caps *devices.Capabilities) { m.caps = caps }

// HeardAt reports whether the state heard since the start shows target,
// without a device fault (devices.SatisfiedBy with the device's
// capabilities, devices.Fault), and returns a copy of it.
func (m *Device) HeardAt(target devices.Target) (map[string]any, bool) {
	h := m.seen.heard
	if h == nil || !devices.SatisfiedBy(m.dev.Class, m.caps, target, h) {
		return nil, false
	}
	if _, bad := devices.Fault(m.dev.Class, h); bad {
		return nil, false
	}
	return maps.Clone(h), true
}

// FreshReadSent records that the fresh read after the start was sent: the
// next live report answers it.
func (m *Device) FreshReadSent() { m.seen.freshReading = true }

// Availability takes the device's availability as its bridge reported it
// at now. Coming back from offline is a wake signal; it reports whether
// that counted.
func (m *Device) Availability(online bool, now time.Time) (woke bool) {
	s := &m.seen
	if online && s.available != nil && !*s.available {
		woke = m.Wake(now)
	}
	if !online && (s.available == nil || *s.available) {
		s.offlineSince = now
	}
	s.available = &online
	return woke
}

// Available returns the last availability, and false if none was
// reported.
func (m *Device) Available() (online, known bool) {
	if m.seen.available == nil {
		return false, false
	}
	return *m.seen.available, true
}

// Offline reports whether the bridge says the device is offline, and
// since when.
func (m *Device) Offline() (bool, time.Time) {
	s := &m.seen
	return s.available != nil && !*s.available, s.offlineSince
}

// GateKind is what the offline gate says of a command's next attempt.
type GateKind int

const (
	// GateOpen: the device is not known to be offline; go on.
	GateOpen GateKind = iota
	// GateEnd: the command ends, with the gate's status, reason and
	// detail, nothing more sent.
	GateEnd
	// GatePassed: the attempt's own deadline (a retry's policy deadline)
	// passed while the device stayed offline; the attempts decide.
	GatePassed
	// GateWait: wait for the device to come back (its offline setting is
	// queue), until the attempt's deadline; the queued result says
	// Detail.
	GateWait
)

// Gate is the offline gate's word on a command.
type Gate struct {
	Kind   GateKind
	Status devices.Status
	Reason devices.Reason
	Detail string
}

// OfflineGate is the offline gate (issue 16) before c's next attempt at
// now, which must go by until, on the device's service. A command for a
// device its bridge reports offline is decided before the breaker is
// asked: it ends at once, failed/device_offline, with nothing sent, or,
// where the device's offline setting says queue, it waits for the bridge
// to say the device is back, within its TTL. Either way it never takes a
// half-open breaker's probe.
func (m *Device) OfflineGate(c *Command, now, until time.Time, service string) Gate {
	offline, since := m.Offline()
	if !offline {
		return Gate{Kind: GateOpen}
	}
	op := c.Op
	away := fmt.Sprintf("the bridge of service %s reports %s offline since %s", service, m.dev.ID, since.UTC().Format(time.RFC3339))
	switch {
	case m.dev.OnOffline() == devices.OfflineFail:
		return Gate{Kind: GateEnd, Status: devices.Failed, Reason: devices.ReasonDeviceOffline, Detail: away + "; " + nothingMore(op.Attempts)}
	case !now.Before(op.Deadline):
		return Gate{Kind: GateEnd, Status: devices.Expired, Reason: devices.ReasonTTLElapsed,
			Detail: fmt.Sprintf("the TTL passed while %s; %s", away, nothingMore(op.Attempts))}
	case !now.Before(until):
		return Gate{Kind: GatePassed}
	}
	return Gate{Kind: GateWait, Detail: fmt.Sprintf("%s; the command waits for it until %s", away, op.Deadline.UTC().Format(time.RFC3339))}
}

// OfflineEnds returns, for a sleepy device whose offline setting is fail
// and which its bridge reports offline, the end of each of pending: failed,
// device_offline, nothing more sent. It is empty otherwise.
func (m *Device) OfflineEnds(pending []*Command, service string) []Gate {
	offline, since := m.Offline()
	if !offline || m.dev.OnOffline() != devices.OfflineFail {
		return nil
	}
	away := fmt.Sprintf("the bridge of service %s reports %s offline since %s", service, m.dev.ID, since.UTC().Format(time.RFC3339))
	out := make([]Gate, len(pending))
	for i, c := range pending {
		out[i] = Gate{Kind: GateEnd, Status: devices.Failed, Reason: devices.ReasonDeviceOffline, Detail: away + "; " + nothingMore(c.Op.Attempts)}
	}
	return out
}

// nothingMore says what was sent of a command that ends without its next
// attempt.
func nothingMore(sent int) string {
	if sent == 0 {
		return "nothing was sent"
	}
	return fmt.Sprintf("no attempt after attempt %d was sent", sent)
}
