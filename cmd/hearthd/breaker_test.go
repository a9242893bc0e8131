package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/notify"
	"github.com/hearthd/hearth/simulator"
)

// breakerConfig has two Zigbee2MQTT services: zigbee, with 50 switches, a
// lock and a breaker that trips after 2 failed attempts and stays open
// 10 s (then 20 s, …), and upstairs, on its own bridge, with one light.
// Attempts time out after 5 s; a retry waits a fixed 1 s.
func breakerConfig(hold bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, `
mqtt:
  listen: 127.0.0.1:0
  reconnect: {base: 10ms, cap: 100ms}
http:
  listen: 127.0.0.1:0
services:
  zigbee:
    protocol: zigbee2mqtt
    retry: {max_attempts: 2, attempt_timeout: 5s, backoff: fixed, jitter: none, base: 1s}
    breaker: {failure_threshold: 2, open_for: 10s, max_open_for: 1m, probe_timeout: 10s, hold: %t}
  upstairs:
    protocol: zigbee2mqtt
    base_topic: zigbee_upstairs
devices:
  attic_light: {class: light, service: upstairs}
  front_door: {class: lock, service: zigbee}
`, hold)
	for i := range 50 {
		fmt.Fprintf(&b, "  sw%02d: {class: switch, service: zigbee}\n", i)
	}
	return b.String()
}

// breakerDevices are the devices of breakerConfig.
func breakerDevices() []string {
	out := []string{"attic_light", "front_door"}
	for i := range 50 {
		out = append(out, fmt.Sprintf("sw%02d", i))
	}
	return out
}

// serviceState is a retained <prefix>/services/<service>/state message.
type serviceState struct {
	State string    `json:"state"`
	Since time.Time `json:"since"`
}

// watch subscribes a client of its own to the exact topics and returns
// what arrives on them, in order.
func (h *harness) watch(topics ...string) <-chan paho.Message {
	h.t.Helper()
	got := make(chan paho.Message, 256)
	c := paho.NewClient(paho.NewClientOptions().AddBroker(h.d.brokerURL).
		SetClientID(fmt.Sprintf("watch-%d", time.Now().UnixNano())).SetOrderMatters(true).
		SetUsername(h.watchLogin.username).SetPassword(h.watchLogin.password).
		SetAutoReconnect(false)) // a broker the test stops takes it along
	mustToken(h.t, c.Connect())
	h.t.Cleanup(func() { c.Disconnect(0) })
	filters := map[string]byte{}
	for _, t := range topics {
		filters[t] = 1
	}
	mustToken(h.t, c.SubscribeMultiple(filters, func(_ paho.Client, m paho.Message) { got <- m }))
	return got
}

// nextState waits for the next breaker state on states whose state is
// want, skipping others (a retained replay, a republish), and returns it.
func nextState(t testing.TB, states <-chan paho.Message, want string) serviceState {
	t.Helper()
	deadline := time.After(eventWait)
	var seen []string
	for {
		select {
		case m := <-states:
			var s serviceState
			if err := json.Unmarshal(m.Payload(), &s); err != nil {
				t.Fatalf("%s: not JSON: %s", m.Topic(), m.Payload())
			}
			if s.State == want {
				return s
			}
			seen = append(seen, s.State)
		case <-deadline:
			t.Fatalf("no breaker state %s; saw %v", want, seen)
		}
	}
}

// openBreaker watches the zigbee service's breaker, sees it closed, has the
// bridge say it is offline and sees the breaker open; it returns the
// watch for what follows.
func (h *harness) openBreaker() <-chan paho.Message {
	h.t.Helper()
	states := h.watch("hearth/services/zigbee/state")
	nextState(h.t, states, "closed")
	h.bridgeState("zigbee2mqtt", false)
	nextState(h.t, states, "open")
	return states
}

// bridgeState publishes the Zigbee2MQTT bridge's own state, retained, as
// Zigbee2MQTT (or its will) does.
func (h *harness) bridgeState(base string, online bool) {
	h.t.Helper()
	payload := `{"state":"offline"}`
	if online {
		payload = `{"state":"online"}`
	}
	mustToken(h.t, h.client.Publish(base+"/bridge/state", 1, true, payload))
}

