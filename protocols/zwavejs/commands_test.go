package zwavejs

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hearthd/hearth/topic"
)

func coveredBy(filters []string, name string) bool {
	for _, f := range filters {
		if topic.Match(f, name) {
			return true
		}
	}
	return false
}

// Every write the gateway takes (a value's /set at every address depth,
// the API, broadcast and multicast) is covered; what the gateway itself
// publishes is not.
func TestCommandFiltersCoverEveryWrite(t *testing.T) {
	filters := CommandFilters("zw", "hub")
	writes := []string{
		"zw/5/98/0/targetMode/set",
		"zw/hall/5/98/0/targetMode/set",
		"zw/hall/back_door/67/0/setpoint/1/set",
		"zw/front_door/door_lock/endpoint_0/targetMode/set",
		"zw/_CLIENTS/ZWAVE_GATEWAY-hub/api/pollValue/set",
		"zw/_CLIENTS/ZWAVE_GATEWAY-hub/api/writeValue/set",
		"zw/_CLIENTS/ZWAVE_GATEWAY-hub/broadcast/37/0/targetValue/set",
		"zw/_CLIENTS/ZWAVE_GATEWAY-hub/broadcast/67/0/setpoint/1/set",
		"zw/_CLIENTS/ZWAVE_GATEWAY-hub/multicast/set",
		"zw/a/b/c/d/e/f/g/h/set",
	}
	for _, topic := range writes {
		if !coveredBy(filters, topic) {
			t.Errorf("%s is a write; no filter covers it", topic)
		}
	}
	reports := []string{
		"zw/5/98/0/currentMode",
		"zw/hall/5/98/0/targetMode",
		"zw/5/status",
		"zw/hall/5/lastActive",
		"zw/_CLIENTS/ZWAVE_GATEWAY-hub/status",
		"zw/_CLIENTS/ZWAVE_GATEWAY-hub/version",
		"zw/_CLIENTS/ZWAVE_GATEWAY-hub/api/pollValue",
		"zw/_CLIENTS/ZWAVE_GATEWAY-hub/broadcast/37/0/targetValue",
		"zw/_CLIENTS/ZWAVE_GATEWAY-hub/multicast",
	}
	for _, topic := range reports {
		if coveredBy(filters, topic) {
			t.Errorf("%s is the gateway's own; a command filter covers it", topic)
		}
	}
}

// Against the gateway's own rule (the last level is "set"): a topic the
// filters cover is a write, and a write up to MaxWriteLevels levels deep
// is covered.
func FuzzCommandFiltersAgreeWithTheGateway(f *testing.F) {
	f.Add("5/98/0/targetMode/set")
	f.Add("_CLIENTS/ZWAVE_GATEWAY-hub/api/x/set")
	f.Add("a/set/b")
	filters := CommandFilters("zw", "hub")
	f.Fuzz(func(t *testing.T, rest string) {
		if rest == "" || strings.ContainsAny(rest, "+#\x00") || !utf8.ValidString(rest) || len(rest) > topic.MaxLen-len("zw/") {
			return
		}
		topic := "zw/" + rest
		levels := strings.Split(rest, "/")
		write := len(levels) > 1 && levels[len(levels)-1] == "set"
		covered := coveredBy(filters, topic)
		if covered && !write {
			t.Fatalf("%q is covered but is no write", topic)
		}
		if write && len(levels)-1 <= MaxWriteLevels && !covered {
			t.Fatalf("%q is a write within the enumerated depth but not covered", topic)
		}
	})
}

func TestGatewayClientIDIsZWaveJSUIsOwn(t *testing.T) {
	if got := GatewayClientID(""); got != "ZWAVE_GATEWAY-zwave-js-ui" {
		t.Errorf("GatewayClientID(\"\") = %q", got)
	}
	if got := GatewayClientID("hub"); got != "ZWAVE_GATEWAY-hub" {
		t.Errorf("GatewayClientID(\"hub\") = %q", got)
	}
}
