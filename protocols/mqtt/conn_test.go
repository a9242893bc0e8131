package mqtt

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/jonboulle/clockwork"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/hearthd/hearth/retry"
)

var status = Announcement{Topic: "hearth/bridge/state", Online: "online", Offline: "offline"}

// blockCtx bounds a fake-clock wait.
func blockCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	t.Cleanup(cancel)
	return ctx
}

func blockUntil(t *testing.T, fc *clockwork.FakeClock, waiters int, what string) {
	t.Helper()
	if err := fc.BlockUntilContext(blockCtx(t), waiters); err != nil {
		t.Fatalf("%s: the Conn did not wait on the clock within %v: %v", what, deadline, err)
	}
}

func TestConnUpAnnouncesRetainedBirth(t *testing.T) {
	b := startBroker(t)
	connects := make(chan struct{}, 8)
	r := runConn(t, b.url(), Options{Status: status, OnConnect: func(context.Context) { connects <- struct{}{} }}, nil)
	r.waitUp(t)
	if !r.Connected() {
		t.Errorf("Connected() = false after Up")
	}
	if got := len(connects); got != 1 {
		t.Errorf("OnConnect ran %d times before Up, want 1", got)
	}
	if got := retainedOn(t, b.url(), status.Topic); got.payload != "online" {
		t.Errorf("retained %s = %q, want %q", status.Topic, got.payload, "online")
	}
}

func TestConnDeliversMessagesInOrderToSubscriptionsMadeBeforeRun(t *testing.T) {
	b := startBroker(t)
	cmds, q0 := newInbox(), newInbox()
	r := runConn(t, b.url(), Options{}, func(c *Conn) {
		if err := c.Subscribe(context.Background(), "cmd/#", 1, cmds.handler); err != nil {
			t.Fatalf("Subscribe before Run: %v", err)
		}
		if err := c.Subscribe(context.Background(), "q0/+", 0, q0.handler); err != nil {
			t.Fatalf("Subscribe before Run: %v", err)
		}
	})
	r.waitUp(t)
	pub := newClient(t, b.url())
	const n = 50
	for i := range n {
		pub.publish(t, fmt.Sprintf("cmd/dev%d/set", i%3), false, strconv.Itoa(i))
	}
	pub.publish(t, "q0/x", false, "zero")
	for i := range n {
		m := cmds.next(t)
		want := Message{Topic: fmt.Sprintf("cmd/dev%d/set", i%3), Payload: []byte(strconv.Itoa(i)), QoS: 1}
		if m.Topic != want.Topic || string(m.Payload) != string(want.Payload) || m.QoS != want.QoS || m.Retained || m.Duplicate {
			t.Fatalf("message %d = {%s %q qos %d retained %v dup %v}, want {%s %q qos 1 retained false dup false}",
				i, m.Topic, m.Payload, m.QoS, m.Retained, m.Duplicate, want.Topic, want.Payload)
		}
	}
	if m := q0.next(t); m.Topic != "q0/x" || string(m.Payload) != "zero" || m.QoS != 0 {
		t.Errorf("QoS 0 subscription got {%s %q qos %d}, want {q0/x \"zero\" qos 0}", m.Topic, m.Payload, m.QoS)
	}
}

// A subscription made while the connection is up is in place when
// Subscribe returns (it waits for the SUBACK).
func TestConnSubscribeWhileUpIsInPlaceOnReturn(t *testing.T) {
	b := startBroker(t)
	r := runConn(t, b.url(), Options{}, nil)
	r.waitUp(t)
	in := newInbox()
	if err := r.Subscribe(context.Background(), "late/#", 1, in.handler); err != nil {
		t.Fatalf("Subscribe while up: %v", err)
	}
	newClient(t, b.url()).publish(t, "late/x", false, "hello")
	if m := in.next(t); m.Topic != "late/x" || string(m.Payload) != "hello" {
		t.Errorf("got {%s %q}, want {late/x \"hello\"}", m.Topic, m.Payload)
	}
}

// A filter the broker refuses is reported as an error.
func TestConnSubscribeRefusedFilterIsAnError(t *testing.T) {
	b := startBroker(t)
	r := runConn(t, b.url(), Options{}, nil)
	r.waitUp(t)
	if err := r.Subscribe(context.Background(), "a/#/b", 1, newInbox().handler); err == nil {
		t.Errorf("Subscribe(a/#/b) = nil, want an error for an invalid filter")
	}
}

