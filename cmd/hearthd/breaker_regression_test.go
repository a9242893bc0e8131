package main

import (
	"fmt"
	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/config"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/simulator"
)

// Regression: with hold: true and successes_to_close: 2, a probe success that
// does not close the breaker frees the probe place without a transition.
// The held commands wait on the breaker's "changed" channel, which only
// transitions close, so they never try again: they expire at their TTL,
// and the breaker stays half-open with healthy devices waiting behind it.
func TestHeldCommandsWakeWhenAProbePlaceFrees(t *testing.T) {
	cfg := strings.Replace(breakerConfig(true), "probe_timeout: 10s,", "probe_timeout: 10s, successes_to_close: 2,", 1)
	h := newHarness(t, harnessOptions{config: cfg})
	h.settle(breakerDevices()...)
	states := h.openBreaker()

	ids := []string{"held-a", "held-b", "held-c"}
	for i, id := range ids {
		h.publish([]string{"sw01", "sw02", "sw03"}[i], `{"state":"ON","op_id":"`+id+`"}`)
		h.result(id) // accepted
		h.await(func(r devices.Result) bool { return r.OpID == id && r.Status == devices.Queued }, id+" queued")
	}
	h.bridgeState("zigbee2mqtt", true) // half-open: one probe at a time
	nextState(t, states, "half_open")
	first := h.await(func(r devices.Result) bool { return r.Status.Terminal() }, "the first probe's result")
	if first.Status != devices.Succeeded {
		t.Fatalf("first probe %s: %s/%s", first.OpID, first.Status, first.Reason)
	}
	// Two more healthy devices wait; a probe place is free. The next probe
	// should go out at once, with no time passing. Let the TTL (60 s)
	// pass to show that nothing made them try again.
	for _, id := range ids {
		if id == first.OpID {
			continue
		}
		r := h.final2(id)
		if r.Status != devices.Succeeded {
			t.Errorf("%s: %s/%s after %d attempts (%s); want succeeded: the probe place was free from the first success on",
				id, r.Status, r.Reason, r.Attempts, r.Detail)
		}
	}
}

// holdConfig: one Zigbee2MQTT service whose breaker holds commands, one
// attempt of 5 s per command, a lock and a switch.
const holdConfig = `
mqtt:
  listen: 127.0.0.1:0
  reconnect: {base: 10ms, cap: 100ms}
http:
  listen: 127.0.0.1:0
services:
  zigbee:
    protocol: zigbee2mqtt
    retry: {max_attempts: 1, attempt_timeout: 5s}
    breaker: {failure_threshold: 2, open_for: 10s, hold: true}
devices:
  front_door: {class: lock}
  sw01: {class: switch}
`

// Regression: a held command whose deadline comes as the breaker lets it go
// is never sent late. The probe (sw01, silent: nothing answers)
// ends at +5s, freeing the probe place at the very moment the held
// unlock's TTL (5s) ends; whichever timer fires first, the unlock must
// not go out, must end expired with 0 attempts, and must notify.
func TestHeldUnlockIsNeverSentAfterItsTTL(t *testing.T) {
	// Which of the two timers is handled first is up to the scheduler;
	// the late send happened only when the probe's came first, so the
	// race is run several times.
	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			h := newHarness(t, harnessOptions{config: holdConfig, faults: simulator.Faults{Silent: []string{"sw01"}}})
			h.settle("front_door")
			notes := h.watch("hearth/notifications")
			states := h.openBreaker()

			h.publish("sw01", `{"state":"ON","op_id":"probe"}`)
			h.await(func(r devices.Result) bool { return r.OpID == "probe" && r.Status == devices.Queued }, "probe queued")
			h.bridgeState("zigbee2mqtt", true)
			nextState(t, states, "half_open")
			if e := h.nextSet(); e.Device != "sw01" {
				t.Fatalf("first set to %s, want sw01 (the held command is the probe)", e.Device)
			}
			h.publish("front_door", `{"state":"UNLOCK","op_id":"unlock","ttl":"5s"}`)
			h.await(func(r devices.Result) bool { return r.OpID == "unlock" && r.Status == devices.Queued }, "unlock queued behind the probe")
			// The probe's attempt, the breaker watching its deadline, and the held
			// unlock wait on the clock; the attempt and the TTL end together.
			h.advanceAfter(3, 5*time.Second)
			if r := h.final2("probe"); r.Status != devices.Failed {
				t.Fatalf("probe: %s/%s", r.Status, r.Reason)
			}
			r := h.final2("unlock")
			if r.Status != devices.Expired || r.Attempts != 0 {
				t.Errorf("unlock: %s/%s after %d attempts (%s); want expired after 0", r.Status, r.Reason, r.Attempts, r.Detail)
			}
			h.noSetsYet()
			select {
			case m := <-notes:
				if !strings.Contains(string(m.Payload()), `"op_id":"unlock"`) {
					t.Errorf("notification %s, want one about the unlock", m.Payload())
				}
			case <-time.After(eventWait):
				t.Error("no notification for the unlock that expired while held")
			}
		})
	}
}

