package mqtt

import (
	"context"
	"testing"
)

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