// Command subscriptions (SubscribeManualAck) ask for Retain As Published:
// a command published with the retain flag arrives with it even when it is
// live, so it can be refused. Other subscriptions keep MQTT's default: the
// flag marks only messages replayed from the retained store on subscribe,
// so a bridge that retains its live reports still sends news.
func TestConnRetainFlagPerSubscription(t *testing.T) {
	b := startBroker(t)
	pub := newClient(t, b.url())
	pub.publish(t, "cmd/old/set", true, "stale")
	pub.publish(t, "state/old", true, "stale")
	// mochi sends the PUBACK before it fans a message out: make sure
	// "stale" is only in the retained store by the time the Conn
	// subscribes, not also on its way as a live message.
	pub.barrier(t)
	cmds, states := newInbox(), newInbox()
	r := runConn(t, b.url(), Options{}, func(c *Conn) {
		c.SubscribeManualAck(context.Background(), "cmd/#", 1, func(m Message) { cmds.handler(m); m.Ack() })
		c.Subscribe(context.Background(), "state/#", 1, states.handler)
	})
	r.waitUp(t)
	// mochi sends the SUBACK before it replays the retained store: let
	// the replay finish, or a message published now may come twice.
	r.barrier(t)

	tests := []struct {
		publish      func()
		in           inbox
		topic, value string
		retained     bool
	}{
		{func() {}, cmds, "cmd/old/set", "stale", true}, // from the retained store
		{func() {}, states, "state/old", "stale", true}, // from the retained store
		{func() { pub.publish(t, "cmd/lamp/set", true, "ON") }, cmds, "cmd/lamp/set", "ON", true},
		{func() { pub.publish(t, "cmd/lamp/set", false, "OFF") }, cmds, "cmd/lamp/set", "OFF", false},
		{func() { pub.publish(t, "state/lamp", true, "ON") }, states, "state/lamp", "ON", false},
	}
	for _, tc := range tests {
		tc.publish()
		m := tc.in.next(t)
		if m.Topic != tc.topic || string(m.Payload) != tc.value || m.Retained != tc.retained {
			t.Errorf("got {%s %q retained %v}, want {%s %q retained %v}", m.Topic, m.Payload, m.Retained, tc.topic, tc.value, tc.retained)
		}
	}
}

// Every subscription sets No Local: what the Conn publishes does not come
// back to it. The other client's message, published after the Conn's own
// was acknowledged, is the first one the handler sees.
func TestConnDoesNotReceiveItsOwnPublishes(t *testing.T) {
	b := startBroker(t)
	in := newInbox()
	r := runConn(t, b.url(), Options{}, func(c *Conn) { c.Subscribe(context.Background(), "echo/#", 1, in.handler) })
	r.waitUp(t)
	if err := r.Publish(context.Background(), "echo/self", 1, false, []byte("mine")); err != nil {
		t.Fatal(err)
	}
	r.barrier(t) // echo/self is fanned out before echo/other is published
	newClient(t, b.url()).publish(t, "echo/other", false, "theirs")
	if m := in.next(t); m.Topic != "echo/other" {
		t.Errorf("first message = {%s %q}, want echo/other: the Conn received its own publish", m.Topic, m.Payload)
	}
}

func TestConnPublishWhileNotConnectedReturnsErrNotConnected(t *testing.T) {
	b := startBroker(t)
	c := New(Options{URL: b.url(), ClientID: "never-run"})
	if err := c.Publish(context.Background(), "x", 1, false, nil); !errors.Is(err, ErrNotConnected) {
		t.Errorf("Publish before Run = %v, want ErrNotConnected", err)
	}
	if c.Connected() {
		t.Errorf("Connected() = true before Run")
	}

	r := runConn(t, b.url(), Options{}, nil)
	r.waitUp(t)
	if err := r.Publish(context.Background(), "x", 1, false, nil); err != nil {
		t.Errorf("Publish while up = %v, want nil", err)
	}
	r.stop(t)
	if err := r.Publish(context.Background(), "x", 1, false, nil); !errors.Is(err, ErrNotConnected) {
		t.Errorf("Publish after a clean stop = %v, want ErrNotConnected", err)
	}
	if r.Connected() {
		t.Errorf("Connected() = true after a clean stop")
	}
}

// ErrNotConnected says that nothing was sent, through a NotSent method the
// dispatcher can test for without importing this package.
func TestErrNotConnectedSaysNotSent(t *testing.T) {
	err := New(Options{URL: "tcp://127.0.0.1:1", ClientID: "x"}).Publish(context.Background(), "x", 1, false, nil)
	var ns interface{ NotSent() bool }
	if !errors.As(err, &ns) || !ns.NotSent() {
		t.Errorf("Publish while not connected = %v (%T), want an error with NotSent() == true", err, err)
	}
	if got, want := err.Error(), "mqtt: not connected"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	wrapped := fmt.Errorf("send: %w", err)
	if !errors.Is(wrapped, ErrNotConnected) {
		t.Errorf("errors.Is(wrapped, ErrNotConnected) = false")
	}
}