// Regression: after a routine bridge restart (offline, then online) the breaker
// is half-open and stays so for as long as no command comes: nothing but
// a command ever probes it. Meanwhile the bridge passes on reports, yet
// every rule with requires: [zigbee] stays paused (and the Home Assistant
// problem sensor stays on), for hours.
func TestBridgeRestartDoesNotLeaveTheBreakerHalfOpenForever(t *testing.T) {
	const cfg = `
mqtt:
  listen: 127.0.0.1:0
  reconnect: {base: 10ms, cap: 100ms}
http:
  listen: 127.0.0.1:0
services:
  zigbee:
    protocol: zigbee2mqtt
devices:
  hall_light: {class: light}
  hall_motion: {class: sensor}
automations:
  motion_seen:
    requires: [zigbee]
    triggers:
      - state: {device: hall_motion, attribute: occupancy, to: true}
    actions:
      - publish: {topic: hearth-test/seen, payload: motion}
`
	h := newHarness(t, harnessOptions{config: cfg})
	h.settle("hall_light")
	seen := h.watch("hearth-test/seen")
	states := h.openBreaker()
	h.bridgeState("zigbee2mqtt", true)
	nextState(t, states, "half_open")

	h.clock.Advance(time.Hour) // no command all evening
	for _, occ := range []bool{false, true} {
		mustToken(t, h.client.Publish("zigbee2mqtt/hall_motion", 1, false, fmt.Sprintf(`{"occupancy":%t}`, occ)))
	}
	select {
	case <-seen:
	case <-time.After(eventWait):
		runs, skipped := h.ruleStatus("motion_seen")
		t.Errorf("motion_seen (requires: [zigbee]) never ran: %d runs, %d skipped", runs, skipped)
	}
	// The reports reached the dispatcher before the engine ran the rule.
	if b := h.d.disp.Breakers(); b[0].State != "closed" {
		t.Errorf("an hour after the bridge came back, with its devices reporting, zigbee's breaker is %s (since %v), want closed", b[0].State, b[0].Since)
	}
}

