package esphome

import (
	"context"
	"sync"
	"testing"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/mqtt"
)

// conn records what the adapter publishes and hands the test the handler
// of its one subscription: the tests feed it the messages a broker would
// deliver (the end-to-end tests in cmd/hearthd run the real broker).
type conn struct {
	mu        sync.Mutex
	published []published
	handler   mqtt.Handler
	filter    string
}

type published struct {
	topic    string
	retained bool
	payload  string
}

func (c *conn) Publish(_ context.Context, topic string, _ byte, retained bool, payload []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.published = append(c.published, published{topic, retained, string(payload)})
	return nil
}

func (c *conn) Subscribe(_ context.Context, filter string, _ byte, h mqtt.Handler) error {
	c.filter, c.handler = filter, h
	return nil
}

// call is one call the adapter made on its Sink.
type call struct {
	kind     string // "report", "availability", "bridge"
	name     string
	state    map[string]any
	online   bool
	retained bool
}

type sink struct{ calls []call }

func (s *sink) Report(device string, state map[string]any, retained bool) {
	s.calls = append(s.calls, call{kind: "report", name: device, state: state, retained: retained})
}
func (s *sink) Availability(device string, online bool) {
	s.calls = append(s.calls, call{kind: "availability", name: device, online: online})
}
func (s *sink) BridgeState(service string, online, retained bool) {
	s.calls = append(s.calls, call{kind: "bridge", name: service, online: online, retained: retained})
}

// take returns the calls since the last take.
func (s *sink) take() []call {
	c := s.calls
	s.calls = nil
	return c
}

var testDevices = []devices.Device{
	{ID: "relay", Class: devices.Switch, Address: "kitchen/switch/relay"},
	{ID: "garage", Class: devices.Cover, Address: "garage/cover/door"},
	{ID: "front", Class: devices.Lock, Address: "frontdoor/lock/front_door"},
	{ID: "ceiling", Class: devices.Light, Address: "livingroom/light/ceiling"},
}

func newAdapter(t *testing.T) (*Adapter, *conn, *sink) {
	t.Helper()
	c, s := &conn{}, &sink{}
	a := New(c, Options{Service: "nodes", Devices: testDevices})
	if err := a.Start(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if c.filter != "esphome/#" {
		t.Fatalf("subscribed to %q; want esphome/#", c.filter)
	}
	return a, c, s
}

// deliver hands the adapter one message as the broker would.
func (c *conn) deliver(topic, payload string, retained bool) {
	c.handler(mqtt.NewMessage(topic, []byte(payload), 1, retained, nil))
}

func device(id string) devices.Device {
	for _, d := range testDevices {
		if d.ID == id {
			return d
		}
	}
	panic(id)
}
