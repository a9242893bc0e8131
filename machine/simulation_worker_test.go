package machine

import (
	"time"

	"pgregory.net/rapid"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
)

// The worker's side of TestSimulation: what the dispatcher's device
// worker does with the machine's steps (attempts, deliveries at a wake,
// reads, sends and their ends), each outcome drawn from the schedule.

// work is the worker's turn. With a command being attempted, its
// attempt ends: confirmed by a report, or not (an always-listening
// device's retry policy gives up; a sleepy device's command waits for the
// next lease, or ends at its TTL). Without one, the next starts: an
// always-listening device's oldest command, or the first eligible command
// of a sleepy device's plan (whose due commands end first). Between two
// turns anything may happen: a newer command may supersede the one being
// attempted.
func (s *sim) work(t *rapid.T) {
	if c := s.m.Current(); c != nil {
		if s.dev.Sleep.Sleepy {
			s.deliveryStep(t, c)
		} else {
			s.step(t, c)
		}
		return
	}
	if !s.dev.Sleep.Sleepy {
		if c := s.m.Next(); c != nil {
			s.a = NewAttempts(c, s.dev, "svc", s.policy, s.w.budget, s.w.now)
			if s.readBack {
				s.a.ReadBackUnconfirmed()
			}
			s.step(t, c)
		}
		return
	}
	p := s.m.Plan(s.w.now)
	for _, c := range p.Due {
		s.endAt(t, c, devices.Expired)
	}
	if !p.Awake {
		for _, c := range p.Pending {
			s.m.Announce(c)
		}
	}
	for _, c := range p.Eligible {
		if c.Ended() {
			continue // ended as due above
		}
		switch s.m.Deliver(c, p.Gen, s.w.now) {
		case Skip:
			continue
		case LeaseOver:
			return
		}
		l := s.m.Lease(s.w.now)
		if !l.Awake || s.m.NodeAsleep() {
			t.Fatalf("%s delivered to a node believed asleep (lease %+v)", c.Op.OpID, l)
		}
		if s.delivered[c.Op.OpID] == l.Gen {
			t.Fatalf("%s delivered twice in lease %d", c.Op.OpID, l.Gen)
		}
		s.delivered[c.Op.OpID] = l.Gen
		s.dl, s.leaseSends = s.m.NewDelivery(c, l.Gen, "svc"), 0
		s.deliveryStep(t, c)
		return
	}
}

