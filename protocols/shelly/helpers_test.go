package shelly

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	paho3 "github.com/eclipse/paho.mqtt.golang"
	"go.uber.org/goleak"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/internal/testbroker"
	"github.com/hearthd/hearth/protocols/mqtt"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// deadline bounds every wait for an event; tests never sleep.
const deadline = 5 * time.Second

func startBroker(t *testing.T) string {
	t.Helper()
	_, addr := testbroker.Start(t)
	return addr
}

var seq atomic.Int64

// call is one call the adapter made on its Sink.
type call struct {
	kind     string // "report", "availability", "bridge", "failed"
	name     string
	state    map[string]any
	online   bool
	retained bool
	err      error
}

type sink struct{ calls chan call }

func newSink() *sink { return &sink{calls: make(chan call, 1024)} }

func (s *sink) Report(device string, state map[string]any, retained bool) {
	s.calls <- call{kind: "report", name: device, state: state, retained: retained}
}
func (s *sink) Availability(device string, online bool) {
	s.calls <- call{kind: "availability", name: device, online: online}
}
func (s *sink) BridgeState(service string, online, retained bool) {
	s.calls <- call{kind: "bridge", name: service, online: online, retained: retained}
}
func (s *sink) SendFailed(device, _ string, err error) {
	s.calls <- call{kind: "failed", name: device, err: err}
}

func (s *sink) next(t *testing.T) call {
	t.Helper()
	select {
	case c := <-s.calls:
		return c
	case <-time.After(deadline):
		t.Fatalf("Sink not called within %v", deadline)
		return call{}
	}
}

// nothingBefore checks that the sink got nothing from what dev published
// before: it publishes a report of plug from dev and wants it as the next
// call (messages of one publisher reach the adapter in order).
func (s *sink) nothingBefore(t *testing.T, dev *device) {
	t.Helper()
	dev.publish(t, "shelly/plug-1/events/rpc", `{"src":"plug-1","method":"NotifyStatus","params":{"ts":2,"switch:0":{"id":0,"output":false}}}`)
	c := s.next(t)
	if c.kind != "report" || c.name != "plug" || c.state["state"] != "OFF" || len(c.state) != 1 {
		t.Fatalf("got %+v before the marker report: what came before should have reached the sink as nothing", c)
	}
}

// device plays a Shelly (or anyone) on the broker: an MQTT 3.1.1 client.
type device struct {
	c    paho3.Client
	reqs chan Request
}

func newDevice(t *testing.T, addr string, subscribe string) *device {
	t.Helper()
	d := &device{reqs: make(chan Request, 64)}
	o := paho3.NewClientOptions().AddBroker("tcp://" + addr).
		SetClientID(fmt.Sprintf("shelly-%d", seq.Add(1))).SetAutoReconnect(false).SetCleanSession(true)
	d.c = paho3.NewClient(o)
	waitToken(t, d.c.Connect())
	t.Cleanup(func() { d.c.Disconnect(0) })
	if subscribe != "" {
		waitToken(t, d.c.Subscribe(subscribe, 1, func(_ paho3.Client, m paho3.Message) {
			var r Request
			if json.Unmarshal(m.Payload(), &r) == nil {
				d.reqs <- r
			}
		}))
	}
	return d
}

func (d *device) publish(t *testing.T, topic, payload string) {
	t.Helper()
	waitToken(t, d.c.Publish(topic, 1, false, payload))
}

func (d *device) publishRetained(t *testing.T, topic, payload string) {
	t.Helper()
	waitToken(t, d.c.Publish(topic, 1, true, payload))
}

func (d *device) request(t *testing.T) Request {
	t.Helper()
	select {
	case r := <-d.reqs:
		return r
	case <-time.After(deadline):
		t.Fatalf("no request within %v", deadline)
		return Request{}
	}
}

func waitToken(t *testing.T, tok paho3.Token) {
	t.Helper()
	if !tok.WaitTimeout(deadline) {
		t.Fatalf("MQTT operation did not complete within %v", deadline)
	}
	if err := tok.Error(); err != nil {
		t.Fatal(err)
	}
}

var testDevices = []devices.Device{
	{ID: "plug", Service: "wifi", Class: devices.Switch, Address: "plug-1"},
	{ID: "lamp", Service: "wifi", Class: devices.Light, Address: "dimmer-1/light:0"},
	{ID: "blind", Service: "wifi", Class: devices.Cover, Address: "pro2pm-1/cover:0"},
	{ID: "garage", Service: "wifi", Class: devices.Cover, Safety: devices.SafetyCritical, Address: "plus1-1/switch:0/input:1"},
}

func startAdapter(t *testing.T, addr string, opts Options) (*Adapter, *sink) {
	t.Helper()
	conn := mqtt.New(mqtt.Options{URL: "tcp://" + addr, ClientID: fmt.Sprintf("hearth-%d", seq.Add(1))})
	if opts.Service == "" {
		opts.Service = "wifi"
	}
	if opts.Devices == nil {
		opts.Devices = testDevices
	}
	a := New(conn, opts)
	s := newSink()
	if err := a.Start(context.Background(), s); err != nil {
		t.Fatalf("Start: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- conn.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(deadline):
			t.Errorf("Run did not return within %v", deadline)
		}
	})
	select {
	case <-conn.Up():
	case <-time.After(deadline):
		t.Fatalf("Conn not up within %v", deadline)
	}
	bctx, bcancel := context.WithTimeout(context.Background(), deadline)
	defer bcancel()
	if err := conn.Publish(bctx, "zz-barrier", 1, false, nil); err != nil {
		t.Fatalf("barrier publish: %v", err)
	}
	return a, s
}

func send(t *testing.T, a *Adapter, id string, target devices.Target) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	for _, d := range testDevices {
		if d.ID == id {
			return a.Send(ctx, d, target)
		}
	}
	t.Fatalf("no test device %s", id)
	return nil
}
