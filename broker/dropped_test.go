package broker

import (
	"sync/atomic"
	"testing"
	"time"

	paho5 "github.com/eclipse/paho.golang/paho"
)

// A subscriber that never acknowledges fills its in-flight store (mochi's
// 8,192 QoS 1 messages): PublishInline waits for it lagMaxWait, then gives
// it up, and what the broker then drops on the way to it is counted, so
// that an automation missing results shows on /metrics.
func TestMessagesDroppedForAFullSubscriberAreCounted(t *testing.T) {
	const inflight, sent = 8192, 9000
	b := startBroker(t, Options{Listen: "127.0.0.1:0"})
	c, _ := tappedV5Config(t, b, "stuck", paho5.ClientConfig{EnableManualAcknowledgment: true})
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

// A subscriber that reads, more slowly than Hearth publishes, gets every
// QoS 1 message: PublishInline waits while it is lagHigh behind, instead
// of filling its store of 8,192 and having the broker drop the rest.
func TestSlowSubscriberThatReadsMissesNothing(t *testing.T) {
	const sent = 20_000
	b := startBroker(t, Options{Listen: "127.0.0.1:0"})
	var c *paho5.Client
	var got atomic.Int64
	done := make(chan struct{})
	queue := make(chan *paho5.Publish, sent)
	c, _ = tappedV5Config(t, b, "slow", paho5.ClientConfig{
		EnableManualAcknowledgment: true,
		OnPublishReceived: []func(paho5.PublishReceived) (bool, error){func(pr paho5.PublishReceived) (bool, error) {
			queue <- pr.Packet
			return true, nil
		}},
	})
	t.Cleanup(func() { close(queue) })
	go func() {
		// The automation: it takes 20 µs per message, and acknowledges
		// each once it has handled it.
		for p := range queue {
			for end := time.Now().Add(20 * time.Microsecond); time.Now().Before(end); {
			}
			c.Ack(p)
			if got.Add(1) == sent {
				close(done)
			}
		}
	}()
	if _, err := c.Subscribe(ctxFor(t), &paho5.Subscribe{Subscriptions: []paho5.SubscribeOptions{{Topic: "hearth/+/result", QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	for i := range sent {
		if err := b.PublishInline("hearth/lamp/result", []byte{byte(i)}, false, 1); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-done:
	case <-time.After(60 * time.Second):
	}
	if n, dropped := got.Load(), b.Stats().MessagesDropped; n != sent || dropped != 0 {
		t.Errorf("the slow subscriber got %d of %d messages, %d dropped; want all, none dropped", n, sent, dropped)
	}
}
