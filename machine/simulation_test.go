package machine

import (
	"flag"
	"slices"
	"strconv"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
)

// seeds is how many seeded schedules TestSimulation runs. Each is a
// rapid check: a random schedule of events, shrunk to the shortest one
// that still breaks a promise when one does. A million:
//
//	go test ./machine/ -run Simulation -seeds 1000000
var seeds = flag.Int("seeds", 5000, "seeded schedules TestSimulation runs (a fifth under -short)")

// TestSimulation drives one device's machine — sleepy, always
// listening, safety-critical, or a garage door whose opening is risky —
// the way the dispatcher drives it, through a seeded random schedule of
// commands, supersedes, failed stores, reports (live and retained), wakes,
// node statuses, ended leases, deliveries, closed gates, fresh reads,
// sends that fail, are lost or whose delivery is unknown, link changes,
// backoffs, TTLs passing and crashes (a crash forgets every memory and
// restarts from what the store holds), over a virtual clock, and checks
// the promises after every step:
//
//   - one terminal status per op_id;
//   - nothing accepted is lost, across crashes too: every command the
//     store holds as pending is in the machine, once;
//   - no command is delivered to a node believed asleep, after its TTL,
//     or twice in one awake lease;
//   - a sleepy device never holds two pending commands for one attribute
//     (the newest target per attribute wins);
//   - the device never takes an older command's value for an attribute
//     after a newer one's, and a command ends succeeded only when the
//     device is at its target;
//   - no send after the TTL, no retry after the policy's deadline, never
//     more attempts than the policy allows;
//   - a risky action is sent only after a strict fresh read, and reaches
//     the device at most MaxRiskyAttempts times;
//   - once the schedule drains, every attribute whose newest command
//     succeeded holds that command's value.
//
// A failure prints the shrunk schedule, one line per event.
func TestSimulation(t *testing.T) {
	if err := flag.Set("rapid.checks", strconv.Itoa(*seeds)); err != nil { // rapid runs a fifth under -short
		t.Fatal(err)
	}
	if err := flag.Set("rapid.steps", "60"); err != nil {
		t.Fatal(err)
	}
	rapid.Check(t, func(rt *rapid.T) {
		w := &world{now: t0, budget: retry.NewBudget(0.2, 3, time.Minute)}
		house := make([]*sim, rapid.IntRange(1, 3).Draw(rt, "devices"))
		for i := range house {
			house[i] = newSim(rt, w, "dev"+strconv.Itoa(i))
		}
		one := func(f func(*sim, *rapid.T)) func(*rapid.T) {
			return func(t *rapid.T) { f(house[rapid.IntRange(0, len(house)-1).Draw(t, "device")], t) }
		}
		rt.Repeat(map[string]func(*rapid.T){
			"accept":  one((*sim).accept),
			"advance": house[0].advance, // the clock is the house's
			"report":  one((*sim).report),
			"node":    one((*sim).node),
			"work":    one((*sim).work),
			"crash": func(t *rapid.T) { // the hub restarts: every device's memory is gone
				for _, s := range house {
					s.crash(t)
				}
			},
			"": func(t *rapid.T) {
				for _, s := range house {
					s.check(t)
				}
			},
		})
		for _, s := range house {
			s.drain(rt)
		}
	})
}

// world is what the devices of one simulated house share: the virtual
// clock and their service's retry budget.
type world struct {
	now    time.Time
	budget *retry.Budget
}

// written is who last wrote an attribute of the simulated device.
type written struct {
	value float64
	seq   int // the writer's acceptance order
}

// sim is the dispatcher's side of one device, as the simulation plays it.
type sim struct {
	dev devices.Device
	m   *Device
	w   *world
	// store is what the store holds: every accepted command, pending or
	// ended, by op_id; seq is its acceptance order.
	store map[string]devices.Op
	seq   map[string]int
	next  int
	// ends counts the terminal statuses given per op_id.
	ends map[string]int
	// delivered is, per op_id, the lease it was last delivered in.
	delivered map[string]uint64
	// device is the device's real state.
	device map[string]written
	// online is the bridge's last availability word.
	online bool
	// attrs are the device's attributes.
	attrs []string
	// policy is the device's service's retry policy; a the current
	// command's attempts, on an always-listening device.
	policy retry.Policy
	a      *Attempts
	// dl is the delivery in this lease of a sleepy device's current
	// command; leaseSends counts its sends.
	dl         *Delivery
	leaseSends int
	// sends counts, per op_id, the sends that may have reached the
	// device; resends the resends of its current attempt after a link
	// change.
	sends, resends map[string]int
	// resumedSent: resumed after a crash with an attempt recorded;
	// resolved: read fresh since.
	resumedSent, resolved map[string]bool
	// reliable: every set is sent, taken and reported (draining).
	reliable bool
	// readBack: an unconfirmed attempt is read back before the policy
	// decides (Attempts.ReadBackUnconfirmed).
	readBack bool
}

