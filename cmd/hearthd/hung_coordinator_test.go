package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/simulator"
)

// Issue 16, items 1 and 5: the Zigbee breaker is fed by the truth about the
// service. A hung coordinator (Zigbee2MQTT still says online, every set is
// swallowed) under traffic that supersedes itself faster than the attempt
// timeout opens it; a single dead bulb never does.

// hungConfig has two lights on the zigbee service (attempts of 5 s, a
// breaker that trips on 5 failures, open 10 s then 20 s, probes of 5 s),
// a landing light on a second bridge, and a fallback automation: while
// zigbee's breaker is not closed, hall motion lights the landing and
// notifies.
const hungConfig = `
mqtt:
  listen: 127.0.0.1:0
  reconnect: {base: 10ms, cap: 100ms}
http:
  listen: 127.0.0.1:0
defaults:
  ttl: 60s
services:
  zigbee:
    protocol: zigbee2mqtt
    retry: {max_attempts: 2, attempt_timeout: 5s, backoff: fixed, jitter: none, base: 1s}
    breaker: {failure_threshold: 5, open_for: 10s, max_open_for: 20s, probe_timeout: 5s}
  upstairs:
    protocol: zigbee2mqtt
    base_topic: zigbee_upstairs
devices:
  hall_light: {class: light, service: zigbee}
  kitchen_light: {class: light, service: zigbee}
  landing_light: {class: light, service: upstairs}
automations:
  landing_light_from_motion:
    fallback_for: zigbee
    triggers:
      - mqtt: {topic: hearth-test/hall_motion, payload: "on"}
    actions:
      - command: {device: landing_light, target: {state: "ON"}}
      - notify: {title: Zigbee bridge down, message: hall motion lights the landing upstairs, severity: warning}
`

// trafficLights are the lights an automation commands in turn, one command
// a second: each light gets a new one every 2 s, before the last one's
// 5 s attempt timeout, which it supersedes.
var trafficLights = []string{"hall_light", "kitchen_light"}

// traffic is the automation's stream of commands to trafficLights, with
// every terminal result it has seen, by op_id.
type traffic struct {
	h     *harness
	n     int
	ended map[string]devices.Result
}

// outcome is what a command of the traffic is expected to do.
type outcome int

const (
	answered   outcome = iota // its set reaches the bridge, which answers: it succeeds
	unanswered                // its set reaches the bridge, which swallows it
	failsFast                 // it fails at once, breaker_open, nothing sent
	// waits: a probe is out, so a command would wait for its outcome
	// (TestHalfOpenBreakerLetsOneProbeThroughWhileTheOthersWait covers
	// that); the traffic sends none meanwhile, so that each command
	// here has one outcome to check.
	waits
)

// zigbee returns the zigbee service's breaker as hearthd shows it.
func (h *harness) zigbee() dispatcher.BreakerStatus {
	h.t.Helper()
	for _, b := range h.d.disp.Breakers() {
		if b.Service == "zigbee" {
			return b
		}
	}
	h.t.Fatal("no zigbee breaker")
	panic("unreachable")
}

// waiters returns how many timers of hearthd wait on the fake clock now.
func (h *harness) waiters() int {
	done, cancel := context.WithCancel(context.Background())
	cancel() // asks only: a count not yet reached fails at once
	n := 0
	for h.clock.BlockUntilContext(done, n+1) == nil {
		n++
	}
	return n
}

// take keeps r if it is terminal.
func (tr *traffic) take(r devices.Result) {
	if r.Status.Terminal() {
		tr.ended[r.OpID] = r
	}
}