// Regression: a probe may take as long as the service's attempt_timeout, but
// counts as failed at probe_timeout. Config accepts probe_timeout <
// attempt_timeout (here the default 10 s against 15 s), so a device that
// answers in 12 s -- a healthy, slow service -- reopens the breaker with
// every probe, each time for longer, and it never closes. The breaker's
// state also says half_open for 2 s after the probe's deadline: the
// breaker clock is not woken by Allow and never schedules the deadline.
func TestProbeConfirmedWithinTheAttemptTimeoutClosesTheBreaker(t *testing.T) {
	cfg := strings.Replace(breakerConfig(false), "attempt_timeout: 5s", "attempt_timeout: 15s", 1)
	cfg = strings.Replace(cfg, " probe_timeout: 10s,", "", 1) // it defaults to the attempt timeout
	h := newHarness(t, harnessOptions{config: cfg, faults: simulator.Faults{DropFirst: 1}})
	h.settle(breakerDevices()...)
	states := h.openBreaker()
	h.bridgeState("zigbee2mqtt", true)
	nextState(t, states, "half_open")

	h.publish("sw01", `{"state":"ON","op_id":"slow"}`)
	h.result("slow")
	h.nextSet()                       // the device takes it, and answers late
	h.advanceAfter(2, 12*time.Second) // within attempt_timeout (15 s); the breaker watches the probe too
	mustToken(t, h.client.Publish("zigbee2mqtt/sw01", 1, false, `{"state":"ON"}`))
	if r := h.final2("slow"); r.Status != devices.Succeeded {
		t.Fatalf("slow: %s/%s", r.Status, r.Reason)
	}
	// The breaker hears of the success before the result goes out: who
	// reads the result finds it closed.
	if b := h.d.disp.Breakers(); b[0].State != "closed" {
		t.Errorf("the probe's command succeeded, yet zigbee's breaker is %s (trips %d)", b[0].State, b[0].Trips)
	}
	if s := nextState(t, states, "closed"); !s.Since.Equal(t0.Add(12 * time.Second)) {
		t.Errorf("closed at %v, want %v: a probe_timeout below attempt_timeout turns every slow success into a failure", s.Since, t0.Add(12*time.Second))
	}
}

// Regression: an automation's MQTT trigger on a topic under a bridge's base
// topic (a Zigbee2MQTT button's action, the most common trigger there is)
// is accepted by config and never fires: mqtt.Conn routes each message to
// the first subscription that matches, and zigbee2mqtt/# was made first.
func TestMQTTTriggerUnderABridgeBaseTopicFires(t *testing.T) {
	const cfg = `
mqtt:
  listen: 127.0.0.1:0
  reconnect: {base: 10ms, cap: 100ms}
http:
  listen: 127.0.0.1:0
services:
  zigbee:
    protocol: zigbee2mqtt
devices:
  hall_light: {class: light}
automations:
  button:
    triggers:
      - mqtt: {topic: zigbee2mqtt/hall_button/action, payload: single}
    actions:
      - command: {device: hall_light, target: {state: "ON"}}
`
	h := newHarness(t, harnessOptions{config: cfg})
	h.settle("hall_light")
	mustToken(t, h.client.Publish("zigbee2mqtt/hall_button/action", 1, false, "single"))
	select {
	case e := <-h.sets:
		if e.Device != "hall_light" {
			t.Errorf("set to %s", e.Device)
		}
	case <-time.After(eventWait):
		runs, skipped := h.ruleStatus("button")
		t.Errorf("the button rule never ran (%d runs, %d skipped): its trigger's messages go to the zigbee2mqtt adapter", runs, skipped)
	}
}

// Regression: a breaker trigger fires on a replay. A watched service's status
// is retained (as status topics are); at every start of Hearth its
// breaker begins closed, the retained "offline" opens it, and a rule
// "breaker: {to: open}" runs its command: a restart of the hub moves a
// device, which the design's principle 7 and BREAKERS.md ("a retained
// message never triggers a rule") forbid.
func TestRetainedStatusReplayDoesNotTriggerBreakerRules(t *testing.T) {
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	pub := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("cloud"))
	mustToken(t, pub.Connect())
	mustToken(t, pub.Publish("cloud/presence/status", 1, true, "offline")) // went down yesterday
	pub.Disconnect(0)

	const cfg = `
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
automations:
  cloud_down_light:
    triggers:
      - breaker: {service: cloud_presence, to: open}
    actions:
      - command: {device: hall_light, target: {state: "ON"}}
  marker:
    triggers:
      - mqtt: {topic: hearth-test/ping}
    actions:
      - publish: {topic: hearth-test/pong, payload: pong}
`
	h := newHarness(t, harnessOptions{config: cfg, brokerURL: b.URL()}) // the hub (re)starts
	h.settle("hall_light")
	states := h.watch("hearth/services/cloud_presence/state")
	pong := h.watch("hearth-test/pong")
	// A replayed offline takes effect only if the service says nothing
	// else within the grace after Hearth connects.
	nextState(t, states, "closed")
	h.advance(dispatcher.BridgeStateGrace)
	if s := nextState(t, states, "open"); !s.Since.Equal(t0.Add(dispatcher.BridgeStateGrace)) {
		t.Errorf("opened at %v, want %v (when the grace ended)", s.Since, t0.Add(dispatcher.BridgeStateGrace))
	}
	// The engine handles events in order: the marker's pong proves the
	// breaker event before it was handled.
	mustToken(t, h.client.Publish("hearth-test/ping", 1, false, "ping"))
	select {
	case <-pong:
	case <-time.After(eventWait):
		t.Fatal("no pong")
	}
	if runs, _ := h.ruleStatus("cloud_down_light"); runs != 0 {
		r := h.await(func(r devices.Result) bool { return r.Device == "hall_light" && r.Status.Terminal() }, "the rule's command")
		t.Errorf("a restart ran cloud_down_light %d time(s) on the replayed retained status: its command %s ended %s", runs, r.OpID, r.Status)
	}
}

