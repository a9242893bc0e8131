package main

import (
	"context"
	"fmt"
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
	// hearth-sim is ready once its clients are connected; a Homie device
	// then publishes its attributes and $state in turn. A first reader
	// waits until each topic says what it should (live or retained);
	// a second, subscribing after that, must find each one retained.
	for _, retainedOnly := range []bool{false, true} {
		readValues(t, b.URL(), want, retainedOnly)
	}
}

// readValues subscribes to each topic of want and waits until each has
// delivered its wanted payload (retained, when retainedOnly).
func readValues(t *testing.T, url string, want map[string]string, retainedOnly bool) {
	t.Helper()
	got := make(chan [2]string, 64)
	c := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID(fmt.Sprintf("homie-reader-%v", retainedOnly)))
	if tok := c.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(0)
	for topic := range want {
		if tok := c.Subscribe(topic, 1, func(_ paho.Client, m paho.Message) {
			if m.Retained() || !retainedOnly {
				got <- [2]string{m.Topic(), string(m.Payload())}
			}
		}); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("subscribe %s: %v", topic, tok.Error())
		}
	}
	seen := map[string]string{}
	deadline := time.After(10 * time.Second)
	for ok := 0; ok < len(want); {
		select {
		case m := <-got:
			seen[m[0]] = m[1]
			ok = 0
			for topic, v := range want {
				if seen[topic] == v {
					ok++
				}
			}
		case <-deadline:
			t.Fatalf("retained only %v: topics read %v; want %v", retainedOnly, seen, want)
		}
	}
}