// Each PUBACK failure code has the retry class its meaning gives it; only
// "quota exceeded" is worth another attempt.
func TestRefusedErrorClass(t *testing.T) {
	tests := []struct {
		code      byte
		class     retry.Class
		permanent bool
	}{
		{0x80, retry.Refused, true},        // unspecified error
		{0x83, retry.Refused, true},        // implementation specific error
		{0x87, retry.Unauthorized, true},   // not authorized
		{0x90, retry.Refused, true},        // topic name invalid
		{0x97, retry.RateLimited, false},   // quota exceeded
		{0x99, retry.InvalidPayload, true}, // payload format invalid
	}
	for _, tc := range tests {
		err := fmt.Errorf("send: %w", &RefusedError{Topic: "t", ReasonCode: tc.code})
		if got := retry.Classify(err); got != tc.class {
			t.Errorf("reason 0x%02x: class %q, want %q", tc.code, got, tc.class)
		}
		if got := retry.Classify(err).Permanent(); got != tc.permanent {
			t.Errorf("reason 0x%02x: class permanent = %v, want %v", tc.code, got, tc.permanent)
		}
	}
}

// A PUBACK with a failure reason code is a RefusedError that says it is
// permanent; the connection stays up.
func TestConnPublishRefusedByBrokerIsPermanent(t *testing.T) {
	b := startBroker(t)
	b.ev.setOnPublish(func(_ *mochi.Client, pk packets.Packet) error {
		if pk.TopicName == "forbidden/x" {
			return packets.ErrNotAuthorized // PUBACK reason 0x87
		}
		return nil
	})
	r := runConn(t, b.url(), Options{}, nil)
	r.waitUp(t)
	err := r.Publish(context.Background(), "forbidden/x", 1, false, []byte("x"))
	var refused *RefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("Publish(forbidden/x) = %v (%T), want a *RefusedError", err, err)
	}
	if got, want := *refused, (RefusedError{Topic: "forbidden/x", ReasonCode: 0x87}); got != want {
		t.Errorf("RefusedError = %+v, want %+v", got, want)
	}
	if !refused.Permanent() {
		t.Errorf("Permanent() = false, want true")
	}
	if got := retry.Classify(err); got != retry.Unauthorized {
		t.Errorf("retry.Classify = %q, want %q", got, retry.Unauthorized)
	}
	if got, want := err.Error(), "publish forbidden/x: refused by the broker (reason code 0x87)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if err := r.Publish(context.Background(), "allowed/x", 1, false, nil); err != nil {
		t.Errorf("Publish after a refusal = %v, want nil (connection still up)", err)
	}
	if !r.Connected() {
		t.Errorf("Connected() = false after a refused publish")
	}
}

// A clean stop publishes offline, retained, and disconnects normally, so
// the broker discards the will instead of sending a second offline.
func TestConnCleanStopPublishesOfflineWithoutWill(t *testing.T) {
	b := startBroker(t)
	watch := newClient(t, b.url(), "hearth/#")
	const id = "hearth-clean-stop"
	r := runConn(t, b.url(), Options{ClientID: id, Status: status}, nil)
	r.waitUp(t)
	if m := watch.next(t); m != (received{topic: status.Topic, payload: "online"}) {
		t.Fatalf("watcher got %+v, want the live birth", m)
	}

	r.stop(t)
	b.ev.waitDisconnected(t, id) // the will, if any, is out by now
	watch.publish(t, "hearth/marker", false, "after")

	want := []received{
		{topic: status.Topic, payload: "offline"},
		{topic: "hearth/marker", payload: "after"}, // not a second offline from the will
	}
	for i, w := range want {
		if got := watch.next(t); got != w {
			t.Errorf("message %d after stop = %+v, want %+v", i, got, w)
		}
	}
	if got := b.ev.willsSent(id); got != 0 {
		t.Errorf("broker sent %d wills for a clean stop, want 0", got)
	}
	if got := retainedOn(t, b.url(), status.Topic); got.payload != "offline" {
		t.Errorf("retained %s after stop = %q, want offline", status.Topic, got.payload)
	}
}

