package zwavejs

import "strings"

// MaxWriteLevels is the most topic levels below the prefix, before the
// final "set", of the value writes CommandFilters covers: 8, which holds
// every ValueID or named value topic ([<location>/]<node>/<cc>/<endpoint>/
// <property>[/<propertyKey>]: 4 to 6 levels, config allows an address of
// at most 2) and every gateway topic (_CLIENTS/ZWAVE_GATEWAY-<name>/
// broadcast/<cc>/<endpoint>/<property>[/<propertyKey>]: up to 7), with room
// for a location of two levels.
const MaxWriteLevels = 8

// CommandFilters returns the MQTT topic filters of every topic on which
// Z-Wave JS UI's gateway under base (its MQTT prefix) named gateway (its
// MQTT name) takes a command, which only Hearth may publish on. The gateway
// takes as a write every topic under its prefix whose last level is "set"
// (api/lib/MqttClient.ts: it subscribes <prefix>/+/…/+/set per value
// depth and reads parts.pop() === 'set'), so the filters are
//
//	<base>/+/set … <base>/+/+/+/+/+/+/+/+/set   (1 to MaxWriteLevels levels)
//
// and, named for what they are, the gateway's API calls (pollValue,
// writeValue, …), broadcast and multicast writes:
//
//	<base>/_CLIENTS/ZWAVE_GATEWAY-<gateway>/api/+/set
//	<base>/_CLIENTS/ZWAVE_GATEWAY-<gateway>/broadcast/+/+/+[/+]/set
//	<base>/_CLIENTS/ZWAVE_GATEWAY-<gateway>/multicast/set
//
// The gateway's own publishes (values, node status, API answers on
// api/<name>, the echo of a broadcast without /set) end otherwise.
// "" means DefaultBaseTopic and DefaultGatewayName.
func CommandFilters(base, gateway string) []string {
	if base == "" {
		base = DefaultBaseTopic
	}
	if gateway == "" {
		gateway = DefaultGatewayName
	}
	var out []string
	for n := 1; n <= MaxWriteLevels; n++ {
		out = append(out, base+strings.Repeat("/+", n)+"/set")
	}
	client := base + "/_CLIENTS/ZWAVE_GATEWAY-" + gateway
	for n := 3; n <= 4; n++ {
		out = append(out, client+"/broadcast"+strings.Repeat("/+", n)+"/set")
	}
	return append(out, client+"/api/+/set", client+"/multicast/set")
}

// GatewayClientID is the MQTT client ID Z-Wave JS UI's gateway connects
// with: ZWAVE_GATEWAY-<gateway> (api/lib/MqttClient.ts, NAME_PREFIX), the
// same name as its _CLIENTS topics. "" means DefaultGatewayName.
func GatewayClientID(gateway string) string {
	if gateway == "" {
		gateway = DefaultGatewayName
	}
	return "ZWAVE_GATEWAY-" + gateway
}