func newSim(t *rapid.T, w *world, id string) *sim {
	dev := devices.Device{ID: id, Class: devices.Climate}
	attrs := []string{"a", "b", "c"}
	switch kind := rapid.SampledFrom([]string{"sleepy", "listening", "guarded", "garage", "sleepy_garage"}).Draw(t, "device"); kind {
	case "sleepy":
		dev.Sleep = devices.Sleep{Sleepy: true, WakeInterval: time.Hour, AwakeWindow: 10 * time.Second}
	case "sleepy_garage": // a battery garage-door controller: sleepy, its opening risky
		dev.Class, dev.Safety, attrs = devices.Cover, devices.SafetyCritical, []string{"position"}
		dev.Sleep = devices.Sleep{Sleepy: true, WakeInterval: time.Hour, AwakeWindow: 30 * time.Second}
	case "guarded": // safety-critical: a fresh read before the first send
		dev.Safety = devices.SafetyCritical
	case "garage": // a safety-critical cover: any opening is risky
		dev.Class, dev.Safety, attrs = devices.Cover, devices.SafetyCritical, []string{"position"}
	}
	if !dev.Sleep.Sleepy && rapid.Bool().Draw(t, "offline_queue") {
		dev.Offline = devices.OfflineQueue
	}
	p := retry.Policy{
		MaxAttempts:    rapid.IntRange(1, 4).Draw(t, "max_attempts"),
		AttemptTimeout: time.Duration(rapid.IntRange(1, 30).Draw(t, "attempt_timeout_s")) * time.Second,
		Deadline:       time.Duration(rapid.IntRange(0, 3).Draw(t, "policy_deadline_min")) * time.Minute,
		Backoff:        retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 30 * time.Second, Jitter: retry.Full},
	}
	s := &sim{
		dev: dev, attrs: attrs, m: New(dev), w: w, policy: p,
		store: map[string]devices.Op{}, seq: map[string]int{}, ends: map[string]int{},
		delivered: map[string]uint64{}, sends: map[string]int{}, resends: map[string]int{}, device: map[string]written{}, online: true,
		resumedSent: map[string]bool{}, resolved: map[string]bool{},
		readBack: rapid.Bool().Draw(t, "read_back"),
	}
	if rapid.Bool().Draw(t, "state_known") {
		for _, a := range attrs {
			s.device[a] = written{} // 0, written before any command
		}
	}
	return s
}

// draws is a retry.Rand drawn from the schedule, so that jitter shrinks
// with it.
type draws struct{ t *rapid.T }

func (d draws) Int64N(n int64) int64 { return rapid.Int64Range(0, n-1).Draw(d.t, "jitter") }

// accept is the intake: a new command supersedes what it replaces, and
// is stored with their ends in one commit; if that commit fails, the
// command is refused and the superseded ones are restored.
func (s *sim) accept(t *rapid.T) {
	attrs := rapid.SliceOfNDistinct(rapid.SampledFrom(s.attrs), 1, len(s.attrs), rapid.ID[string]).Draw(t, "attributes")
	target := devices.Target{}
	for _, a := range attrs {
		target[a] = float64(rapid.IntRange(0, 3).Draw(t, "value"))
	}
	ttl := time.Duration(rapid.IntRange(1, 90).Draw(t, "ttl_minutes")) * time.Minute
	s.next++
	op := devices.Op{OpID: s.dev.ID + "-op" + strconv.Itoa(s.next), Device: s.dev.ID, Target: target,
		Status: devices.Accepted, AcceptedAt: s.w.now, Deadline: s.w.now.Add(ttl)}
	ended := s.m.Supersede(op, s.w.now)
	if rapid.IntRange(0, 9).Draw(t, "store_fails") == 0 {
		t.Logf("accept %s %v ttl %s: the store fails; %d restored", op.OpID, target, ttl, len(ended))
		ops := make([]devices.Op, len(ended))
		for i, c := range ended {
			ops[i] = s.store[c.Op.OpID] // as stored: still pending
		}
		s.m.Restore(ops)
		return
	}
	t.Logf("accept %s %v ttl %s, superseding %v", op.OpID, target, ttl, opIDs(ended))
	for _, c := range ended {
		s.end(t, c.Op)
		s.m.Forget(c.Op.OpID)
	}
	s.store[op.OpID], s.seq[op.OpID] = op, s.next
	s.m.Accept(op, Fresh)
}

// advance moves the virtual clock.
func (s *sim) advance(t *rapid.T) {
	// Mostly moments (within an awake lease), sometimes a long while.
	d := time.Duration(rapid.OneOf(rapid.IntRange(0, 15), rapid.IntRange(0, 20*60)).Draw(t, "seconds")) * time.Second
	s.w.now = s.w.now.Add(d)
	t.Logf("advance %s", d)
}