// When the network drops the connection (no DISCONNECT either way), the
// broker sends the will; the Conn waits out the full-jitter delay on its clock, reconnects,
// resubscribes and announces itself again.
func TestConnUncleanLossSendsWillThenReconnects(t *testing.T) {
	b := startBroker(t)
	fc := clockwork.NewFakeClock()
	connects := make(chan struct{}, 8)
	in := newInbox()
	const id = "hearth-unclean"
	watch := newClient(t, b.url(), status.Topic)
	link := startProxy(t, b.addr)
	r := runConn(t, link.url(), Options{
		ClientID:  id,
		Status:    status,
		Clock:     fc,
		Rand:      ceilingRand{},
		Reconnect: retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 8 * time.Second},
		OnConnect: func(context.Context) { connects <- struct{}{} },
	}, func(c *Conn) { c.Subscribe(context.Background(), "cmd/#", 1, in.handler) })
	waitChan(t, connects, "first connect")
	if m := watch.next(t); m != (received{topic: status.Topic, payload: "online"}) {
		t.Fatalf("watcher got %+v, want the live birth", m)
	}

	link.cut()
	b.ev.waitDisconnected(t, id)
	b.ev.waitEnded(t) // only then may the Conn come back with the same ID
	if m := watch.next(t); m != (received{topic: status.Topic, payload: "offline"}) {
		t.Fatalf("watcher got %+v after the cut, want the will's offline", m)
	}
	if got := b.ev.willsSent(id); got != 1 {
		t.Errorf("broker sent %d wills after an unclean loss, want 1", got)
	}

	blockUntil(t, fc, 1, "reconnect backoff")
	if r.Connected() {
		t.Errorf("Connected() = true while waiting to reconnect")
	}
	if err := r.Publish(context.Background(), "x", 1, false, nil); !errors.Is(err, ErrNotConnected) {
		t.Errorf("Publish while waiting to reconnect = %v, want ErrNotConnected", err)
	}
	fc.Advance(time.Second) // retry 1: ceiling = base
	waitChan(t, connects, "reconnect")
	if m := watch.next(t); m != (received{topic: status.Topic, payload: "online"}) {
		t.Errorf("watcher got %+v after reconnect, want the live birth", m)
	}
	newClient(t, b.url()).publish(t, "cmd/lamp/set", false, "ON")
	if m := in.next(t); m.Topic != "cmd/lamp/set" || string(m.Payload) != "ON" {
		t.Errorf("after reconnect got {%s %q}, want {cmd/lamp/set \"ON\"}", m.Topic, m.Payload)
	}
}

func TestConnReconnectsAndResubscribesAfterBrokerRestart(t *testing.T) {
	b := startBroker(t)
	fc := clockwork.NewFakeClock()
	connects := make(chan struct{}, 8)
	in := newInbox()
	r := runConn(t, b.url(), Options{
		Status:    status,
		Clock:     fc,
		Rand:      ceilingRand{},
		Reconnect: retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 8 * time.Second},
		OnConnect: func(context.Context) { connects <- struct{}{} },
	}, func(c *Conn) { c.Subscribe(context.Background(), "cmd/#", 1, in.handler) })
	waitChan(t, connects, "first connect")

	b.stop()
	blockUntil(t, fc, 1, "reconnect backoff after the broker closed")
	if err := r.Publish(context.Background(), "x", 1, false, nil); !errors.Is(err, ErrNotConnected) {
		t.Errorf("Publish while the broker is down = %v, want ErrNotConnected", err)
	}
	b.start() // same port, empty retained store
	fc.Advance(time.Second)
	waitChan(t, connects, "reconnect to the restarted broker")
	if !r.Connected() {
		t.Errorf("Connected() = false after reconnect")
	}

	newClient(t, b.url()).publish(t, "cmd/lamp/set", false, "ON")
	if m := in.next(t); m.Topic != "cmd/lamp/set" || string(m.Payload) != "ON" {
		t.Errorf("after restart got {%s %q}, want {cmd/lamp/set \"ON\"}", m.Topic, m.Payload)
	}
	if got := retainedOn(t, b.url(), status.Topic); got.payload != "online" {
		t.Errorf("retained %s on the restarted broker = %q, want online", status.Topic, got.payload)
	}
}

// Run retries the first connection too: a hub that boots before its broker
// waits. The delays are the full-jitter ceilings of retries 1, 2, … (the
// stub source draws the top of each interval), and a successful connection
// starts the count again.
func TestConnRetriesFirstConnectUntilBrokerListens(t *testing.T) {
	addr := freeAddr(t)
	b := brokerAt(t, addr)
	fc := clockwork.NewFakeClock()
	in := newInbox()
	connects := make(chan struct{}, 8)
	r := runConn(t, "tcp://"+addr, Options{
		Clock:     fc,
		Rand:      ceilingRand{},
		Reconnect: retry.Backoff{Base: 2 * time.Second, Multiplier: 2, Cap: 8 * time.Second},
		OnConnect: func(context.Context) { connects <- struct{}{} },
	}, func(c *Conn) { c.Subscribe(context.Background(), "cmd/#", 1, in.handler) })

	blockUntil(t, fc, 1, "after attempt 1") // waits ceiling(1) = 2s
	fc.Advance(2 * time.Second)             // attempt 2 fails: nothing listens yet
	blockUntil(t, fc, 1, "after attempt 2") // waits ceiling(2) = 4s
	b.start()
	fc.Advance(4*time.Second - time.Nanosecond)
	// Still waiting: had the timer fired, the Conn would now be connected
	// and waiting on nothing.
	blockUntil(t, fc, 1, "1ns before the second delay ends")
	select {
	case <-r.Up():
		t.Fatal("connected before the backoff delay ended")
	default:
	}
	fc.Advance(time.Nanosecond)
	r.waitUp(t)
	waitChan(t, connects, "first connect")

	newClient(t, b.url()).publish(t, "cmd/lamp/set", false, "ON")
	if m := in.next(t); m.Topic != "cmd/lamp/set" {
		t.Errorf("got %s, want cmd/lamp/set", m.Topic)
	}

	// Lost after a connection that lasted ShortConnection (10 s): the
	// next delay is retry 1's again (2s), not retry 3's.
	fc.Advance(10 * time.Second)
	b.stop()
	blockUntil(t, fc, 1, "after the loss")
	b.start()
	fc.Advance(2*time.Second - time.Nanosecond)
	blockUntil(t, fc, 1, "1ns before the first delay after a loss ends")
	fc.Advance(time.Nanosecond)
	waitChan(t, connects, "reconnect after the loss")
}

