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
