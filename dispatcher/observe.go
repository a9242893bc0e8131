package dispatcher

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/devices"
)

// Report takes a state report of a device from its bridge; retained says
// the broker replayed it from its retained store (it is not news, and
// confirms nothing). Reports of unknown devices are ignored.
func (d *Dispatcher) Report(device string, state map[string]any, retained bool) {
	if q, ok := d.devices[device]; ok {
		if !retained {
			q.svc.link.Heard.Add(1)
			if s := q.svc.silence; s != nil {
				s.HeardFrom(q)
			}
			d.heardFrom(q.svc)
		}
		q.report(state, retained)
	}
}

// Availability takes a device's availability from its bridge and mirrors
// it, retained, on hearth/<device>/availability.
func (d *Dispatcher) Availability(device string, online bool) {
	if q, ok := d.devices[device]; ok {
		q.availability(online)
	}
}

// Capabilities takes what a device's bridge says the device can do
// (Zigbee2MQTT's bridge/devices exposes), or nil when it no longer says:
// from then on, intake validates its commands for them and confirmation
// accepts a report after the device's own clamping and rounding
// (devices.ValidateFor, devices.SatisfiedBy). A command already accepted
// keeps its target. Unknown devices are ignored.
func (d *Dispatcher) Capabilities(device string, caps *devices.Capabilities) {
	q, ok := d.devices[device]
	if !ok {
		return
	}
	q.caps.Store(caps)
	q.mu.Lock()
	q.m.SetCapabilities(caps)
	q.mu.Unlock()
}

// DeviceCapabilities returns the capabilities the device's bridge last
// gave for it, nil while unknown or for an unknown device. Safe for
// concurrent use; O(1).
func (d *Dispatcher) DeviceCapabilities(device string) *devices.Capabilities {
	if q, ok := d.devices[device]; ok {
		return q.caps.Load()
	}
	return nil
}

// NodeStatus takes what a bridge that knows its nodes' sleep (Z-Wave JS
// UI) says of a device: alive and awake mean online (awake also begins an
// awake lease of a sleepy device), dead means offline, asleep ends the
// awake lease at once without making the device offline: a sleeping node
// is reachable at its next wake. A retained status (replayed by the broker
// on subscribe) sets the availability but begins no lease: the node that
// was awake then is asleep by now. Unknown devices are ignored.
func (d *Dispatcher) NodeStatus(device string, status devices.NodeStatus, retained bool) {
	q, ok := d.devices[device]
	if !ok {
		return
	}
	switch status {
	case devices.NodeAlive, devices.NodeAwake:
		q.availability(true)
	case devices.NodeDead:
		q.availability(false)
	}
	if retained && (status == devices.NodeAwake || status == devices.NodeAlive) {
		// Awake then, asleep by now, most likely: wait for a fresh wake.
		status = devices.NodeAsleep
	}
	q.nodeStatus(status)
}

// BridgeState takes a bridge's own online state. An offline bridge opens
// the service's circuit breaker; back online, a probe decides. Commands
// through an offline bridge without a breaker wait for it (costing no
// attempt), and attempts that were waiting for confirmation when it comes
// back are sent again.
//
// A watched service (one without a Bridge) has no commands to probe it
// with: its own online report is its probe, and closes the breaker.
//
// retained says the broker replayed the state from its retained store. A
// replayed online is followed, a replayed offline only if the bridge says
// nothing else for BridgeStateGrace (it may be old news); either way the
// transitions are marked Replay for the OnBreakerChange hook (automations
// must not act on them).
func (d *Dispatcher) BridgeState(service string, online, retained bool) {
	s, ok := d.services[service]
	if !ok {
		return
	}
	// The breaker before the link: a command that wakes when the link
	// comes back must find the breaker half-open, not still open.
	if s.breaker != nil && !online && retained {
		// A replayed offline may be old news: after a power cut the hub
		// may start Hearth before the bridge, which is about to say
		// online. Commands wait for it (the link is down), and the
		// breaker opens only if it says nothing for BridgeStateGrace.
		s.breaker.DeferOffline(d.now().Add(BridgeStateGrace))
	} else if s.breaker != nil {
		now := d.now()
		s.breaker.DeferOffline(time.Time{})
		report := func() {
			s.breaker.ReportHealth(online, now)
			if online && s.Bridge == nil {
				// Its probes: as many successes as closing takes.
				for range maxHealthProbes {
					if s.breaker.State(now) != breaker.HalfOpen {
						break
					}
					p, err := s.breaker.Allow(now)
					if err != nil {
						break
					}
					p.Done(breaker.Success, now)
				}
			}
		}
		if retained {
			s.breaker.Replay(report)
		} else {
			report()
		}
		if snap := s.breaker.Snapshot(now); online && snap.State == breaker.HalfOpen && snap.Since.Equal(now) {
			s.breaker.Vouch(now) // the bridge's online began it: see probeOutcome
		}
	}
	if s.link.Set(online, d.now()) {
		d.log.Info("bridge state", "service", service, "online", online)
	}
}