// Run returns nil when cancelled while it waits to retry.
func TestConnRunReturnsWhenCancelledDuringBackoff(t *testing.T) {
	fc := clockwork.NewFakeClock()
	r := runConn(t, "tcp://"+freeAddr(t), Options{Clock: fc, Rand: ceilingRand{}}, nil)
	blockUntil(t, fc, 1, "backoff")
	r.stop(t)
}

// SubscribeManualAck: the broker gets the PUBACK only through Ack, Ack is
// idempotent, and acknowledgements go out in arrival order (MQTT 5.0 §4.6)
// whatever order the handlers call Ack in. An unacknowledged message does
// not hold back delivery of later ones, on its own subscription or others.
//
// What this cannot show without waiting: that no PUBACK goes out before Ack
// is called. paho flushes acknowledgements from a 50 ms ticker, so the
// check for an early PUBACK below only catches one that was already out.
func TestConnSubscribeManualAck(t *testing.T) {
	b := startBroker(t)
	manual, auto := newInbox(), newInbox()
	const id = "hearth-manual-ack"
	r := runConn(t, b.url(), Options{ClientID: id}, func(c *Conn) {
		c.SubscribeManualAck(context.Background(), "cmd/#", 1, manual.handler)
		c.Subscribe(context.Background(), "other/#", 1, auto.handler)
	})
	r.waitUp(t)
	pub := newClient(t, b.url())
	pub.publish(t, "cmd/1", false, "a")
	pub.publish(t, "other/1", false, "b")
	pub.publish(t, "cmd/2", false, "c")

	m1 := manual.next(t)
	if m := auto.next(t); m.Topic != "other/1" {
		t.Fatalf("auto-ack subscription got %s, want other/1", m.Topic)
	}
	m2 := manual.next(t)
	if m1.Topic != "cmd/1" || m2.Topic != "cmd/2" {
		t.Fatalf("manual subscription got %s, %s; want cmd/1, cmd/2", m1.Topic, m2.Topic)
	}
	select {
	case ev := <-b.ev.completed:
		t.Fatalf("broker had a PUBACK for %s before any Ack", ev.topic)
	default:
	}

	m2.Ack()
	m2.Ack()
	m1.Ack()
	m1.Ack()
	for _, want := range []string{"cmd/1", "other/1", "cmd/2"} {
		if ev := waitChan(t, b.ev.completed, "PUBACK for "+want); ev != (qosEvent{client: id, topic: want}) {
			t.Errorf("PUBACK = %+v, want %s from %s", ev, want, id)
		}
	}

	// The flow goes on after double acks.
	pub.publish(t, "cmd/3", false, "d")
	m3 := manual.next(t)
	m3.Ack()
	if ev := waitChan(t, b.ev.completed, "PUBACK for cmd/3"); ev.topic != "cmd/3" {
		t.Errorf("PUBACK for %s, want cmd/3", ev.topic)
	}
	var zero Message
	zero.Ack() // a Message without an ack function is a no-op
}