// deliveryStep is one step of a sleepy device's delivery of c in its
// lease, as c's Delivery asks: the gates, the fresh read, the send, the
// wait for the device's word.
func (s *sim) deliveryStep(t *rapid.T, c *Command) {
	if c.Ended() { // superseded during its delivery
		s.endDelivery(t, c)
		return
	}
	st := s.dl.Next(s.w.now)
	if st.Kind != StepAttempt {
		s.endDelivery(t, c)
		return
	}
	if devices.Risky(s.dev, c.Op.Target) && !(st.Read && st.Strict) {
		t.Fatalf("%s: a risky attempt without a strict fresh read", c.Op.OpID)
	}
	if s.dev.SafetyCritical() && c.Op.Attempts == 0 && !st.Read {
		t.Fatalf("%s: the first send to a safety-critical device without a fresh read", c.Op.OpID)
	}
	if !s.reliable && rapid.IntRange(0, 5).Draw(t, "gate_closed") == 0 {
		s.w.now = s.w.now.Add(time.Duration(rapid.IntRange(1, 5).Draw(t, "gate_wait_s")) * time.Second)
		t.Logf("%s: a gate stays closed in its lease", c.Op.OpID)
		s.endDelivery(t, c)
		return
	}
	if st.Read && !s.read(t, c, st) {
		if !c.Ended() {
			s.endDelivery(t, c)
		}
		return
	}
	end, ok := s.dl.BeforeSend(s.w.now)
	if !ok {
		if end.Kind == StepEnd {
			if op, ok := s.m.End(c, end.Status, end.Reason, end.Detail, end.State, s.w.now); ok {
				s.ended(t, op)
			}
		}
		s.endDelivery(t, c)
		return
	}
	prev, _ := c.RecordAttempt(false, s.w.now)
	s.store[c.Op.OpID] = c.Op
	if !s.reliable && rapid.IntRange(0, 7).Draw(t, "asleep_while_stored") == 0 {
		s.m.NodeStatus(devices.NodeAsleep, s.w.now) // the bridge's word while the attempt is stored
		t.Logf("%s: the bridge says the node is asleep as the attempt is stored", c.Op.OpID)
	}
	if !s.dl.Sending(s.w.now) {
		c.Unsent(prev)
		s.store[c.Op.OpID] = c.Op
		s.endDelivery(t, c)
		return
	}
	if !s.w.now.Before(c.Op.Deadline) {
		t.Fatalf("%s sent at %s, after its TTL (deadline %s)", c.Op.OpID, s.w.now, c.Op.Deadline)
	}
	if l := s.m.Lease(s.w.now); !l.Awake || s.m.NodeAsleep() {
		t.Fatalf("%s sent to a node believed asleep (lease %+v)", c.Op.OpID, l)
	}
	res := Sent
	if !s.reliable {
		res = rapid.SampledFrom([]SendResult{Sent, Sent, Sent, NotSent, DeliveryUnknown, SendFailed}).Draw(t, "send_result")
	}
	if res == NotSent {
		c.Unsent(prev) // nothing left Hearth: the next lease tries again
		s.store[c.Op.OpID] = c.Op
		t.Logf("send %s: %v", c.Op.OpID, res)
		s.endDelivery(t, c)
		return
	}
	c.Sending()
	c.SentSinceResume()
	s.sends[c.Op.OpID]++
	s.leaseSends++
	if res == DeliveryUnknown {
		s.take(t, c) // it may have reached the device
		c.Lost(prev) // no attempt spent on it, the send counted: the next lease tries again
		s.store[c.Op.OpID] = c.Op
		t.Logf("send %s: %v", c.Op.OpID, res)
	}
	switch {
	case devices.Risky(s.dev, c.Op.Target) && s.sends[c.Op.OpID] > MaxRiskyAttempts:
		t.Fatalf("%s: a risky action sent %d times", c.Op.OpID, s.sends[c.Op.OpID])
	case s.leaseSends > MaxAttemptsPerWake:
		t.Fatalf("%s: %d sends in one lease; at most %d", c.Op.OpID, s.leaseSends, MaxAttemptsPerWake)
	}
	if devices.Risky(s.dev, c.Op.Target) && s.sends[c.Op.OpID] > MaxRiskyAttempts {
		t.Fatalf("%s: a risky action sent %d times", c.Op.OpID, s.sends[c.Op.OpID])
	}
	if res == DeliveryUnknown {
		s.endDelivery(t, c)
		return
	}
	if res == SendFailed {
		err := rapid.SampledFrom([]error{retry.ErrUnavailable, retry.ErrInvalidPayload}).Draw(t, "send_error")
		t.Logf("send %s: failed: %v", c.Op.OpID, err)
		if end, stop := s.dl.SendFailed(err); stop {
			if op, ok := s.m.End(c, end.Status, end.Reason, end.Detail, nil, s.w.now); ok {
				s.ended(t, op)
			}
			s.endDelivery(t, c)
		}
		return
	}
	s.take(t, c)
	if _, ok := s.dl.Sent(s.w.now); !ok {
		s.endDelivery(t, c)
		return
	}
	switch word := rapid.IntRange(0, 2).Draw(t, "device_word"); {
	case s.reliable || word == 0: // the device reports (by itself, or to the verifying read)
		r := s.m.Report(s.state(), false, s.w.now)
		if devices.Satisfied(s.dev.Class, c.Op.Target, r.Mirror) {
			if op, ok := s.m.End(c, devices.Succeeded, "", "", r.Mirror, s.w.now); ok {
				s.ended(t, op)
			}
			s.endDelivery(t, c)
		} // another state: the lease's further attempt, at the next step
	case word == 1: // silent: it went back to sleep
		s.w.now = s.w.now.Add(time.Duration(rapid.IntRange(1, 10).Draw(t, "verify_s")) * time.Second)
		s.dl.Silent(s.w.now)
		s.endDelivery(t, c)
	default: // the bridge says the node is asleep
		s.m.NodeStatus(devices.NodeAsleep, s.w.now)
		s.endDelivery(t, c)
	}
}