// Regression: a watched service's online report is "its own probe", one
// success. Config accepts successes_to_close: 2 (and max_probes,
// probe_timeout, failure_threshold...) for it, and then the breaker stays
// half-open after the service says online, until it says online again,
// which a retained status topic never does: fallback rules run and
// requires rules stay paused for good.
func TestWatchedServiceClosesWhenItSaysOnline(t *testing.T) {
	cfg := strings.Replace(automationConfig, "    status_topic: cloud/presence/status\n",
		"    status_topic: cloud/presence/status\n    breaker: {successes_to_close: 2}\n", 1)
	h := newHarness(t, harnessOptions{config: cfg})
	h.settle("hall_light")
	states := h.watch("hearth/services/cloud_presence/state")
	nextState(t, states, "closed")
	mustToken(t, h.client.Publish("cloud/presence/status", 1, true, "offline"))
	nextState(t, states, "open")
	mustToken(t, h.client.Publish("cloud/presence/status", 1, true, "online"))
	nextState(t, states, "closed")
	if b := h.d.disp.Breakers(); b[1].Service != "cloud_presence" || b[1].State != "closed" {
		t.Errorf("an hour after cloud_presence said online its breaker is %s", b[1].State)
	}
}

// Regression: two Hearth instances on one broker (the design runs several side
// by side) announce the same Home Assistant entity: the daemon never sets
// Discovery.NodeID, so the config topic and unique_id are
// "hearth"/"hearth_hearth_service_<service>" whatever the prefix; the
// second instance's config overwrites the first's and its state topic
// wins.
func TestDiscoveryEntitiesOfTwoInstancesDoNotClash(t *testing.T) {
	cfg := "prefix: upstairs\n" + breakerConfig(false)
	h := newHarness(t, harnessOptions{config: cfg})
	h.settle()
	const clash = "homeassistant/binary_sensor/hearth/service_zigbee/config"
	// Retained: whichever topic the instance announced on arrives at once.
	got := h.watch(clash, "homeassistant/binary_sensor/upstairs/service_zigbee/config")
	select {
	case m := <-got:
		if m.Topic() == clash {
			t.Errorf("the instance with prefix upstairs announces on the default instance's topic %s: %s", clash, m.Payload())
		}
	case <-time.After(eventWait):
		t.Fatal("no discovery config")
	}
}

// Regression: config accepts automations gated on, or triggered by, a service
// whose breaker is disabled: with no breaker there are no transitions, so
// fallback_for never runs and a breaker trigger never fires, silently.
func TestConfigRejectsBreakerRulesOnAServiceWithoutABreaker(t *testing.T) {
	const cfg = `
services:
  zigbee:
    protocol: zigbee2mqtt
    breaker: {enabled: false}
devices:
  hall_light: {class: light}
automations:
  stand_in:
    fallback_for: zigbee
    triggers:
      - breaker: {service: zigbee, to: open}
    actions:
      - notify: {title: zigbee is down}
`
	if _, err := config.Parse("test.yaml", []byte(cfg)); err == nil {
		t.Error("config accepted fallback_for and a breaker trigger naming zigbee, whose breaker is disabled: the rule can never run")
	}
}