// A Subscribe call made while the Conn is connecting (after it took its
// snapshot of the subscriptions, before the connection is up) still
// subscribes. The proxy holds the SUBACK of the snapshot's SUBSCRIBE to
// keep that window open; the broker itself is not blocked.
//
// Regression test for the race in the committed conn.go (eb0a31d..0e5d98a),
// where subscribe saw c.client == nil after connect had copied c.subs; the
// working tree's conn.go sets c.client under the same lock as the copy.
func TestConnSubscribeDuringConnectIsNotLost(t *testing.T) {
	b := startBroker(t)
	link := startProxy(t, b.addr)
	const id = "hearth-window"
	snapshot, lateOnWire := make(chan struct{}), make(chan struct{})
	var snapshotOnce, lateOnce sync.Once
	b.ev.setOnSubscribed(func(cl *mochi.Client, pk packets.Packet) {
		if cl.ID != id {
			return
		}
		for _, f := range pk.Filters {
			switch f.Filter {
			case "early/#":
				snapshotOnce.Do(func() { link.hold(); close(snapshot) })
			case "late/#":
				lateOnce.Do(func() { close(lateOnWire) })
			}
		}
	})
	early, late := newInbox(), newInbox()
	r := runConn(t, link.url(), Options{ClientID: id}, func(c *Conn) {
		c.Subscribe(context.Background(), "early/#", 1, early.handler)
	})
	waitChan(t, snapshot, "the snapshot's SUBSCRIBE")
	select {
	case <-r.Up():
		t.Fatal("Conn up while its SUBACK is held")
	default:
	}

	done := make(chan error, 1)
	go func() { done <- r.Subscribe(context.Background(), "late/#", 1, late.handler) }()
	var subErr error
	returned := false
	select {
	case <-lateOnWire: // the SUBSCRIBE went out; its SUBACK is held too
	case subErr = <-done: // returned without waiting for any SUBACK
		returned = true
	case <-time.After(deadline):
		t.Fatal("Subscribe during connect neither subscribed nor returned")
	}
	link.open()
	if !returned {
		subErr = waitChan(t, done, "Subscribe during connect")
	}
	if subErr != nil {
		t.Fatalf("Subscribe during connect: %v", subErr)
	}
	r.waitUp(t)

	pub := newClient(t, b.url())
	pub.publish(t, "late/x", false, "1")
	pub.publish(t, "early/x", false, "2")
	early.next(t) // late/x, published first, is routed before it if subscribed
	select {
	case m := <-late:
		if m.Topic != "late/x" {
			t.Errorf("late subscription got %s, want late/x", m.Topic)
		}
	default:
		t.Errorf("late/x was not delivered: the subscription made during connect was lost")
	}
}

// A publish waiting for its PUBACK when the connection dies returns as soon
// as the loss is known, saying so, instead of waiting out its own timeout:
// the caller learns the outcome is unknown and can move on.
func TestPublishReturnsWhenTheConnectionIsLost(t *testing.T) {
	b := startBroker(t)
	p := startProxy(t, strings.TrimPrefix(b.url(), "tcp://"))
	r := runConn(t, p.url(), Options{Clock: clockwork.NewFakeClock()}, nil)
	r.waitUp(t)
	p.hold() // the PUBACK will never come back
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		done <- r.Publish(ctx, "held/topic", 1, false, []byte("x"))
	}()
	p.cut()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "connection was lost") && !errors.Is(err, ErrNotConnected) {
			t.Errorf("Publish after the cut: %v; want an error saying the connection was lost", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Publish still waits for a PUBACK on a dead connection")
	}
}

// Two Conns with one client ID take the session from each other in turn.
// After ConflictAfter short connections, a Conn reports the conflict,
// names the client ID, and waits ConflictBackoff more before trying again
// instead of throwing the other off every second.
func TestConnStopsFightingOverItsClientID(t *testing.T) {
	b := startBroker(t)
	const id = "hearth-twin"
	opts := func(fc *clockwork.FakeClock, connects chan struct{}) Options {
		return Options{
			ClientID:        id,
			Clock:           fc,
			Reconnect:       retry.Backoff{Strategy: retry.Fixed, Jitter: retry.None, Base: time.Second},
			ConflictBackoff: time.Minute,
			OnConnect:       func(context.Context) { connects <- struct{}{} },
		}
	}
	fa, fb := clockwork.NewFakeClock(), clockwork.NewFakeClock()
	ca, cb := make(chan struct{}, 8), make(chan struct{}, 8)
	a := runConn(t, b.url(), opts(fa, ca), nil)
	waitChan(t, ca, "a connects")
	bb := runConn(t, b.url(), opts(fb, cb), nil)

	// b takes the session, a takes it back a second later, and so on.
	// Each loss within 10 s of connecting is a short connection.
	for round := 1; round <= 3; round++ {
		waitChan(t, cb, fmt.Sprintf("round %d: b connects", round))
		blockUntil(t, fa, 1, fmt.Sprintf("round %d: a waits to reconnect", round))
		if round < 3 {
			if err := a.Conflict(); err != nil {
				t.Fatalf("round %d: a reports a conflict after %d short connections: %v", round, round, err)
			}
			fa.Advance(time.Second)
			waitChan(t, ca, fmt.Sprintf("round %d: a connects again", round))
			blockUntil(t, fb, 1, fmt.Sprintf("round %d: b waits to reconnect", round))
			fb.Advance(time.Second)
		}
	}
	err := a.Conflict()
	if err == nil || !strings.Contains(err.Error(), `client ID "hearth-twin"`) {
		t.Fatalf("a.Conflict() after 3 short connections = %v, want an error naming the client ID", err)
	}
	// a now waits ConflictBackoff plus its backoff: not a moment less.
	fa.Advance(time.Minute + time.Second - 1)
	blockUntil(t, fa, 1, "a still backing off")
	select {
	case <-ca:
		t.Fatal("a reconnected before ConflictBackoff ended")
	default:
	}
	if !bb.Connected() {
		t.Error("b lost its connection while a backed off")
	}
	fa.Advance(1)
	waitChan(t, ca, "a tries again after the long backoff")
}

