package broker

import (
	"errors"
	"net"
	"reflect"
	"testing"
	"time"

	paho5 "github.com/eclipse/paho.golang/paho"
)

// inlineRecorder collects what an inline subscription receives.
type inlineRecorder chan InlineMessage

func (r inlineRecorder) handle(m InlineMessage) { r <- m }

func (r inlineRecorder) next(t *testing.T) InlineMessage {
	t.Helper()
	select {
	case m := <-r:
		return m
	case <-time.After(eventWait):
		t.Fatal("timed out waiting for an inline message")
		panic("unreachable")
	}
}

// none fails if r holds a message. Inline deliveries of PublishInline are
// synchronous, so a call that returned has delivered whatever it would.
func (r inlineRecorder) none(t *testing.T, what string) {
	t.Helper()
	select {
	case m := <-r:
		t.Errorf("%s: got %s %q", what, m.Topic, m.Payload)
	default:
	}
}

// A client's publish reaches an inline subscription with the broker's
// username stamp among its user properties (a forged one removed), live
// and so with Retained false even though the publisher set the flag, which
// RetainFlag keeps; another account's publish carries that account's
// stamp.
func TestInlineSubscriptionGetsClientPublishesStamped(t *testing.T) {
	b := startBroker(t, Options{Listen: "127.0.0.1:0", StampUsernameProperty: stampKey, Users: map[string]string{
		"bridge": "bridge-password", "mallory": "mallory-password"}})
	got := make(inlineRecorder, 8)
	unsubscribe, err := b.SubscribeInline("z2m/#", got.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer unsubscribe()

	bridge := dialV5(t, b, "bridge", creds{"bridge", "bridge-password"})
	if _, err := bridge.c.Publish(ctxFor(t), &paho5.Publish{Topic: "z2m/lamp", QoS: 1, Retain: true, Payload: []byte(`{"state":"ON"}`),
		Properties: &paho5.PublishProperties{User: paho5.UserProperties{{Key: "note", Value: "kept"}, {Key: stampKey, Value: "forged"}}}}); err != nil {
		t.Fatal(err)
	}
	m := got.next(t)
	want := InlineMessage{Topic: "z2m/lamp", Payload: []byte(`{"state":"ON"}`), QoS: 1, Retained: false, RetainFlag: true,
		User: []UserProperty{{"note", "kept"}, {stampKey, "bridge"}}}
	if !reflect.DeepEqual(m, want) {
		t.Errorf("the bridge's report: %+v; want %+v", m, want)
	}

	mallory := dialV3(t, b, "mallory", creds{"mallory", "mallory-password"})
	mustWait(t, mallory.c.Publish("z2m/lamp", 1, false, `{"state":"OFF"}`))
	m = got.next(t)
	if want := []UserProperty{{stampKey, "mallory"}}; !reflect.DeepEqual(m.User, want) || m.RetainFlag {
		t.Errorf("another account's report: properties %v, retain flag %v; want %v and false", m.User, m.RetainFlag, want)
	}
	mustWait(t, mallory.c.Publish("z2m/lamp", 1, true, "")) // clear the retained report
}

// What the broker publishes inline reaches network subscribers, at their
// QoS and with the retain flag for a later subscriber, and never an inline
// subscription: neither live (No Local) nor replayed from the retained
// store.
func TestInlinePublishesAreNotDeliveredBackInline(t *testing.T) {
	b := startBroker(t, Options{Listen: "127.0.0.1:0"})
	got := make(inlineRecorder, 8)
	unsubscribe, err := b.SubscribeInline("hearth/#", got.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer unsubscribe()
	live := dialV5(t, b, "automation", creds{})
	live.subscribe(t, "hearth/#")

	if err := b.PublishInline("hearth/lamp/result", []byte(`{"status":"succeeded"}`), false, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.PublishInline("hearth/bridge/state", []byte("online"), true, 1); err != nil {
		t.Fatal(err)
	}
	got.none(t, "the inline subscription, live")
	if m := recv(t, live.msgs); m.Topic != "hearth/lamp/result" || m.QoS != 1 || m.Retain {
		t.Errorf("the network subscriber's first message: %s QoS %d retained %v; want hearth/lamp/result QoS 1 not retained", m.Topic, m.QoS, m.Retain)
	}
	if m := recv(t, live.msgs); m.Topic != "hearth/bridge/state" || string(m.Payload) != "online" {
		t.Errorf("the network subscriber's second message: %s %q; want hearth/bridge/state online", m.Topic, m.Payload)
	}

	later := dialV5(t, b, "later", creds{})
	later.subscribe(t, "hearth/bridge/state")
	if m := recv(t, later.msgs); !m.Retain || string(m.Payload) != "online" {
		t.Errorf("a later subscriber: %q retained %v; want online, retained", m.Payload, m.Retain)
	}
	again := make(inlineRecorder, 8)
	unsubscribeAgain, err := b.SubscribeInline("hearth/#", again.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer unsubscribeAgain()
	again.none(t, "a later inline subscription's replay")

	// A client's publish on the same topics still arrives, once per
	// subscription.
	c := dialV3(t, b, "other", creds{})
	mustWait(t, c.c.Publish("hearth/lamp/set", 1, false, "ON"))
	for _, r := range []inlineRecorder{got, again} {
		if m := r.next(t); m.Topic != "hearth/lamp/set" {
			t.Errorf("a client's publish: %s; want hearth/lamp/set", m.Topic)
		}
	}
}

// A retained message is replayed to a new inline subscription before
// SubscribeInline returns, marked Retained, with the stamp it was
// published with; a live message after it is not marked, retained or
// not.
func TestInlineReplayIsMarkedRetainedAndLiveIsNot(t *testing.T) {
	b := startBroker(t, Options{Listen: "127.0.0.1:0", StampUsernameProperty: stampKey, Users: map[string]string{"bridge": "bridge-password"}})
	bridge := dialV3(t, b, "bridge", creds{"bridge", "bridge-password"})
	mustWait(t, bridge.c.Publish("z2m/lamp", 1, true, `{"state":"ON"}`))
	// Routed, so that it does not also arrive live (see the end).
	mustWait(t, bridge.c.Publish("barrier", 1, false, "x"))

	got := make(inlineRecorder, 8)
	unsubscribe, err := b.SubscribeInline("z2m/+", got.handle)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-got:
		want := InlineMessage{Topic: "z2m/lamp", Payload: []byte(`{"state":"ON"}`), QoS: 1, Retained: true, RetainFlag: true,
			User: []UserProperty{{stampKey, "bridge"}}}
		if !reflect.DeepEqual(m, want) {
			t.Errorf("the replay: %+v; want %+v", m, want)
		}
	default:
		t.Fatal("SubscribeInline returned before replaying the retained report")
	}

	for _, retain := range []bool{true, false} {
		mustWait(t, bridge.c.Publish("z2m/lamp", 1, retain, `{"state":"OFF"}`))
		if m := got.next(t); m.Retained || m.RetainFlag != retain {
			t.Errorf("a live report published with retain %v: Retained %v, RetainFlag %v; want false, %v", retain, m.Retained, m.RetainFlag, retain)
		}
	}

	unsubscribe()
	unsubscribe() // a second call does nothing
	mustWait(t, bridge.c.Publish("z2m/lamp", 1, false, `{"state":"ON"}`))
	// mochi PUBACKs a QoS 1 publish before it routes it, but routes one
	// client's publishes in order: this PUBACK follows the routing of the
	// publish before.
	mustWait(t, bridge.c.Publish("z2m/lamp", 1, true, ""))
	got.none(t, "after unsubscribe")
}

// A network client cannot use the inline client's ID: its CONNECT is
// refused with "identifier rejected" (3.1.1) or 0x85 (MQTT 5), reported
// as RefusedOther, and the broker's inline subscriptions keep hearing it
// under another ID.
func TestTheInlineClientIDIsRefused(t *testing.T) {
	events := make(chan ConnectEvent, 16)
	b := startBroker(t, Options{Listen: "127.0.0.1:0", OnConnect: func(e ConnectEvent) { events <- e }})
	got := make(inlineRecorder, 8)
	unsubscribe, err := b.SubscribeInline("x", got.handle)
	if err != nil {
		t.Fatal(err)
	}
	defer unsubscribe()

	if a := connect(b, inlineClientID, false); a.code != 0x02 {
		t.Errorf("3.1.1 CONNECT as %q: return code %d (%v); want 2 (identifier rejected)", inlineClientID, a.code, a.err)
	}
	if a := connect(b, inlineClientID, true); a.code != 0x85 {
		t.Errorf("MQTT 5 CONNECT as %q: reason code 0x%02x (%v); want 0x85 (client identifier not valid)", inlineClientID, a.code, a.err)
	}
	for range 2 {
		select {
		case e := <-events:
			if e.ClientID != inlineClientID || e.Refusal != RefusedOther {
				t.Errorf("event %+v; want %s refused as %s", e, inlineClientID, RefusedOther)
			}
		case <-time.After(eventWait):
			t.Fatal("no ConnectEvent for the refusal")
		}
	}
	c := dialV3(t, b, "someone", creds{})
	mustWait(t, c.c.Publish("x", 1, false, "hello"))
	if m := got.next(t); string(m.Payload) != "hello" {
		t.Errorf("got %q; want hello", m.Payload)
	}
}

// PublishInline refuses what no client could publish, and both calls fail
// with ErrClosed once the broker is closed.
func TestInlineRefusesBadTopicsAndAClosedBroker(t *testing.T) {
	b := startBroker(t, Options{})
	for _, topic := range []string{"", "a/+", "a/#", "$SYS/x"} {
		if err := b.PublishInline(topic, nil, false, 0); err == nil {
			t.Errorf("PublishInline(%q): nil error; want one", topic)
		}
	}
	if err := b.PublishInline("a", nil, false, 3); err == nil {
		t.Error("PublishInline at QoS 3: nil error; want one")
	}
	if _, err := b.SubscribeInline("a/#/b", func(InlineMessage) {}); err == nil {
		t.Error("SubscribeInline(a/#/b): nil error; want one")
	}
	if _, err := b.SubscribeInline("a", nil); err == nil {
		t.Error("SubscribeInline with a nil handler: nil error; want one")
	}
	b.Close()
	if err := b.PublishInline("a", nil, false, 1); !errors.Is(err, ErrClosed) || !errors.Is(err, net.ErrClosed) {
		t.Errorf("PublishInline after Close: %v; want ErrClosed", err)
	}
	if _, err := b.SubscribeInline("a", func(InlineMessage) {}); !errors.Is(err, ErrClosed) {
		t.Errorf("SubscribeInline after Close: %v; want ErrClosed", err)
	}
}