// command sends the traffic's next command and waits until it did what
// want says, returning its op_id and what it did: for a set that reaches
// the bridge, until hearthd's timer for its attempt (and, for a probe, the
// breaker's for its deadline) is set, or until it succeeded when the
// bridge answers. A command expected unanswered may fail fast instead, if
// the breaker opened meanwhile (on the timeout of an attempt before it).
func (tr *traffic) command(want outcome) (string, outcome) {
	h := tr.h
	h.t.Helper()
	if want == waits {
		return "", waits
	}
	dev := trafficLights[tr.n%len(trafficLights)]
	state := []string{"ON", "OFF"}[(tr.n/len(trafficLights))%2]
	opID := fmt.Sprintf("t%03d", tr.n)
	tr.n++
	b := h.zigbee()
	before := h.waiters()
	timers := before + 1
	if b.State == "half_open" {
		timers++ // a probe: the breaker watches its deadline
	}
	h.publish(dev, fmt.Sprintf(`{"state":%q,"op_id":%q}`, state, opID))
	deadline := time.After(eventWait)
	sent := false
	for {
		if r, ok := tr.ended[opID]; ok {
			switch {
			case r.Status == devices.Failed && r.Reason == devices.ReasonBreakerOpen && r.Attempts == 0 && !sent &&
				(want == failsFast || want == unanswered && h.zigbee().State != "closed"):
				if !r.At.Equal(h.clock.Now()) {
					h.t.Fatalf("%s failed at %v; want at once (%v)", opID, r.At, h.clock.Now())
				}
				return opID, failsFast
			case r.Status == devices.Succeeded && want == answered && sent:
				// Its attempt's timer is stopped after the result: wait
				// for it, so that the next command counts timers right.
				h.eventually(opID+"'s timers to stop", func() bool { return h.waiters() <= before })
				return opID, answered
			case r.Status == devices.Succeeded && want == answered:
				// Its result overtook the simulator's word of its set.
			default:
				h.t.Fatalf("%s (%s, breaker %s when sent): %s/%s after %d attempts (%s); want it %s",
					opID, dev, b.State, r.Status, r.Reason, r.Attempts, r.Detail, map[outcome]string{answered: "succeeded", unanswered: "waiting for its report", failsFast: "failed/breaker_open at once"}[want])
			}
		}
		var set simulator.SetEvent
		got := false
		if sent && want == unanswered {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
			err := h.clock.BlockUntilContext(ctx, timers)
			cancel()
			if err == nil {
				return opID, unanswered
			}
			select {
			case r := <-h.results:
				tr.take(r)
			case set = <-h.sets:
				got = true
			case <-deadline:
				h.t.Fatalf("%s: its attempt's timer never came (%d timers, want %d: one per attempt in flight, superseded ones included, this one's, and a probe's deadline)", opID, h.waiters(), timers)
			default:
			}
		} else {
			select {
			case r := <-h.results:
				tr.take(r)
			case set = <-h.sets:
				got = true
			case <-deadline:
				h.t.Fatalf("%s: no result (sent %t)", opID, sent)
			}
		}
		if got {
			if set.Device != dev || want == failsFast || sent {
				h.t.Fatalf("%s (breaker %s when sent): a set reached %s: %s", opID, b.State, set.Device, set.Payload)
			}
			sent = true
		}
	}
}

// expected is what the next command does, given the breaker's state and
// whether the bridge answers.
func (tr *traffic) expected(bridgeAnswers bool) outcome {
	b := tr.h.zigbee()
	switch {
	case b.State == "open":
		return failsFast
	case b.State == "half_open" && !b.Until.IsZero(): // a probe is out
		return waits
	case bridgeAnswers:
		return answered
	}
	return unanswered
}

