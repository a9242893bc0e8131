package main

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	paho5 "github.com/eclipse/paho.golang/paho"
	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/zigbee2mqtt"
	"github.com/hearthd/hearth/protocols/zwavejs"
)

// aclConfig is mqttPrincipalsConfig with the bridge's client ID reserved
// to its account (client_id), as Zigbee2MQTT's mqtt.client_id sets it.
var aclConfig = strings.Replace(mqttPrincipalsConfig, "    mqtt_password: "+bridgeLogin.password+"\n",
	"    mqtt_password: "+bridgeLogin.password+"\n    client_id: zigbee2mqtt-bridge\n", 1)

// The attacks of issue 13 on the embedded broker, each with its own
// harness: every one is refused at the broker (PUBACK 0x87 to an MQTT 5
// client) or dropped by the adapter, and none reaches a device or
// confirms anything.

// refusedPublish publishes payload on topic as c at QoS 1 (retained if
// asked) and fails unless the broker answers 0x87 "not authorized".
func refusedPublish(t *testing.T, who string, c v5Publisher, topic, payload string, retain bool) {
	t.Helper()
	pr, err := c.c.Publish(ctxFor(t), &paho5.Publish{Topic: topic, QoS: 1, Retain: retain, Payload: []byte(payload)})
	if pr == nil || pr.ReasonCode != 0x87 {
		t.Errorf("%s publishing on %s: %+v, %v; want PUBACK 0x87 (not authorized)", who, topic, pr, err)
	}
}

// unlockThroughHearth unlocks the front door through Hearth as the phone
// and waits for the set to reach the lock: the first set any device saw.
func unlockThroughHearth(t *testing.T, h *harness, phone v5Publisher, opID string) {
	t.Helper()
	phone.command(t, "front_door", `{"state":"UNLOCK","op_id":"`+opID+`"}`, nil)
	if r := h.final(opID); r.Status != devices.Succeeded {
		t.Fatalf("%s: %s (%s: %s); want succeeded", opID, r.Status, r.Reason, r.Detail)
	}
	if e := h.nextSet(); e.Device != "Front Door" || string(e.Payload) != `{"state":"UNLOCK"}` {
		t.Fatalf("the first set to reach a device: %s %s; want Hearth's UNLOCK of Front Door", e.Device, e.Payload)
	}
}

func TestPrincipalCannotUnlockTheDoorPastHearth(t *testing.T) {
	h := newHarness(t, harnessOptions{config: aclConfig, simLogin: bridgeLogin, automationLogin: tabletLogin})
	h.settle("front_door")
	phone := h.v5Client("phone-client", phoneLogin)
	for _, topic := range []string{"zigbee2mqtt/Front Door/set", "zigbee2mqtt/Front Door/set/state", "zigbee2mqtt/bridge/request/permit_join"} {
		refusedPublish(t, "the phone", phone, topic, `{"state":"UNLOCK"}`, false)
	}
	// The phone's messages reach the broker in order: had a direct set
	// gone through, the lock would have seen it before Hearth's.
	unlockThroughHearth(t, h, phone, "through-hearth")
}

func TestBridgeAccountCannotCommandItsOwnDevices(t *testing.T) {
	h := newHarness(t, harnessOptions{config: aclConfig, simLogin: bridgeLogin, automationLogin: tabletLogin})
	h.settle("front_door")
	bridge := h.v5Client("stolen-bridge-password", bridgeLogin)
	for _, topic := range []string{"zigbee2mqtt/Front Door/set", "zigbee2mqtt/Front Door/get", "zigbee2mqtt/bridge/request/device/remove"} {
		refusedPublish(t, "the bridge's account", bridge, topic, `{"state":"UNLOCK"}`, false)
	}
	unlockThroughHearth(t, h, h.v5Client("phone-client", phoneLogin), "through-hearth")
}

