package zwavejs

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	paho3 "github.com/eclipse/paho.mqtt.golang"
	"go.uber.org/goleak"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/internal/testbroker"
	"github.com/hearthd/hearth/protocols/mqtt"
)

// TestMain fails the package if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// deadline bounds every wait for an event; tests never sleep.
const deadline = 5 * time.Second

// startBroker runs a real embedded mochi-mqtt broker on a free loopback
// port until the test ends and returns its host:port.
func startBroker(t *testing.T) string {
	t.Helper()
	_, addr := testbroker.Start(t)
	return addr
}

var seq atomic.Int64

// call is one call the adapter made on its Sink.
type call struct {
	kind     string // "report", "node" or "bridge"
	name     string // device ID, or service for "bridge"
	state    map[string]any
	status   devices.NodeStatus
	online   bool
	retained bool
}

// sink records every Sink call in order.
type sink struct{ calls chan call }

func newSink() *sink { return &sink{calls: make(chan call, 1024)} }

func (s *sink) Report(device string, state map[string]any, retained bool) {
	s.calls <- call{kind: "report", name: device, state: state, retained: retained}
}

func (s *sink) NodeStatus(device string, status devices.NodeStatus, retained bool) {
	s.calls <- call{kind: "node", name: device, status: status, retained: retained}
}

func (s *sink) BridgeState(service string, online, retained bool) {
	s.calls <- call{kind: "bridge", name: service, online: online, retained: retained}
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

// bridge plays the Z-Wave JS UI gateway (or anyone else) on the broker: an independent
// MQTT 3.1.1 client.
type bridge struct{ c paho3.Client }

func newBridge(t *testing.T, addr string) *bridge {
	t.Helper()
	o := paho3.NewClientOptions().AddBroker("tcp://" + addr).
		SetClientID(fmt.Sprintf("zui-%d", seq.Add(1))).
		SetAutoReconnect(false).SetCleanSession(true)
	c := paho3.NewClient(o)
	waitToken(t, c.Connect())
	t.Cleanup(func() { c.Disconnect(0) })
	return &bridge{c: c}
}

// publish publishes at QoS 1, not retained, and waits for the PUBACK.
// Messages from one bridge reach subscribers in publish order.
func (b *bridge) publish(t *testing.T, topic, payload string) {
	t.Helper()
	waitToken(t, b.c.Publish(topic, 1, false, payload))
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

// observed is one PUBLISH as an MQTT 5 observer saw it.
type observed struct {
	topic    string
	payload  string
	qos      byte
	retained bool
}

// observe subscribes an independent paho.golang MQTT 5 client to filter
// with Retain As Published, so it sees each message's QoS and retain flag
// as they were published.
func observe(t *testing.T, addr, filter string) <-chan observed {
	t.Helper()
	ch := make(chan observed, 1024)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{
		Conn: conn,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){func(pr paho.PublishReceived) (bool, error) {
			p := pr.Packet
			ch <- observed{topic: p.Topic, payload: string(p.Payload), qos: p.QoS, retained: p.Retain}
			return true, nil
		}},
	})
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: fmt.Sprintf("observer-%d", seq.Add(1)), CleanStart: true, KeepAlive: 30}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Disconnect(&paho.Disconnect{})
		<-c.Done()
	})
	if _, err := c.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: filter, QoS: 1, RetainAsPublished: true}}}); err != nil {
		t.Fatal(err)
	}
	return ch
}

func nextObserved(t *testing.T, ch <-chan observed) observed {
	t.Helper()
	select {
	case o := <-ch:
		return o
	case <-time.After(deadline):
		t.Fatalf("observer received nothing within %v", deadline)
		return observed{}
	}
}

// testDevices are the devices of the adapters under test: addresses with a
// location, without one, by node ID and defaulting to the ID.
var testDevices = []devices.Device{
	{ID: "lamp", Service: "zw", Class: devices.Light, Address: "living/lamp"},
	{ID: "plug", Service: "zw", Class: devices.Switch},
	{ID: "door", Service: "zw", Class: devices.Lock, Address: "hall/front_door"},
	{ID: "trv", Service: "zw", Class: devices.Climate, Address: "12"},
	{ID: "blind", Service: "zw", Class: devices.Cover, Address: "bed/7"},
}

// startAdapter creates a Conn and an adapter on it, starts the adapter with
// a recording sink, runs the Conn until the test ends and waits for it to
// be up.
func startAdapter(t *testing.T, addr string, opts Options) (*Adapter, *sink, *mqtt.Conn) {
	t.Helper()
	conn := mqtt.New(mqtt.Options{URL: "tcp://" + addr, ClientID: fmt.Sprintf("hearth-%d", seq.Add(1))})
	if opts.Service == "" {
		opts.Service = "zw"
	}
	if opts.Devices == nil {
		opts.Devices = testDevices
	}
	a := New(conn, opts)
	s := newSink()
	if err := a.Start(context.Background(), s); err != nil {
		t.Fatalf("Start: %v", err)
	}
	runConn(t, conn)
	return a, s, conn
}

// runConn runs conn until the test ends and waits for it to be up.
func runConn(t *testing.T, conn *mqtt.Conn) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- conn.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v, want nil", err)
			}
		case <-time.After(deadline):
			t.Errorf("Run did not return within %v", deadline)
		}
	})
	select {
	case <-conn.Up():
	case <-time.After(deadline):
		t.Fatalf("Conn not up within %v", deadline)
	}
	// mochi sends the SUBACK before it replays the retained store, and
	// handles one client's packets in order: one more round trip lets the
	// replay finish, so that a message published from now on arrives once,
	// live.
	bctx, bcancel := context.WithTimeout(context.Background(), deadline)
	defer bcancel()
	if err := conn.Publish(bctx, "zz-barrier", 1, false, nil); err != nil {
		t.Fatalf("barrier publish: %v", err)
	}
}