// report is a report of the device's state from its bridge: live (a wake
// signal too), retained (the broker's replay), or its availability.
func (s *sim) report(t *rapid.T) {
	switch k := rapid.IntRange(0, 3).Draw(t, "report"); k {
	case 0, 1:
		retained := k == 1
		s.m.Report(s.state(), retained, s.w.now)
		t.Logf("%s: report retained=%v", s.dev.ID, retained)
	case 2:
		s.online = !s.online
		s.m.Availability(s.online, s.w.now)
		t.Logf("%s: availability online=%v", s.dev.ID, s.online)
	case 3:
		if l := s.m.Lease(s.w.now); l.Awake {
			s.m.EndLease(l.Gen)
			t.Logf("%s: a request went unanswered: lease %d ends", s.dev.ID, l.Gen)
		}
	}
}

// node is a node status from a bridge that knows its nodes' sleep.
func (s *sim) node(t *rapid.T) {
	st := rapid.SampledFrom([]devices.NodeStatus{devices.NodeAwake, devices.NodeAlive, devices.NodeAsleep, devices.NodeDead}).Draw(t, "node_status")
	s.m.NodeStatus(st, s.w.now)
	t.Logf("%s: node status %s", s.dev.ID, st)
}

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

// crash forgets every memory: a new machine takes the store's pending
// commands, in acceptance order, and the state the mirror kept.
func (s *sim) crash(t *rapid.T) {
	pending := s.pending()
	s.m = New(s.dev)
	for _, id := range pending {
		s.m.Accept(s.store[id], Resumed)
		s.resumedSent[id], s.resolved[id] = s.store[id].Attempts > 0, false
		s.resends[id] = 0
	}
	s.m.Restored(s.state())
	clear(s.delivered)
	t.Logf("%s: crash: %d pending resumed", s.dev.ID, len(pending))
}

// pending returns the op_ids the store holds as pending, in acceptance
// order.
func (s *sim) pending() []string {
	var ids []string
	for id, op := range s.store {
		if !op.Status.Terminal() {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b string) int { return s.seq[a] - s.seq[b] })
	return ids
}

// check runs after every step.
func (s *sim) check(t *rapid.T) {
	live := map[string]int{}
	var targets []devices.Target
	cmds := s.m.Waiting()
	if c := s.m.Current(); c != nil {
		cmds = append(cmds, c)
	}
	for _, c := range cmds {
		if c.Ended() {
			continue
		}
		live[c.Op.OpID]++
		targets = append(targets, c.Op.Target)
	}
	for _, id := range s.pending() {
		if live[id] != 1 {
			t.Fatalf("pending %s is in the machine %d times; want once (nothing accepted is lost)", id, live[id])
		}
	}
	for id := range live {
		if op, ok := s.store[id]; !ok || op.Status.Terminal() {
			t.Fatalf("the machine holds %s, which the store does not hold as pending", id)
		}
	}
	if s.dev.Sleep.Sleepy {
		for i := range targets {
			for j := range i {
				if sharesAttribute(targets[i], targets[j]) {
					t.Fatalf("two pending commands name one attribute: %v and %v", targets[j], targets[i])
				}
			}
		}
	}
}

// drain wakes the device and works until nothing is pending, with every
// set taken and reported, then checks that each attribute whose newest
// command succeeded holds its value.
func (s *sim) drain(t *rapid.T) {
	s.reliable = true
	t.Logf("drain")
	for range 400 {
		if len(s.pending()) == 0 {
			break
		}
		s.w.now = s.w.now.Add(15 * time.Second)
		s.m.NodeStatus(devices.NodeAwake, s.w.now)
		if !s.online {
			s.online = true
			s.m.Availability(true, s.w.now)
		}
		s.m.Report(s.state(), false, s.w.now)
		s.work(t)
		s.check(t)
	}
	if ids := s.pending(); len(ids) > 0 {
		t.Fatalf("after draining, %v still pending: never ended", ids)
	}
	newest := map[string]devices.Op{}
	for id, op := range s.store {
		for a := range op.Target {
			if n, ok := newest[a]; !ok || s.seq[id] > s.seq[n.OpID] {
				newest[a] = op
			}
		}
	}
	for a, op := range newest {
		if op.Status == devices.Succeeded && s.device[a].value != op.Target[a].(float64) {
			t.Fatalf("%s is %v; want %v, the value of its newest command %s, which succeeded", a, s.device[a].value, op.Target[a], op.OpID)
		}
	}
}

// state is the device's real state, as its bridge reports it.
func (s *sim) state() map[string]any {
	out := make(map[string]any, len(s.device))
	for a, w := range s.device {
		out[a] = w.value
	}
	return out
}

func opIDs(cs []*Command) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Op.OpID
	}
	return out
}