func TestHungCoordinatorUnderSupersedingTrafficOpensFailsFastFallsBackAndCloses(t *testing.T) {
	h := newHarness(t, harnessOptions{config: hungConfig})
	h.settle("hall_light", "kitchen_light", "landing_light")
	states := h.watch("hearth/services/zigbee/state")
	nextState(t, states, "closed")
	notes := h.watch("hearth/notifications")
	tr := &traffic{h: h, ended: map[string]devices.Result{}}
	for range 2 {
		tr.command(answered)
		h.clock.Advance(time.Second)
	}
	if len(h.sets) > 0 {
		t.Fatalf("%d sets unaccounted for", len(h.sets))
	}

	// The coordinator hangs: Zigbee2MQTT stays online, sets are swallowed.
	if err := h.sim.SetBridgeOnline("zigbee2mqtt", false, false); err != nil {
		t.Fatal(err)
	}
	outageAt := h.clock.Now()
	for tr.expected(false) == unanswered {
		if h.clock.Now().Sub(outageAt) > time.Minute {
			t.Fatal("the breaker did not open within a minute of the outage")
		}
		if _, did := tr.command(unanswered); did == failsFast {
			break // the breaker opened as it came
		}
		h.clock.Advance(time.Second)
	}
	opened := nextState(t, states, "open")
	t.Logf("outage at %v; opened %v after it", outageAt.Format(time.TimeOnly), opened.Since.Sub(outageAt))
	if limit := outageAt.Add(2 * 5 * time.Second); opened.Since.After(limit) {
		t.Errorf("opened %v after the outage began; want within two attempt timeouts (10s)", opened.Since.Sub(outageAt))
	}
	for _, r := range tr.ended {
		if r.Status == devices.Superseded && r.Reason != devices.ReasonNewerCommand {
			t.Errorf("%s superseded with reason %s", r.OpID, r.Reason)
		}
	}

	// Open: the following commands fail fast.
	for range 3 {
		tr.command(failsFast)
		h.clock.Advance(time.Second)
	}

	// The fallback stands in for the bridge: hall motion lights the
	// landing, on the other bridge, and notifies.
	mustToken(t, h.client.Publish("hearth-test/hall_motion", 1, false, "on"))
	if e := h.nextSet(); e.Device != "landing_light" || e.Attrs["state"] != "ON" {
		t.Errorf("fallback set %s %s; want landing_light ON", e.Device, e.Payload)
	}
	fb := h.await(func(r devices.Result) bool { return r.Device == "landing_light" && r.Status.Terminal() }, "the fallback command's result")
	if fb.Status != devices.Succeeded {
		t.Errorf("fallback command: %s/%s; want succeeded", fb.Status, fb.Reason)
	}
	select {
	case m := <-notes:
		var n struct{ Title, Source string }
		if err := json.Unmarshal(m.Payload(), &n); err != nil || n.Title != "Zigbee bridge down" || n.Source != "automation:landing_light_from_motion" {
			t.Errorf("notification %s; want the fallback's", m.Payload())
		}
	case <-time.After(eventWait):
		t.Error("no notification from the fallback")
	}

	// Half-open after its cooldown: one probe goes to the hung bridge,
	// is superseded, keeps its place until its deadline, and fails: open
	// again. Everything else fails fast.
	probes := 0
	var reopened serviceState
	for reopened.State == "" {
		if h.clock.Now().Sub(opened.Since) > time.Minute {
			t.Fatal("no probe failed within a minute of the opening")
		}
		if _, did := tr.command(tr.expected(false)); did == unanswered {
			probes++
		}
		h.clock.Advance(time.Second)
		if b := h.zigbee(); b.State == "open" && b.Trips == 2 {
			reopened = nextState(t, states, "open")
		}
	}
	t.Logf("reopened %v after the outage began, after %d probe", reopened.Since.Sub(outageAt), probes)
	if probes != 1 {
		t.Errorf("%d probes reached the hung bridge in one cooldown; want 1", probes)
	}

	// The coordinator is back: the breaker closes within one cooldown
	// (20 s now) plus one probe (5 s).
	if err := h.sim.SetBridgeOnline("zigbee2mqtt", true, false); err != nil {
		t.Fatal(err)
	}
	recoveredAt := h.clock.Now()
	for h.zigbee().State != "closed" {
		if h.clock.Now().Sub(recoveredAt) > time.Minute {
			t.Fatal("the breaker did not close within a minute of the recovery")
		}
		tr.command(tr.expected(true))
		if h.zigbee().State != "closed" {
			h.clock.Advance(time.Second)
		}
	}
	closed := nextState(t, states, "closed")
	t.Logf("recovered %v after the outage began; closed %v after the recovery", recoveredAt.Sub(outageAt), closed.Since.Sub(recoveredAt))
	if limit := recoveredAt.Add(20*time.Second + 5*time.Second); closed.Since.After(limit) {
		t.Errorf("closed %v after the recovery; want within one cooldown plus one probe (25s)", closed.Since.Sub(recoveredAt))
	}
	tr.command(answered)
}