// The first test, as issue 16 changed it: with the breaker
// half-open, 50 commands arrive within a second; exactly one probe reaches
// the service, and the other 49 wait for its outcome instead of failing,
// costing no attempt. The probe's device drops it (DropFirst); after the
// bridge's own online one lost probe is spared, so the next probe goes to
// another device, and still none of the 50 has failed.
func TestHalfOpenBreakerLetsOneProbeThroughWhileTheOthersWait(t *testing.T) {
	h := newHarness(t, harnessOptions{config: breakerConfig(false), faults: simulator.Faults{DropFirst: 1}})
	h.settle(breakerDevices()...)
	states := h.watch("hearth/services/zigbee/state")
	nextState(t, states, "closed")

	h.bridgeState("zigbee2mqtt", false)
	nextState(t, states, "open")
	h.bridgeState("zigbee2mqtt", true)
	if s := nextState(t, states, "half_open"); !s.Since.Equal(t0) {
		t.Errorf("half-open since %v, want %v (when the bridge came back)", s.Since, t0)
	}

	for i := range 50 {
		h.publish(fmt.Sprintf("sw%02d", i), fmt.Sprintf(`{"state":"ON","op_id":"burst-%02d"}`, i))
	}
	for range 50 {
		h.await(func(r devices.Result) bool { return r.Status == devices.Accepted }, "50 accepted")
	}
	probe := h.nextSet() // the one probe, which the device drops (DropFirst)
	// The probe's attempt, the breaker's watch of its deadline, and the
	// 49 waiting for it.
	h.advanceAfter(51, 5*time.Second)
	next := h.nextSet()
	if next.Device == probe.Device {
		t.Errorf("the second probe went to %s again; want another device", next.Device)
	}
	h.noSetsYet()
	total := 0
	for i := range 50 {
		total += h.sim.Sets(fmt.Sprintf("sw%02d", i))
	}
	if total != 2 {
		t.Errorf("the service received %d sets from 50 commands while half-open, want 2: one probe, then the next", total)
	}
	for _, r := range h.backlog {
		t.Errorf("%s: %s/%s (%s) while a probe was out; want every command waiting", r.OpID, r.Status, r.Reason, r.Detail)
	}
	select {
	case r := <-h.results:
		t.Errorf("%s: %s/%s (%s) while a probe was out; want every command waiting", r.OpID, r.Status, r.Reason, r.Detail)
	default:
	}
}

// The second test: the probe fails (its device drops the set), the
// breaker opens again for its cooldown, and once the service answers, the
// breaker closes within one cooldown plus one probe. A retry decided while
// the breaker is open fails fast instead of reaching the service.
func TestBreakerClosesWithinOneCooldownPlusOneProbe(t *testing.T) {
	h := newHarness(t, harnessOptions{config: breakerConfig(false), faults: simulator.Faults{DropFirst: 1}})
	h.settle(breakerDevices()...)
	states := h.openBreaker()
	h.bridgeState("zigbee2mqtt", true)
	nextState(t, states, "half_open")

	h.publish("sw07", `{"state":"ON","op_id":"probe-1"}`)
	h.result("probe-1")
	h.nextSet() // dropped by the device
	// The attempt's timeout (5 s) comes before the probe's deadline (10 s):
	// a timed-out probe is a failure, and the breaker opens again. Both
	// wait on the clock: the attempt, and the breaker for the deadline.
	h.advanceAfter(2, 5*time.Second)
	reopened := nextState(t, states, "open")
	if want := t0.Add(5 * time.Second); !reopened.Since.Equal(want) {
		t.Errorf("reopened at %v, want %v (the probe's timeout)", reopened.Since, want)
	}
	h.advanceAfter(2, time.Second) // the retry's backoff ends while the breaker is open (until +15s)
	if r := h.final2("probe-1"); r.Status != devices.Failed || r.Reason != devices.ReasonBreakerOpen || r.Attempts != 1 {
		t.Fatalf("probe-1: %s/%s after %d attempts; want failed/breaker_open after 1 (the retry fails fast)", r.Status, r.Reason, r.Attempts)
	}
	h.noSetsYet()

	// The cooldown is open_for (10 s) after the first trip; the breaker
	// turns half-open on its own, published when it does.
	h.advance(9 * time.Second)
	half := nextState(t, states, "half_open")
	if want := reopened.Since.Add(10 * time.Second); !half.Since.Equal(want) {
		t.Errorf("half-open at %v, want %v (one cooldown after it opened)", half.Since, want)
	}
	// sw07 has dropped its one set: it answers now, so the probe succeeds.
	h.publish("sw07", `{"state":"OFF","op_id":"probe-2"}`)
	if r := h.final("probe-2"); r.Status != devices.Succeeded || r.Attempts != 1 {
		t.Fatalf("probe-2: %s/%s after %d attempts; want succeeded after 1", r.Status, r.Reason, r.Attempts)
	}
	closed := nextState(t, states, "closed")
	if limit := reopened.Since.Add(10*time.Second + 10*time.Second); closed.Since.After(limit) {
		t.Errorf("closed at %v, later than one cooldown plus one probe after it opened (%v)", closed.Since, limit)
	}
	if !closed.Since.Equal(half.Since) {
		t.Errorf("closed at %v, want %v: the probe took no fake time", closed.Since, half.Since)
	}
}

