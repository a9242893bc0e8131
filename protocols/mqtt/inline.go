package mqtt

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/eclipse/paho.golang/paho"

	"github.com/hearthd/hearth/topic"
)

// UserProperty is one MQTT 5 user property.
type UserProperty struct{ Key, Value string }

// NewMessage returns a received message, for an InlineBroker's adapter to
// hand to a Handler: user holds its MQTT 5 user properties in the order
// they came (Message.UserProperty reads them). Its Ack does nothing, and
// it is no redelivery (Duplicate false).
func NewMessage(topic string, payload []byte, qos byte, retained bool, user []UserProperty) Message {
	m := Message{Topic: topic, Payload: payload, QoS: qos, Retained: retained}
	if len(user) > 0 {
		m.user = make(paho.UserProperties, len(user))
		for i, p := range user {
			m.user[i] = paho.UserProperty{Key: p.Key, Value: p.Value}
		}
	}
	return m
}

// InlineBroker is what Inline needs of an in-process broker (the embedded
// broker's inline client: broker.Broker's PublishInline and
// SubscribeInline, through an adapter in cmd/hearthd).
type InlineBroker interface {
	// Publish publishes payload to topic, retained if retained, at qos,
	// and returns once the broker has handed it to its subscribers (there
	// is no acknowledgement to wait for). The broker may keep payload.
	Publish(topic string, payload []byte, retained bool, qos byte) error
	// Subscribe calls h with every message on a topic that filter
	// matches until unsubscribe is called: first, before it returns, the
	// retained messages, then the live ones; never those that Publish
	// published (MQTT 5 No Local). Message.Retained is, with
	// retainAsPublished, the flag the publisher set (true for a replay),
	// else true only for a replay. h may be called concurrently, for
	// different publishers.
	Subscribe(filter string, retainAsPublished bool, h Handler) (unsubscribe func(), err error)
}

// InlineOptions configures an Inline.
type InlineOptions struct {
	// Broker is the in-process broker; required.
	Broker InlineBroker
	// ClientID names Hearth in the log; the broker never sees it.
	ClientID string
	// Status is announced retained when Run starts (birth), and its
	// Offline when Run stops, if its Topic is set. There is no will: the
	// broker lives and dies with Hearth's process.
	Status Announcement
	// OnSession runs once, when Run starts, before the subscriptions are
	// made (and their retained messages replayed). Keep it short.
	OnSession func()
	// OnConnect runs once, after the subscriptions are made and the birth
	// is published. Keep it short or hand work off.
	OnConnect func(ctx context.Context)
	Logger    *slog.Logger
}

// Inline is Hearth's link to an in-process broker: the methods of Conn
// that Hearth uses, without a socket, a session or acknowledgements. It is
// up from Run's start until its stop, and is never lost, so OnSession and
// OnConnect run once and there is nothing to reconnect. Create it with
// NewInline, register subscriptions, then Run it once.
//
// A message reaches every handler whose filter matches it exactly once,
// also where filters partly overlap (a Conn may deliver it once per
// filter there): a filter that an earlier one covers is not subscribed at
// the broker, and its handler gets the messages of the covering one,
// after the earlier handler. Handlers are called one at a time, as on a
// Conn: messages of one publisher in the order it published them, of
// several publishers in the order the broker routed them. A handler runs
// on the publisher's goroutine inside the broker, so while it runs every
// publisher whose message matches a subscription waits: keep handlers
// short. A handler may publish; it must not subscribe.
type Inline struct {
	opts InlineOptions
	log  *slog.Logger

	// deliver is held while a handler runs.
	deliver sync.Mutex

	mu sync.Mutex
	// subs are the registered subscriptions; the slice is replaced, never
	// changed, so that route reads it without holding mu.
	subs []inlineSub
	// ends holds, per index of subs made at the broker, how to end it.
	ends map[int]func()
	// open: Run has started and not stopped: subscriptions are made at
	// once, and publishes go out. Set under mu.
	open atomic.Bool

	connected atomic.Bool
	up        chan struct{} // closed once the birth is out
}

// inlineSub is a registered subscription and the one, made at the
// broker, whose messages its handler gets: itself, or the earlier one
// that covers it (local).
type inlineSub struct {
	subscription
	via int // index in Inline.subs
}

// NewInline returns an Inline that does nothing until Run.
func NewInline(opts InlineOptions) *Inline {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Inline{opts: opts, log: opts.Logger, ends: map[int]func(){}, up: make(chan struct{})}
}

// ClientID returns the client ID Inline logs as.
func (c *Inline) ClientID() string { return c.opts.ClientID }

// Connected reports whether Run has published the birth and not stopped.
func (c *Inline) Connected() bool { return c.connected.Load() }

// Up is closed once Run has made the subscriptions and published the
// birth.
func (c *Inline) Up() <-chan struct{} { return c.up }

// Conflict returns nil: no other client can take an inline link over.
func (c *Inline) Conflict() error { return nil }

// Subscribe registers h for filter, as Conn.Subscribe does: made at once
// if Run has started (its retained messages reach h before it returns),
// else when Run starts; qos caps Message.QoS. A filter that an earlier
// one of at least its QoS covers is not subscribed at the broker again:
// h gets the earlier one's messages that filter matches, and no replay.
func (c *Inline) Subscribe(ctx context.Context, filter string, qos byte, h Handler) error {
	return c.subscribe(subscription{filter: filter, qos: qos, handler: h})
}

