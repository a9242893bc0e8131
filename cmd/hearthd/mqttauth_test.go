package main

import (
	"context"
	"net"
	"net/url"
	"strings"
	"testing"

	paho5 "github.com/eclipse/paho.golang/paho"
	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
)

// mqttPrincipalsConfig is testConfig with two principals, the tablet and the
// phone, and the Zigbee2MQTT bridge as a broker user.
var mqttPrincipalsConfig = withBridgeAccount(testConfig) + `
principals:
  wall_tablet:
    mqtt_username: tablet
    mqtt_password: tablet-password
    allow: {front_door: [lock, unlock]}
  phone:
    mqtt_username: phone
    mqtt_password: phone-password
    allow: {"*": ["*"]}
`

var (
	bridgeLogin = login{"zigbee2mqtt", "bridge-password"}
	tabletLogin = login{"tablet", "tablet-password"}
	phoneLogin  = login{"phone", "phone-password"}
)

// With principals, the op of a command carries the principal whose MQTT
// client published it, from the embedded broker's stamp: a property the
// publisher forged is replaced by the stamp of its real username, and a
// broker user's command has no principal. An anonymous client is refused,
// and so is another user with hearthd's own client ID.
func TestCommandsCarryThePrincipalThatPublishedThem(t *testing.T) {
	h := newHarness(t, harnessOptions{config: mqttPrincipalsConfig, simLogin: bridgeLogin, automationLogin: tabletLogin})

	h.publish("front_door", `{"state":"LOCK","op_id":"from-tablet"}`)
	h.expectPrincipal("from-tablet", "wall_tablet")

	forged := paho5.UserProperties{{Key: usernameProperty, Value: "tablet"}}
	phone := h.v5Client("phone-client", phoneLogin)
	phone.command(t, "front_door", `{"state":"LOCK","op_id":"from-phone"}`, forged)
	h.expectPrincipal("from-phone", "phone")

	// A bridge's account is no principal: the broker refuses its command,
	// forged property or not, since a bridge may publish only under its
	// base topic.
	bridge := h.v5Client("bridge-client", bridgeLogin)
	pr, err := bridge.c.Publish(ctxFor(t), &paho5.Publish{Topic: "hearth/front_door/set", QoS: 1, Payload: []byte(`{"state":"LOCK","op_id":"from-bridge"}`),
		Properties: &paho5.PublishProperties{User: forged}})
	if pr == nil || pr.ReasonCode != 0x87 {
		t.Errorf("the bridge's command: %+v, %v; want PUBACK 0x87 (not authorized)", pr, err)
	}

	thief := paho.NewClient(paho.NewClientOptions().AddBroker(h.d.brokerURL).SetClientID(defaultClientID(h.cfg.DataDir)).
		SetUsername(bridgeLogin.username).SetPassword(bridgeLogin.password).
		SetProtocolVersion(4).SetAutoReconnect(false).SetConnectRetry(false))
	if tok := thief.Connect(); !tok.WaitTimeout(eventWait) || tok.(*paho.ConnectToken).ReturnCode() != 0x05 {
		t.Errorf("a bridge user with hearthd's client ID: return code %d; want 5 (not authorized): hearthd's client ID is its account's",
			tok.(*paho.ConnectToken).ReturnCode())
	}

	anon := paho.NewClient(paho.NewClientOptions().AddBroker(h.d.brokerURL).SetClientID("anonymous").
		SetProtocolVersion(4).SetAutoReconnect(false).SetConnectRetry(false))
	tok := anon.Connect()
	if !tok.WaitTimeout(eventWait) || tok.(*paho.ConnectToken).ReturnCode() != 0x04 {
		t.Errorf("an anonymous client: return code %d, %v; want 4 (bad user name or password)", tok.(*paho.ConnectToken).ReturnCode(), tok.Error())
	}
}

// Without principals nobody is authenticated: a client's forged property
// is no principal, and Hearth and every client connect as before.
func TestNoPrincipalWithoutPrincipals(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	c := h.v5Client("forger", login{"tablet", "whatever"})
	c.command(t, "front_door", `{"state":"LOCK","op_id":"forged"}`, paho5.UserProperties{{Key: usernameProperty, Value: "tablet"}})
	h.expectPrincipal("forged", "")
}

// A principal may publish only commands to Hearth: not on a bridge's
// topics (it would command the device past Hearth), nor elsewhere under
// the prefix (it would speak for Hearth). Those publishes are refused
// with 0x87 and reach nobody.
func TestPrincipalsCannotPublishPastHearth(t *testing.T) {
	h := newHarness(t, harnessOptions{config: mqttPrincipalsConfig, simLogin: bridgeLogin, automationLogin: tabletLogin})
	phone := h.v5Client("phone-client", phoneLogin)
	for _, topic := range []string{"zigbee2mqtt/Front Door/set", "zigbee2mqtt/bridge/state", "hearth/front_door", "hearth/bridge/state"} {
		pr, err := phone.c.Publish(ctxFor(t), &paho5.Publish{Topic: topic, QoS: 1, Payload: []byte(`{"state":"UNLOCK","direct":true}`)})
		if pr == nil || pr.ReasonCode != 0x87 {
			t.Errorf("the phone publishing on %s: %+v, %v; want PUBACK 0x87 (not authorized)", topic, pr, err)
		}
	}
	// An UNLOCK: the simulated lock starts locked, so it is read and sent.
	phone.command(t, "front_door", `{"state":"UNLOCK","op_id":"through-hearth"}`, nil)
	if r := h.final("through-hearth"); r.Status != devices.Succeeded {
		t.Fatalf("the command through Hearth: %s (%s: %s); want succeeded", r.Status, r.Reason, r.Detail)
	}
	// The phone's messages reach the bridge in order: had the direct set
	// gone through, it would have come first.
	if e := h.nextSet(); e.Device != "Front Door" || string(e.Payload) != `{"state":"UNLOCK"}` {
		t.Errorf("the first set to reach a device: %s %s; want Hearth's UNLOCK of Front Door", e.Device, e.Payload)
	}
}