// Restore seeds the mirrored state of devices from the store, so that it
// is republished after a restart.
func (d *Dispatcher) Restore(states map[string]map[string]any) {
	for id, s := range states {
		if q, ok := d.devices[id]; ok {
			q.mu.Lock()
			q.m.Restored(s)
			q.mu.Unlock()
		}
	}
}

// resume queues the stored pending ops again, in acceptance order. Those
// whose TTL passed while Hearth was down end expired; those for a device no
// longer configured end failed.
//
// One line at INFO says how many resumed, one at DEBUG per command: a
// restart with many pending commands must not write a line for each of
// them before it takes a new command.
func (d *Dispatcher) resume(pending []devices.Op) {
	now := d.now()
	var ended []devices.Op
	resumed := 0
	defer func() {
		if len(pending) > 0 {
			d.log.Info("pending commands resumed", "resumed", resumed, "ended", len(ended))
		}
	}()
	for _, op := range pending {
		q, ok := d.devices[op.Device]
		switch {
		case !ok:
			op.Status, op.Reason = devices.Failed, devices.ReasonUnknownDevice
			op.Detail = "the device is no longer in the configuration"
		case !now.Before(op.Deadline):
			op.Status, op.Reason = devices.Expired, devices.ReasonTTLElapsed
			op.Detail = "the TTL passed while hearth was not running"
		default:
			d.log.Debug("command resumed", "op_id", op.OpID, "device", op.Device, "attempts", op.Attempts, "deadline", op.Deadline)
			resumed++
			superseded := q.supersede(op, now)
			q.forget(superseded) // saved below; a failure there is logged, not undone
			ended = append(ended, superseded...)
			q.pushResumed(op)
			continue
		}
		op.UpdatedAt = now
		ended = append(ended, op)
	}
	if len(ended) == 0 {
		return
	}
	if err := d.journal.Save(ended...); err != nil {
		d.log.Warn("store resumed commands", "err", err)
	}
	// As finish does for a running command: the audit trail and the dead
	// letters first, then the result, then the alert.
	var dead []devices.Op
	for _, op := range ended {
		var dev devices.Device
		q, known := d.devices[op.Device]
		if known {
			dev = q.dev.Device
		}
		if known && d.audited(dev) {
			d.audit(devices.EndAudit(dev, op, now))
		}
		switch {
		case op.Status == devices.Failed, op.Status == devices.Expired:
			dead = append(dead, op)
		case op.Status == devices.Superseded && known && dev.Sleep.Sleepy && op.Attempts == 0:
			dead = append(dead, op)
		}
	}
	d.deadLetter(dead...)
	for _, op := range ended {
		d.log.Info("command ended", "op_id", op.OpID, "device", op.Device, "status", op.Status, "reason", op.Reason)
		d.endedOn(op)
		d.publishResult(op.Result())
		if q, known := d.devices[op.Device]; known {
			d.alertIfSafetyCritical(q.dev.Device, op)
		}
	}
}

// stateSaver stores mirrored device state in the background, keeping only
// the newest state per device, so a chatty device costs at most one write
// per commit instead of one per report.
type stateSaver struct {
	journal Journal
	log     *slog.Logger

	mu    sync.Mutex
	dirty map[string]savedState
	kick  chan struct{}
}

type savedState struct {
	state map[string]any
	at    time.Time
}

func newStateSaver(j Journal, log *slog.Logger) *stateSaver {
	return &stateSaver{journal: j, log: log, dirty: map[string]savedState{}, kick: make(chan struct{}, 1)}
}