// A report forged by a principal is refused by the ACL, and one on the
// bridge's topic by anyone but the bridge's account (here Hearth's own
// account, which the ACL lets publish anywhere) is dropped by the stamp: neither makes a LOCK of the unlocked door succeed with 0
// attempts; the LOCK is sent and confirmed by the lock itself.
func TestForgedReportConfirmsNothing(t *testing.T) {
	h := newHarness(t, harnessOptions{config: aclConfig, simLogin: bridgeLogin, automationLogin: tabletLogin})
	h.settle("front_door")
	phone := h.v5Client("phone-client", phoneLogin)
	unlockThroughHearth(t, h, phone, "unlock")

	forged := `{"state":"LOCK","lock_state":"locked"}`
	refusedPublish(t, "the phone", phone, "zigbee2mqtt/Front Door", forged, false)
	// Hearth's account may publish anywhere; a connection with it (Hearth
	// itself has none: its link is inline) plays anyone the ACL lets onto
	// the bridge's topic who is not the bridge.
	other := h.v5Client("not-the-bridge", login{config.InternalUsername, h.d.internalPassword})
	if _, err := other.c.Publish(ctxFor(t), &paho5.Publish{Topic: "zigbee2mqtt/Front Door", QoS: 1, Payload: []byte(forged)}); err != nil {
		t.Fatal(err)
	}
	h.eventually("the adapter to drop the report of an account that is not the bridge's", func() bool {
		return untrustedReports(t, h, "zigbee") == 1
	})

	phone.command(t, "front_door", `{"state":"LOCK","op_id":"lock"}`, nil)
	r := h.final("lock")
	if r.Status != devices.Succeeded || r.Attempts != 1 {
		t.Errorf("LOCK after the forged reports: %s with %d attempts (%s: %s); want succeeded with 1 attempt: the door was unlocked",
			r.Status, r.Attempts, r.Reason, r.Detail)
	}
	if e := h.nextSet(); e.Device != "Front Door" || string(e.Payload) != `{"state":"LOCK"}` {
		t.Errorf("set to reach a device: %s %s; want the LOCK of Front Door", e.Device, e.Payload)
	}
}

// untrustedReports reads hearth_untrusted_reports_total of service.
func untrustedReports(t *testing.T, h *harness, service string) float64 {
	t.Helper()
	mfs, err := h.d.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "hearth_untrusted_reports_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "service" && l.GetValue() == service {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no hearth_untrusted_reports_total{service=%q}", service)
	return 0
}

func TestPrincipalCannotSpeakForHearth(t *testing.T) {
	h := newHarness(t, harnessOptions{config: aclConfig, simLogin: bridgeLogin, automationLogin: tabletLogin})
	h.settle("front_door")
	phone := h.v5Client("phone-client", phoneLogin)
	refusedPublish(t, "the phone", phone, "hearth/front_door/result",
		`{"op_id":"x","device":"front_door","status":"succeeded","attempts":1}`, false)
	refusedPublish(t, "the phone", phone, "hearth/bridge/state", "offline", true)
	refusedPublish(t, "the phone", phone, "hearth/front_door", `{"state":"UNLOCK"}`, true)
	// Hearth's retained state is still its own: a new subscriber reads
	// online.
	select {
	case m := <-h.watch("hearth/bridge/state"):
		if string(m.Payload()) != "online" {
			t.Errorf("retained hearth/bridge/state: %q; want online", m.Payload())
		}
	case <-time.After(eventWait):
		t.Fatal("no retained hearth/bridge/state")
	}
}

// Another account cannot take the bridge's client ID (reserved by
// client_id), nor the client ID of any connected client of another
// account: both CONNECTs are refused, and the bridge stays connected and
// carries out the next command.
func TestNobodyThrowsTheBridgeOffTheBroker(t *testing.T) {
	h := newHarness(t, harnessOptions{config: aclConfig, simLogin: bridgeLogin, automationLogin: tabletLogin})
	h.settle("front_door")
	for _, id := range []string{"zigbee2mqtt-bridge", "automation-" + strings.ReplaceAll(t.Name(), "/", "-")} {
		for _, v5 := range []bool{true, false} {
			code := connectCode(t, h, id, phoneLogin, v5)
			want := byte(0x05)
			if v5 {
				want = 0x87
			}
			if code != want {
				t.Errorf("the phone with client ID %s (MQTT 5: %v): CONNACK %#x; want %#x", id, v5, code, want)
			}
		}
	}
	if b := h.d.disp.Breakers()[0]; b.Bridge != "online" {
		t.Errorf("bridge %s after the attempts; want online", b.Bridge)
	}
	h.publish("front_door", `{"state":"UNLOCK","op_id":"after"}`)
	if r := h.final("after"); r.Status != devices.Succeeded {
		t.Errorf("a command after the attempts: %s (%s: %s); want succeeded: the bridge and the automation stay connected", r.Status, r.Reason, r.Detail)
	}
}

