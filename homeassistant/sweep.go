package homeassistant

import "strings"

// Configs returns every discovery config of this instance: the problem
// entity of each service in services (those with a breaker), then the
// entities of each device.
func (d Discovery) Configs(services []string, devs []Device) []Config {
	var out []Config
	for _, s := range services {
		topic, payload := d.ServiceEntity(s)
		out = append(out, Config{Topic: topic, Payload: payload})
	}
	for _, dev := range devs {
		out = append(out, d.DeviceConfigs(dev)...)
	}
	return out
}

// Removals returns the empty retained configs that remove from Home
// Assistant every entity announced before (previous: the topics of an
// earlier run's configs, as the caller recorded them) that current (this
// run's, empty with discovery off) no longer has: a removed service or
// device, a class changed. Topics outside this instance's node are left
// alone.
func (d Discovery) Removals(previous []string, current map[string]bool) []Config {
	var out []Config
	for _, topic := range previous {
		if !current[topic] && d.ownConfig(topic) {
			out = append(out, Config{Topic: topic})
		}
	}
	return out
}

// ownConfig reports whether topic is a config topic of this node:
// <Prefix>/<component>/<NodeID>/<object>/config.
func (d Discovery) ownConfig(topic string) bool {
	rest, ok := strings.CutPrefix(topic, d.prefix()+"/")
	if !ok {
		return false
	}
	parts := strings.Split(rest, "/")
	return len(parts) == 4 && parts[1] == d.node() && parts[3] == "config"
}

// Topics returns the set of the configs' topics, for Removals.
func Topics(configs []Config) map[string]bool {
	out := make(map[string]bool, len(configs))
	for _, c := range configs {
		out[c.Topic] = true
	}
	return out
}

// ReadingOf reports whether topic may be the config of a reading of the
// sensor device: <Prefix>/sensor|binary_sensor/<NodeID>/<device>_<reading>/config.
// A device whose ID is another's with a suffix ("door", "door_2") makes it
// ambiguous; it errs on "may", which keeps an entity rather than removes
// one.
func (d Discovery) ReadingOf(topic, device string) bool {
	for _, component := range []string{"sensor", "binary_sensor"} {
		prefix := d.prefix() + "/" + component + "/" + d.node() + "/" + deviceObject(device) + "_"
		rest, ok := strings.CutPrefix(topic, prefix)
		reading, isConfig := strings.CutSuffix(rest, "/config")
		if ok && isConfig && reading != "" && !strings.Contains(reading, "/") {
			return true
		}
	}
	return false
}
