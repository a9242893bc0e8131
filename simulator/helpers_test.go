package simulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
)

// deadline bounds every wait for an event; tests never sleep.
const deadline = 5 * time.Second

// startBroker runs a real embedded mochi-mqtt broker on a free loopback port
// and returns it with its URL; it is closed when the test ends.
func startBroker(t *testing.T) (*mochi.Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := mochi.New(&mochi.Options{Logger: slog.New(slog.DiscardHandler)})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddListener(listeners.NewNet("t", ln)); err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// mochi v2.7.9's Close can deadlock: closing a listener's clients
		// takes the clients' read lock twice (GetByListener calls Len), and a
		// client being added or removed in between blocks both. Close the
		// listener without that step and stop the clients first.
		srv.Listeners.Close("t", func(string) {})
		for _, cl := range srv.Clients.GetAll() {
			cl.Stop(errors.New("broker closing"))
		}
		_ = srv.Close()
	})
	return srv, "tcp://" + ln.Addr().String()
}

// msg is one message a watcher received.
type msg struct {
	topic    string
	payload  []byte
	retained bool
}

// json decodes the payload as a JSON object.
func (m msg) json(t *testing.T) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(m.payload, &v); err != nil {
		t.Fatalf("%s: payload %q is not a JSON object: %v", m.topic, m.payload, err)
	}
	return v
}

// watcher plays Hearth: a real paho client that publishes commands and keeps
// what it receives in one ordered queue per topic.
type watcher struct {
	client paho.Client
	mu     sync.Mutex
	topics map[string]chan msg
}

// watchers numbers watcher clients so that their IDs differ.
var watchers atomic.Int64

// watch connects a client to the broker and subscribes to filter.
func watch(t *testing.T, broker, filter string) *watcher {
	t.Helper()
	w := &watcher{topics: map[string]chan msg{}}
	o := paho.NewClientOptions().AddBroker(broker).SetClientID(fmt.Sprintf("hearth-%s-%d", t.Name(), watchers.Add(1))).
		SetAutoReconnect(false).SetCleanSession(true)
	w.client = paho.NewClient(o)
	waitToken(t, w.client.Connect())
	t.Cleanup(func() { w.client.Disconnect(0) })
	waitToken(t, w.client.Subscribe(filter, 1, func(_ paho.Client, m paho.Message) {
		w.queue(m.Topic()) <- msg{topic: m.Topic(), payload: m.Payload(), retained: m.Retained()}
	}))
	// mochi acks a SUBSCRIBE before it scans the retained messages for it,
	// and reads its retained index without locks. A second SUBSCRIBE from the
	// same connection is handled after that scan and takes the index lock, so
	// once it is acked the first scan is over and ordered before any later
	// retained publish (no duplicate retained copies, no data race report).
	waitToken(t, w.client.Subscribe("hearth-test/barrier", 0, func(paho.Client, paho.Message) {}))
	return w
}

func (w *watcher) queue(topic string) chan msg {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := w.topics[topic]
	if q == nil {
		q = make(chan msg, 1024)
		w.topics[topic] = q
	}
	return q
}

// next returns the next message received on topic.
func (w *watcher) next(t *testing.T, topic string) msg {
	t.Helper()
	select {
	case m := <-w.queue(topic):
		return m
	case <-time.After(deadline):
		t.Fatalf("no message on %s within %v", topic, deadline)
		return msg{}
	}
}

// live returns the next message on topic that the broker delivered live,
// skipping retained copies: a broker may send a retained message to a new
// subscription even though the same message also reaches it live, when the
// publish races the subscription.
func (w *watcher) live(t *testing.T, topic string) msg {
	t.Helper()
	for {
		if m := w.next(t, topic); !m.retained {
			return m
		}
	}
}

// none asserts that nothing is queued on topic now.
func (w *watcher) none(t *testing.T, topic string) {
	t.Helper()
	select {
	case m := <-w.queue(topic):
		t.Fatalf("unexpected message on %s: %s", topic, m.payload)
	default:
	}
}

// publish publishes a QoS 1 message and waits for the broker's ack.
func (w *watcher) publish(t *testing.T, topic, payload string) {
	t.Helper()
	waitToken(t, w.client.Publish(topic, 1, false, payload))
}

func waitToken(t *testing.T, tok paho.Token) {
	t.Helper()
	if !tok.WaitTimeout(deadline) {
		t.Fatalf("MQTT operation did not complete within %v", deadline)
	}
	if err := tok.Error(); err != nil {
		t.Fatal(err)
	}
}

// retained returns the retained message on topic as a fresh subscriber sees it.
func retained(t *testing.T, broker, topic string) msg {
	t.Helper()
	w := watch(t, broker, topic)
	defer w.client.Disconnect(0)
	for {
		// A publish acked before the subscription may still fan out to it
		// live (mochi acks first); the retained copy follows.
		if m := w.next(t, topic); m.retained {
			return m
		}
	}
}

// events collects SetEvents from Options.OnSet.
type events chan SetEvent

func (e events) observe(ev SetEvent) { e <- ev }

// next returns the next SetEvent.
func (e events) next(t *testing.T) SetEvent {
	t.Helper()
	select {
	case ev := <-e:
		return ev
	case <-time.After(deadline):
		t.Fatalf("no SetEvent within %v", deadline)
		return SetEvent{}
	}
}

// startSim creates a Sim from opts (with OnSet feeding the returned events),
// runs it and waits until it is ready. When the test ends it cancels Run and
// waits for it to return.
func startSim(t *testing.T, opts Options) (*Sim, events, func()) {
	t.Helper()
	evs := make(events, 256)
	opts.OnSet = evs.observe
	if opts.Logger == nil && testing.Verbose() {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	sim, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sim.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(deadline):
				_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 2) // where it hangs
				t.Errorf("Run did not return within %v of cancel", deadline)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case <-sim.Ready():
	case err := <-done:
		t.Fatalf("Run returned before ready: %v", err)
	case <-time.After(deadline):
		t.Fatalf("sim not ready within %v", deadline)
	}
	return sim, evs, stop
}

// wantState asserts that a decoded report has the wanted values (numbers as
// JSON decodes them).
func wantState(t *testing.T, got map[string]any, want map[string]any) {
	t.Helper()
	for k, v := range want {
		if n, ok := v.(int); ok {
			v = float64(n)
		}
		if got[k] != v {
			t.Errorf("report %v: %s = %v, want %v", got, k, got[k], v)
		}
	}
}

// brokerForgets waits until the broker no longer knows client id. mochi has
// no hook for the end of a session's teardown, so this polls, yielding the
// processor between looks; it never sleeps.
func brokerForgets(t *testing.T, srv *mochi.Server, id string) {
	t.Helper()
	end := time.Now().Add(deadline)
	for {
		if _, ok := srv.Clients.Get(id); !ok {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("broker still holds client %s after %v", id, deadline)
		}
		runtime.Gosched()
	}
}