// Regression: a broker that shuts down sends its clients' wills, so the
// bridge's "offline" arrives just before Hearth's own connection drops,
// and opened the breaker: commands failed fast through a mere broker
// restart. Losing its connection, Hearth forgets that offline; after the
// reconnect the bridge's word decides again.
func TestOwnConnectionLossForgetsTheBridgesOffline(t *testing.T) {
	m := startRestartableMochi(t)
	h := newHarness(t, harnessOptions{brokerURL: m.url(), config: manyDevices(1, "")})
	h.settle("sw000")
	h.openBreaker() // as the shutting-down broker's will would say
	h.stopAutomation()
	h.stopSim()
	h.stopSim = nil
	m.stop() // Hearth's connection drops
	h.eventually("the breaker closed, the offline forgotten, after Hearth lost its connection", func() bool {
		b := h.d.disp.Breakers()[0]
		return b.State == "closed" && !b.Offline
	})
}

// Regression: a probe admitted while the bridge's link was not ready
// (just after Hearth reconnected, before the bridge spoke) waited for the
// link with its deadline running, and could expire unsent, counting as a
// failure and reopening the breaker for longer. Now it gives its place
// back while it waits.
func TestProbeIsNotSpentWaitingForTheLink(t *testing.T) {
	m := startRestartableMochi(t)
	cfg := strings.Replace(manyDevices(1, ""), "    protocol: zigbee2mqtt\n",
		"    protocol: zigbee2mqtt\n    retry: {max_attempts: 1, attempt_timeout: 5s}\n    breaker: {failure_threshold: 1, open_for: 10s, max_open_for: 1m, probe_timeout: 10s}\n", 1)
	h := newHarness(t, harnessOptions{brokerURL: m.url(), config: cfg, faults: simulator.Faults{DropFirst: 1}})
	h.settle("sw000")
	states := h.watch("hearth/services/zigbee/state")
	nextState(t, states, "closed")
	h.publish("sw000", `{"state":"ON","op_id":"trip"}`)
	h.result("trip")
	h.nextSet()                // dropped: the one failure trips the breaker
	h.advance(5 * time.Second) // at +5s, open until +15s
	nextState(t, states, "open")

	// The bridge leaves, then the broker restarts: Hearth reconnects to a
	// broker where nobody speaks for the bridge.
	h.stopAutomation()
	h.stopSim()
	h.stopSim = nil
	m.restart()
	birth := h.watch("hearth/bridge/state") // the broker is new: only Hearth's next birth says online
	h.driveReconnect()                      // the link is unknown for BridgeStateGrace
	// Hearth's birth follows its subscriptions: the intake listens.
	for online := false; !online; {
		select {
		case msg := <-birth:
			online = string(msg.Payload()) == "online"
		case <-time.After(eventWait):
			t.Fatal("no birth from Hearth after the reconnect")
		}
	}

	// A command through a newly connected client, once the breaker is
	// half-open (it was open until +15s; forgetting the offline on the
	// loss made it half-open, as it had tripped).
	c := paho.NewClient(paho.NewClientOptions().AddBroker(m.url()).SetClientID("late-automation").SetAutoReconnect(false))
	mustToken(t, c.Connect())
	defer c.Disconnect(0)
	mustToken(t, c.Publish("hearth/sw000/set", 1, false, `{"state":"OFF","op_id":"probe"}`))
	// Let BridgeStateGrace (10 s) pass with the command waiting for the
	// link: its probe's deadline (10 s) must not run meanwhile.
	h.eventually("the probe command accepted (the store is the witness)", func() bool {
		op, ok, _ := h.d.store.Lookup("probe")
		return ok && op.Status == devices.Accepted
	})
	h.advance(dispatcher.BridgeStateGrace) // the command waits for the link (and, unfixed, the breaker for the probe's deadline)
	b := h.d.disp.Breakers()[0]
	if b.Trips > 1 {
		t.Errorf("after the grace the breaker has %d trips (%s): the probe expired while it waited for the link", b.Trips, b.State)
	}
}
