package main

import (
	"testing"

	paho5 "github.com/eclipse/paho.golang/paho"

	"github.com/hearthd/hearth/devices"
)

var tasmotaLogin = login{"tasmotas", "tasmota-password-1234"}

// tasmotaAuthConfig is a Tasmota plug whose service names the account
// every Tasmota of it logs in with, and a principal, the phone, allowed
// everything: authentication is on.
const tasmotaAuthConfig = `
mqtt:
  listen: 127.0.0.1:0
  reconnect: {base: 10ms, cap: 100ms}
http:
  listen: 127.0.0.1:0
defaults:
  ttl: 60s
services:
  wifi:
    protocol: tasmota
    mqtt_username: tasmotas
    mqtt_password: tasmota-password-1234
devices:
  plug:
    service: wifi
    class: switch
principals:
  phone:
    mqtt_username: phone
    mqtt_password: phone-password
    allow: {"*": ["*"]}
`

// With authentication on, only Hearth may publish a Tasmota command: the
// broker refuses a principal's cmnd (it would switch the plug past
// Hearth), the GroupTopic's and the FallbackTopic's, a principal's fake
// stat report, and the Tasmotas' own account's cmnd (a hijacked device
// commanding the others), each with 0x87, and none reaches a device. The
// phone's command through Hearth is the first set the plug receives.
func TestOnlyHearthCommandsTheTasmotas(t *testing.T) {
	h := newHarness(t, harnessOptions{config: tasmotaAuthConfig, simLogin: tasmotaLogin, automationLogin: phoneLogin})
	h.settle("plug")
	phone := h.v5Client("phone-client", phoneLogin)
	device := h.v5Client("tasmota-hijacked", tasmotaLogin)
	for _, tc := range []struct {
		who   string
		c     v5Publisher
		topic string
	}{
		{"the phone", phone, "cmnd/plug/POWER"},
		{"the phone", phone, "cmnd/tasmotas/POWER"},
		{"the phone", phone, "cmnd/DVES_ABCDEF_fb/POWER"},
		{"the phone", phone, "stat/plug/POWER"},
		{"the phone", phone, "tele/plug/LWT"},
		{"the Tasmotas' account", device, "cmnd/plug/POWER"},
		{"the Tasmotas' account", device, "cmnd/tasmotas/POWER"},
	} {
		pr, err := tc.c.c.Publish(ctxFor(t), &paho5.Publish{Topic: tc.topic, QoS: 1, Payload: []byte("TOGGLE")})
		if pr == nil || pr.ReasonCode != 0x87 {
			t.Errorf("%s publishing on %s: %+v, %v; want PUBACK 0x87 (not authorized)", tc.who, tc.topic, pr, err)
		}
	}
	phone.command(t, "plug", `{"state":"ON","op_id":"through-hearth"}`, nil)
	if r := h.final("through-hearth"); r.Status != devices.Succeeded || r.Attempts != 1 {
		t.Fatalf("the command through Hearth: %s (%s: %s) after %d attempts; want succeeded after 1", r.Status, r.Reason, r.Detail, r.Attempts)
	}
	// The plug hears its commands in order: had a refused TOGGLE gone
	// through, it would have come first.
	if e := h.nextSet(); e.Device != "plug" || e.Topic != "cmnd/plug/POWER" || string(e.Payload) != "ON" {
		t.Errorf("the first set to reach a device: %s %s %q; want Hearth's cmnd/plug/POWER ON", e.Device, e.Topic, e.Payload)
	}
	if st := h.sim.State("plug"); st["POWER"] != "ON" {
		t.Errorf("the plug %v; want POWER ON", st)
	}
}