func (s *stateSaver) mark(device string, state map[string]any, at time.Time) {
	s.mu.Lock()
	s.dirty[device] = savedState{state, at}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

func (s *stateSaver) run(ctx context.Context) {
	for {
		select {
		case <-s.kick:
			s.flush()
		case <-ctx.Done():
			s.flush()
			return
		}
	}
}

func (s *stateSaver) flush() {
	s.mu.Lock()
	batch := s.dirty
	s.dirty = map[string]savedState{}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for dev, st := range batch {
		wg.Go(func() {
			// Concurrent saves share one commit in the store.
			if err := s.journal.SaveState(dev, st.state, st.at); err != nil {
				s.log.Warn("store device state", "device", dev, "err", err)
			}
		})
	}
	wg.Wait()
}

// maxHealthProbes bounds the successes a watched service's online report
// gives its half-open breaker (successes_to_close is far below it).
const maxHealthProbes = 1000

// heardFrom takes a live report passed on by s: a half-open breaker with
// no probe out counts it as a successful probe, since a bridge that talks
// is up. Without it a bridge back from a restart would keep its breaker
// half-open until some command came, pausing every automation that
// requires it.
func (d *Dispatcher) heardFrom(s *Service) {
	if s.breaker == nil {
		return
	}
	now := d.now()
	if s.breaker.State(now) != breaker.HalfOpen {
		return
	}
	if p, err := s.breaker.Allow(now); err == nil {
		p.Done(breaker.Success, now)
		s.breaker.Signal() // a place for held commands, if it stays half-open
	}
}

// report takes a state report of the device: it confirms the running
// attempt when the reports since its send show the target, and mirrors the
// state. A retained report (one the broker kept from before, replayed on
// subscribe) updates the mirror but never confirms: it is not news.
func (q *deviceQueue) report(state map[string]any, retained bool) {
	now := q.d.now()
	q.mu.Lock()
	r := q.m.Report(state, retained, now)
	q.changedLocked() // a wake signal (r.Woke), or news for an attempt
	if t := q.cur; t != nil && t.check != nil && !t.Ended() && r.News {
		maps.Copy(t.check.seen, state)
		t.check.reports++
	}
	if t := q.cur; t != nil && t.confirm != nil && !t.Ended() && (r.News || (retained && t.confirm.resumed)) {
		q.feedLocked(t.confirm, state)
	}
	if r.News {
		for _, c := range q.overtaken {
			q.feedLocked(c, state)
		}
	}
	// Pushed under q.mu, as a republish sweep pushes: whichever comes
	// last carries the newest state.
	q.d.out.Push(q.d.topic(q.dev.ID, ""), r.Mirror, true)
	if q.d.onState != nil {
		// Under q.mu too: the attempt this report confirms ends (finish
		// takes q.mu) only after the hook heard the state, so that its
		// hearers, like the topics, get the state before the result.
		q.d.onState(q.dev.ID, r.Mirror)
	}
	q.mu.Unlock()
	q.d.saver.mark(q.dev.ID, r.Mirror, now)
	if r.Answered && q.d.onFreshState != nil {
		q.d.onFreshState(q.dev.Device)
	}
}

// availability mirrors the device's availability as the bridge reports it.
func (q *deviceQueue) availability(online bool) {
	q.mu.Lock()
	q.m.Availability(online, q.d.now()) // back from offline: a wake signal
	q.changedLocked()
	q.d.out.PushRaw(q.d.topic(q.dev.ID, "availability"), []byte(onlineWord(online)), true)
	q.mu.Unlock()
	if q.d.onAvailability != nil {
		q.d.onAvailability(q.dev.ID, online)
	}
}

// republishMirror pushes the device's current state (availability false)
// or availability (true) again, if known, reading it at the moment of the
// push and under q.mu, as live updates push: a sweep never publishes a
// value older than one already out. It reports whether it pushed.
func (q *deviceQueue) republishMirror(availability bool) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if availability {
		online, known := q.m.Available()
		if !known {
			return false
		}
		q.d.out.PushRaw(q.d.topic(q.dev.ID, "availability"), []byte(onlineWord(online)), true)
		return true
	}
	state := q.m.State()
	if state == nil {
		return false
	}
	q.d.out.Push(q.d.topic(q.dev.ID, ""), state, true)
	return true
}

func onlineWord(online bool) string {
	if online {
		return "online"
	}
	return "offline"
}