// SubscribeManualAck registers h as Conn.SubscribeManualAck does:
// Message.Retained is the flag the sender set (Retain As Published). The
// broker has acknowledged the publisher before it routes a message, so
// Message.Ack does nothing.
func (c *Inline) SubscribeManualAck(ctx context.Context, filter string, qos byte, h Handler) error {
	return c.subscribe(subscription{filter: filter, qos: qos, handler: h, manualAck: true})
}

func (c *Inline) subscribe(s subscription) error {
	c.mu.Lock()
	for _, o := range c.subs {
		if o.filter == s.filter && o.manualAck != s.manualAck {
			c.mu.Unlock()
			return fmt.Errorf("subscribe %s: already subscribed with other options", s.filter)
		}
	}
	i := len(c.subs)
	via := i
	for j, o := range c.subs {
		if !o.local && o.manualAck == s.manualAck && o.qos >= s.qos && topic.Covers(o.filter, s.filter) {
			s.local, via = true, j
			break
		}
	}
	c.subs = append(slices.Clip(c.subs), inlineSub{subscription: s, via: via})
	open := c.open.Load()
	c.mu.Unlock()
	if !open || s.local {
		return nil
	}
	return c.make(i)
}

// make subscribes c.subs[i] at the broker.
func (c *Inline) make(i int) error {
	c.mu.Lock()
	s := c.subs[i]
	c.mu.Unlock()
	unsubscribe, err := c.opts.Broker.Subscribe(s.filter, s.manualAck, c.route(i, s.qos))
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", s.filter, err)
	}
	c.mu.Lock()
	stopped := !c.open.Load()
	if !stopped {
		c.ends[i] = unsubscribe
	}
	c.mu.Unlock()
	if stopped {
		unsubscribe() // Run stopped meanwhile
	}
	return nil
}

// route hands a message that arrived through the broker subscription of
// c.subs[via], at qos, to every handler of a subscription it carries whose
// filter matches, one message at a time.
func (c *Inline) route(via int, qos byte) Handler {
	return func(m Message) {
		if m.QoS > qos {
			m.QoS = qos
		}
		c.deliver.Lock()
		defer c.deliver.Unlock()
		c.mu.Lock()
		subs := c.subs
		c.mu.Unlock()
		for _, s := range subs[via:] {
			if s.via == via && topic.Match(s.filter, m.Topic) {
				s.handler(m)
			}
		}
	}
}

// Publish hands payload to the broker for topic; there is no
// acknowledgement to wait for, so ctx only refuses a call made after it
// ended. It returns ErrNotConnected before Run starts and once it has
// stopped: nothing was sent.
func (c *Inline) Publish(ctx context.Context, topic string, qos byte, retained bool, payload []byte) error {
	if !c.open.Load() {
		return ErrNotConnected
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("publish %s: %w", topic, err)
	}
	if err := c.opts.Broker.Publish(topic, payload, retained, qos); err != nil {
		return fmt.Errorf("publish %s: %w", topic, err)
	}
	return nil
}

// Run opens the link: OnSession, the subscriptions (each replaying its
// retained messages), the birth, OnConnect; then it waits for ctx, and
// publishes the offline announcement and ends the subscriptions. It
// returns nil after that stop, or, at once, the error of a subscription
// or of the birth that the broker refused (a closed broker), logged. Call
// it once.
func (c *Inline) Run(ctx context.Context) error {
	c.mu.Lock()
	c.open.Store(true) // handlers may publish from the first message on
	var pending []int
	for i, s := range c.subs {
		if !s.local {
			pending = append(pending, i)
		}
	}
	c.mu.Unlock()
	if c.opts.OnSession != nil {
		c.opts.OnSession()
	}
	err := func() error {
		for _, i := range pending {
			if err := c.make(i); err != nil {
				return err
			}
		}
		if a := c.opts.Status; a.Topic != "" {
			if err := c.opts.Broker.Publish(a.Topic, []byte(a.Online), true, 1); err != nil {
				return fmt.Errorf("publish birth: %w", err)
			}
		}
		return nil
	}()
	if err != nil {
		c.log.Error("mqtt: the embedded broker refused Hearth's inline link", "client_id", c.opts.ClientID, "err", err)
		c.close()
		return err
	}
	c.connected.Store(true)
	c.log.Info("mqtt connected", "broker", "embedded, inline", "client_id", c.opts.ClientID)
	if c.opts.OnConnect != nil {
		c.opts.OnConnect(ctx)
	}
	close(c.up)
	<-ctx.Done()
	if a := c.opts.Status; a.Topic != "" {
		if err := c.opts.Broker.Publish(a.Topic, []byte(a.Offline), true, 1); err != nil {
			c.log.Warn("mqtt: could not publish offline status", "err", err)
		}
	}
	c.close()
	return nil
}

// close ends publishing and every subscription made at the broker.
func (c *Inline) close() {
	c.connected.Store(false)
	c.mu.Lock()
	c.open.Store(false)
	ends := c.ends
	c.ends = map[int]func(){}
	c.mu.Unlock()
	for _, end := range ends {
		end()
	}
}