// endDelivery ends the delivery of c in its lease: it waits for the next,
// or ends at its TTL.
func (s *sim) endDelivery(t *rapid.T, c *Command) {
	s.dl = nil
	if s.m.Delivered(c, s.w.now) {
		s.endAt(t, c, devices.Failed) // sent, unverified by its TTL
	}
}

// take is the set of c reaching the device, or not (a lost set).
func (s *sim) take(t *rapid.T, c *Command) {
	taken := s.reliable || rapid.IntRange(0, 3).Draw(t, "set_lost") != 0
	t.Logf("send %s %v (attempt %d): taken=%v", c.Op.OpID, c.Op.Target, c.Op.Attempts, taken)
	if !taken {
		return
	}
	seq := s.seq[c.Op.OpID]
	for a, v := range c.Op.Target {
		if w, ok := s.device[a]; ok && w.seq > seq {
			t.Fatalf("%s (accepted #%d) wrote %s=%v over the newer #%d's %v", c.Op.OpID, seq, a, v, w.seq, w.value)
		}
		s.device[a] = written{value: v.(float64), seq: seq}
	}
}

// step is one step of an always-listening device's worker on c, the
// command being attempted: it runs what c's Attempts ask for, with the
// gates, the reads, the sends and the reports drawn from the schedule.
func (s *sim) step(t *rapid.T, c *Command) {
	if c.Ended() { // superseded while it was attempted
		s.done()
		return
	}
	st := s.a.Next(s.w.now, draws{t})
	switch st.Kind {
	case StepEnd:
		if op, ok := s.m.End(c, st.Status, st.Reason, st.Detail, nil, s.w.now); ok {
			s.ended(t, op)
		}
		s.done()
	case StepStop:
		t.Fatalf("%s: the attempts stopped without shutting down", c.Op.OpID)
	case StepResolve:
		if s.read(t, c, st) {
			s.a.Resolved()
		}
	case StepAwaitResumed:
		if devices.Satisfied(s.dev.Class, c.Op.Target, s.state()) && s.reliableDraw(t, "resumed_report") {
			s.succeed(t, c)
			return
		}
		if end := c.Op.LastSentAt.Add(st.Timeout); end.After(s.w.now) {
			s.w.now = end
		}
		t.Logf("resumed attempt of %s unconfirmed", c.Op.OpID)
	case StepBackoff:
		s.w.now = s.w.now.Add(st.Wait)
		t.Logf("backoff %s", st.Wait)
	case StepReadBack:
		// The read after an unconfirmed attempt: not strict, bounded by
		// Until, never an attempt.
		if !s.readBack {
			t.Fatalf("%s: a read-back on a device without it", c.Op.OpID)
		}
		if st.Strict || !st.Read {
			t.Fatalf("%s: a read-back step that is strict (%v) or reads nothing (%v)", c.Op.OpID, st.Strict, !st.Read)
		}
		before := c.Op
		if !s.reliable {
			s.w.now = s.w.now.Add(time.Duration(rapid.IntRange(0, 5).Draw(t, "read_back_s")) * time.Second)
		}
		switch {
		case !s.w.now.Before(st.Until):
			t.Logf("read-back of %s %s: unanswered by %s", c.Op.OpID, st.When, st.Until)
		case devices.Satisfied(s.dev.Class, c.Op.Target, s.state()) && s.reliableDraw(t, "read_back_answered"):
			t.Logf("read-back of %s %s: at the target", c.Op.OpID, st.When)
			s.succeed(t, c)
			return
		default:
			t.Logf("read-back of %s %s: not at the target, or no answer", c.Op.OpID, st.When)
		}
		if c.Op.Attempts != before.Attempts || c.Op.Sends != before.Sends {
			t.Fatalf("%s: the read-back cost an attempt (%d → %d, sends %d → %d)", c.Op.OpID, before.Attempts, c.Op.Attempts, before.Sends, c.Op.Sends)
		}
	case StepAttempt:
		s.attempt(t, c, st)
	}
}