// The reconnect delays are the policy's, exactly, up to its cap: here
// exponential with equal jitter and a source that always draws 0, so each
// delay is the lower end t - t/2 of [t/2, t] with t = min(5s, 1s·2^(n-1)).
// A listener that hangs up at once counts the attempts.
func TestConnReconnectDelaysFollowThePolicy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	attempts := make(chan struct{}, 16)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Close()
			attempts <- struct{}{}
		}
	}()
	fc := clockwork.NewFakeClock()
	runConn(t, "tcp://"+ln.Addr().String(), Options{
		Clock:     fc,
		Rand:      floorRand{},
		Reconnect: retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 5 * time.Second, Jitter: retry.Equal},
	}, nil)
	waitChan(t, attempts, "the first attempt")
	for n, want := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 2500 * time.Millisecond, 2500 * time.Millisecond, 2500 * time.Millisecond} {
		blockUntil(t, fc, 1, fmt.Sprintf("backoff %d", n+1))
		fc.Advance(want - 1)
		// Had the timer fired early, the failed attempt would be counted
		// before the Conn waits on the clock again.
		blockUntil(t, fc, 1, fmt.Sprintf("1ns before backoff %d ends", n+1))
		select {
		case <-attempts:
			t.Fatalf("retry %d came before its delay of %v", n+1, want)
		default:
		}
		fc.Advance(1)
		waitChan(t, attempts, fmt.Sprintf("retry %d after %v", n+1, want))
	}
}

type floorRand struct{}

func (floorRand) Int64N(int64) int64 { return 0 }

