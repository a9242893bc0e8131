package acl

import "testing"

// A bridge with Topics (Tasmota's devices: reports under stat and tele,
// commands under cmnd) may publish its reports and never a command; nobody
// else but Hearth may publish either.
func TestBridgeTopicsOutsideABaseTopic(t *testing.T) {
	tab := mustTable(t, Spec{
		Prefix: "hearth",
		Hearth: Account{Username: "hearthd"},
		Bridges: []Bridge{{Name: "wifi", Account: Account{Username: "wifi"},
			Commands: []string{"cmnd/+/#"}, Topics: []string{"stat/+/#", "tele/+/#"}}},
		Principals: []Principal{{Name: "ha", Account: Account{Username: "ha"}, Publish: []string{"#"}}},
		Users:      []User{{Account: Account{Username: "nodered"}, Publish: []string{"#"}}},
	})
	for _, tc := range []struct {
		user, topic string
		want        bool
	}{
		{"wifi", "stat/kitchen/POWER", true},
		{"wifi", "tele/kitchen/LWT", true},
		{"wifi", "cmnd/kitchen/POWER", false},
		{"wifi", "cmnd/tasmotas/POWER", false},
		{"wifi", "hearth/kitchen/set", false},
		{"hearthd", "cmnd/kitchen/POWER", true},
		{"ha", "cmnd/kitchen/POWER", false},
		{"ha", "stat/kitchen/POWER", false},
		{"ha", "other/topic", true},
		{"nodered", "tele/kitchen/LWT", false},
		{"nodered", "cmnd/tasmotas/Upgrade", false},
	} {
		if got := tab.MayPublish(tc.user, tc.topic); got != tc.want {
			t.Errorf("MayPublish(%s, %s) = %v; want %v", tc.user, tc.topic, got, tc.want)
		}
	}
}
