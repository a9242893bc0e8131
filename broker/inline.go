package broker

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// InlineMessage is a PUBLISH delivered to an inline subscription (see
// SubscribeInline): a client's publish or will, after the broker's checks
// and its username stamp.
type InlineMessage struct {
	Topic string
	// Payload is shared with the broker's retained store and its other
	// subscribers: read it, never change it.
	Payload []byte
	// QoS is the QoS the publisher sent it with.
	QoS byte
	// Retained is true only for a message replayed from the retained
	// store when the subscription was made; a live message has false,
	// whatever flag its publisher set (the meaning of the flag on an
	// ordinary MQTT subscription).
	Retained bool
	// RetainFlag is the retain flag as the publisher set it (what an
	// MQTT 5 subscription with Retain As Published receives); true for a
	// replay.
	RetainFlag bool
	// User holds the message's MQTT 5 user properties in the order they
	// came, the broker's username stamp (Options.StampUsernameProperty)
	// last when there is one; nil when there are none.
	User []UserProperty
}

// UserProperty is one MQTT 5 user property.
type UserProperty struct{ Key, Value string }

// ErrClosed is returned by PublishInline and SubscribeInline once Close
// has been called. It wraps net.ErrClosed.
var ErrClosed = fmt.Errorf("embedded broker: closed: %w", net.ErrClosed)

// inlineClientID is the client ID mochi gives the broker's own inline
// client (mqtt.InlineClientId): the Origin of every PublishInline, which
// no network client may use (see inlineID).
const inlineClientID = mqtt.InlineClientId

// inline is the state of the broker's inline client.
type inline struct {
	lastID atomic.Int64 // the last mochi subscription identifier handed out
	closed atomic.Bool
	// retain orders Hearth's own retained publishes with its own
	// subscriptions' scans of the retained store: mochi-mqtt v2.7.9 reads
	// the retained messages of a new wildcard subscription without the
	// lock its writes take (mochi-mqtt/server#200). Network clients'
	// publishes and subscriptions are not covered.
	retain sync.Mutex
	// refused logs the CONNECTs refused for the inline client's ID.
	refused *throttledLog

	// lagging are the subscribers PublishInline found with a full
	// in-flight store, by client ID: when the wait for them began, and
	// whether it was given up (see waitForSubscribers).
	mu      sync.Mutex
	lagging map[string]*lag
	log     *slog.Logger
}

// lag is one subscriber's episode of falling behind.
type lag struct {
	since    time.Time
	gaveUp   bool
	waitedOn int // publishes that waited for it
}

// The flow control of PublishInline: a publish waits while a subscriber
// of its topic has lagHigh QoS 1 and 2 messages in flight (sent, not yet
// acknowledged, or held for its Receive Maximum), half of mochi's store of
// 8,192 beyond which it drops what comes, until it is below lagHigh again,
// for at most lagMaxWait per episode: a subscriber that does not catch up
// by then is given up (its messages are dropped, counted in
// Stats.MessagesDropped, and logged once) until it is down to lagLow, so
// that one client that never reads cannot hold up Hearth for long.
const (
	lagHigh    = 4096
	lagLow     = 1024
	lagMaxWait = 2 * time.Second
	lagPoll    = time.Millisecond
)

