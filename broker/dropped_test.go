package broker

import (
	"testing"

	paho5 "github.com/eclipse/paho.golang/paho"
)

// A subscriber that never acknowledges fills its in-flight store (mochi's
// 8,192 QoS 1 messages); what the broker then drops on the way to it,
// after the publisher was done with it, is counted, so that a slow
// automation missing results shows on /metrics.
func TestMessagesDroppedForAFullSubscriberAreCounted(t *testing.T) {
	const inflight, sent = 8192, 9000
	b := startBroker(t, Options{Listen: "127.0.0.1:0"})
	c, _ := tappedV5Config(t, b, "slow", paho5.ClientConfig{EnableManualAcknowledgment: true})
	if _, err := c.Subscribe(ctxFor(t), &paho5.Subscribe{Subscriptions: []paho5.SubscribeOptions{{Topic: "hearth/+/result", QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	for i := range sent {
		if err := b.PublishInline("hearth/lamp/result", []byte{byte(i)}, false, 1); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.Stats().MessagesDropped; got != sent-inflight {
		t.Errorf("Stats().MessagesDropped = %d; want %d: the messages beyond the subscriber's %d in flight", got, sent-inflight, inflight)
	}
}
