package main

import (
	"context"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/broker"
)

// hearth-sim plays the Homie devices of configs/homie.yaml: each says
// $state ready (the sleepy valve sleeping) and describes its properties,
// retained on the broker.
func TestSimPlaysTheConfigsHomieDevices(t *testing.T) {
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	log := &lineWatch{marker: "hearth-sim ready", ready: make(chan struct{})}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-broker", b.URL(), "-config", "../../configs/homie.yaml"}, log) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("hearth-sim: %v", err)
		}
	}()
	select {
	case <-log.ready:
	case <-time.After(10 * time.Second):
		t.Fatalf("hearth-sim never ready:\n%s", log)
	}
	want := map[string]string{
		"homie/kitchen-plug/$state":                      "ready",
		"homie/kitchen-light/$state":                     "ready",
		"homie/garden-valve/$state":                      "sleeping",
		"homie/kitchen-light/light/brightness/$datatype": "integer",
		"homie/kitchen-plug/relay/on/$settable":          "true",
		"homie/kitchen-light/light/$properties":          "power,brightness",
	}
	got := make(chan [2]string, len(want))
	c := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("homie-reader"))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(0)
	for topic := range want {
		if tok := c.Subscribe(topic, 1, func(_ paho.Client, m paho.Message) {
			if m.Retained() {
				got <- [2]string{m.Topic(), string(m.Payload())}
			}
		}); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("subscribe %s: %v", topic, tok.Error())
		}
	}
	deadline := time.After(10 * time.Second)
	for range want {
		select {
		case m := <-got:
			if want[m[0]] != m[1] {
				t.Errorf("%s = %q; want %q", m[0], m[1], want[m[0]])
			}
		case <-deadline:
			t.Fatal("not every retained topic came")
		}
	}
}