// PublishInline publishes payload to topic as the broker itself (mochi's
// inline client), with no socket and no acknowledgement to wait for: the
// broker retains it when retained is set (an empty payload clears the
// topic's retained message) and queues it to every subscriber whose
// filter matches, at the lower of qos and the subscription's QoS, before
// it returns. It passes no ACL (DenyPublish is not asked) and carries no
// username stamp. It is never delivered to an inline subscription (MQTT 5
// No Local: the inline subscriptions are the same client). A network
// subscriber that falls behind makes it wait (see lagHigh), so that what
// Hearth publishes goes at the pace of the slowest subscriber who reads;
// one whose queue is full all the same does not get it (mochi drops it,
// counted in Stats.MessagesDropped; PublishInline does not fail).
//
// The broker keeps payload, in the retained store and in the subscribers'
// queues: the caller must not change it afterwards. PublishInline is safe
// for concurrent use; it fails for a topic that is empty, holds a wildcard
// or starts with $SYS, for qos above 2, and after Close (ErrClosed).
func (b *Broker) PublishInline(topic string, payload []byte, retained bool, qos byte) error {
	if topic == "" || !mqtt.IsValidFilter(topic, true) {
		return fmt.Errorf("embedded broker: publish %q: %w", topic, packets.ErrTopicNameInvalid)
	}
	if qos > 2 {
		return fmt.Errorf("embedded broker: publish %s: QoS %d: want 0, 1 or 2", topic, qos)
	}
	if b.inline.closed.Load() {
		return ErrClosed
	}
	if qos > 0 {
		b.waitForSubscribers(topic)
	}
	if retained {
		b.inline.retain.Lock()
		defer b.inline.retain.Unlock()
	}
	if err := b.srv.Publish(topic, payload, retained, qos); err != nil {
		return fmt.Errorf("embedded broker: publish %s: %w", topic, err)
	}
	return nil
}

// SubscribeInline calls h with every message published to a topic that
// filter matches (MQTT wildcards, as a client's SUBSCRIBE), from now until
// unsubscribe is called: first, before it returns, each retained message
// the filter matches (Retained true), then every message published live
// (Retained false) — by network clients, and the wills of those that
// disconnect uncleanly; never Hearth's own PublishInline (No Local), and
// never the retained messages it published. A live message published
// while the subscription is made may reach h twice, live and replayed,
// in either order.
//
// h runs on the goroutine of whoever published the message (the
// publishing client's read loop, or the goroutine that ends a client for
// its will), so calls for different publishers are concurrent and, for
// one publisher, in the order it published; a replay runs on the caller's
// goroutine. While h runs, that publisher's reads wait: keep it short. It
// must not call SubscribeInline or unsubscribe itself.
//
// unsubscribe may be called more than once; after it returns, h is called
// no more, except by a delivery already under way. SubscribeInline fails
// for an invalid filter, a nil h, and after Close (ErrClosed).
func (b *Broker) SubscribeInline(filter string, h func(InlineMessage)) (unsubscribe func(), err error) {
	if h == nil {
		return nil, errors.New("embedded broker: subscribe: nil handler")
	}
	if !mqtt.IsValidFilter(filter, false) {
		return nil, fmt.Errorf("embedded broker: subscribe %q: %w", filter, packets.ErrTopicFilterInvalid)
	}
	if b.inline.closed.Load() {
		return nil, ErrClosed
	}
	// mochi keys the inline subscriptions that match a topic by this
	// identifier, across filters: each needs its own.
	id := int(b.inline.lastID.Add(1))

	b.srv.Topics.InlineSubscribe(mqtt.InlineSubscription{
		Subscription: packets.Subscription{Identifier: id, Filter: filter},
		Handler: func(_ *mqtt.Client, _ packets.Subscription, pk packets.Packet) {
			if pk.Origin == inlineClientID {
				return // No Local
			}
			h(inlineMessage(pk, false))
		},
	})
	// mochi's own Server.Subscribe replays the retained messages through
	// the live handler, where they could not be told apart.
	b.inline.retain.Lock()
	retained := b.srv.Topics.Messages(filter)
	b.inline.retain.Unlock()
	for _, pk := range retained {
		if pk.Origin == inlineClientID {
			continue
		}
		h(inlineMessage(pk, true))
	}
	return sync.OnceFunc(func() { b.srv.Topics.InlineUnsubscribe(id, filter) }), nil
}

// inlineMessage converts a packet to the message h receives.
func inlineMessage(pk packets.Packet, replayed bool) InlineMessage {
	m := InlineMessage{
		Topic:      pk.TopicName,
		Payload:    pk.Payload,
		QoS:        pk.FixedHeader.Qos,
		Retained:   replayed,
		RetainFlag: replayed || pk.FixedHeader.Retain,
	}
	if n := len(pk.Properties.User); n > 0 {
		m.User = make([]UserProperty, n)
		for i, p := range pk.Properties.User {
			m.User[i] = UserProperty{Key: p.Key, Value: p.Val}
		}
	}
	return m
}

