package main

import (
	"testing"

	"github.com/hearthd/hearth/acl"
	"github.com/hearthd/hearth/config"
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
