package acl

import (
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/hearthd/hearth/topic"
)

// spec is a hub's table: Hearth, a Zigbee2MQTT bridge, a Z-Wave JS UI
// gateway, a watched service, two principals (one with an extra filter)
// and a read-only user.
func spec() Spec {
	return Spec{
		Prefix:          "hearth",
		DiscoveryPrefix: "homeassistant",
		Hearth:          Account{Username: "hearthd", ClientIDs: []string{"hearth-hub"}},
		Bridges: []Bridge{
			{Name: "zigbee", Account: Account{Username: "zigbee"}, BaseTopic: "zigbee2mqtt",
				Commands: []string{"zigbee2mqtt/+/set/#", "zigbee2mqtt/+/get/#", "zigbee2mqtt/+/+/set/#", "zigbee2mqtt/+/+/get/#", "zigbee2mqtt/bridge/request/#"}},
			{Name: "zwave", Account: Account{Username: "zwave", ClientIDs: []string{"ZWAVE_GATEWAY-zwave-js-ui"}}, BaseTopic: "zwave",
				Commands: []string{"zwave/+/+/+/+/set", "zwave/+/+/+/+/+/set", "zwave/_CLIENTS/ZWAVE_GATEWAY-zwave-js-ui/api/+/set"}},
		},
		StatusServices: []StatusService{{Name: "cloud", Account: Account{Username: "cloud"}, StatusTopic: "cloud/status"}},
		Principals: []Principal{
			{Name: "tablet", Account: Account{Username: "tablet"}},
			{Name: "ha", Account: Account{Username: "ha"}, Publish: []string{"notify/#", "zigbee2mqtt/#", "hearth/#", "homeassistant/#"}},
		},
		Users: []User{{Account: Account{Username: "reader"}}, {Account: Account{Username: "logger"}, Publish: []string{"logs/#"}}},
	}
}

func mustTable(t testing.TB, s Spec) *Table {
	t.Helper()
	tab, err := New(s)
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

// Each account may publish exactly what the package documentation says,
// and a topic no rule matches is denied.
func TestMayPublishFollowsEachAccountsRules(t *testing.T) {
	tab := mustTable(t, spec())
	tests := []struct {
		user, topic string
		want        bool
	}{
		{"hearthd", "zigbee2mqtt/Front Door/set", true},
		{"hearthd", "hearth/front_door/result", true},
		{"hearthd", "anything/at/all", true},

		{"zigbee", "zigbee2mqtt/Front Door", true},
		{"zigbee", "zigbee2mqtt/Front Door/availability", true},
		{"zigbee", "zigbee2mqtt/bridge/state", true},
		{"zigbee", "zigbee2mqtt/bridge/response/device/options", true},
		{"zigbee", "zigbee2mqtt/Front Door/set", false},
		{"zigbee", "zigbee2mqtt/Front Door/set/state", false},
		{"zigbee", "zigbee2mqtt/Front Door/get", false},
		{"zigbee", "zigbee2mqtt/hall/door/set", false},
		{"zigbee", "zigbee2mqtt/bridge/request/permit_join", false},
		{"zigbee", "hearth/front_door", false},
		{"zigbee", "hearth/front_door/set", false},
		{"zigbee", "zwave/5/98/0/currentMode", false},
		{"zigbee", "homeassistant/lock/x/config", false},

		{"zwave", "zwave/hall/5/98/0/currentMode", true},
		{"zwave", "zwave/5/98/0/targetMode/set", false},
		{"zwave", "zwave/hall/5/98/0/targetMode/set", false},
		{"zwave", "zwave/_CLIENTS/ZWAVE_GATEWAY-zwave-js-ui/api/pollValue/set", false},
		{"zwave", "zwave/_CLIENTS/ZWAVE_GATEWAY-zwave-js-ui/api/pollValue", true},
		{"zwave", "zigbee2mqtt/Front Door", false},

		{"cloud", "cloud/status", true},
		{"cloud", "cloud/status/x", false},
		{"cloud", "hearth/x/set", false},

		{"tablet", "hearth/front_door/set", true},
		{"tablet", "homeassistant/status", true},
		{"tablet", "hearth/front_door/result", false},
		{"tablet", "hearth/bridge/state", false},
		{"tablet", "hearth/front_door", false},
		{"tablet", "zigbee2mqtt/Front Door/set", false},
		{"tablet", "zigbee2mqtt/Front Door", false},
		{"tablet", "cloud/status", false},
		{"tablet", "notify/me", false},
		{"ha", "notify/me", true},
		// An extra filter that overlaps a protected root opens nothing.
		{"ha", "zigbee2mqtt/Front Door/set", false},
		{"ha", "hearth/bridge/state", false},
		{"ha", "hearth/front_door/set", true},
		// A discovery config would make Home Assistant command through
		// its own principal; only the birth is let through.
		{"ha", "homeassistant/switch/hall/lamp/config", false},
		{"ha", "homeassistant/status", true},
		{"tablet", "homeassistant/binary_sensor/hearth/service_zigbee/config", false},

		{"reader", "hearth/front_door/set", false},
		{"reader", "anything", false},
		{"logger", "logs/today", true},
		{"logger", "zigbee2mqtt/Front Door", false},

		{"stranger", "anything", false},
		{"", "hearth/front_door/set", false},
	}
	for _, tt := range tests {
		if got := tab.MayPublish(tt.user, tt.topic); got != tt.want {
			t.Errorf("MayPublish(%q, %q) = %v; want %v", tt.user, tt.topic, got, tt.want)
		}
	}
}

// The first matching rule decides: a deny before an allow of the same
// topic denies, an allow before a deny allows.
func TestFirstMatchingRuleDecides(t *testing.T) {
	tab := mustTable(t, Spec{Prefix: "hearth", Hearth: Account{Username: "h"},
		Bridges: []Bridge{{Name: "b", Account: Account{Username: "b"}, BaseTopic: "base", Commands: []string{"base/x"}}}})
	if tab.MayPublish("b", "base/x") {
		t.Error("a command filter listed before <base>/# was allowed")
	}
	if !tab.MayPublish("b", "base/y") {
		t.Error("<base>/# did not allow base/y")
	}
	got := tab.Entries()[1].Rules
	want := []Rule{{"base/x", false}, {"base/#", true}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("bridge rules %v; want %v", got, want)
	}
}

func TestClientIDsAreReservedToTheirAccount(t *testing.T) {
	tab := mustTable(t, spec())
	for id, want := range map[string]string{"hearth-hub": "hearthd", "ZWAVE_GATEWAY-zwave-js-ui": "zwave"} {
		if got, ok := tab.ClientIDOwner(id); !ok || got != want {
			t.Errorf("ClientIDOwner(%q) = %q, %v; want %q", id, got, ok, want)
		}
	}
	if got, ok := tab.ClientIDOwner("mqttjs_1234"); ok {
		t.Errorf("an unreserved client ID has owner %q", got)
	}
	if m := tab.ClientIDOwners(); len(m) != 2 || m["hearth-hub"] != "hearthd" {
		t.Errorf("ClientIDOwners = %v", m)
	}
}

func TestNewRefusesAmbiguousAccounts(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Spec)
		want string
	}{
		{"shared username", func(s *Spec) { s.Principals[0].Username = "zigbee" }, `username "zigbee" is already the account of bridge zigbee`},
		{"empty username", func(s *Spec) { s.Users[0].Username = "" }, "has no username"},
		{"client ID twice", func(s *Spec) { s.Bridges[0].ClientIDs = []string{"hearth-hub"} }, `client ID "hearth-hub" is already reserved to "hearthd"`},
		{"no base topic", func(s *Spec) { s.Bridges[0].BaseTopic = "" }, "bridge zigbee has no base topic"},
		{"bad filter", func(s *Spec) { s.Users[1].Publish = []string{"logs/#/x"} }, `topic filter "logs/#/x": '#' must be the whole last topic level`},
		{"partial wildcard", func(s *Spec) { s.Principals[1].Publish = []string{"a+/b"} }, `topic filter "a+/b": '+' must stand for a whole topic level`},
		{"no prefix", func(s *Spec) { s.Prefix = "" }, "no topic prefix"},
	}
	for _, tt := range tests {
		s := spec()
		tt.edit(&s)
		if _, err := New(s); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: %v; want an error with %q", tt.name, err, tt.want)
		}
	}
}

