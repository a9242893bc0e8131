package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	paho5 "github.com/eclipse/paho.golang/paho"
	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/mqtt"
)

// With the embedded broker Hearth's link is inline, no socket: the
// bridge's reports reach the dispatcher through the inline subscription
// (hearthd mirrors them), results reach the automation's paho client, a
// report on the bridge's topic by another account is dropped by its stamp
// and confirms nothing (the LOCK is sent and confirmed by the lock), and
// nothing Hearth publishes comes back to it (No Local): neither its
// retained messages when it subscribes nor its results and mirrors.
func TestHearthsTrafficToItsEmbeddedBrokerIsInline(t *testing.T) {
	h := newHarness(t, harnessOptions{config: aclConfig, simLogin: bridgeLogin, automationLogin: tabletLogin})
	if _, ok := h.d.conn.(*mqtt.Inline); !ok {
		t.Fatalf("hearthd's link to its embedded broker is a %T; want *mqtt.Inline", h.d.conn)
	}
	h.settle("front_door")
	heard := make(chan string, 256)
	if err := h.d.conn.Subscribe(ctxFor(t), "hearth/#", 1, func(m mqtt.Message) { heard <- m.Topic }); err != nil {
		t.Fatal(err)
	}
	phone := h.v5Client("phone-client", phoneLogin)
	unlockThroughHearth(t, h, phone, "unlock") // accepted, then succeeded, at the automation

	mirror := h.watch("hearth/front_door")
	lockState := func(want string) {
		t.Helper()
		deadline := time.After(eventWait)
		for {
			select {
			case m := <-mirror:
				var s map[string]any
				if json.Unmarshal(m.Payload(), &s) == nil && s["lock_state"] == want {
					return
				}
			case <-deadline:
				t.Fatalf("hearthd never mirrored lock_state %s", want)
			}
		}
	}
	lockState("unlocked")

	// Hearth's account may publish anywhere (the ACL) but is not the
	// bridge's: a second connection with it plays any such account.
	other := h.v5Client("not-the-bridge", login{config.InternalUsername, h.d.internalPassword})
	if _, err := other.c.Publish(ctxFor(t), &paho5.Publish{Topic: "zigbee2mqtt/Front Door", QoS: 1,
		Payload: []byte(`{"state":"LOCK","lock_state":"locked"}`)}); err != nil {
		t.Fatal(err)
	}
	h.eventually("the adapter to drop the report of an account that is not the bridge's", func() bool {
		return untrustedReports(t, h, "zigbee") == 1
	})
	phone.command(t, "front_door", `{"state":"LOCK","op_id":"lock"}`, nil)
	if r := h.final("lock"); r.Status != devices.Succeeded || r.Attempts != 1 {
		t.Errorf("LOCK after the forged report: %s with %d attempts (%s: %s); want succeeded with 1 attempt",
			r.Status, r.Attempts, r.Reason, r.Detail)
	}
	if e := h.nextSet(); e.Device != "Front Door" || string(e.Payload) != `{"state":"LOCK"}` {
		t.Errorf("set to reach a device: %s %s; want the LOCK of Front Door", e.Device, e.Payload)
	}
	lockState("locked") // Hearth's last publish of the LOCK

	// Published after all of Hearth's: once it is heard, anything of
	// Hearth's that came back would have been heard before it.
	if _, err := other.c.Publish(ctxFor(t), &paho5.Publish{Topic: "hearth/marker", QoS: 1, Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(eventWait)
	for done := false; !done; {
		select {
		case topic := <-heard:
			switch topic {
			case "hearth/marker":
				done = true
			case "hearth/front_door/set": // the phone's commands
			default:
				t.Errorf("Hearth heard %s, which it published itself", topic)
			}
		case <-deadline:
			t.Fatal("Hearth never heard the marker")
		}
	}
}

// No client can throw Hearth off its embedded broker, since it has no
// connection there: its client ID stays reserved to its own account
// (another account is refused with 0x87 / 0x05), a CONNECT with that ID
// and Hearth's own account takes over no session, and the inline client's
// ID is refused (0x85 / 0x02). Hearth stays connected and carries out the
// next command. (With a socket, the first would have been refused and the
// second would have taken Hearth's session over.)
func TestNoClientThrowsHearthOffItsEmbeddedBroker(t *testing.T) {
	h := newHarness(t, harnessOptions{config: aclConfig, simLogin: bridgeLogin, automationLogin: tabletLogin})
	h.settle("front_door")
	own := login{config.InternalUsername, h.d.internalPassword}
	for _, v5 := range []bool{true, false} {
		want := map[bool]byte{true: 0x87, false: 0x05}[v5]
		if code := connectCode(t, h, h.d.conn.ClientID(), phoneLogin, v5); code != want {
			t.Errorf("the phone with Hearth's client ID (MQTT 5: %v): CONNACK %#x; want %#x", v5, code, want)
		}
		if code := connectCode(t, h, h.d.conn.ClientID(), own, v5); code != 0 {
			t.Errorf("Hearth's account with Hearth's client ID (MQTT 5: %v): CONNACK %#x; want accepted", v5, code)
		}
		want = map[bool]byte{true: 0x85, false: 0x02}[v5]
		if code := connectCode(t, h, "inline", phoneLogin, v5); code != want {
			t.Errorf("the phone with the inline client's ID (MQTT 5: %v): CONNACK %#x; want %#x", v5, code, want)
		}
	}
	if !h.d.conn.Connected() {
		t.Error("hearthd is not connected after the attempts")
	}
	h.publish("front_door", `{"state":"UNLOCK","op_id":"after"}`)
	if r := h.final("after"); r.Status != devices.Succeeded {
		t.Errorf("a command after the attempts: %s (%s: %s); want succeeded", r.Status, r.Reason, r.Detail)
	}
}

// A restarted hearthd comes up with a fresh embedded broker, and its link
// still runs the dispatcher's start of a session once: the birth, and
// the republish sweep that puts every stored state back as a retained
// mirror before any bridge has said anything.
func TestRestartedHearthRepublishesIntoItsFreshEmbeddedBroker(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, harnessOptions{dataDir: dir})
	h.settle("plug")
	h.stop()

	cfg, err := config.Parse("test.yaml", []byte(testConfig))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = dir
	openWithoutPrincipals(cfg)
	// The real clock: the sweep spaces its publishes at republish_rate.
	d, err := start(cfg, deps{logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stop)
	waitClosed(t, d.conn.Up(), "hearthd connected")
	_, c := connect(t, d.brokerURL, "watcher", login{})
	got := make(chan paho.Message, 16)
	mustToken(t, c.SubscribeMultiple(map[string]byte{"hearth/plug": 1, "hearth/bridge/state": 1}, func(_ paho.Client, m paho.Message) { got <- m }))
	seen := map[string]string{}
	deadline := time.After(eventWait)
	for len(seen) < 2 {
		select {
		case m := <-got:
			seen[m.Topic()] = string(m.Payload())
		case <-deadline:
			t.Fatalf("retained after the restart: %v; want the plug's mirror and hearthd's birth", seen)
		}
	}
	if s := seen["hearth/plug"]; !strings.Contains(s, `"state"`) || seen["hearth/bridge/state"] != "online" {
		t.Errorf("retained after the restart: %v; want the plug's stored state and online", seen)
	}
}

// The adapter that puts Hearth's link inside the embedded broker keeps the
// broker's username stamp where mqtt.Trust and the intake read it, and
// tells a retained report replayed at subscribe (Retained) from a live one;
// for a command subscription (Retain As Published) Retained is the flag
// the publisher set.
func TestInlineAdapterKeepsTheStampAndTellsReplaysFromLive(t *testing.T) {
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0", StampUsernameProperty: usernameProperty,
		Users: map[string]string{bridgeLogin.username: bridgeLogin.password, "mallory": "mallory-password"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, bridge := connect(t, b.URL(), "bridge", bridgeLogin)
	_, mallory := connect(t, b.URL(), "mallory", login{"mallory", "mallory-password"})
	mustToken(t, bridge.Publish("zigbee2mqtt/lamp", 1, true, `{"state":"ON"}`))
	// mochi PUBACKs a QoS 1 publish before it routes it, one client's in
	// order: after this PUBACK the retained report is routed.
	mustToken(t, bridge.Publish("zigbee2mqtt/bridge/logging", 1, false, "x"))

	ib := inlineBroker{b}
	trust := &mqtt.Trust{Publisher: bridgeLogin.username, StampProperty: usernameProperty}
	reports := make(chan mqtt.Message, 8)
	unsubscribe, err := ib.Subscribe("zigbee2mqtt/+", false, func(m mqtt.Message) { reports <- m })
	if err != nil {
		t.Fatal(err)
	}
	defer unsubscribe()
	next := func(ch <-chan mqtt.Message) mqtt.Message {
		t.Helper()
		select {
		case m := <-ch:
			return m
		case <-time.After(eventWait):
			t.Fatal("timed out waiting for a message")
			panic("unreachable")
		}
	}
	if m := next(reports); !m.Retained || !trust.Trusted(m) {
		t.Errorf("the replayed report: retained %v, trusted %v; want both", m.Retained, trust.Trusted(m))
	}
	mustToken(t, bridge.Publish("zigbee2mqtt/lamp", 1, true, `{"state":"OFF"}`))
	if m := next(reports); m.Retained || !trust.Trusted(m) {
		t.Errorf("a live report, published retained: retained %v, trusted %v; want false, true", m.Retained, trust.Trusted(m))
	}
	mustToken(t, mallory.Publish("zigbee2mqtt/lamp", 1, false, `{"state":"ON"}`))
	if m := next(reports); trust.Trusted(m) {
		t.Error("another account's report is trusted")
	}

	commands := make(chan mqtt.Message, 8)
	unsubscribeCommands, err := ib.Subscribe("hearth/+/set", true, func(m mqtt.Message) { commands <- m })
	if err != nil {
		t.Fatal(err)
	}
	defer unsubscribeCommands()
	for _, retain := range []bool{true, false} {
		mustToken(t, mallory.Publish("hearth/lamp/set", 1, retain, "ON"))
		m := next(commands)
		if by, _ := m.UserProperty(usernameProperty); m.Retained != retain || by != "mallory" {
			t.Errorf("a command published with retain %v: Retained %v, stamped %q; want %v, mallory", retain, m.Retained, by, retain)
		}
	}
	mustToken(t, mallory.Publish("hearth/lamp/set", 1, true, ""))
	mustToken(t, bridge.Publish("zigbee2mqtt/lamp", 1, true, ""))
}