// final2 waits for the terminal result of opID, whose accepted result was
// already taken.
func (h *harness) final2(opID string) devices.Result {
	h.t.Helper()
	return h.await(func(r devices.Result) bool { return r.OpID == opID && r.Status.Terminal() }, "the final result of "+opID)
}

// With hold: true, commands wait, reported queued/breaker_open, while the
// breaker is open, and go out once a probe closes it; none reaches the
// service while it is open.
func TestHeldCommandsWaitForTheBreakerToClose(t *testing.T) {
	h := newHarness(t, harnessOptions{config: breakerConfig(true)})
	h.settle(breakerDevices()...)
	states := h.openBreaker()

	for _, id := range []string{"held-1", "held-2"} {
		h.publish("sw01", `{"state":"ON","op_id":"`+id+`"}`)
		h.result(id) // accepted
	}
	// held-2 supersedes held-1 (same device, newest target wins); it waits.
	r := h.await(func(r devices.Result) bool { return r.OpID == "held-2" && r.Status == devices.Queued }, "held-2 queued")
	if r.Reason != devices.ReasonBreakerOpen {
		t.Errorf("held-2 queued with reason %s, want %s", r.Reason, devices.ReasonBreakerOpen)
	}
	h.noSetsYet()

	h.bridgeState("zigbee2mqtt", true) // half-open: held-2 is the probe
	if r := h.final2("held-2"); r.Status != devices.Succeeded || r.Attempts != 1 {
		t.Fatalf("held-2: %s/%s after %d attempts; want succeeded after 1", r.Status, r.Reason, r.Attempts)
	}
	nextState(t, states, "closed")
	if got := h.sim.Sets("sw01"); got != 1 {
		t.Errorf("sw01 received %d sets, want 1", got)
	}
}

// The fourth test: one service failing leaves another's commands
// alone.
func TestOneServicesBreakerLeavesAnotherAlone(t *testing.T) {
	h := newHarness(t, harnessOptions{config: breakerConfig(false)})
	h.settle(breakerDevices()...)
	zigbee := h.watch("hearth/services/zigbee/state")
	upstairs := h.watch("hearth/services/upstairs/state")
	nextState(t, zigbee, "closed")
	nextState(t, upstairs, "closed")
	h.bridgeState("zigbee2mqtt", false)
	nextState(t, zigbee, "open")

	h.publish("sw03", `{"state":"ON","op_id":"down"}`)
	h.publish("attic_light", `{"state":"ON","brightness":80,"op_id":"up"}`)
	if r := h.final("down"); r.Status != devices.Failed || r.Reason != devices.ReasonBreakerOpen {
		t.Errorf("down: %s/%s, want failed/breaker_open", r.Status, r.Reason)
	}
	if r := h.final("up"); r.Status != devices.Succeeded || r.Attempts != 1 {
		t.Errorf("up: %s/%s after %d attempts, want succeeded after 1", r.Status, r.Reason, r.Attempts)
	}
	if b := h.d.disp.Breakers(); len(b) != 2 || b[0].State != "open" || b[1].State != "closed" {
		t.Errorf("Breakers() = %+v, want zigbee open and upstairs closed", b)
	}
}

