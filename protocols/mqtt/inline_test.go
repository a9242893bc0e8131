package mqtt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho3 "github.com/eclipse/paho.mqtt.golang"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// inlineBroker is a real mochi broker with its inline client on, on a free
// loopback port, and an InlineBroker over it as the embedded broker's
// adapter makes one (this package may not import Hearth's broker).
type inlineBroker struct {
	srv  *mochi.Server
	addr string
	last atomic.Int64
	// entered, if set, gets every message's topic as the broker hands it
	// to Inline, before Inline's handlers run.
	entered chan string
}

func startInlineBroker(t *testing.T) *inlineBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := mochi.New(&mochi.Options{InlineClient: true, Logger: slog.New(slog.DiscardHandler)})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddListener(listeners.NewNet("t", ln)); err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeBroker(srv) })
	return &inlineBroker{srv: srv, addr: ln.Addr().String()}
}

func (b *inlineBroker) Publish(topic string, payload []byte, retained bool, qos byte) error {
	return b.srv.Publish(topic, payload, retained, qos)
}

func (b *inlineBroker) Subscribe(filter string, retainAsPublished bool, h Handler) (func(), error) {
	id := int(b.last.Add(1))
	deliver := func(pk packets.Packet, replay bool) {
		if pk.Origin == mochi.InlineClientId {
			return // No Local
		}
		if b.entered != nil {
			b.entered <- pk.TopicName
		}
		var user []UserProperty
		for _, p := range pk.Properties.User {
			user = append(user, UserProperty{p.Key, p.Val})
		}
		h(NewMessage(pk.TopicName, pk.Payload, pk.FixedHeader.Qos, replay || (retainAsPublished && pk.FixedHeader.Retain), user))
	}
	b.srv.Topics.InlineSubscribe(mochi.InlineSubscription{
		Subscription: packets.Subscription{Identifier: id, Filter: filter},
		Handler:      func(_ *mochi.Client, _ packets.Subscription, pk packets.Packet) { deliver(pk, false) },
	})
	for _, pk := range b.srv.Topics.Messages(filter) {
		deliver(pk, true)
	}
	return func() { b.srv.Topics.InlineUnsubscribe(id, filter) }, nil
}

// client connects an MQTT 3.1.1 client until the test ends.
func (b *inlineBroker) client(t *testing.T, id string) paho3.Client {
	t.Helper()
	c := paho3.NewClient(paho3.NewClientOptions().AddBroker("tcp://" + b.addr).SetClientID(id).
		SetProtocolVersion(4).SetAutoReconnect(false).SetOrderMatters(true))
	waitToken(t, c.Connect())
	t.Cleanup(func() { c.Disconnect(0) })
	return c
}

func recvMessage(t *testing.T, ch <-chan Message) Message {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(deadline):
		t.Fatal("timed out waiting for a message")
		panic("unreachable")
	}
}

func recvTopic(t *testing.T, ch <-chan string) string {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(deadline):
		t.Fatal("timed out waiting for a topic")
		panic("unreachable")
	}
}

// routed waits until the broker has routed every message c published
// before: mochi sends a QoS 1 PUBACK before it routes the message, but
// handles one client's publishes one after the other, so a later
// publish's PUBACK follows the routing of every earlier one.
func routed(t *testing.T, c paho3.Client) {
	t.Helper()
	waitToken(t, c.Publish("barrier", 1, false, "x"))
}

// runInline runs c until the test ends, or until the returned stop.
func runInline(t *testing.T, c *Inline) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	select {
	case <-c.Up():
	case err := <-done:
		t.Fatalf("Run returned %v before it was up", err)
	case <-time.After(deadline):
		t.Fatal("Inline never came up")
	}
	return stop
}