// closeInline makes PublishInline and SubscribeInline fail from now on,
// and logs what the refusal log still holds.
func (b *Broker) closeInline() {
	b.inline.closed.Store(true)
	b.inline.refused.stop()
}

// inlineID is the hook that keeps network clients off the client ID of
// the broker's inline client: mochi would let a CONNECT with it take over
// that client, and Origin, by which SubscribeInline tells Hearth's own
// publishes, would no longer say who published. Such a CONNECT is refused
// with CONNACK 0x85 "client identifier not valid" (0x02 "identifier
// rejected" to 3.1.1), reported as RefusedOther, and logged.
type inlineID struct {
	mqtt.HookBase
	log *throttledLog
}

// ID names the hook in mochi.
func (h *inlineID) ID() string { return "hearth-inline-client-id" }

// Provides says the hook implements OnConnect.
func (h *inlineID) Provides(b byte) bool { return b == mqtt.OnConnect }

// OnConnect refuses the inline client's ID.
func (h *inlineID) OnConnect(cl *mqtt.Client, _ packets.Packet) error {
	if cl.ID != inlineClientID {
		return nil
	}
	h.log.warn("client_id", cl.ID, "remote", cl.Net.Remote)
	code := packets.Err3ClientIdentifierNotValid.Code // 0x02
	if cl.Properties.ProtocolVersion >= 5 {
		code = packets.ErrClientIdentifierNotValid.Code // 0x85
	}
	writeConnack(cl, code) // the guard reports it as RefusedOther
	return errRefused
}

// waitForSubscribers returns once no subscriber of topic that takes QoS 1
// or 2 has lagHigh messages in flight, or every one that has is given up
// (see lagHigh).
func (b *Broker) waitForSubscribers(topic string) {
	var tick *time.Ticker
	defer func() {
		if tick != nil {
			tick.Stop()
		}
	}()
	for {
		behind := b.laggingSubscriber(topic)
		if behind == "" || b.inline.closed.Load() {
			return
		}
		if tick == nil {
			tick = time.NewTicker(lagPoll)
		}
		<-tick.C
	}
}

// laggingSubscriber returns the ID of a subscriber of topic at QoS 1 or 2
// that is lagHigh behind and not given up, or "". It updates the episodes
// of the subscribers it looks at.
func (b *Broker) laggingSubscriber(topic string) string {
	subs := b.srv.Topics.Subscribers(topic)
	in := &b.inline
	in.mu.Lock()
	defer in.mu.Unlock()
	for id, sub := range subs.Subscriptions {
		if sub.Qos == 0 {
			continue
		}
		cl, ok := b.srv.Clients.Get(id)
		if !ok {
			continue
		}
		n := cl.State.Inflight.Len()
		l := in.lagging[id]
		switch {
		case l == nil && n < lagHigh:
			continue
		case l == nil:
			if in.lagging == nil {
				in.lagging = map[string]*lag{}
			}
			l = &lag{since: time.Now()}
			in.lagging[id] = l
		case n < lagLow || (n < lagHigh && !l.gaveUp):
			if l.gaveUp {
				in.log.Warn("embedded broker: a subscriber that fell behind caught up; its messages flow again",
					"client_id", printable(id), "for", time.Since(l.since).Round(time.Millisecond))
			}
			delete(in.lagging, id)
			continue
		}
		if l.gaveUp {
			continue
		}
		if time.Since(l.since) > lagMaxWait {
			l.gaveUp = true
			in.log.Warn("embedded broker: a subscriber does not read what Hearth publishes; its messages are dropped until it catches up",
				"client_id", printable(id), "in_flight", n, "waited", lagMaxWait, "publishes_held", l.waitedOn)
			continue
		}
		l.waitedOn++
		return id
	}
	return ""
}