// attempt runs a StepAttempt.
func (s *sim) attempt(t *rapid.T, c *Command, st Step) {
	if !s.w.now.Before(st.Until) {
		t.Fatalf("%s: an attempt step at %s, past its deadline %s", c.Op.OpID, s.w.now, st.Until)
	}
	switch g := s.m.OfflineGate(c, s.w.now, st.Until, "svc"); g.Kind {
	case GateEnd:
		if op, ok := s.m.End(c, g.Status, g.Reason, g.Detail, nil, s.w.now); ok {
			s.ended(t, op)
		}
		s.done()
		return
	case GatePassed, GateWait:
		s.w.now = s.w.now.Add(time.Duration(rapid.IntRange(1, 60).Draw(t, "offline_wait_s")) * time.Second)
		t.Logf("%s: waits for the device to come back", c.Op.OpID)
		return
	}
	if !s.reliable && rapid.IntRange(0, 5).Draw(t, "gate_closed") == 0 {
		s.w.now = s.w.now.Add(time.Duration(rapid.IntRange(1, 60).Draw(t, "gate_wait_s")) * time.Second)
		t.Logf("%s: a gate stays closed", c.Op.OpID)
		return
	}
	if s.a.Risky() && !(st.Read && st.Strict) {
		t.Fatalf("%s: a risky attempt without a strict fresh read", c.Op.OpID)
	}
	if s.dev.SafetyCritical() && c.Op.Attempts == 0 && !st.Read {
		t.Fatalf("%s: the first send to a safety-critical device without a fresh read", c.Op.OpID)
	}
	if st.Read {
		if !s.read(t, c, st) {
			return
		}
		if !s.w.now.Before(st.Until) {
			return // the read took the time that was left: the next step ends it
		}
	}
	end, ok, heard := s.a.BeforeSend()
	if !ok {
		if op, ok := s.m.End(c, end.Status, end.Reason, end.Detail, nil, s.w.now); ok {
			s.ended(t, op)
		}
		s.done()
		return
	}
	if state, ok := s.m.HeardAt(c.Op.Target); heard && ok {
		if op, ok := s.m.End(c, devices.Succeeded, "", "", state, s.w.now); ok {
			s.ended(t, op)
		}
		s.done()
		return
	}
	if !st.Resend {
		s.resends[c.Op.OpID] = 0 // a new attempt
	}
	if s.dev.SafetyCritical() && s.resumedSent[c.Op.OpID] && !s.resolved[c.Op.OpID] {
		t.Fatalf("%s: resumed with an attempt of unknown outcome, sent again without a fresh read", c.Op.OpID)
	}
	retryBy := s.policy.DeadlineFor(c.Op.AcceptedAt, c.Op.Deadline)
	isRetry := (!st.Resend && c.Op.Attempts > 0) || (st.Resend && c.Op.Attempts > 1)
	prev, op := c.RecordAttempt(st.Resend, s.w.now)
	switch {
	case !s.w.now.Before(op.Deadline):
		t.Fatalf("%s sent at %s, after its TTL (deadline %s)", op.OpID, s.w.now, op.Deadline)
	case isRetry && !s.w.now.Before(retryBy):
		t.Fatalf("%s: a retry sent at %s, after the policy's deadline %s", op.OpID, s.w.now, retryBy)
	case op.Attempts > s.a.Policy().MaxAttempts:
		t.Fatalf("%s: attempt %d of at most %d", op.OpID, op.Attempts, s.a.Policy().MaxAttempts)
	}
	s.store[op.OpID] = op
	res := rapid.SampledFrom([]SendResult{Sent, Sent, Sent, Sent, NotSent, DeliveryUnknown, SendFailed}).Draw(t, "send_result")
	if s.reliable {
		res = Sent
	}
	var err error
	switch res {
	case NotSent:
		c.Unsent(prev)
		s.store[op.OpID] = c.Op
		t.Logf("send %s: not sent (the connection is down)", op.OpID)
		return
	case SendFailed:
		err = rapid.SampledFrom([]error{retry.ErrUnavailable, retry.ErrInvalidPayload}).Draw(t, "send_error")
	}
	c.Sending()
	c.SentSinceResume()
	s.sends[op.OpID]++
	if s.a.Risky() && s.sends[op.OpID] > MaxRiskyAttempts {
		t.Fatalf("%s: a risky action sent %d times", op.OpID, s.sends[op.OpID])
	}
	if res == Sent || res == DeliveryUnknown {
		s.take(t, c)
	}
	s.a.Sent(res, err)
	if res != Sent {
		t.Logf("send %s: %v %v", op.OpID, res, err)
		return
	}
	if s.reliableDraw(t, "reports") && devices.Satisfied(s.dev.Class, c.Op.Target, s.state()) {
		s.succeed(t, c)
		return
	}
	if !s.reliable && rapid.IntRange(0, 7).Draw(t, "bridge_reports_failure") == 0 {
		// The bridge took the set, then said it failed (Zigbee2MQTT's
		// publish error): the attempt ends at once, a send failure.
		s.w.now = s.w.now.Add(time.Duration(rapid.IntRange(0, 3).Draw(t, "failure_after_s")) * time.Second)
		s.a.Failed(retry.ErrUnavailable)
		t.Logf("send %s: the bridge reported its failure", op.OpID)
		return
	}
	s.w.now = s.w.now.Add(s.policy.AttemptTimeout)
	if s.a.Unconfirmed(!s.reliable && rapid.Bool().Draw(t, "link_changed")) {
		s.resends[c.Op.OpID]++
		if s.resends[c.Op.OpID] > MaxResends {
			t.Fatalf("%s: attempt %d resent %d times after link changes; at most %d", c.Op.OpID, c.Op.Attempts, s.resends[c.Op.OpID], MaxResends)
		}
	}
}