// Run calls OnSession once, then makes the subscriptions (their retained
// messages replayed, marked Retained), then publishes the birth retained,
// then calls OnConnect once and is Connected; OnLost has no counterpart.
// At stop it publishes the offline announcement retained, is no longer
// Connected, refuses publishes with ErrNotConnected, and its handlers get
// nothing more.
func TestInlineRunsSessionSubscriptionsBirthThenConnect(t *testing.T) {
	b := startInlineBroker(t)
	bridge := b.client(t, "bridge")
	waitToken(t, bridge.Publish("z2m/lamp", 1, true, `{"state":"ON"}`))
	routed(t, bridge) // so that it is not also live once Inline subscribes

	var (
		mu    sync.Mutex
		steps []string
	)
	step := func(s string) { mu.Lock(); steps = append(steps, s); mu.Unlock() }
	status := Announcement{Topic: "hearth/bridge/state", Online: "online", Offline: "offline"}
	var c *Inline
	c = NewInline(InlineOptions{
		Broker:    b,
		ClientID:  "hearth-test",
		Status:    status,
		OnSession: func() { step("session") },
		OnConnect: func(context.Context) {
			pk, _ := b.srv.Topics.Retained.Get(status.Topic)
			step("connect, status " + string(pk.Payload))
		},
	})
	if err := c.Publish(context.Background(), "hearth/x", 1, false, nil); !errors.Is(err, ErrNotConnected) {
		t.Errorf("Publish before Run: %v; want ErrNotConnected", err)
	}
	got := make(chan Message, 8)
	if err := c.Subscribe(context.Background(), "z2m/#", 1, func(m Message) {
		step("report " + m.Topic)
		got <- m
	}); err != nil {
		t.Fatal(err)
	}
	stop := runInline(t, c)
	mu.Lock()
	if want := []string{"session", "report z2m/lamp", "connect, status online"}; !reflect.DeepEqual(steps, want) {
		t.Errorf("steps %q; want %q", steps, want)
	}
	mu.Unlock()
	if m := recvMessage(t, got); !m.Retained {
		t.Error("the replayed report is not marked retained")
	}
	if !c.Connected() || c.Conflict() != nil {
		t.Errorf("Connected %v, Conflict %v; want true, nil", c.Connected(), c.Conflict())
	}

	waitToken(t, bridge.Publish("z2m/lamp", 1, true, `{"state":"OFF"}`))
	if m := recvMessage(t, got); m.Retained || string(m.Payload) != `{"state":"OFF"}` {
		t.Errorf("a live report: %q retained %v; want OFF, not retained", m.Payload, m.Retained)
	}

	stop()
	if pk, _ := b.srv.Topics.Retained.Get(status.Topic); string(pk.Payload) != "offline" {
		t.Errorf("retained status after stop: %q; want offline", pk.Payload)
	}
	if c.Connected() {
		t.Error("Connected after stop")
	}
	if err := c.Publish(context.Background(), "hearth/x", 1, false, nil); !errors.Is(err, ErrNotConnected) {
		t.Errorf("Publish after stop: %v; want ErrNotConnected", err)
	}
	waitToken(t, bridge.Publish("z2m/lamp", 1, true, ""))
	routed(t, bridge)
	select {
	case m := <-got:
		t.Errorf("a handler got %s %q after stop", m.Topic, m.Payload)
	default:
	}
	mu.Lock()
	if n := len(steps); n != 4 {
		t.Errorf("steps %q; want OnSession and OnConnect once each", steps)
	}
	mu.Unlock()
}

// Inline's own publishes reach network subscribers and never its own
// handlers; a handler may publish.
func TestInlineDoesNotHearItself(t *testing.T) {
	b := startInlineBroker(t)
	c := NewInline(InlineOptions{Broker: b})
	heard := make(chan Message, 8)
	if err := c.Subscribe(context.Background(), "hearth/#", 1, func(m Message) {
		heard <- m
		if err := c.Publish(context.Background(), "hearth/"+m.Topic[len("hearth/"):]+"/result", 1, false, []byte("done")); err != nil {
			t.Errorf("publish from a handler: %v", err)
		}
	}); err != nil {
		t.Fatal(err)
	}
	runInline(t, c)
	automation := b.client(t, "automation")
	results := make(chan string, 8)
	waitToken(t, automation.Subscribe("hearth/#", 1, func(_ paho3.Client, m paho3.Message) { results <- m.Topic() }))
	waitToken(t, automation.Publish("hearth/lamp", 1, false, "ON"))
	if m := recvMessage(t, heard); m.Topic != "hearth/lamp" {
		t.Fatalf("heard %s; want hearth/lamp", m.Topic)
	}
	seen := map[string]bool{}
	for len(seen) < 2 {
		select {
		case topic := <-results:
			seen[topic] = true
		case <-time.After(deadline):
			t.Fatalf("the automation saw %v; want hearth/lamp and hearth/lamp/result", seen)
		}
	}
	select {
	case m := <-heard:
		t.Errorf("Inline heard its own publish %s", m.Topic)
	default:
	}
}

// On a SubscribeManualAck subscription Retained is the flag the publisher
// set (Retain As Published), on a Subscribe one it is false for a live
// message; Ack does nothing and may be called.
func TestInlineManualAckKeepsTheRetainFlag(t *testing.T) {
	b := startInlineBroker(t)
	c := NewInline(InlineOptions{Broker: b})
	commands, reports := make(chan Message, 8), make(chan Message, 8)
	if err := c.SubscribeManualAck(context.Background(), "hearth/+/set", 1, func(m Message) { m.Ack(); commands <- m }); err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(context.Background(), "z2m/#", 1, func(m Message) { reports <- m }); err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(context.Background(), "hearth/+/set", 1, func(Message) {}); err == nil {
		t.Error("Subscribe to a filter already subscribed with SubscribeManualAck: nil error; want one")
	}
	runInline(t, c)
	a := b.client(t, "automation")
	waitToken(t, a.Publish("hearth/lamp/set", 1, true, "ON"))
	waitToken(t, a.Publish("z2m/lamp", 1, true, `{"state":"ON"}`))
	if m := recvMessage(t, commands); !m.Retained {
		t.Error("a retained command arrived with Retained false; want the publisher's flag")
	}
	if m := recvMessage(t, reports); m.Retained {
		t.Error("a live retained report arrived with Retained true; want false")
	}
	waitToken(t, a.Publish("hearth/lamp/set", 1, true, ""))
	waitToken(t, a.Publish("z2m/lamp", 1, true, ""))
}

