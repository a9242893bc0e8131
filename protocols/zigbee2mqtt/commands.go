package zigbee2mqtt

import "strings"

// MaxNameLevels is the most topic levels of a friendly_name that Hearth's
// config accepts for a Zigbee2MQTT device: 4
// ("first_floor/hall/ceiling/lamp"). Zigbee2MQTT itself allows any number
// (a name may contain '/'), but an MQTT ACL cannot say "a set level at any
// depth", so Hearth enumerates the depths.
const MaxNameLevels = 4

// MaxCommandLevels is how deep below the base topic CommandFilters
// enumerates a command's set or get level: 16, well past MaxNameLevels, so
// that the devices and groups on the bridge that Hearth's config does not
// list (and so does not limit) are covered too. A name deeper than this is
// left to the bridge account's rules.
const MaxCommandLevels = 16

// CommandFilters returns the MQTT topic filters of every topic on which
// Zigbee2MQTT under base (its base_topic) takes a command, which only
// Hearth may publish on:
//
//	<base>/<name>[/<endpoint>]/set[/<attribute>]
//	<base>/<name>[/<endpoint>]/get[/<attribute>]
//	<base>/bridge/request/#
//	<base>/bridge/config/+, <base>/bridge/group/#, <base>/bridge/ota_update/#,
//	<base>/bridge/configure, <base>/bridge/networkmap, <base>/bridge/networkmap/routes
//
// with the set or get level 2 to MaxCommandLevels levels below the base.
// Zigbee2MQTT reads a topic as a device command when any level after the
// first below the base topic is "set" or "get" (its
// lib/extension/publish.ts: ^<base>/(?!bridge)(.+?)/(get|set)(?:/(.+))?$,
// where the attribute itself may hold '/'), so each filter ends in
// set/# or get/#, which matches the bare /set too. The bridge API
// (lib/extension/bridge.ts, "MQTT Topics and Messages": bridge/request/…)
// changes the network itself (permit_join, device/remove, …), and so does
// Zigbee2MQTT 1.x's legacy API (on by default there: advanced.legacy_api;
// bridge/config/permit_join, bridge/config/remove, bridge/config/rename,
// bridge/group/<name>/add, bridge/configure, bridge/ota_update/update,
// bridge/networkmap), whose topics the bridge itself never publishes on
// (its legacy answers go to bridge/log, bridge/config and
// bridge/networkmap/<type>).
func CommandFilters(base string) []string {
	if base == "" {
		base = DefaultBaseTopic
	}
	var out []string
	for n := 1; n < MaxCommandLevels; n++ {
		levels := base + strings.Repeat("/+", n)
		out = append(out, levels+"/set/#", levels+"/get/#")
	}
	bridge := base + "/bridge/"
	return append(out,
		bridge+"request/#",
		bridge+"config/+",
		bridge+"group/#",
		bridge+"ota_update/#",
		bridge+"configure",
		bridge+"networkmap",
		bridge+"networkmap/routes",
	)
}
