package main

import (
	"context"
	"io"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/broker"
)

// hearth-sim plays configs/esphome.yaml's ESPHome entities: each node
// publishes its birth and its entities' states under esphome/<node>.
func TestSimPlaysTheESPHomeSample(t *testing.T) {
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got := make(chan [2]string, 64)
	c := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("esphome-watch"))
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatal("connect", tok.Error())
	}
	defer c.Disconnect(0)
	if tok := c.Subscribe("esphome/#", 1, func(_ paho.Client, m paho.Message) { got <- [2]string{m.Topic(), string(m.Payload())} }); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatal("subscribe", tok.Error())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-broker", b.URL(), "-config", "../../configs/esphome.yaml"}, io.Discard)
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("hearth-sim: %v", err)
		}
	}()
	want := map[string]string{
		"esphome/frontdoor/status":                "online",
		"esphome/frontdoor/lock/front_door/state": "LOCKED",
		"esphome/garage/cover/door/state":         "closed",
		"esphome/kitchen/switch/relay/state":      "OFF",
	}
	deadline := time.After(10 * time.Second)
	for len(want) > 0 {
		select {
		case m := <-got:
			if w, ok := want[m[0]]; ok && w == m[1] {
				delete(want, m[0])
			}
		case <-deadline:
			t.Fatalf("hearth-sim never published %v", want)
		}
	}
}