// OnSession runs at every connect before the subscriptions are made, so a
// retained message of the new session always arrives after it: what it
// resets is never overwritten by a stale value from the last session.
func TestConnOnSessionRunsBeforeRetainedMessages(t *testing.T) {
	b := startBroker(t)
	newClient(t, b.url()).publish(t, "bridge/state", true, "online")
	fc := clockwork.NewFakeClock()
	events := make(chan string, 16)
	r := runConn(t, b.url(), Options{
		Clock:     fc,
		Rand:      ceilingRand{},
		Reconnect: retry.Backoff{Base: time.Second, Cap: time.Second},
		OnSession: func() { events <- "session" },
	}, func(c *Conn) {
		// Only retained deliveries: mochi acknowledges a publish before it
		// fans it out, so a subscription made in between may also get it
		// live.
		c.Subscribe(context.Background(), "bridge/state", 1, func(m Message) {
			if m.Retained {
				events <- "retained " + string(m.Payload)
			}
		})
	})
	r.waitUp(t)
	for _, want := range []string{"session", "retained online"} {
		if got := waitChan(t, events, want); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	b.stop()
	blockUntil(t, fc, 1, "reconnect backoff")
	b.start() // empty retained store
	newClient(t, b.url()).publish(t, "bridge/state", true, "offline")
	fc.Advance(time.Second)
	for _, want := range []string{"session", "retained offline"} {
		if got := waitChan(t, events, want); got != want {
			t.Fatalf("after the reconnect got %q, want %q", got, want)
		}
	}
}

// Network cuts are no client ID conflict, however many come in a row and
// however soon after each connect: a cut fails the dials that follow it
// (the link is down), or leaves the connection unanswered until the
// keep-alive gives up (a black hole). Neither is what a takeover looks
// like, a connection closed by the broker's side with the next connect
// accepted at once, again and again (TestConnTwinOnMosquittoIsAConflict
// WithinAMinute). The reconnects keep the normal backoff, never
// ConflictBackoff. On mochi (the embedded broker's library, here as an
// external broker) and on Mosquitto. (Counting every short connection made a flaky Wi-Fi
// look like a second instance; a router that resets the connection and
// lets the next dial through at once, three times within seconds of
// connecting, does look like one.)
func TestConnNetworkCutsAreNotAClientIDConflict(t *testing.T) {
	for _, tc := range []struct {
		name string
		// cut cuts the link; back brings it back once the Conn waits to
		// reconnect, returning whether that attempt fails first.
		cut  func(*proxy)
		back func(*proxy) (failsFirst bool)
	}{
		{"link down, the next dial fails", (*proxy).takeDown, func(p *proxy) bool { return true }},
		{"black hole until the keep-alive gives up", (*proxy).blackHole, func(*proxy) bool { return false }},
	} {
		for _, broker := range []string{"mochi", "Mosquitto"} {
			t.Run(broker+", "+tc.name, func(t *testing.T) { testNetworkCuts(t, broker, tc.cut, tc.back) })
		}
	}
}

func testNetworkCuts(t *testing.T, broker string, cut func(*proxy), back func(*proxy) bool) {
	const id = "hearth-flaky"
	// gone waits until the broker has finished with the connection cut
	// (mochi: see waitEnded); Mosquitto needs no wait.
	var addr string
	gone := func() {}
	if broker == "Mosquitto" {
		addr = startMosquitto(t).addr
	} else {
		b := startBroker(t)
		addr = b.addr
		gone = func() {
			b.ev.waitDisconnected(t, id)
			b.ev.waitEnded(t)
		}
	}
	fc := clockwork.NewFakeClock()
	waits := make(chan wait, 4)
	connects := make(chan struct{}, 8)
	link := startProxy(t, addr)
	r := runConn(t, link.url(), Options{
		ClientID:  id,
		KeepAlive: time.Second,
		Clock:     &waitClock{FakeClock: fc, name: id, waits: waits},
		Rand:      ceilingRand{},
		Reconnect: retry.Backoff{Strategy: retry.Fixed, Jitter: retry.None, Base: time.Second},
		OnConnect: func(context.Context) { connects <- struct{}{} },
	}, nil)
	waitChan(t, connects, "first connect")
	normal := func(what string) {
		t.Helper()
		w := waitChan(t, waits, what)
		if err := r.Conflict(); err != nil {
			t.Fatalf("%s: Conflict() = %v, want nil: the network, not another client, dropped it", what, err)
		}
		if w.d != time.Second {
			t.Fatalf("%s: the Conn waits %v to reconnect; want the normal backoff, 1s", what, w.d)
		}
		fc.Advance(w.d)
	}
	for n := 1; n <= 3; n++ {
		cut(link)
		gone()
		normal(fmt.Sprintf("cut %d", n))
		if back(link) {
			normal(fmt.Sprintf("cut %d: the dial while the link is down", n))
			link.bringUp()
		}
		waitChan(t, connects, fmt.Sprintf("cut %d: reconnect", n))
	}
}

// A message's user properties are read by key, the last of a repeated key
// winning; a message without them (from an MQTT 3.1.1 publisher) has none.
func TestMessageUserProperty(t *testing.T) {
	b := startBroker(t)
	in := newInbox()
	r := runConn(t, b.url(), Options{}, func(c *Conn) {
		if err := c.Subscribe(context.Background(), "props/#", 1, in.handler); err != nil {
			t.Fatal(err)
		}
	})
	r.waitUp(t)

	conn, err := net.Dial("tcp", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	pub := paho.NewClient(paho.ClientConfig{Conn: conn})
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if _, err := pub.Connect(ctx, &paho.Connect{ClientID: "v5-publisher", KeepAlive: 30, CleanStart: true}); err != nil {
		t.Fatal(err)
	}
	defer func() { pub.Disconnect(&paho.Disconnect{}); <-pub.Done() }()
	props := paho.UserProperties{{Key: "who", Value: "first"}, {Key: "other", Value: "x"}, {Key: "who", Value: "last"}}
	if _, err := pub.Publish(ctx, &paho.Publish{Topic: "props/v5", QoS: 1, Payload: []byte("p"),
		Properties: &paho.PublishProperties{User: props}}); err != nil {
		t.Fatal(err)
	}
	m := in.next(t)
	if v, ok := m.UserProperty("who"); v != "last" || !ok {
		t.Errorf(`UserProperty("who") = %q, %v; want "last", true`, v, ok)
	}
	if v, ok := m.UserProperty("other"); v != "x" || !ok {
		t.Errorf(`UserProperty("other") = %q, %v; want "x", true`, v, ok)
	}
	if v, ok := m.UserProperty("absent"); v != "" || ok {
		t.Errorf(`UserProperty("absent") = %q, %v; want "", false`, v, ok)
	}

	newClient(t, b.url()).publish(t, "props/v3", false, "p")
	if m := in.next(t); m.Topic != "props/v3" {
		t.Fatalf("got %s; want props/v3", m.Topic)
	} else if v, ok := m.UserProperty("who"); ok {
		t.Errorf(`from MQTT 3.1.1: UserProperty("who") = %q, true; want none`, v)
	}
}
