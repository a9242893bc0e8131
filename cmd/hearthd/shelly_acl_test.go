package main

import (
	"testing"

	"github.com/hearthd/hearth/acl"
	"github.com/hearthd/hearth/config"
)

// A shelly service's account (its devices') may publish their reports,
// availability and responses under the base topic, never a request to a
// Shelly, which only Hearth may send; nobody else may publish under it.
func TestShellyAccountsTopics(t *testing.T) {
	cfg, err := config.Parse("hearth.yaml", []byte("services:\n  wifi:\n    protocol: shelly\n    mqtt_password: wifi-password-1234\ndevices:\n  plug:\n    class: switch\n    address: shellyplus1-a\nprincipals:\n  ha:\n    mqtt_username: ha\n    mqtt_password: ha-password-12345\n    allow: {'*': ['*']}\n"))
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
		{"wifi", "shelly/shellyplus1-a/online", true},
		{"wifi", "shelly/shellyplus1-a/events/rpc", true},
		{"wifi", "shelly/shellyplus1-a/status/switch:0", true},
		{"wifi", "shelly/hearth/wifi/rpc", true},
		{"wifi", "shelly/shellyplus1-a/rpc", false},
		{"wifi", "shelly/shellyplus1-a/command/switch:0", false},
		{"wifi", "hearth/plug/set", false},
		{"ha", "shelly/shellyplus1-a/rpc", false},
		{"ha", "shelly/hearth/wifi/rpc", false},
		{"ha", "shelly/shellyplus1-a/events/rpc", false},
		{"hearth", "shelly/shellyplus1-a/rpc", true},
	} {
		if got := table.MayPublish(tc.user, tc.topic); got != tc.want {
			t.Errorf("MayPublish(%s, %s) = %v, want %v", tc.user, tc.topic, got, tc.want)
		}
	}
}