// A message that matches several filters reaches each handler once:
// through the filter that covers its own, after the covering filter's
// handler, or through its own filter where filters only partly overlap,
// with the QoS capped by that subscription. A subscription made while
// running replays its retained messages to its own handler before it
// returns; a covered one replays nothing.
func TestInlineRoutesToEveryMatchingHandlerOnce(t *testing.T) {
	b := startInlineBroker(t)
	c := NewInline(InlineOptions{Broker: b})
	var (
		mu  sync.Mutex
		got = map[string][]string{}
		all []string
	)
	record := func(name string) Handler {
		return func(m Message) {
			mu.Lock()
			got[name] = append(got[name], fmt.Sprintf("%s qos %d", m.Topic, m.QoS))
			all = append(all, name)
			mu.Unlock()
		}
	}
	for _, s := range []struct {
		filter string
		qos    byte
		name   string
	}{{"a/#", 1, "wide"}, {"a/b", 1, "covered"}, {"+/b", 0, "partial"}} {
		if err := c.Subscribe(context.Background(), s.filter, s.qos, record(s.name)); err != nil {
			t.Fatal(err)
		}
	}
	runInline(t, c)
	p := b.client(t, "p")
	waitToken(t, p.Publish("a/b/c", 2, false, "x"))
	waitToken(t, p.Publish("a/b", 2, true, "y"))
	routed(t, p)
	mu.Lock()
	want := map[string][]string{
		"wide":    {"a/b/c qos 1", "a/b qos 1"},
		"covered": {"a/b qos 1"},
		"partial": {"a/b qos 0"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("deliveries %q; want %q", got, want)
	}
	// One delivery of a/b through a/# calls wide's handler, then
	// covered's.
	if i := slices.Index(all, "covered"); i < 1 || all[i-1] != "wide" {
		t.Errorf("handlers in the order %q; want covered right after wide", all)
	}
	got = map[string][]string{}
	mu.Unlock()

	if err := c.Subscribe(context.Background(), "a/b", 1, record("late covered")); err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(context.Background(), "+/+", 1, record("late")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if want := map[string][]string{"late": {"a/b qos 1"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("the late subscriptions' replay %q; want %q", got, want)
	}
	mu.Unlock()
	waitToken(t, p.Publish("a/b", 1, true, ""))
}

// Handlers are called one at a time, also for messages of two publishers
// that the broker routes at once.
func TestInlineCallsHandlersOneAtATime(t *testing.T) {
	b := startInlineBroker(t)
	b.entered = make(chan string, 8)
	c := NewInline(InlineOptions{Broker: b})
	var inside atomic.Int32
	release := make(chan struct{})
	firstRuns := make(chan struct{})
	calls := make(chan string, 8)
	if err := c.Subscribe(context.Background(), "r/#", 1, func(m Message) {
		if n := inside.Add(1); n != 1 {
			t.Errorf("%d handlers running at once", n)
		}
		if m.Topic == "r/first" {
			close(firstRuns)
			<-release
		}
		inside.Add(-1)
		calls <- m.Topic
	}); err != nil {
		t.Fatal(err)
	}
	runInline(t, c)
	first, second := b.client(t, "first"), b.client(t, "second")
	tok := first.Publish("r/first", 1, false, "x")
	if topic := recvTopic(t, b.entered); topic != "r/first" {
		t.Fatalf("entered %s; want r/first", topic)
	}
	// The broker hands a message over before Inline takes it in: wait
	// until r/first's handler runs, not only until it has been handed over.
	select {
	case <-firstRuns:
	case <-time.After(deadline):
		t.Fatal("r/first's handler never ran")
	}
	tok2 := second.Publish("r/second", 1, false, "y")
	if topic := recvTopic(t, b.entered); topic != "r/second" {
		t.Fatalf("entered %s; want r/second", topic)
	}
	// r/second is in Inline, waiting for r/first's handler.
	select {
	case topic := <-calls:
		t.Errorf("%s handled while r/first's handler runs", topic)
	default:
	}
	close(release)
	for _, want := range []string{"r/first", "r/second"} {
		if got := recvTopic(t, calls); got != want {
			t.Errorf("handled %s; want %s", got, want)
		}
	}
	waitToken(t, tok)
	waitToken(t, tok2)
}

// NewMessage carries its user properties, of which UserProperty reads the
// last of a name.
func TestNewMessageUserProperties(t *testing.T) {
	m := NewMessage("t", []byte("p"), 1, true, []UserProperty{{"hearth-username", "forged"}, {"note", "x"}, {"hearth-username", "bridge"}})
	if v, ok := m.UserProperty("hearth-username"); !ok || v != "bridge" {
		t.Errorf("UserProperty: %q, %v; want bridge, true", v, ok)
	}
	if _, ok := NewMessage("t", nil, 0, false, nil).UserProperty("note"); ok {
		t.Error("a message without properties has one")
	}
	m.Ack() // does nothing
}
