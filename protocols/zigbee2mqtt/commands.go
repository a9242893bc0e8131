package zigbee2mqtt

import "strings"

// MaxNameLevels is the most topic levels of a friendly_name whose command
// topics CommandFilters covers: 4 ("first_floor/hall/ceiling/lamp").
// Zigbee2MQTT itself allows any number (a name may contain '/'), but an
// MQTT ACL cannot say "a set level at any depth", so Hearth enumerates the
// depths and config refuses a Zigbee2MQTT device address deeper than this.
const MaxNameLevels = 4

// CommandFilters returns the MQTT topic filters of every topic on which
// Zigbee2MQTT under base (its base_topic) takes a command, which only
// Hearth may publish on:
//
//	<base>/<name>[/<endpoint>]/set[/<attribute>]
//	<base>/<name>[/<endpoint>]/get[/<attribute>]
//	<base>/bridge/request/#
//
// for friendly names of 1 to MaxNameLevels levels, each with or without an
// endpoint level. Zigbee2MQTT reads a topic as a device command when any
// level after the first below the base topic is "set" or "get" (its
// lib/extension/publish.ts: ^<base>/(?!bridge)(.+?)/(get|set)(?:/(.+))?$,
// where the attribute itself may hold '/'), so each filter ends in
// set/# or get/#, which matches the bare /set too; and the bridge API
// (lib/extension/bridge.ts, "MQTT Topics and Messages": bridge/request/…)
// changes the network itself (permit_join, device/remove, …).
func CommandFilters(base string) []string {
	if base == "" {
		base = DefaultBaseTopic
	}
	var out []string
	for n := 1; n <= MaxNameLevels+1; n++ {
		levels := base + strings.Repeat("/+", n)
		out = append(out, levels+"/set/#", levels+"/get/#")
	}
	return append(out, base+"/bridge/request/#")
}
