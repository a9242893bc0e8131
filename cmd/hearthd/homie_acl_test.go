package main

import (
	"strings"
	"testing"

	"github.com/hearthd/hearth/acl"
	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
)

// A homie service's account (its devices') may publish their $state,
// attributes and property values under the root, never a property's set
// topic nor a broadcast, which only Hearth may publish; nobody else may
// publish under the root.
func TestHomieAccountsTopics(t *testing.T) {
	cfg, err := config.Parse("hearth.yaml", []byte("services:\n  wifi:\n    protocol: homie\n    mqtt_password: wifi-password-1234\ndevices:\n  plug:\n    class: switch\n    address: plug-1/relay/on\nprincipals:\n  ha:\n    mqtt_username: ha\n    mqtt_password: ha-password-12345\n    allow: {'*': ['*']}\n"))
	if err != nil {
		t.Fatal(err)
	}
	table, err := acl.New(aclSpec(cfg, "hearth", ""))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		user, topic string
		want        bool
	}{
		{"wifi", "homie/plug-1/$state", true},
		{"wifi", "homie/plug-1/relay/on", true},
		{"wifi", "homie/plug-1/relay/on/$settable", true},
		{"wifi", "homie/plug-1/relay/on/set", false},
		{"wifi", "homie/other/node/prop/set", false},
		{"wifi", "homie/$broadcast/alert", false},
		{"wifi", "hearth/plug/set", false},
		{"ha", "homie/plug-1/relay/on/set", false},
		{"ha", "homie/plug-1/relay/on", false},
		{"ha", "homie/plug-1/$state", false},
		{"hearth", "homie/plug-1/relay/on/set", true},
	} {
		if got := table.MayPublish(tc.user, tc.topic); got != tc.want {
			t.Errorf("MayPublish(%s, %s) = %v, want %v", tc.user, tc.topic, got, tc.want)
		}
	}
}

// homieAuthConfig is homieConfig with authentication on: the Homie
// devices' account and a principal allowed everything.
var homieAuthConfig = strings.Replace(homieConfig, "    protocol: homie\n", "    protocol: homie\n    mqtt_password: "+homieLogin.password+"\n", 1) + `
principals:
  phone:
    mqtt_username: phone
    mqtt_password: phone-password
    allow: {"*": ["*"]}
`

var homieLogin = login{"home", "homie-devices-password"}

// With authentication on, neither a principal nor the Homie devices' own
// account may publish a set (or a broadcast): the broker answers 0x87,
// and the first set the plug hears is Hearth's, which succeeds.
func TestHomieOnlyHearthPublishesSets(t *testing.T) {
	h := newHarness(t, harnessOptions{config: homieAuthConfig, simLogin: homieLogin, automationLogin: phoneLogin})
	h.awaitAvailability(t, "plug", "online")
	phone := h.v5Client("phone-client", phoneLogin)
	device := h.v5Client("stolen-homie-password", homieLogin)
	for _, topic := range []string{"homie/plug-1/relay/on/set", "homie/$broadcast/alert"} {
		refusedPublish(t, "the phone", phone, topic, "true", false)
		refusedPublish(t, "the Homie devices' account", device, topic, "true", false)
	}
	phone.command(t, "plug", `{"state":"ON","op_id":"hacl"}`, nil)
	if r := h.final("hacl"); r.Status != devices.Succeeded || r.Attempts != 1 {
		t.Fatalf("hacl: %s/%s after %d attempts (%s); want succeeded after 1", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	if e := h.nextSet(); e.Device != homiePlug || string(e.Payload) != "true" {
		t.Fatalf("the first set to reach a device: %s %s; want Hearth's true to the plug", e.Device, e.Payload)
	}
	if n := h.sim.Sets(homiePlug); n != 1 {
		t.Errorf("the plug heard %d sets; want Hearth's one", n)
	}
}