// A safety-critical command (a lock) that the open breaker stops is never
// dropped silently: it fails, and a critical notification says so.
func TestLockCommandFailedByTheBreakerNotifies(t *testing.T) {
	h := newHarness(t, harnessOptions{config: breakerConfig(false)})
	h.settle(breakerDevices()...)
	notes := h.watch("hearth/notifications")
	h.openBreaker()

	h.publish("sw00", `{"state":"ON","op_id":"switch"}`) // not safety-critical: no notification
	h.final("switch")
	h.publish("front_door", `{"state":"UNLOCK","op_id":"unlock"}`)
	if r := h.final("unlock"); r.Status != devices.Failed || r.Reason != devices.ReasonBreakerOpen {
		t.Fatalf("unlock: %s/%s, want failed/breaker_open", r.Status, r.Reason)
	}
	select {
	case m := <-notes:
		var n notify.Notification
		if err := json.Unmarshal(m.Payload(), &n); err != nil {
			t.Fatalf("notification is not JSON: %s", m.Payload())
		}
		if n.Severity != "critical" || n.Device != "front_door" || n.OpID != "unlock" || n.Source != "dispatcher" || m.Retained() {
			t.Errorf("notification %s (retained %t); want critical, about front_door's unlock, from the dispatcher, not retained", m.Payload(), m.Retained())
		}
	case <-time.After(eventWait):
		t.Fatal("no notification for the failed unlock")
	}
	select {
	case m := <-notes:
		t.Errorf("a second notification: %s", m.Payload())
	default:
	}
}

