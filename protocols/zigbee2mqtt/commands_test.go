package zigbee2mqtt

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hearthd/hearth/topic"
)

// isCommand is Zigbee2MQTT's own test of a command topic for base_topic
// "z2m": its bridge API, or a device command, which its
// lib/extension/publish.ts matches with ^z2m/(?!bridge)(.+?)/(get|set)(?:/(.+))?$
// (a negative lookahead, which Go's regexp lacks).
func isCommand(topic string) bool {
	if strings.HasPrefix(topic, "z2m/bridge/request/") {
		return true
	}
	// The 1.x legacy API (advanced.legacy_api).
	for _, legacy := range []string{"z2m/bridge/group/", "z2m/bridge/ota_update/"} {
		if strings.HasPrefix(topic, legacy) {
			return true
		}
	}
	if rest, ok := strings.CutPrefix(topic, "z2m/bridge/config/"); ok && !strings.Contains(rest, "/") {
		return true
	}
	switch topic {
	case "z2m/bridge/configure", "z2m/bridge/networkmap", "z2m/bridge/networkmap/routes":
		return true
	}
	rest, ok := strings.CutPrefix(topic, "z2m/")
	if !ok || strings.HasPrefix(rest, "bridge") {
		return false
	}
	levels := strings.Split(rest, "/")
	for i := 1; i < len(levels); i++ {
		if levels[i] == "set" || levels[i] == "get" {
			return true
		}
	}
	return false
}

// Every command topic of a name of up to MaxNameLevels levels, with or
// without an endpoint and an attribute, is covered; the device's state,
// availability and the bridge's state and responses are not.
func TestCommandFiltersCoverEveryCommandTopic(t *testing.T) {
	filters := CommandFilters("z2m")
	covered := func(name string) bool {
		for _, f := range filters {
			if topic.Match(f, name) {
				return true
			}
		}
		return false
	}
	names := []string{"Front Door", "hall/lamp", "a/b/c", "first_floor/hall/ceiling/lamp", "a/b/c/d/e/f/g/h/i/j/k/l/m/n"}
	for _, name := range names {
		for _, suffix := range []string{"/set", "/set/state", "/set/color/x", "/get", "/get/state", "/left/set", "/left/set/state", "/l2/get"} {
			topic := "z2m/" + name + suffix
			if !covered(topic) {
				t.Errorf("%s is a command topic; no filter covers it", topic)
			}
		}
		for _, suffix := range []string{"", "/availability"} {
			if topic := "z2m/" + name + suffix; covered(topic) {
				t.Errorf("%s is a report; a command filter covers it", topic)
			}
		}
	}
	for _, topic := range []string{"z2m/bridge/state", "z2m/bridge/devices", "z2m/bridge/response/device/options", "z2m/bridge/info", "z2m/bridge/logging",
		"z2m/bridge/config", "z2m/bridge/log", "z2m/bridge/networkmap/raw", "z2m/bridge/networkmap/graphviz"} {
		if covered(topic) {
			t.Errorf("%s is the bridge's own; a command filter covers it", topic)
		}
	}
	for _, topic := range []string{"z2m/bridge/request/permit_join", "z2m/bridge/request/device/remove",
		"z2m/bridge/config/permit_join", "z2m/bridge/config/remove", "z2m/bridge/config/rename",
		"z2m/bridge/group/kitchen/add", "z2m/bridge/configure", "z2m/bridge/ota_update/update",
		"z2m/bridge/networkmap", "z2m/bridge/networkmap/routes"} {
		if !covered(topic) {
			t.Errorf("%s is the bridge API (or its 1.x legacy API); no filter covers it", topic)
		}
	}
}

// Against Zigbee2MQTT's own rule: every topic below the base that the
// filters cover is one Zigbee2MQTT reads as a command, and every command
// whose set or get level is fewer than MaxCommandLevels levels deep is
// covered.
func FuzzCommandFiltersAgreeWithZigbee2MQTT(f *testing.F) {
	f.Add("Front Door/set")
	f.Add("bridge/request/permit_join")
	f.Add("a/b/c/d/e/get/x")
	f.Add("bridgeish/set")
	filters := CommandFilters("z2m")
	f.Fuzz(func(t *testing.T, rest string) {
		name := "z2m/" + rest
		if strings.ContainsAny(name, "+#\x00") || !utf8.ValidString(name) || len(name) > topic.MaxLen {
			return
		}
		covered := false
		for _, fl := range filters {
			covered = covered || topic.Match(fl, name)
		}
		cmd := isCommand(name)
		// Names that start with "bridge" are covered too (bridgeish/set):
		// Zigbee2MQTT ignores those, and the bridge never publishes them.
		if covered && !cmd && !strings.HasPrefix(rest, "bridge") {
			t.Fatalf("%q is covered but is no command", name)
		}
		levels := strings.Split(rest, "/")
		shallow := false
		for i := 1; i < len(levels) && i < MaxCommandLevels; i++ {
			shallow = shallow || levels[i] == "set" || levels[i] == "get"
		}
		if cmd && (shallow || strings.HasPrefix(rest, "bridge")) && !covered {
			t.Fatalf("%q is a command within the enumerated depth but not covered", name)
		}
	})
}