// connectCode connects with id and l over MQTT 5 (paho.golang) or 3.1.1
// (paho.mqtt.golang) and returns the CONNACK's code, disconnecting at once
// if it was accepted.
func connectCode(t *testing.T, h *harness, id string, l login, v5 bool) byte {
	t.Helper()
	if !v5 {
		c := paho.NewClient(paho.NewClientOptions().AddBroker(h.d.brokerURL).SetClientID(id).
			SetUsername(l.username).SetPassword(l.password).
			SetProtocolVersion(4).SetAutoReconnect(false).SetConnectRetry(false))
		tok := c.Connect()
		if !tok.WaitTimeout(eventWait) {
			t.Fatal("no CONNACK")
		}
		code := tok.(*paho.ConnectToken).ReturnCode()
		if code == 0 {
			c.Disconnect(0)
		}
		return code
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(h.d.brokerURL, "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := paho5.NewClient(paho5.ClientConfig{Conn: conn})
	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	defer cancel()
	ca, err := c.Connect(ctx, &paho5.Connect{ClientID: id, KeepAlive: 30, CleanStart: true,
		UsernameFlag: true, Username: l.username, PasswordFlag: true, Password: []byte(l.password)})
	if ca == nil {
		t.Fatalf("connect: %v", err)
	}
	if ca.ReasonCode == 0 {
		c.Disconnect(&paho5.Disconnect{})
	}
	<-c.Done()
	return ca.ReasonCode
}

// The config refuses a Zigbee2MQTT address deeper than the command
// filters reach (config's limit is the adapter's), and reserves Z-Wave JS
// UI's own client ID by default.
func TestConfigAgreesWithTheAdapters(t *testing.T) {
	if config.MaxZigbeeNameLevels != zigbee2mqtt.MaxNameLevels {
		t.Errorf("config.MaxZigbeeNameLevels = %d, zigbee2mqtt.MaxNameLevels = %d; want them equal",
			config.MaxZigbeeNameLevels, zigbee2mqtt.MaxNameLevels)
	}
	if got, want := config.ZWaveClientIDPrefix+zwavejs.DefaultGatewayName, zwavejs.GatewayClientID(""); got != want {
		t.Errorf("config's default Z-Wave JS UI client ID %q; want the gateway's own %q", got, want)
	}
}

// The bridge's client_id is its account's even while the bridge is away:
// no other account can take it (and with it the bridge's persistent
// session) before the bridge comes back; the bridge's own account can.
func TestBridgesClientIDIsReservedWhileItIsAway(t *testing.T) {
	h := newHarness(t, harnessOptions{config: aclConfig, simLogin: bridgeLogin, automationLogin: tabletLogin})
	h.settle("front_door")
	h.stopSim() // the simulated bridge says offline and disconnects
	h.stopSim = nil
	h.eventually("the bridge to be offline", func() bool { return h.d.disp.Breakers()[0].Bridge == "offline" })
	for _, v5 := range []bool{true, false} {
		want := byte(0x05)
		if v5 {
			want = 0x87
		}
		if code := connectCode(t, h, "zigbee2mqtt-bridge", phoneLogin, v5); code != want {
			t.Errorf("the phone with the absent bridge's client ID (MQTT 5: %v): CONNACK %#x; want %#x", v5, code, want)
		}
	}
	if code := connectCode(t, h, "zigbee2mqtt-bridge", bridgeLogin, true); code != 0 {
		t.Errorf("the bridge's own account with its client ID: CONNACK %#x; want accepted", code)
	}
}

// A watched service's status counts only from its own account: an
// "offline" on its status topic by another account (Hearth's, which the
// ACL lets publish there) is dropped and counted, and the breaker stays
// closed; the service's own "offline" is heard.
func TestWatchedStatusCountsOnlyFromItsAccount(t *testing.T) {
	cfg := strings.Replace(aclConfig, "devices:\n",
		"  cloud:\n    protocol: status_topic\n    status_topic: cloud/status\n    mqtt_username: cloud\n    mqtt_password: cloud-password\ndevices:\n", 1)
	h := newHarness(t, harnessOptions{config: cfg, simLogin: bridgeLogin, automationLogin: tabletLogin})
	h.settle("front_door")
	cloud := func() dispatcherBreaker {
		for _, b := range h.d.disp.Breakers() {
			if b.Service == "cloud" {
				return dispatcherBreaker{b.State, b.Offline}
			}
		}
		t.Fatal("no breaker of cloud")
		return dispatcherBreaker{}
	}
	refusedPublish(t, "the phone", h.v5Client("phone-client", phoneLogin), "cloud/status", "offline", false)
	other := h.v5Client("not-the-service", login{config.InternalUsername, h.d.internalPassword})
	if _, err := other.c.Publish(ctxFor(t), &paho5.Publish{Topic: "cloud/status", QoS: 1, Payload: []byte("offline")}); err != nil {
		t.Fatal(err)
	}
	h.eventually("the forged status to be dropped", func() bool { return untrustedReports(t, h, "cloud") == 1 })
	if b := cloud(); b.offline {
		t.Errorf("after the forged offline: %+v; want the service online", b)
	}
	own := h.v5Client("cloud-service", login{"cloud", "cloud-password"})
	if _, err := own.c.Publish(ctxFor(t), &paho5.Publish{Topic: "cloud/status", QoS: 1, Payload: []byte("offline")}); err != nil {
		t.Fatal(err)
	}
	h.eventually("the service's own offline to be heard", func() bool { return cloud().offline })
}

type dispatcherBreaker struct {
	state   string
	offline bool
}
