package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/homeassistant"
	"github.com/hearthd/hearth/protocols/mqtt"
)

// A sensor reading its bridge no longer describes (a re-interview, a
// firmware update) is removed from Home Assistant: its config is emptied.
func TestHomeAssistantSensorReadingNoLongerDescribedIsRemoved(t *testing.T) {
	dir := t.TempDir()
	cfg := strings.Replace(sampleConfig(), "devices:\n", "devices:\n  hall_motion:\n    service: zigbee\n    class: sensor\n", 1)
	h := newHarness(t, harnessOptions{dataDir: dir, config: cfg, notSimulated: []string{"hall_motion"}})
	// Exact topics: a wildcard subscription over retained messages races in
	// mochi-mqtt (see newHarness).
	all := h.watch("homeassistant/sensor/hearth/hall_motion_humidity/config", "homeassistant/sensor/hearth/hall_motion_temperature/config")
	two := devices.NewCapabilities("WSDCGQ11LM", "Aqara", "TH sensor", []devices.Property{
		{Name: "temperature", Kind: devices.KindNumeric, Access: devices.AccessPublished, Unit: "°C"},
		{Name: "humidity", Kind: devices.KindNumeric, Access: devices.AccessPublished, Unit: "%"},
	})
	h.d.ha.capabilities("hall_motion", two)
	var humidity string
	deadline := time.After(eventWait)
	for humidity == "" {
		select {
		case m := <-all:
			if strings.Contains(m.Topic(), "hall_motion") && strings.Contains(m.Topic(), "humidity") && len(m.Payload()) > 0 {
				humidity = m.Topic()
			}
		case <-deadline:
			t.Fatal("the humidity reading was never announced")
		}
	}
	one := devices.NewCapabilities("WSDCGQ11LM", "Aqara", "TH sensor", []devices.Property{
		{Name: "temperature", Kind: devices.KindNumeric, Access: devices.AccessPublished, Unit: "°C"},
	})
	h.d.ha.capabilities("hall_motion", one)
	deadline = time.After(eventWait)
	for {
		select {
		case m := <-all:
			if m.Topic() == humidity && len(m.Payload()) == 0 {
				return // removed
			}
		case <-deadline:
			b, _ := os.ReadFile(filepath.Join(dir, haRecordFile))
			var r haRecord
			_ = json.Unmarshal(b, &r)
			t.Fatalf("%s never removed; the record names it: %v", humidity, slices.Contains(r.Announced, humidity))
		}
	}
}

// noted signals each log record whose message is msg.
type noted struct {
	slog.Handler
	msg string
	ch  chan struct{}
}

func (n noted) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == n.msg {
		n.ch <- struct{}{}
	}
	return n.Handler.Handle(ctx, r)
}

// An ha_state that could not be published (the link down: a Mosquitto
// restart, a reconnect) is published at the next connect, with the
// configs: Home Assistant never goes on showing the lock as it was.
func TestHomeAssistantStateNotPublishedIsPublishedAtTheNextConnect(t *testing.T) {
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	cfg := &config.Config{Prefix: "hearth", DataDir: t.TempDir(),
		HomeAssistant: config.HomeAssistant{Discovery: true, DiscoveryPrefix: "homeassistant"},
		Devices:       []config.Device{{Device: devices.Device{ID: "front_door", Service: "zigbee", Class: devices.Lock}}}}
	failed := make(chan struct{}, 4)
	log := slog.New(noted{Handler: testLogger(t).Handler(), msg: "home assistant state not published", ch: failed})
	var h *homeAssistant
	conn := mqtt.New(mqtt.Options{URL: b.URL(), ClientID: "hearth-ha-state",
		OnConnect: func(ctx context.Context) { go h.announce(ctx) }})
	h = newHomeAssistant(cfg, conn, log, "test")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go h.run(ctx)
	h.state("front_door", map[string]any{"state": "LOCK", "lock_state": "locked"})
	<-failed // not connected yet: the publish failed
	runDone := make(chan error, 1)
	go func() { runDone <- conn.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-runDone })
	w := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("ha-state-watcher"))
	mustToken(t, w.Connect())
	t.Cleanup(func() { w.Disconnect(0) })
	got := make(chan paho.Message, 16)
	announced := make(chan paho.Message, 16)
	mustToken(t, w.Subscribe("homeassistant/lock/hearth/front_door_lock/config", 1, func(_ paho.Client, m paho.Message) { announced <- m }))
	select {
	case <-announced: // connected and announced
	case <-time.After(eventWait):
		t.Fatal("never announced")
	}
	mustToken(t, w.Subscribe("hearth/front_door/ha_state", 1, func(_ paho.Client, m paho.Message) { got <- m }))
	select {
	case m := <-got:
		if string(m.Payload()) != homeassistant.LockLocked {
			t.Fatalf("ha_state %q; want %s", m.Payload(), homeassistant.LockLocked)
		}
	case <-time.After(eventWait):
		t.Fatal("after the reconnect, no ha_state: Home Assistant still shows the lock as before")
	}
}