// One bulb loses its power while Zigbee2MQTT still shows it online, and an
// automation keeps commanding it and its neighbour, each every 2 s, each
// command superseding the last: the bulb's attempts time out, but the
// bridge passes on its neighbour's reports meanwhile, so the silence is
// the bulb's and the breaker stays closed. Once Zigbee2MQTT marks the bulb
// offline, commands to it alone do not open the breaker either.
func TestOneDeadBulbNeverOpensTheZigbeeBreaker(t *testing.T) {
	h := newHarness(t, harnessOptions{config: hungConfig, faults: simulator.Faults{Dead: []string{"hall_light"}}})
	h.settle("hall_light", "kitchen_light", "landing_light")
	tr := &traffic{h: h, ended: map[string]devices.Result{}}
	for i := range 60 {
		want := answered
		if i%2 == 0 {
			want = unanswered // hall_light
		}
		tr.command(want)
		h.step()
	}
	if b := h.zigbee(); b.State != "closed" || b.Trips != 0 {
		t.Fatalf("after a minute of commands to a dead bulb and its neighbour: breaker %s, %d trips; want closed", b.State, b.Trips)
	}

	// A slider on the dead bulb alone, one command a second for half a
	// minute, nothing else commanded: each attempt times out in the
	// bridge's silence, and a get of another light (a witness) shows the
	// bridge talking.
	for len(h.traffic) > 0 {
		<-h.traffic
	}
	h.drag("hall_light", 30)
	h.publish("kitchen_light", `{"state":"OFF","op_id":"after-drag"}`)
	if r := h.await(func(r devices.Result) bool { return r.OpID == "after-drag" && r.Status.Terminal() }, "after-drag's end"); r.Status != devices.Succeeded {
		t.Errorf("a command to the neighbour after the drag: %s/%s; want succeeded", r.Status, r.Reason)
	}
	if b := h.zigbee(); b.State != "closed" || b.Trips != 0 {
		t.Fatalf("after half a minute of a slider on a dead bulb alone: breaker %s, %d trips; want closed", b.State, b.Trips)
	}
	witnessed := 0
	for len(h.traffic) > 0 {
		if m := <-h.traffic; strings.HasPrefix(m, "get ") && !strings.HasPrefix(m, "get hall_light") {
			witnessed++
		}
	}
	if witnessed == 0 || witnessed > 30 {
		t.Errorf("%d gets of a witness for 30 timed-out attempts; want some, at most one per attempt", witnessed)
	}
	t.Logf("%d witness reads for the slider's attempts", witnessed)
	for len(h.sets) > 0 {
		<-h.sets
	}

	// Zigbee2MQTT's availability check notices: the bulb is offline. A
	// slider on it alone, one command a second, for a minute.
	if err := h.sim.SetOnline("hall_light", false); err != nil {
		t.Fatal(err)
	}
	offline := h.watch("hearth/hall_light/availability")
	for m := range offline {
		if string(m.Payload()) == "offline" {
			break
		}
	}
	for i := range 60 {
		opID := fmt.Sprintf("slider-%02d", i)
		h.publish("hall_light", fmt.Sprintf(`{"state":"ON","brightness":%d,"op_id":%q}`, 10+i, opID))
		// Its set goes out (and is ignored), or it ends at once.
		select {
		case <-h.sets:
		case r := <-h.results:
			for !r.Status.Terminal() || r.OpID != opID {
				if r.Reason == devices.ReasonBreakerOpen {
					t.Fatalf("%s: %s/%s; the breaker opened on one offline bulb", r.OpID, r.Status, r.Reason)
				}
				select {
				case r = <-h.results:
				case <-h.sets:
					r = devices.Result{OpID: opID, Status: devices.Superseded} // sent: done waiting
				case <-time.After(eventWait):
					t.Fatalf("%s: neither sent nor ended", opID)
				}
			}
			if r.Reason == devices.ReasonBreakerOpen {
				t.Fatalf("%s: %s/%s; the breaker opened on one offline bulb", opID, r.Status, r.Reason)
			}
		case <-time.After(eventWait):
			t.Fatalf("%s: neither sent nor ended", opID)
		}
		h.step()
	}
	for range 10 { // every attempt still out times out
		h.step()
	}
	h.publish("kitchen_light", `{"state":"ON","op_id":"last"}`)
	if r := h.await(func(r devices.Result) bool { return r.OpID == "last" && r.Status.Terminal() }, "last's end"); r.Status != devices.Succeeded {
		t.Errorf("a command to the neighbour at the end: %s/%s; want succeeded", r.Status, r.Reason)
	}
	if b := h.zigbee(); b.State != "closed" || b.Trips != 0 {
		t.Errorf("after a minute of commands to an offline bulb: breaker %s, %d trips; want closed", b.State, b.Trips)
	}
}