// A reload applies new principals at once: a
// client whose principal was removed is disconnected and cannot come back,
// a username now names another principal, and Hearth and the bridge stay
// connected.
func TestSetPrincipalsAppliesAReload(t *testing.T) {
	h := newHarness(t, harnessOptions{config: mqttPrincipalsConfig, simLogin: bridgeLogin, automationLogin: phoneLogin})
	lost := make(chan struct{})
	tablet := paho.NewClient(paho.NewClientOptions().AddBroker(h.d.brokerURL).SetClientID("tablet-client").
		SetUsername(tabletLogin.username).SetPassword(tabletLogin.password).SetAutoReconnect(false).
		SetConnectionLostHandler(func(paho.Client, error) { close(lost) }))
	mustToken(t, tablet.Connect())
	defer tablet.Disconnect(0)

	reloaded := strings.Replace(strings.Replace(mqttPrincipalsConfig, "  wall_tablet:\n    mqtt_username: tablet\n    mqtt_password: tablet-password\n    allow: {front_door: [lock, unlock]}\n", "", 1),
		"  phone:\n", "  mobile:\n", 1)
	cfg, err := config.Parse("reloaded.yaml", []byte(reloaded))
	if err != nil {
		t.Fatal(err)
	}
	h.d.reload(cfg)
	waitClosed(t, lost, "the removed principal's client to be disconnected")
	if !h.d.conn.Connected() {
		t.Error("hearthd lost its own connection at the reload")
	}
	h.publish("front_door", `{"state":"LOCK","op_id":"after-reload"}`)
	h.expectPrincipal("after-reload", "mobile")
	if r := h.await(func(r devices.Result) bool { return r.OpID == "after-reload" && r.Status.Terminal() }, "the end of after-reload"); r.Status != devices.Succeeded {
		t.Errorf("a command after the reload: %s (%s: %s); want succeeded: the bridge is still connected", r.Status, r.Reason, r.Detail)
	}

	again := paho.NewClient(paho.NewClientOptions().AddBroker(h.d.brokerURL).SetClientID("tablet-client").
		SetUsername(tabletLogin.username).SetPassword(tabletLogin.password).
		SetProtocolVersion(4).SetAutoReconnect(false).SetConnectRetry(false))
	if tok := again.Connect(); !tok.WaitTimeout(eventWait) || tok.(*paho.ConnectToken).ReturnCode() != 0x04 {
		t.Errorf("the removed principal again: return code %d; want 4 (bad user name or password)", tok.(*paho.ConnectToken).ReturnCode())
	}
}

// expectPrincipal waits for the first result of opID, accepted, and
// checks the principal of its stored op.
func (h *harness) expectPrincipal(opID, want string) {
	h.t.Helper()
	if r := h.result(opID); r.Status != devices.Accepted {
		h.t.Fatalf("%s: %s (%s: %s); want accepted", opID, r.Status, r.Reason, r.Detail)
	}
	op, found, err := h.d.store.Lookup(opID)
	if err != nil || !found {
		h.t.Fatalf("%s: not stored: %v", opID, err)
	}
	if op.Principal != want {
		h.t.Errorf("%s: principal %q; want %q", opID, op.Principal, want)
	}
}

// v5Publisher is an MQTT 5 client (paho.golang), which can set user
// properties.
type v5Publisher struct{ c *paho5.Client }

// v5Client connects an MQTT 5 client to hearthd's embedded broker until
// the test ends.
func (h *harness) v5Client(id string, l login) v5Publisher {
	h.t.Helper()
	u, err := url.Parse(h.d.brokerURL)
	if err != nil {
		h.t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		h.t.Fatal(err)
	}
	c := paho5.NewClient(paho5.ClientConfig{Conn: conn})
	h.t.Cleanup(func() {
		c.Disconnect(&paho5.Disconnect{})
		conn.Close()
		<-c.Done()
	})
	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	defer cancel()
	if _, err := c.Connect(ctx, &paho5.Connect{ClientID: id, KeepAlive: 30, CleanStart: true,
		UsernameFlag: true, Username: l.username, PasswordFlag: true, Password: []byte(l.password)}); err != nil {
		h.t.Fatalf("%s: connect: %v", id, err)
	}
	return v5Publisher{c}
}

// command publishes a command at QoS 1 with user properties props.
func (p v5Publisher) command(t *testing.T, device, payload string, props paho5.UserProperties) {
	t.Helper()
	if _, err := p.c.Publish(ctxFor(t), &paho5.Publish{Topic: "hearth/" + device + "/set", QoS: 1, Payload: []byte(payload),
		Properties: &paho5.PublishProperties{User: props}}); err != nil {
		t.Fatal(err)
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	t.Cleanup(cancel)
	return ctx
}
