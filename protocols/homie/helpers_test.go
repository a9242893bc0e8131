package homie

import (
	"context"
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
	kind     string // "report", "availability", "bridge", "node"
	name     string
	state    map[string]any
	online   bool
	status   devices.NodeStatus
	retained bool
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
func (s *sink) NodeStatus(device string, status devices.NodeStatus, retained bool) {
	s.calls <- call{kind: "node", name: device, status: status, retained: retained}
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

// empty checks the sink got nothing so far (call it after a marker).
func (s *sink) empty(t *testing.T) {
	t.Helper()
	select {
	case c := <-s.calls:
		t.Fatalf("unexpected sink call %+v", c)
	default:
	}
}

// device plays a Homie device (or anyone) on the broker: an MQTT 3.1.1
// client.
type device struct {
	c    paho3.Client
	sets chan paho3.Message
}

func newDevice(t *testing.T, addr, subscribe string) *device {
	t.Helper()
	d := &device{sets: make(chan paho3.Message, 64)}
	o := paho3.NewClientOptions().AddBroker("tcp://" + addr).
		SetClientID(fmt.Sprintf("homie-%d", seq.Add(1))).SetAutoReconnect(false).SetCleanSession(true)
	d.c = paho3.NewClient(o)
	waitToken(t, d.c.Connect())
	t.Cleanup(func() { d.c.Disconnect(0) })
	if subscribe != "" {
		waitToken(t, d.c.Subscribe(subscribe, 1, func(_ paho3.Client, m paho3.Message) { d.sets <- m }))
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

func (d *device) set(t *testing.T) paho3.Message {
	t.Helper()
	select {
	case m := <-d.sets:
		return m
	case <-time.After(deadline):
		t.Fatalf("no set within %v", deadline)
		return nil
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
	{ID: "plug", Service: "wifi", Class: devices.Switch, Address: "plug-1/relay/on"},
	{ID: "lamp", Service: "wifi", Class: devices.Light, Address: "kitchen-light/light/power,brightness"},
	{ID: "valve", Service: "wifi", Class: devices.Switch, Address: "garden/valve/open", Sleep: devices.Sleep{Sleepy: true, WakeInterval: time.Hour, AwakeWindow: 10 * time.Second}},
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

// describe4 publishes, retained, the Homie 4 attributes of a property.
func (d *device) describe4(t *testing.T, prop, datatype, format string, settable bool) {
	t.Helper()
	d.publishRetained(t, prop+"/$datatype", datatype)
	if format != "" {
		d.publishRetained(t, prop+"/$format", format)
	}
	d.publishRetained(t, prop+"/$settable", fmt.Sprint(settable))
}

// waitFor takes sink calls until one matches, failing at the deadline.
func (s *sink) waitFor(t *testing.T, what string, match func(call) bool) call {
	t.Helper()
	timeout := time.After(deadline)
	for {
		select {
		case c := <-s.calls:
			if match(c) {
				return c
			}
		case <-timeout:
			t.Fatalf("no %s within %v", what, deadline)
			return call{}
		}
	}
}
