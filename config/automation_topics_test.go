package config

import "testing"

// Automations that talk to command topics on MQTT are refused at the
// config level, each with a problem naming the key.
func TestAutomationsOnCommandTopicsAreRefused(t *testing.T) {
	rule := func(body string) string { return home + "  r:\n" + body }
	const trig = "    triggers:\n      - mqtt: {topic: go}\n"
	const act = "    actions:\n      - notify: {message: m}\n"
	for name, file := range map[string]string{
		// A command must never be retained (DESIGN: "nothing Hearth
		// publishes as a command is retained"): the broker replays it to
		// the bridge at every reconnect.
		"retained publish to a bridge's set topic": rule(trig + "    actions:\n      - publish: {topic: \"zigbee2mqtt/lamp/set\", payload: '{\"state\":\"ON\"}', retain: true}\n"),
		// Bypasses the dispatcher: no op_id, no confirmation, no safety
		// re-validation, no breaker. Use a command action.
		"publish to a bridge's set topic": rule(trig + "    actions:\n      - publish: {topic: \"zigbee2mqtt/lamp/set\", payload: '{\"state\":\"ON\"}'}\n"),
		// Never reaches Hearth (No Local): lost without a trace.
		"publish to hearth's own set topic": rule(trig + "    actions:\n      - publish: {topic: \"hearth/lamp/set\", payload: ON}\n"),
		// Replaces the intake's Retain-As-Published subscription.
		"mqtt trigger on hearth's own set topics":     rule("    triggers:\n      - mqtt: {topic: \"hearth/+/set\"}\n" + act),
		"mqtt trigger under a device's command topic": rule("    triggers:\n      - mqtt: {topic: \"hearth/lamp/#\"}\n" + act),
	} {
		if _, err := Parse("hearth.yaml", []byte(file)); err == nil {
			t.Errorf("%s: accepted; want an error naming the key", name)
		}
	}
}