// twoDeadConfig is hungConfig's zigbee service with three lights, the
// first in order (the first witness asked) on the same wall switch as
// the last: both without power, while Zigbee2MQTT still shows them
// online.
var twoDeadConfig = strings.Replace(hungConfig, `  hall_light: {class: light, service: zigbee}
  kitchen_light: {class: light, service: zigbee}`, `  kitchen_light: {class: light, service: zigbee}
  porch_light: {class: light, service: zigbee}
  hall_light: {class: light, service: zigbee}`, 1)

// Two bulbs on one wall switch lose their power, and an automation drags
// a slider on one of them: each attempt times out in the bridge's
// silence, and the witness reads ask more than the other dead bulb, so
// the porch light's answer shows the bridge talking and the breaker
// stays closed.
func TestTwoDeadBulbsNeverOpenTheZigbeeBreaker(t *testing.T) {
	h := newHarness(t, harnessOptions{config: twoDeadConfig, faults: simulator.Faults{Dead: []string{"hall_light", "kitchen_light"}}})
	h.settle("hall_light", "kitchen_light", "porch_light", "landing_light")
	h.drag("hall_light", 20)
	h.publish("porch_light", `{"state":"OFF","op_id":"after-drag"}`)
	if r := h.await(func(r devices.Result) bool { return r.OpID == "after-drag" && r.Status.Terminal() }, "after-drag's end"); r.Status != devices.Succeeded {
		t.Errorf("a command to the porch light after the drag: %s/%s; want succeeded", r.Status, r.Reason)
	}
	if b := h.zigbee(); b.State != "closed" || b.Trips != 0 {
		t.Fatalf("after a drag on one of two dead bulbs: breaker %s, %d trips; want closed", b.State, b.Trips)
	}
}

// drag moves a slider on device: n commands, one a second, each
// superseding the last, each checked to reach the device (none may end
// first, as a breaker_open would), then 10 s more for the last attempts
// to time out. Time moves on only once no witness read is out (see
// step): its answer comes from a simulated device, in real time.
func (h *harness) drag(device string, n int) {
	h.t.Helper()
	for i := range n {
		opID := fmt.Sprintf("drag-%02d", i)
		h.publish(device, fmt.Sprintf(`{"state":"ON","brightness":%d,"op_id":%q}`, 100+i, opID))
	wait:
		for {
			select {
			case e := <-h.sets:
				if e.Device != device {
					h.t.Fatalf("%s: a set reached %s", opID, e.Device)
				}
				break wait
			case r := <-h.results:
				if r.OpID == opID && r.Status.Terminal() {
					h.t.Fatalf("%s: %s/%s after %d commands of a slider on %s; want it sent, the breaker closed", opID, r.Status, r.Reason, i, device)
				}
			case <-time.After(eventWait):
				h.t.Fatalf("%s: not sent", opID)
			}
		}
		h.step()
	}
	for range 10 { // the last attempts time out
		h.step()
	}
}

// step moves the clock a second on, then waits until no attempt waits
// for a witness read's answer: the read goes to a simulated device, which
// answers in real time, and a clock moved past the witness timeout first
// would take a talking bridge for a silent one.
func (h *harness) step() {
	h.t.Helper()
	h.clock.Advance(time.Second)
	h.eventually("the witness reads answered", func() bool {
		for _, l := range h.d.disp.Load() {
			if l.Witnessed > 0 {
				return false
			}
		}
		return true
	})
}
