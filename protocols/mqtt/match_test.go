package mqtt

import (
	"context"
	"testing"
)

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

func TestCovers(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"zigbee2mqtt/#", "zigbee2mqtt/hall_button/action", true},
		{"zigbee2mqtt/#", "zigbee2mqtt", true},
		{"zigbee2mqtt/#", "zigbee2mqtt/#", true},
		{"zigbee2mqtt/#", "zigbee2mqtt/+/action", true},
		{"zigbee2mqtt/#", "zigbee/x", false},
		{"zigbee2mqtt/#", "+/hall_button/action", false},
		{"a/+", "a/b", true},
		{"a/+", "a/+", true},
		{"a/+", "a/#", false},
		{"a/+", "a/b/c", false},
		{"a/b", "a/+", false},
		{"a/b", "a/b", true},
		{"a/b", "a", false},
		{"#", "a/b", true},
		{"#", "$SYS/x", false},
		{"+/x", "$SYS/x", false},
		{"$SYS/#", "$SYS/x", true},
		{"hearth/+/set", "hearth/lamp/set", true},
		{"hearth/+/set", "hearth/#", false},
	} {
		if got := Covers(tc.a, tc.b); got != tc.want {
			t.Errorf("Covers(%q, %q) = %t, want %t", tc.a, tc.b, got, tc.want)
		}
	}
}

// Covers agrees with Match: whenever a covers b, every topic b matches,
// a matches.
func TestCoversAgreesWithMatch(t *testing.T) {
	filters := []string{"#", "a/#", "a/+", "a/b", "a", "+/b", "a/+/c", "a/b/#", "+", "+/+", "$SYS/#"}
	topics := []string{"a", "a/b", "a/c", "a/b/c", "b/b", "x", "$SYS/a", "a/x/c"}
	for _, a := range filters {
		for _, b := range filters {
			if !Covers(a, b) {
				continue
			}
			for _, topic := range topics {
				if Match(b, topic) && !Match(a, topic) {
					t.Errorf("Covers(%q, %q), but %q matches %q and not %q", a, b, topic, b, a)
				}
			}
		}
	}
}

// A filter subscribed again with other options would replace the first
// subscription at the broker (MQTT 5 §3.8.4), losing Retain As Published
// on the command intake: refused.
func TestSubscribeRefusesTheSameFilterWithOtherOptions(t *testing.T) {
	c := New(Options{URL: "tcp://127.0.0.1:1", ClientID: "t"})
	ctx := context.Background()
	if err := c.SubscribeManualAck(ctx, "hearth/+/set", 1, func(Message) {}); err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(ctx, "hearth/+/set", 1, func(Message) {}); err == nil {
		t.Error("Subscribe of the intake's filter without manual ack succeeded")
	}
	if err := c.Subscribe(ctx, "zigbee2mqtt/#", 1, func(Message) {}); err != nil {
		t.Errorf("another filter: %v", err)
	}
}
