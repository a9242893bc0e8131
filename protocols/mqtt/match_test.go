package mqtt

import "testing"

func TestMatch(t *testing.T) {
	tests := []struct {
		filter, topic string
		want          bool
	}{
		// Exact.
		{"a/b", "a/b", true},
		{"a/b", "a/c", false},
		{"a/b", "a/b/c", false},
		{"a/b/c", "a/b", false},
		{"a", "A", false}, // topics are case-sensitive
		{"hearth/lamp/set", "hearth/lamp/set", true},

		// '+' is exactly one level, possibly empty.
		{"a/+", "a/b", true},
		{"a/+", "a/b/c", false},
		{"a/+", "a", false},
		{"a/+", "a/", true},
		{"+/+", "/finance", true},
		{"/+", "/finance", true},
		{"+", "/finance", false},
		{"+", "a", true},
		{"a/+/c", "a/b/c", true},
		{"a/+/c", "a//c", true},
		{"a/+/c", "a/b/d", false},
		{"hearth/+/set", "hearth/lamp/set", true},
		{"hearth/+/set", "hearth/living room/lamp/set", false},

		// '#' is any number of levels, the parent level included.
		{"#", "a", true},
		{"#", "a/b/c", true},
		{"#", "/", true},
		{"a/#", "a", true},
		{"a/#", "a/b", true},
		{"a/#", "a/b/c", true},
		{"a/#", "a/", true},
		{"a/#", "ab", false},
		{"a/#", "b/a", false},
		{"a/b/#", "a", false},
		{"+/#", "a/b", true},
		{"zigbee2mqtt/#", "zigbee2mqtt/living room/lamp", true},
		{"zigbee2mqtt/#", "zigbee2mqtt", true},

		// Trailing slash makes an empty last level.
		{"a/", "a/", true},
		{"a/", "a", false},
		{"a", "a/", false},
		{"a//b", "a//b", true},
		{"a//b", "a/b", false},

		// '$' topics match no filter that starts with a wildcard
		// (MQTT 5.0 §4.7.2), but do match explicit ones.
		{"#", "$SYS/broker/uptime", false},
		{"+/broker/uptime", "$SYS/broker/uptime", false},
		{"+/#", "$SYS/x", false},
		{"$SYS/#", "$SYS/broker/uptime", true},
		{"$SYS/+/uptime", "$SYS/broker/uptime", true},
		{"$SYS", "$SYS", true},
		{"a/#", "a/$SYS", true}, // '$' only matters at the start
		{"a/+", "a/$x", true},
	}
	for _, tc := range tests {
		if got := Match(tc.filter, tc.topic); got != tc.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tc.filter, tc.topic, got, tc.want)
		}
	}
}
