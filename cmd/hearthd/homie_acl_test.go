package main

import (
	"testing"

	"github.com/hearthd/hearth/acl"
	"github.com/hearthd/hearth/config"
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