// topicGen draws topics from levels that the table's filters name, so
// that most draws land on or near a rule.
var topicGen = rapid.Custom(func(t *rapid.T) string {
	root := rapid.SampledFrom([]string{"hearth", "zigbee2mqtt", "zwave", "cloud", "homeassistant", "notify", "other"}).Draw(t, "root")
	levels := rapid.SliceOfN(rapid.SampledFrom([]string{"set", "get", "bridge", "request", "state", "status", "Front Door", "5", "98", "0", "_CLIENTS", "ZWAVE_GATEWAY-zwave-js-ui", "api", "x", ""}), 0, 7).Draw(t, "levels")
	return strings.Join(append([]string{root}, levels...), "/")
})

// Whatever the topic: only Hearth publishes on a bridge's command topics
// and under the prefix (but the intake's <prefix>/+/set); only the bridge
// and Hearth under the bridge's base topic; nobody who is unknown.
func TestPropertyOnlyHearthReachesADevice(t *testing.T) {
	s := spec()
	tab := mustTable(t, s)
	var users []string
	for _, e := range tab.Entries() {
		users = append(users, e.Username)
	}
	rapid.Check(t, func(rt *rapid.T) {
		name := topicGen.Draw(rt, "topic")
		for _, b := range s.Bridges {
			command := false
			for _, f := range b.Commands {
				command = command || topic.Match(f, name)
			}
			under := topic.Match(b.BaseTopic+"/#", name)
			for _, u := range users {
				may := tab.MayPublish(u, name)
				switch {
				case u == "hearthd":
					if !may {
						rt.Fatalf("Hearth may not publish %q", name)
					}
				case command && may:
					rt.Fatalf("%s may publish the command topic %q of %s", u, name, b.Name)
				case under && may && u != b.Username:
					rt.Fatalf("%s may publish %q under the base topic of %s", u, name, b.Name)
				}
			}
		}
		if topic.Match("hearth/#", name) && !topic.Match("hearth/+/set", name) {
			for _, u := range users {
				if u != "hearthd" && tab.MayPublish(u, name) {
					rt.Fatalf("%s may publish %q under Hearth's prefix", u, name)
				}
			}
		}
		if tab.MayPublish("intruder", name) {
			rt.Fatalf("an unknown username may publish %q", name)
		}
	})
}