// read is the fresh read before an attempt: a device at the target ends
// c succeeded with nothing sent; unknown state stops a strict read (a
// risky action) failed. It reports whether the attempt goes on.
func (s *sim) read(t *rapid.T, c *Command, st Step) bool {
	if !s.reliable {
		s.w.now = s.w.now.Add(time.Duration(rapid.IntRange(0, 5).Draw(t, "read_s")) * time.Second)
	}
	s.resolved[c.Op.OpID] = true
	state := s.state()
	if devices.Satisfied(s.dev.Class, c.Op.Target, state) {
		s.succeed(t, c)
		return false
	}
	for a := range c.Op.Target {
		if _, known := state[a]; !known && st.Strict {
			if op, ok := s.m.End(c, devices.Failed, devices.ReasonStateUnknown, "", nil, s.w.now); ok {
				s.ended(t, op)
			}
			s.done()
			return false
		}
	}
	return true
}

// succeed ends c succeeded by a live report of the device's state.
func (s *sim) succeed(t *rapid.T, c *Command) {
	r := s.m.Report(s.state(), false, s.w.now)
	if op, ok := s.m.End(c, devices.Succeeded, "", "", r.Mirror, s.w.now); ok {
		s.ended(t, op)
	}
	s.done()
}

// done ends the attempts of the current command (ended).
func (s *sim) done() {
	s.m.Done()
	s.a, s.dl = nil, nil
}

// reliableDraw draws a coin, heads while draining.
func (s *sim) reliableDraw(t *rapid.T, label string) bool {
	return s.reliable || rapid.Bool().Draw(t, label)
}

// endAt ends c where the worker found it: expired or failed.
func (s *sim) endAt(t *rapid.T, c *Command, status devices.Status) {
	if op, ok := s.m.End(c, status, devices.ReasonTTLElapsed, "", nil, s.w.now); ok {
		s.ended(t, op)
	}
}

// ended stores op's end.
func (s *sim) ended(t *rapid.T, op devices.Op) {
	if op.Status == devices.Succeeded && !devices.Satisfied(s.dev.Class, op.Target, s.state()) {
		t.Fatalf("%s succeeded with the device at %v, not at its target %v", op.OpID, s.state(), op.Target)
	}
	s.end(t, op)
}

// end stores a terminal op, once.
func (s *sim) end(t *rapid.T, op devices.Op) {
	if !op.Status.Terminal() {
		t.Fatalf("%s ended with status %s", op.OpID, op.Status)
	}
	s.ends[op.OpID]++
	if s.ends[op.OpID] > 1 {
		t.Fatalf("%s got a second terminal status, %s", op.OpID, op.Status)
	}
	s.store[op.OpID] = op
	t.Logf("end %s %s", op.OpID, op.Status)
}
