package main

import (
	"strings"
	"testing"

	paho5 "github.com/eclipse/paho.golang/paho"

	"github.com/hearthd/hearth/acl"
	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
)

// An esphome service's account (its nodes') may publish their states and
// status under the base topic, never a command topic of an entity, which
// only Hearth may publish; a principal may publish neither.
func TestESPHomeAccountsTopics(t *testing.T) {
	cfg, err := config.Parse("hearth.yaml", []byte("services:\n  nodes:\n    protocol: esphome\n    mqtt_password: nodes-password-1234\ndevices:\n  front:\n    class: lock\n    address: frontdoor/lock/front_door\nprincipals:\n  ha:\n    mqtt_username: ha\n    mqtt_password: ha-password-12345\n    allow: {'*': ['*']}\n"))
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
		{"nodes", "esphome/frontdoor/status", true},
		{"nodes", "esphome/frontdoor/lock/front_door/state", true},
		{"nodes", "esphome/garage/cover/door/position/state", true},
		{"nodes", "esphome/frontdoor/lock/front_door/command", false},
		{"nodes", "esphome/garage/cover/door/position/command", false},
		{"nodes", "esphome/garage/cover/door/tilt/command", false},
		{"nodes", "esphome/attic/fan/vent/oscillation/command", false},
		{"nodes", "esphome/attic/climate/hvac/target_temperature/command", false},
		{"nodes", "esphome/attic/sensor/temperature/state", true},
		{"nodes", "hearth/front/set", false},
		{"ha", "esphome/frontdoor/lock/front_door/command", false},
		{"ha", "esphome/garage/cover/door/position/command", false},
		{"ha", "esphome/frontdoor/lock/front_door/state", false},
		{"ha", "esphome/frontdoor/status", false},
		{"hearth", "esphome/frontdoor/lock/front_door/command", true},
		{"hearth", "esphome/garage/cover/door/position/command", true},
	} {
		if got := table.MayPublish(tc.user, tc.topic); got != tc.want {
			t.Errorf("MayPublish(%s, %s) = %v, want %v", tc.user, tc.topic, got, tc.want)
		}
	}
}

// esphomeAuthConfig is esphomeConfig with the nodes' account's password
// and two principals: the broker authenticates every client.
var esphomeAuthConfig = strings.Replace(esphomeConfig, "    protocol: esphome\n", "    protocol: esphome\n    mqtt_password: "+nodesLogin.password+"\n", 1) + `
principals:
  wall_tablet:
    mqtt_username: tablet
    mqtt_password: tablet-password
    allow: {front: [lock, unlock]}
  phone:
    mqtt_username: phone
    mqtt_password: phone-password
    allow: {"*": ["*"]}
`

var nodesLogin = login{"nodes", "nodes-password-1234"}

// With auth on, a principal and the nodes' own account are refused on the
// entities' command topics (PUBACK 0x87); only Hearth's UNLOCK reaches
// the lock, the first command it sees.
func TestESPHomeOnlyHearthPublishesTheCommandTopics(t *testing.T) {
	h := newHarness(t, harnessOptions{config: esphomeAuthConfig, simLogin: nodesLogin, automationLogin: tabletLogin})
	h.awaitMirror(t, "front", func(s map[string]any) bool { return s["lock_state"] == "locked" })
	phone := h.v5Client("phone-client", phoneLogin)
	node := h.v5Client("stolen-node-password", nodesLogin)
	for _, topic := range []string{"esphome/frontdoor/lock/front_door/command", "esphome/garage/cover/door/command", "esphome/garage/cover/door/position/command"} {
		refusedPublish(t, "the phone", phone, topic, "UNLOCK", false)
		refusedPublish(t, "the nodes' account", node, topic, "UNLOCK", false)
	}
	phone.command(t, "front", `{"state":"UNLOCK","op_id":"through-hearth"}`, nil)
	if r := h.final("through-hearth"); r.Status != devices.Succeeded {
		t.Fatalf("UNLOCK through Hearth: %s (%s: %s); want succeeded", r.Status, r.Reason, r.Detail)
	}
	if e := h.nextSet(); e.Device != frontLock || string(e.Payload) != "UNLOCK" {
		t.Fatalf("the first command to reach a node: %s %s; want Hearth's UNLOCK of %s", e.Device, e.Payload, frontLock)
	}
}

// A state forged on the lock's state topic by an account that is not the
// nodes' (Hearth's own, which the ACL lets publish anywhere) is dropped:
// the read before the UNLOCK still finds the lock LOCKED, so the UNLOCK is
// sent, once, and confirmed by the lock itself. Taken, the forged
// UNLOCKED would have ended it succeeded with nothing sent.
func TestESPHomeForgedStateConfirmsNothing(t *testing.T) {
	h := newHarness(t, harnessOptions{config: esphomeAuthConfig, simLogin: nodesLogin, automationLogin: tabletLogin})
	h.awaitMirror(t, "front", func(s map[string]any) bool { return s["lock_state"] == "locked" })
	other := h.v5Client("not-the-nodes", login{config.InternalUsername, h.d.internalPassword})
	if _, err := other.c.Publish(ctxFor(t), &paho5.Publish{Topic: "esphome/frontdoor/lock/front_door/state", QoS: 1, Payload: []byte("UNLOCKED")}); err != nil {
		t.Fatal(err)
	}
	h.eventually("the adapter to drop the state of an account that is not the nodes'", func() bool {
		return untrustedReports(t, h, "nodes") == 1
	})
	h.v5Client("phone-client", phoneLogin).command(t, "front", `{"state":"UNLOCK","op_id":"after-forgery"}`, nil)
	r := h.final("after-forgery")
	if r.Status != devices.Succeeded || r.Attempts != 1 {
		t.Fatalf("UNLOCK after the forged state: %s/%s after %d attempts (%s); want succeeded after 1", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	if e := h.nextSet(); e.Device != frontLock || string(e.Payload) != "UNLOCK" {
		t.Fatalf("command to reach a node: %s %s; want the UNLOCK of %s", e.Device, e.Payload, frontLock)
	}
}