// The fifth test: breaker states appear on MQTT (retained) and as
// Home Assistant discovery entities, which are announced again when Home
// Assistant's birth message says it restarted; /readyz shows the breakers
// and stays ready while one is open; /metrics counts the transitions.
func TestBreakerStatesOnMQTTDiscoveryReadyzAndMetrics(t *testing.T) {
	h := newHarness(t, harnessOptions{config: breakerConfig(false)})
	h.settle(breakerDevices()...)
	const configTopic = "homeassistant/binary_sensor/hearth/service_zigbee/config"
	discovery := h.watch(configTopic)
	select {
	case m := <-discovery:
		var c map[string]any
		if err := json.Unmarshal(m.Payload(), &c); err != nil {
			t.Fatalf("discovery payload is not JSON: %s", m.Payload())
		}
		if !m.Retained() || c["device_class"] != "problem" || c["state_topic"] != "hearth/services/zigbee/state" ||
			c["unique_id"] != "hearth_hearth_service_zigbee" {
			t.Errorf("discovery (retained %t): %s", m.Retained(), m.Payload())
		}
	case <-time.After(eventWait):
		t.Fatal("no discovery entity for service zigbee")
	}

	states := h.watch("hearth/services/zigbee/state")
	first := <-states
	if !first.Retained() {
		t.Error("the breaker state is not retained")
	}
	// Regression: a breaker closed since the start said since year 1.
	if got := string(first.Payload()); got != `{"state":"closed"}` {
		t.Errorf("the state of a breaker closed since the start: %s, want {\"state\":\"closed\"}", got)
	}
	h.bridgeState("zigbee2mqtt", false)
	nextState(t, states, "open")

	status, body := get(t, "http://"+h.d.httpAddr()+"/readyz")
	if status != http.StatusOK || !strings.Contains(body, `"breakers":[{"service":"zigbee","state":"open"`) {
		t.Errorf("/readyz while zigbee's breaker is open: %d %s; want 200 with the open breaker", status, body)
	}
	_, body = get(t, "http://"+h.d.httpAddr()+"/api/v1/breakers")
	if !strings.Contains(body, `{"service":"upstairs","state":"closed"`) {
		t.Errorf("/api/v1/breakers: %s; want upstairs closed", body)
	}
	_, body = get(t, "http://"+h.d.httpAddr()+"/metrics")
	for _, want := range []string{
		`hearth_breaker_transitions_total{from="closed",service="zigbee",to="open"} 1`,
		`hearth_breaker_state{service="zigbee",state="open"} 1`,
		`hearth_breaker_state{service="upstairs",state="closed"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	// Home Assistant restarts: its birth message brings the entity again.
	mustToken(t, h.client.Publish("homeassistant/status", 1, false, "online"))
	select {
	case m := <-discovery:
		if !strings.Contains(string(m.Payload()), `"device_class":"problem"`) {
			t.Errorf("re-announced discovery: %s", m.Payload())
		}
	case <-time.After(eventWait):
		t.Fatal("discovery was not announced again after Home Assistant's birth message")
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// automationConfig watches a cloud presence service Hearth does not
// command; while its breaker is open, a local motion sensor drives the
// hall light (fallback_for), and the arrival greeting, which needs the
// cloud service, pauses (requires).
const automationConfig = `
mqtt:
  listen: 127.0.0.1:0
  reconnect: {base: 10ms, cap: 100ms}
http:
  listen: 127.0.0.1:0
services:
  zigbee:
    protocol: zigbee2mqtt
  cloud_presence:
    protocol: status_topic
    status_topic: cloud/presence/status
devices:
  hall_light: {class: light}
  hall_motion: {class: sensor}
automations:
  hall_light_from_motion:
    fallback_for: cloud_presence
    triggers:
      - state: {device: hall_motion, attribute: occupancy, to: true}
    actions:
      - command: {device: hall_light, target: {state: "ON", brightness: 102}}
  greet_arrival:
    requires: [cloud_presence]
    triggers:
      - mqtt: {topic: presence/arrived}
    actions:
      - publish: {topic: hearth-test/greeting, payload: welcome}
`

// ruleStatus returns the named rule's status.
func (h *harness) ruleStatus(name string) (runs, skipped int) {
	h.t.Helper()
	for _, s := range h.d.engine.Status() {
		if s.Name == name {
			return s.Runs, s.Skipped
		}
	}
	h.t.Fatalf("no rule %s", name)
	return 0, 0
}

// The third test: a fallback automation runs while its service's
// breaker is open and stops when it closes; a requires automation pauses
// and resumes. The engine handles events in arrival order, so a later
// event that shows up is the proof that an earlier one was handled.
func TestFallbackAndRequiresAutomationsFollowTheBreaker(t *testing.T) {
	h := newHarness(t, harnessOptions{config: automationConfig})
	h.settle("hall_light")
	states := h.watch("hearth/services/cloud_presence/state")
	greetings := h.watch("hearth-test/greeting")
	nextState(t, states, "closed")
	motion := func(occupied bool) {
		t.Helper()
		mustToken(t, h.client.Publish("zigbee2mqtt/hall_motion", 1, false, fmt.Sprintf(`{"occupancy":%t}`, occupied)))
	}
	greeted := func() {
		t.Helper()
		select {
		case m := <-greetings:
			if string(m.Payload()) != "welcome" {
				t.Errorf("greeting %q, want welcome", m.Payload())
			}
		case <-time.After(eventWait):
			t.Fatal("no greeting")
		}
	}

	// The cloud service is up: motion does nothing, arrivals are greeted.
	motion(false)
	motion(true)
	mustToken(t, h.client.Publish("presence/arrived", 1, false, "alice"))
	greeted()
	if runs, skipped := h.ruleStatus("hall_light_from_motion"); runs != 0 || skipped != 1 {
		t.Errorf("fallback while the service is up: %d runs, %d skipped; want 0, 1", runs, skipped)
	}

	// It goes down: motion drives the light, arrivals wait.
	mustToken(t, h.client.Publish("cloud/presence/status", 1, true, "offline"))
	nextState(t, states, "open")
	mustToken(t, h.client.Publish("presence/arrived", 1, false, "bob"))
	motion(false)
	motion(true)
	set := h.nextSet()
	if set.Device != "hall_light" || set.Attrs["state"] != "ON" || set.Attrs["brightness"] != float64(102) {
		t.Errorf("fallback set %s: %s; want hall_light ON at 102", set.Device, set.Payload)
	}
	r := h.await(func(r devices.Result) bool { return r.Device == "hall_light" && r.Status.Terminal() }, "the fallback command's result")
	if r.Status != devices.Succeeded || !strings.HasPrefix(r.OpID, "auto-") {
		t.Errorf("fallback command %s: %s/%s; want an auto- op_id, succeeded", r.OpID, r.Status, r.Reason)
	}
	if runs, skipped := h.ruleStatus("greet_arrival"); runs != 1 || skipped != 1 {
		t.Errorf("greeting while the service is down: %d runs, %d skipped; want 1, 1", runs, skipped)
	}
	select {
	case m := <-greetings:
		t.Errorf("greeted %q while the service was down", m.Payload())
	default:
	}

	// It comes back (a watched service's online is its probe): the
	// fallback stops, the greeting resumes.
	mustToken(t, h.client.Publish("cloud/presence/status", 1, true, "online"))
	nextState(t, states, "closed")
	motion(false)
	motion(true)
	mustToken(t, h.client.Publish("presence/arrived", 1, false, "carol"))
	greeted()
	if runs, skipped := h.ruleStatus("hall_light_from_motion"); runs != 1 || skipped != 2 {
		t.Errorf("fallback after the service is back: %d runs, %d skipped; want 1, 2", runs, skipped)
	}
	h.noSetsYet()
}

// A bridge that goes silent (its coordinator hangs, and it never says
// offline) opens the breaker by its threshold, 2 timed-out attempts here.
// One silent device never does: not behind a bridge that keeps passing on
// other devices' reports, nor behind a quiet one, which answers the get
// Hearth sends another of its devices (a witness) when an attempt times
// out in its silence.
func TestSilentBridgeTripsTheBreakerButOneDeadDeviceDoesNot(t *testing.T) {
	for _, tc := range []struct {
		name        string
		hung        bool // the coordinator hangs: every set and get is swallowed
		othersTalk  bool
		wantBreaker string
	}{
		{"hung coordinator", true, false, "open"},
		{"dead device behind a talking bridge", false, true, "closed"},
		{"dead device behind a quiet bridge", false, false, "closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{config: breakerConfig(false), faults: simulator.Faults{DropFirst: 2}})
			h.settle(breakerDevices()...)
			if tc.hung {
				if err := h.sim.SetBridgeOnline("zigbee2mqtt", false, false); err != nil {
					t.Fatal(err)
				}
			}
			mirror := h.watch("hearth/sw05")
			talk := func(state string) {
				t.Helper()
				if !tc.othersTalk {
					return
				}
				// sw05 reports a change by hand (its bridge passes it
				// on); Hearth's mirror shows it was taken.
				mustToken(t, h.client.Publish("zigbee2mqtt/sw05", 1, false, `{"state":"`+state+`"}`))
				for m := range mirror {
					if strings.Contains(string(m.Payload()), `"state":"`+state+`"`) {
						return
					}
				}
			}
			base := h.waiters() // the timers of the idle daemon
			h.publish("sw00", `{"state":"ON","op_id":"dead"}`)
			h.result("dead")
			h.nextSet() // attempt 1, dropped
			talk("ON")
			// The set is out before its timeout's timer is set: count
			// the timers once it is.
			h.eventually("attempt 1's timer", func() bool { return h.waiters() == base+1 })
			// In the bridge's silence a witness read decides each
			// timeout, on a timer of its own: before the clock moves,
			// the timers it moves for must be set, and the witness's
			// answer (real time) taken where one comes. Then hearthd
			// waits on the attempt's timer or the backoff, plus, behind
			// a hung coordinator, the unanswered witness read's.
			timers := base + 1 // the attempt's timeout
			if tc.hung {
				timers++
			}
			h.advance(5 * time.Second) // it times out
			h.eventually("the backoff's timer (and the witness read's)", func() bool { return h.waiters() == timers })
			h.advance(time.Second) // the retry's backoff
			h.nextSet()            // attempt 2, dropped
			h.eventually("attempt 2's timer", func() bool { return h.waiters() == timers })
			talk("OFF")
			h.advance(5 * time.Second) // it times out too
			r := h.final2("dead")
			if r.Status != devices.Failed || r.Reason != devices.ReasonTimeout || r.Attempts != 2 {
				t.Fatalf("dead: %s/%s after %d attempts; want failed/timeout after 2", r.Status, r.Reason, r.Attempts)
			}
			h.eventually("zigbee's breaker "+tc.wantBreaker, func() bool {
				b := h.d.disp.Breakers()
				return b[0].Service == "zigbee" && b[0].State == tc.wantBreaker
			})
			if b := h.d.disp.Breakers(); b[0].State != tc.wantBreaker {
				t.Errorf("zigbee's breaker is %s, want %s", b[0].State, tc.wantBreaker)
			}
		})
	}
}
