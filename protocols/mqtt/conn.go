// Package mqtt is Hearth's one MQTT connection: MQTT 5 through Eclipse
// Paho's paho.golang client. It connects and reconnects with its own
// full-jitter backoff loop, announces itself with a birth message and
// leaves a will, resubscribes after every reconnect, and hands messages to
// handlers with their retain flag and an explicit acknowledgement.
//
// MQTT 5 is needed for one promise: the command subscriptions
// (SubscribeManualAck) ask for "Retain As Published" (MQTT 5.0 §3.8.3.1),
// so a command that an automation published with the retain flag arrives
// with the flag still set and can be refused. Over MQTT 3.1.1 a broker
// clears the flag for established subscriptions (MQTT 3.1.1 §3.3.1.3),
// which would let a retained command through. Other subscriptions keep the
// default, so there the flag means "replayed from the retained store on
// subscribe", which is what a bridge's state reports need: a device whose
// bridge retains its reports still sends news. Every subscription also
// sets "No Local", so Hearth never receives its own publishes back.
//
// With Options.SessionExpiry the broker keeps a session for Hearth across
// a gap (Clean Start 0 and a Session Expiry Interval, MQTT 5.0 §3.1.2.4,
// §3.1.2.11.2): the command subscriptions and the commands published to
// them while Hearth is away, which it delivers when Hearth is back. Only
// commands: every other subscription is made at QoS 0, which a broker does
// not queue for an absent client, because a bridge's report hours old
// would arrive as if live; what Hearth missed there it learns from the
// retained messages replayed on subscribe. The client side of the session
// is never kept: every connection starts paho's session state afresh, so a
// publish of Hearth's left unacknowledged by a lost connection is not sent
// again behind its caller's back (the caller got a LostError and decides).
// The CONNACK says what the broker granted: less than asked, or a reconnect
// that finds no session although one should be there, is logged as a
// warning saying what it means for lost commands.
//
// What the broker kept arrives with Message.Backlog set, so that the intake
// can tell a command that may have waited minutes from one sent just now.
// A resumed session's queue has no end marked in MQTT, so the Conn marks
// it (Options.SessionMarker): once subscribed, it publishes a QoS 1 message
// to itself, which the broker queues behind everything it kept; whatever
// arrives before it comes back is backlog.
//
// It never interprets topics or payloads: the bridge adapters and the
// intake do. It imports retry of Hearth's and nothing else.
package mqtt

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	"github.com/eclipse/paho.golang/paho/session"
	"github.com/eclipse/paho.golang/paho/session/state"
	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/retry"
	"github.com/hearthd/hearth/topic"
)

// ErrNotConnected is returned by Publish while the connection is down:
// nothing was sent. It has a method NotSent() bool that returns true, by
// which callers that must not import this package (the dispatcher) tell a
// message that never left from one whose fate is unknown.
var ErrNotConnected error = notConnected{}

type notConnected struct{}

func (notConnected) Error() string { return "mqtt: not connected" }
func (notConnected) NotSent() bool { return true }

// Message is one received MQTT PUBLISH.
type Message struct {
	Topic   string
	Payload []byte
	QoS     byte
	// Retained is the retain flag: on a SubscribeManualAck subscription the
	// flag the sender set (Retain As Published); on a Subscribe one, true
	// only for a message the broker replayed from its retained store.
	Retained bool
	// Duplicate is the DUP flag: the broker may have delivered this QoS 1
	// message before (MQTT 5.0 §3.3.1.1), for instance on a connection
	// that ended before Hearth's PUBACK arrived, and sends it again from
	// the session. Whatever acts on a message must not act twice on it:
	// for commands, their op_id says.
	Duplicate bool
	// Backlog is true for a message of a SubscribeManualAck subscription
	// that may have waited in Hearth's session at the broker rather than
	// come live (Options.SessionExpiry): one flagged DUP, or one that
	// arrived on a connection whose CONNACK said Session Present before
	// that connection's backlog was known to be over, which is when its
	// session marker came back (Options.SessionMarker). Its arrival says
	// nothing of when it was sent: up to the session expiry ago. It errs
	// on the side of the backlog: a command published live between the
	// CONNACK and the marker's return is counted in. Always false on a
	// Subscribe subscription (nothing of theirs waits in the session),
	// on a connection without a session, and from an Inline.
	Backlog bool
	ack     func()
	user    paho.UserProperties
}

// UserProperty returns the value of the message's MQTT 5 user property
// named key, and whether it has one. With several of that name it returns
// the last: a broker that adds a property (such as the embedded broker's
// stamp of the publisher's username, broker.Options.StampUsernameProperty)
// appends it after the publisher's own.
func (m Message) UserProperty(key string) (string, bool) {
	for i := len(m.user) - 1; i >= 0; i-- {
		if m.user[i].Key == key {
			return m.user[i].Value, true
		}
	}
	return "", false
}

// Ack acknowledges the message to the broker (PUBACK for QoS 1). Handlers
// registered with SubscribeManualAck must call it once the message is safe
// (for a command: stored); other handlers are acknowledged on return. Ack is
// safe to call more than once.
func (m Message) Ack() {
	if m.ack != nil {
		m.ack()
	}
}

// Handler receives messages of one subscription, in arrival order.
type Handler func(Message)

// Announcement is a retained status message: the birth on connect, the
// will the broker sends on an unclean loss, and the message published on a
// clean stop.
type Announcement struct {
	Topic   string
	Online  string // payload published on every connect (birth)
	Offline string // payload of the will and of a clean stop
}

// Options configures a Conn. Zero values take the documented defaults.
type Options struct {
	// URL is the broker: tcp:// or mqtt:// (plain), ssl://, tls:// or
	// mqtts:// (TLS), e.g. tcp://127.0.0.1:1883.
	URL string
	// ClientID must be unique per broker; required.
	ClientID           string
	Username, Password string
	TLS                *tls.Config
	// KeepAlive is the MQTT keep-alive; 0 means 30 s.
	KeepAlive time.Duration
	// ConnectTimeout bounds one connection attempt; 0 means 10 s.
	ConnectTimeout time.Duration
	// SessionExpiry is how long the broker is asked to keep Hearth's
	// session after a connection ends (MQTT 5.0 §3.1.2.11.2): whole
	// seconds, at most 0xFFFFFFFE s (0xFFFFFFFF means never expires, and
	// is not asked for). More than 0: every CONNECT asks for Clean Start 0
	// and this Session Expiry Interval, a clean stop keeps the session,
	// and messages of SubscribeManualAck subscriptions published while
	// Hearth is away are delivered when it is back; Subscribe
	// subscriptions are made at QoS 0, so that none of theirs wait (see
	// Subscribe). 0 (the default): a clean session at every connect, which
	// ends with the connection.
	SessionExpiry time.Duration
	// SessionMarker is the topic that ends a resumed session's backlog
	// (Message.Backlog). On a connection whose CONNACK says Session
	// Present, once its subscriptions are made, the Conn subscribes to it
	// at QoS 1 (without No Local) and publishes to it, at QoS 1, a token
	// of that connection's; the broker queues that message for Hearth
	// behind everything it kept, and when it comes back the backlog is
	// over. This holds for a broker that delivers one session's messages
	// in the order it queued them, across topics and publishers: MQTT 5.0
	// §4.6 promises only the order of one publisher's messages on one
	// topic at one QoS; Mosquitto 2 keeps one list per client (inflight,
	// then queued; a new QoS 1 message joins the queue while anything
	// waits there), and mochi-mqtt 2 writes all it kept right after the
	// CONNACK, before it reads Hearth's first packet. A marker not back
	// within markerResend (5 s) is published again (a full queue may have
	// dropped it; a warning says so once), and until one is back the
	// backlog is not over, however long that takes. A marker whose
	// SUBSCRIBE or PUBLISH the broker refuses is logged as an error, and
	// that connection's backlog never ends. Messages on this topic reach
	// no handler. Hearth's account must be allowed to publish to it and
	// receive it, and nobody else should publish there (a message without
	// the token is ignored). Empty: a resumed session's backlog never
	// ends.
	SessionMarker string
	// Reconnect spaces connection attempts; its zero value is exponential
	// backoff with full jitter, base 1 s, cap 60 s.
	Reconnect retry.Backoff
	// ShortConnection is how long a connection must last for the
	// reconnect backoff to start again from its first step: until then a
	// lost connection counts as one more failed attempt, so two clients
	// that throw each other off (see ConflictAfter), or a broker that
	// drops Hearth right after accepting it, meet a growing full-jitter
	// backoff, not a retry every second. It is also how soon after its
	// CONNACK a connection must end to start a takeover streak. Zero means
	// 10 s.
	ShortConnection time.Duration
	// ConflictAfter and ConflictBackoff detect a client ID conflict:
	// another client using the same ID, so that each connect throws the
	// other off. A connection is *taken over* when the broker's side ends
	// it after its CONNACK: a DISCONNECT "session taken over" (reason code
	// 0x8E, MQTT 5.0 §3.1.4), or the connection closed or reset without a
	// DISCONNECT, which is what Mosquitto 2.0 does. ConflictAfter taken
	// over connections in a row are a conflict when the first of them
	// ended within ShortConnection of its CONNACK and each later one
	// within the conflict horizon, ConflictBackoff + Reconnect.Cap +
	// ShortConnection (the longest a twin in conflict waits before it
	// takes the session back, and a little). What a network does ends a
	// streak: a connect attempt that fails (no CONNACK: the dial failed
	// or timed out, or the broker refused), a connection that ends in a
	// keep-alive timeout or with a DISCONNECT of any other reason, or one
	// that lasts the horizon. So a cut that fails the next dials, or that
	// the keep-alive notices, is no conflict however often it comes;
	// what looks like one is a connection accepted and closed by the
	// broker's side soon after, again and again. Run then reports it by
	// Conflict (until the streak ends), logs it once at ERROR as the
	// configuration error it is, and waits ConflictBackoff more before
	// each attempt, so that the two clients' availability changes about
	// once per ConflictBackoff instead of every second. Zero values mean
	// 3 and 1 min.
	ConflictAfter   int
	ConflictBackoff time.Duration
	// Status is announced retained with a will, when its Topic is set.
	Status Announcement
	// OnSession runs at every (re)connect as soon as the broker accepted
	// it, before the subscriptions are made: anything learned from
	// retained messages on an earlier connection may be stale from here
	// (a restarted broker may have lost them), and retained messages of
	// the new session arrive only after it returns. Commands that waited
	// in a kept session (SessionExpiry) may be handed over while it runs.
	// Keep it short.
	OnSession func()
	// OnLost runs when an established connection is lost, before Run
	// waits to reconnect: from here until the next OnSession nothing
	// published reaches the broker, and nothing is received. Keep it short.
	OnLost func()
	// OnConnect runs after every (re)connect, once the subscriptions are
	// back and the birth is published. It runs on the connection's loop:
	// keep it short or hand work off.
	OnConnect func(ctx context.Context)
	Clock     clockwork.Clock // nil means the real clock
	Rand      retry.Rand      // nil means a randomly seeded source
	Logger    *slog.Logger
}

type subscription struct {
	filter    string
	qos       byte
	handler   Handler
	manualAck bool
	// local: an earlier subscription covers filter, so the broker is not
	// asked for it (it would send overlapping copies); its messages reach
	// handler through the covering one.
	local bool
	// marker: the session marker's subscription (Options.SessionMarker),
	// made at QoS 1 and without No Local, so that Hearth's own marker
	// comes back, queued like a command.
	marker bool
}

// markerResend is how long a session marker may take to come back before
// it is published again (real time, like ackInterval: a transport's
// patience, not a policy). A long backlog takes longer than this, and the
// marker published again then waits behind the first: harmless.
const markerResend = 5 * time.Second

// backlog is one connection's view of its session's backlog (see
// Message.Backlog and Options.SessionMarker).
type backlog struct {
	token string // the payload of this connection's marker
	over  atomic.Bool
	done  chan struct{} // closed when over
	once  sync.Once
	count atomic.Int64 // backlog messages handed to manual-ack handlers
}

// newBacklog returns a connection's backlog, pending until end.
func newBacklog() *backlog {
	return &backlog{token: rand.Text(), done: make(chan struct{})}
}

// end marks the backlog over and reports whether it was not already.
func (b *backlog) end() bool {
	ended := false
	b.once.Do(func() {
		b.over.Store(true)
		close(b.done)
		ended = true
	})
	return ended
}

// Conn is a supervised MQTT connection. Create it with New, register
// subscriptions, then Run it.
type Conn struct {
	opts Options
	log  *slog.Logger

	mu     sync.Mutex
	client *paho.Client // nil while disconnected
	// gone is cancelled when client's connection is dropped, so that
	// publishes waiting for a PUBACK on it return at once.
	gone        context.Context
	dropped     context.CancelFunc
	subs        []subscription
	conflict    error     // see Conflict
	connectedAt time.Time // when client connected
	connected   atomic.Bool
	up          chan struct{} // closed on the first successful connect
	upOnce      sync.Once
	// lastAck is when a handler last acknowledged a message (UnixNano,
	// real time: paho's acknowledgement ticker runs on it); see stop.
	lastAck atomic.Int64
	// backlog is the current connection's (nil before the first), for
	// tests to wait on.
	backlog *backlog
	// markerResend is markerResend, shorter in tests.
	markerResend time.Duration

	// What the previous connection's CONNACK granted, for the next one's
	// (Run's goroutine only).
	granted    time.Duration // its session expiry; 0: none
	lostAt     time.Time     // when it ended, on Clock; zero before the first
	warnedUpTo time.Duration // the grant a warning was last logged for; -1: none
}

// New returns an unconnected Conn.
func New(opts Options) *Conn {
	if opts.KeepAlive == 0 {
		opts.KeepAlive = 30 * time.Second
	}
	if opts.ConnectTimeout == 0 {
		opts.ConnectTimeout = 10 * time.Second
	}
	if opts.Reconnect.Base == 0 {
		opts.Reconnect.Base = time.Second
	}
	if opts.Reconnect.Cap == 0 {
		opts.Reconnect.Cap = time.Minute
	}
	if opts.ShortConnection == 0 {
		opts.ShortConnection = 10 * time.Second
	}
	if opts.ConflictAfter == 0 {
		opts.ConflictAfter = 3
	}
	if opts.ConflictBackoff == 0 {
		opts.ConflictBackoff = time.Minute
	}
	if opts.Clock == nil {
		opts.Clock = clockwork.NewRealClock()
	}
	if opts.Rand == nil {
		opts.Rand = mrand.New(mrand.NewPCG(mrand.Uint64(), mrand.Uint64()))
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	return &Conn{opts: opts, log: opts.Logger, up: make(chan struct{}), warnedUpTo: -1, markerResend: markerResend}
}

// ClientID returns the MQTT client ID the connection uses.
func (c *Conn) ClientID() string { return c.opts.ClientID }

// Connected reports whether the connection is up now.
func (c *Conn) Connected() bool { return c.connected.Load() }

// Up is closed once the first connection has been made, its subscriptions
// are in place and its birth message is out.
func (c *Conn) Up() <-chan struct{} { return c.up }

// Subscribe registers h for filter at the given QoS. It holds across
// reconnects. If the connection is up it subscribes at once and waits for
// the SUBACK; otherwise the subscription is made on the next connect.
// Messages are acknowledged when h returns. A message that matches
// several filters reaches each of their handlers, in the order they were
// registered. A filter that an earlier one covers (zigbee2mqtt/+/action
// under zigbee2mqtt/#, say) is not subscribed at the broker again, so its
// messages arrive once; filters that only partly overlap are both
// subscribed, and a broker may then send a message once per filter
// (MQTT 5 §3.3.4), which reaches the handlers each time.
//
// With Options.SessionExpiry the broker is asked for QoS 0 whatever qos
// says, so that it queues none of these messages for Hearth's session
// while Hearth is away: they would arrive on its return as if live, and a
// report hours old could move an automation or open a breaker. A live
// connection (TCP) delivers them as it would at QoS 1; what was in flight
// when it ended is lost, as with a clean session, and the retained
// messages replayed at the resubscribe say what Hearth missed.
func (c *Conn) Subscribe(ctx context.Context, filter string, qos byte, h Handler) error {
	return c.subscribe(ctx, subscription{filter: filter, qos: qos, handler: h})
}

// SubscribeManualAck is Subscribe for commands: the handler acknowledges
// each message itself with Message.Ack, once it is safe (stored), and the
// subscription asks for Retain As Published, so Message.Retained is the
// flag the sender set. Acks go to the broker in the order the messages
// arrived, as MQTT requires.
func (c *Conn) SubscribeManualAck(ctx context.Context, filter string, qos byte, h Handler) error {
	return c.subscribe(ctx, subscription{filter: filter, qos: qos, handler: h, manualAck: true})
}

func (c *Conn) subscribe(ctx context.Context, s subscription) error {
	c.mu.Lock()
	for _, o := range c.subs {
		if o.filter == s.filter && o.manualAck != s.manualAck {
			// A second SUBSCRIBE to the same filter replaces the first
			// (MQTT 5 §3.8.4), options included: Retain As Published
			// would be lost, or gained.
			c.mu.Unlock()
			return fmt.Errorf("subscribe %s: already subscribed with other options", s.filter)
		}
	}
	for _, o := range c.subs {
		if !o.local && o.manualAck == s.manualAck && o.qos >= s.qos && topic.Covers(o.filter, s.filter) {
			s.local = true
			break
		}
	}
	c.subs = append(c.subs, s)
	client := c.client
	c.mu.Unlock()
	if client == nil || s.local {
		return nil
	}
	return c.subscribeOn(ctx, client, []subscription{s})
}

func (c *Conn) subscribeOn(ctx context.Context, client *paho.Client, subs []subscription) error {
	if len(subs) == 0 {
		return nil
	}
	req := &paho.Subscribe{}
	for _, s := range subs {
		qos := s.qos
		if c.opts.SessionExpiry > 0 && !s.manualAck && !s.marker {
			qos = 0 // nothing of it waits in the session: see Subscribe
		}
		req.Subscriptions = append(req.Subscriptions, paho.SubscribeOptions{
			Topic:             s.filter,
			QoS:               qos,
			NoLocal:           !s.marker,
			RetainAsPublished: s.manualAck,
		})
	}
	for {
		ack, err := client.Subscribe(ctx, req)
		if ack == nil {
			return fmt.Errorf("subscribe: %w", err)
		}
		if identifierInUse(ack.Reasons) {
			// mochi-mqtt v2.7.9 keeps the packet identifiers of both
			// directions in one set (mochi-mqtt/server#545), and refuses
			// a SUBSCRIBE whose identifier it uses for a delivery to
			// Hearth, such as one it resends from the session right
			// after the CONNACK. The identifier is free once Hearth's
			// PUBACK for it is in: try again after paho's next
			// acknowledgements, with paho's next identifier.
			c.log.Debug("mqtt: the broker has the SUBSCRIBE's packet identifier in use; subscribing again", "broker", c.opts.URL)
			t := time.NewTimer(2 * ackInterval)
			select {
			case <-t.C:
				continue
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("subscribe: %w", ctx.Err())
			}
		}
		for i, code := range ack.Reasons {
			if code >= 0x80 && i < len(subs) {
				return &subscribeRefused{filter: subs[i].filter, code: code}
			}
		}
		if err != nil {
			return fmt.Errorf("subscribe: %w", err)
		}
		return nil
	}
}

// subscribeRefused is a SUBACK that refused a filter (reason code 0x80 or
// more, MQTT 5.0 §3.9.3).
type subscribeRefused struct {
	filter string
	code   byte
}

func (e *subscribeRefused) Error() string {
	return fmt.Sprintf("subscribe %s: refused by the broker (reason code 0x%02x)", e.filter, e.code)
}

// reasonIdentifierInUse is the SUBACK reason code "Packet Identifier in
// use" (MQTT 5.0 §3.9.3).
const reasonIdentifierInUse = 0x91

// identifierInUse reports whether a SUBACK refused every filter with
// "Packet Identifier in use".
func identifierInUse(reasons []byte) bool {
	for _, code := range reasons {
		if code != reasonIdentifierInUse {
			return false
		}
	}
	return len(reasons) > 0
}

// ackInterval is how often paho writes the acknowledgements handlers have
// given (real time, paho's own ticker; its default too).
const ackInterval = 50 * time.Millisecond

// route hands a received message to the handler whose filter matches. It
// runs on the client's single receive goroutine, so handlers see messages
// in arrival order, and bl, the connection's backlog, ends in that order
// too: every message before the marker has been handed over with Backlog
// set.
func (c *Conn) route(client *paho.Client, bl *backlog) func(paho.PublishReceived) (bool, error) {
	return func(pr paho.PublishReceived) (bool, error) {
		p := pr.Packet
		var once sync.Once
		ack := func() {
			once.Do(func() {
				if p.QoS > 0 {
					c.lastAck.Store(time.Now().UnixNano())
				}
				if err := client.Ack(p); err != nil {
					c.log.Debug("mqtt: ack", "topic", p.Topic, "err", err)
				}
			})
		}
		if c.opts.SessionMarker != "" && p.Topic == c.opts.SessionMarker {
			// The Conn's own: no handler's. Another connection's token
			// (a marker the previous connection left in the session) or
			// anyone else's message ends nothing.
			if string(p.Payload) == bl.token && bl.end() {
				c.log.Info("mqtt: the session's backlog is delivered", "broker", c.opts.URL, "messages", bl.count.Load())
			}
			ack()
			return true, nil
		}
		inBacklog := p.Duplicate() || !bl.over.Load()
		m := Message{Topic: p.Topic, Payload: p.Payload, QoS: p.QoS, Retained: p.Retain, Duplicate: p.Duplicate(), ack: ack}
		if p.Properties != nil {
			m.user = p.Properties.User
		}
		c.mu.Lock()
		var matches []subscription
		for _, s := range c.subs {
			if topic.Match(s.filter, p.Topic) {
				matches = append(matches, s)
			}
		}
		c.mu.Unlock()
		manual := false
		for _, s := range matches {
			m.Backlog = s.manualAck && inBacklog
			s.handler(m)
			manual = manual || s.manualAck
		}
		if manual && inBacklog {
			bl.count.Add(1)
		}
		if !manual {
			ack()
		}
		return len(matches) > 0, nil
	}
}

// Publish sends payload to topic and, for QoS 1 and 2, waits for the
// broker's acknowledgement or ctx. It returns ErrNotConnected at once while
// the connection is down: the caller decides whether to hold the message.
// With Options.SessionExpiry, use QoS 0 or 1: every connection numbers its
// packets afresh, and a QoS 2 publish could take the packet identifier of
// an earlier one whose PUBREL the broker's session still awaits, which the
// broker would then take for that one again (MQTT 5.0 §4.3.3).
func (c *Conn) Publish(ctx context.Context, topic string, qos byte, retained bool, payload []byte) error {
	c.mu.Lock()
	client, gone := c.client, c.gone
	c.mu.Unlock()
	if client == nil {
		return ErrNotConnected
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(gone, cancel)()
	resp, err := client.Publish(ctx, &paho.Publish{Topic: topic, QoS: qos, Retain: retained, Payload: payload})
	if errors.Is(err, session.ErrNoConnection) {
		return ErrNotConnected // paho had no connection to write to: nothing left
	}
	if err != nil && gone.Err() != nil {
		return &LostError{Topic: topic}
	}
	if resp != nil && resp.ReasonCode >= 0x80 {
		return &RefusedError{Topic: topic, ReasonCode: resp.ReasonCode}
	}
	if err != nil {
		return fmt.Errorf("publish %s: %w", topic, err)
	}
	return nil
}

// LostError is a publish whose connection was lost before the broker
// acknowledged it: the message may or may not have reached the broker.
// Its delivery is unknown (DeliveryUnknown returns true), and its retry
// class is retry.Unavailable, transient: send it again on the next
// connection.
type LostError struct {
	Topic string
}

func (e *LostError) Error() string {
	return fmt.Sprintf("publish %s: the connection was lost before the broker acknowledged it", e.Topic)
}

// DeliveryUnknown reports that the message may or may not have arrived.
func (e *LostError) DeliveryUnknown() bool { return true }

// Unwrap returns retry.ErrUnavailable, the class of a lost connection.
func (e *LostError) Unwrap() error { return retry.ErrUnavailable }

// RefusedError is a publish the broker refused with a PUBACK reason code
// of 0x80 or more (MQTT 5.0 §3.4.2.1), for example 0x87 "not authorized".
// Sending the same message again cannot succeed, except after 0x97 "quota
// exceeded".
type RefusedError struct {
	Topic      string
	ReasonCode byte
}

// PUBACK reason codes (MQTT 5.0 §3.4.2.1) with a retry class of their own.
const (
	reasonNotAuthorized        = 0x87
	reasonQuotaExceeded        = 0x97
	reasonPayloadFormatInvalid = 0x99
)

func (e *RefusedError) Error() string {
	return fmt.Sprintf("publish %s: refused by the broker (reason code 0x%02x)", e.Topic, e.ReasonCode)
}

// Permanent reports whether retrying cannot help: true for every reason
// code but 0x97 "quota exceeded".
func (e *RefusedError) Permanent() bool { return e.ReasonCode != reasonQuotaExceeded }

// Unwrap returns the retry class of the reason code, where it has one, so
// that retry.Classify sees it: retry.ErrUnauthorized for 0x87,
// retry.ErrRateLimited for 0x97, retry.ErrInvalidPayload for 0x99; nil
// otherwise (the class is retry.Refused, from Permanent).
func (e *RefusedError) Unwrap() error {
	switch e.ReasonCode {
	case reasonNotAuthorized:
		return retry.ErrUnauthorized
	case reasonQuotaExceeded:
		return retry.ErrRateLimited
	case reasonPayloadFormatInvalid:
		return retry.ErrInvalidPayload
	}
	return nil
}

// Run connects, keeps the connection up until ctx is cancelled, and then
// publishes the offline announcement and disconnects cleanly. Connection
// attempts, the first included, are spaced with full-jitter backoff, so a
// hub that boots before its broker waits instead of failing, and many
// clients cut off together do not come back in lockstep. The backoff
// starts again from its first step only after a connection has lasted
// Options.ShortConnection. Run returns nil after a clean stop.
func (c *Conn) Run(ctx context.Context) error {
	failures := 0           // attempts since a connection last lasted ShortConnection
	var delay time.Duration // the last reconnect delay, for decorrelated jitter
	var tw takeovers
	for {
		client, lost, err := c.connect(ctx)
		var setup *setupError
		switch {
		case err == nil:
			c.mu.Lock()
			since := c.connectedAt
			c.mu.Unlock()
			select {
			case err = <-lost:
				c.drop(client)
				c.lostAt = c.opts.Clock.Now()
				lived := c.lostAt.Sub(since)
				c.log.Warn("mqtt connection lost", "broker", c.opts.URL, "err", err, "after", lived)
				if lived >= c.opts.ShortConnection {
					failures, delay = 0, 0
				}
				tw.lost(lived, err, c.opts.ShortConnection, c.conflictHorizon())
				if c.opts.OnLost != nil {
					c.opts.OnLost()
				}
			case <-ctx.Done():
				c.stop(client)
				return nil
			}
		case ctx.Err() != nil:
			return nil
		case errors.As(err, &setup) && setup.lost != nil:
			// Accepted, then lost while subscribing or announcing: a
			// short connection like any other.
			c.lostAt = c.opts.Clock.Now()
			lived := c.lostAt.Sub(setup.at)
			c.log.Warn("mqtt connection lost while setting up", "broker", c.opts.URL, "err", err, "after", lived)
			tw.lost(lived, setup.lost, c.opts.ShortConnection, c.conflictHorizon())
		default:
			c.log.Warn("mqtt connect failed", "broker", c.opts.URL, "attempt", failures+1, "err", err)
			tw.failed()
		}
		if ctx.Err() != nil {
			return nil
		}
		failures++
		delay = c.opts.Reconnect.Delay(failures, delay, c.opts.Rand)
		if tw.streak >= c.opts.ConflictAfter {
			// Another client keeps taking the session over: stop
			// fighting it, so neither instance's availability flaps.
			conflict := fmt.Errorf("another client uses client ID %q: the broker closed Hearth's connection %d times in a row soon after accepting it (the first within %v) and accepted it again at once in between; give each instance its own mqtt.client_id (if only one runs, something between Hearth and the broker keeps closing its connections)",
				c.opts.ClientID, tw.streak, c.opts.ShortConnection)
			if c.setConflict(conflict) {
				c.log.Error("mqtt client ID conflict, a configuration error; backing off", "broker", c.opts.URL, "err", conflict, "backoff", c.opts.ConflictBackoff)
			}
			delay = c.opts.ConflictBackoff + delay
		} else {
			c.setConflict(nil)
		}
		c.log.Info("mqtt reconnecting", "broker", c.opts.URL, "in", delay)
		select {
		case <-c.opts.Clock.After(delay):
		case <-ctx.Done():
			return nil
		}
	}
}

// conflictHorizon is how long a twin in conflict may hold the session
// before the other takes it back: its ConflictBackoff, its longest
// reconnect delay, and ShortConnection for good measure (see
// Options.ConflictAfter). A connection that lasts it ends a conflict.
func (c *Conn) conflictHorizon() time.Duration {
	return c.opts.ConflictBackoff + c.opts.Reconnect.Cap + c.opts.ShortConnection
}

// takeovers counts connections taken over in a row (see
// Options.ConflictAfter). Run's goroutine only.
type takeovers struct {
	streak int
}

// lost judges a connection accepted lived ago and ended by err: taken
// over, within short for the first of a streak and within horizon for
// the later ones, it adds to the streak; anything else ends it.
func (t *takeovers) lost(lived time.Duration, err error, short, horizon time.Duration) {
	limit := short
	if t.streak > 0 {
		limit = horizon
	}
	if closedByBroker(err) && lived < limit {
		t.streak++
	} else {
		t.streak = 0
	}
}

// failed ends the streak: a connect attempt without a CONNACK is the
// network's doing (or the broker's refusal), not another client's.
func (t *takeovers) failed() { t.streak = 0 }

// closedByBroker reports whether err ends a connection the way a broker
// ends the connection of a client whose session another client took: a
// DISCONNECT "session taken over", or the connection closed (end of file)
// or reset by the other side without a DISCONNECT, as Mosquitto 2.0 does
// it. A DISCONNECT of another reason says why the broker ended it; a
// keep-alive that timed out, or a network that is unreachable, is a cut.
func closedByBroker(err error) bool {
	var d *DisconnectError
	if errors.As(err, &d) {
		return d.ReasonCode == reasonSessionTakenOver
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// setupError is a connection the broker accepted (CONNACK) that failed
// before it was ready: its subscriptions, session marker or birth.
type setupError struct {
	err  error
	at   time.Time // its CONNACK, on Clock
	lost error     // what ended the connection; nil: it was up, Hearth dropped it
}

func (e *setupError) Error() string { return e.err.Error() }
func (e *setupError) Unwrap() error { return e.err }

// disconnectGrace is how long a connection's end waits for the broker's
// DISCONNECT reason before it is reported as plainly closed (real time:
// an ordering grace inside paho, not a policy).
const disconnectGrace = 100 * time.Millisecond

// errConnectionClosed is a connection that paho closed with neither a
// DISCONNECT from the broker nor an error of its own: Hearth's own drop.
var errConnectionClosed = errors.New("connection closed")

// reasonSessionTakenOver is the DISCONNECT reason code an MQTT 5 broker
// sends when another connection with the same client ID takes the session
// (MQTT 5.0 §3.14.2.1).
const reasonSessionTakenOver = 0x8E

// DisconnectError is a DISCONNECT the broker sent.
type DisconnectError struct {
	ReasonCode byte
	Reason     string // the reason string, if the broker gave one
}

func (e *DisconnectError) Error() string {
	if e.ReasonCode == reasonSessionTakenOver {
		return fmt.Sprintf("the broker disconnected Hearth: session taken over by another client with the same ID (reason code 0x%02x %s)", e.ReasonCode, e.Reason)
	}
	return fmt.Sprintf("the broker disconnected Hearth (reason code 0x%02x %s)", e.ReasonCode, e.Reason)
}

// Conflict returns the client ID conflict Run detected (see
// Options.ConflictAfter), or nil. It holds while connections keep being
// taken over, also while Hearth is connected between two takeovers, and
// clears once a connection has lasted the conflict horizon
// (ConflictBackoff + Reconnect.Cap + ShortConnection: 2 min 10 s by
// default), or a connect attempt fails or a connection ends otherwise.
func (c *Conn) Conflict() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conflict != nil && c.client != nil && c.opts.Clock.Since(c.connectedAt) >= c.conflictHorizon() {
		return nil // this connection has lasted: the other client is gone
	}
	return c.conflict
}

// setConflict records err (nil clears it) and reports whether it is new.
func (c *Conn) setConflict(err error) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	fresh := c.conflict == nil && err != nil
	c.conflict = err
	return fresh
}

// connect dials, connects, resubscribes and publishes the birth. lost
// receives the reason once the connection ends.
func (c *Conn) connect(ctx context.Context) (*paho.Client, <-chan error, error) {
	cctx, cancel := context.WithTimeout(ctx, c.opts.ConnectTimeout)
	defer cancel()
	conn, err := c.dial(cctx)
	if err != nil {
		return nil, nil, err
	}
	lost := make(chan error, 1)
	serverDisconnected := make(chan struct{})
	report := func(err error) {
		select {
		case lost <- err:
		default:
		}
	}
	// A new paho client and a new session state for every connection: see
	// the package comment. The state is given, not paho's default, so
	// that paho does not close it when the connection ends: closing it
	// answers every publish still waiting for its PUBACK with an error
	// of its own ("not fully acknowledged at time of shutdown"), which
	// would overtake drop's LostError. (With a session expiry of 0 paho
	// empties the state at the loss first, so nobody was answered.)
	client := paho.NewClient(paho.ClientConfig{
		Conn:                       packets.NewThreadSafeConn(conn),
		Session:                    state.NewInMemory(),
		EnableManualAcknowledgment: true,
		SendAcksInterval:           ackInterval,
		OnClientError:              report,
		OnServerDisconnect: func(d *paho.Disconnect) {
			e := &DisconnectError{ReasonCode: d.ReasonCode}
			if d.Properties != nil {
				e.Reason = d.Properties.ReasonString
			}
			report(e)
			close(serverDisconnected)
		},
	})
	// Until the CONNACK is read, every message counts as backlog: paho
	// routes the first before Connect returns. Without a session to
	// resume there is none (and nothing can arrive before the
	// subscriptions are made).
	bl := newBacklog()
	if c.opts.SessionExpiry <= 0 {
		bl.end()
	}
	client.AddOnPublishReceived(c.route(client, bl))
	cp := &paho.Connect{
		ClientID:   c.opts.ClientID,
		KeepAlive:  uint16(c.opts.KeepAlive / time.Second),
		CleanStart: c.opts.SessionExpiry <= 0,
	}
	if c.opts.SessionExpiry > 0 {
		expiry := sessionSeconds(c.opts.SessionExpiry)
		cp.Properties = &paho.ConnectProperties{SessionExpiryInterval: &expiry}
	}
	if c.opts.Username != "" {
		cp.Username, cp.UsernameFlag = c.opts.Username, true
	}
	if c.opts.Password != "" {
		cp.Password, cp.PasswordFlag = []byte(c.opts.Password), true
	}
	if a := c.opts.Status; a.Topic != "" {
		cp.WillMessage = &paho.WillMessage{Retain: true, QoS: 1, Topic: a.Topic, Payload: []byte(a.Offline)}
	}
	ca, err := client.Connect(cctx, cp)
	if err != nil {
		conn.Close()
		if ca != nil && ca.ReasonCode >= 0x80 {
			reason := ""
			if ca.Properties != nil {
				reason = ca.Properties.ReasonString
			}
			return nil, nil, fmt.Errorf("the broker refused the connection (reason code 0x%02x %s)", ca.ReasonCode, reason)
		}
		return nil, nil, err
	}
	present := c.session(ca)
	if !present {
		bl.end()
	}
	go func() {
		<-client.Done()
		// paho closes the client before it calls OnServerDisconnect:
		// give the broker's reason a moment to arrive first, so that a
		// "session taken over" is seen as such.
		t := time.NewTimer(disconnectGrace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-serverDisconnected:
			return
		}
		report(errConnectionClosed)
	}()
	c.mu.Lock()
	c.client = client // handlers may publish from the first message on
	c.connectedAt = c.opts.Clock.Now()
	c.gone, c.dropped = context.WithCancel(context.Background())
	c.backlog = bl
	gone := c.gone
	var subs []subscription
	for _, s := range c.subs {
		if !s.local {
			subs = append(subs, s)
		}
	}
	c.mu.Unlock()
	// The setup ends as soon as the connection does: paho answers no
	// SUBACK or PUBACK still awaited when it ends (see the session state
	// above), and a broker that gives the session to a twin closes the
	// connection whenever the twin's CONNECT comes.
	setup, endSetup := context.WithCancel(cctx)
	defer endSetup()
	go func() {
		select {
		case <-client.Done():
			endSetup()
		case <-setup.Done():
		}
	}()
	// fail ends a connection that was accepted but could not be set up,
	// saying what ended it if it was not Hearth (see setupError).
	fail := func(err error) (*paho.Client, <-chan error, error) {
		e := &setupError{err: err, at: c.connectedAt}
		var refused *subscribeRefused
		if cctx.Err() == nil && !errors.As(err, &refused) {
			e.lost = lostReason(client, lost)
		}
		c.drop(client)
		return nil, nil, e
	}
	if c.opts.OnSession != nil {
		c.opts.OnSession()
	}
	if err := c.subscribeOn(setup, client, subs); err != nil {
		return fail(err)
	}
	if present {
		if err := c.markBacklog(setup, gone, client, bl); err != nil {
			return fail(err)
		}
	}
	if a := c.opts.Status; a.Topic != "" {
		if _, err := client.Publish(setup, &paho.Publish{Topic: a.Topic, QoS: 1, Retain: true, Payload: []byte(a.Online)}); err != nil {
			return fail(fmt.Errorf("publish birth: %w", err))
		}
	}
	c.connected.Store(true)
	if c.opts.SessionExpiry > 0 {
		c.log.Info("mqtt connected", "broker", c.opts.URL, "client_id", c.opts.ClientID,
			"session_present", present, "session_expiry", c.granted)
	} else {
		c.log.Info("mqtt connected", "broker", c.opts.URL, "client_id", c.opts.ClientID)
	}
	if c.opts.OnConnect != nil {
		c.opts.OnConnect(ctx)
	}
	c.upOnce.Do(func() { close(c.up) })
	return client, lost, nil
}

// lostReason returns what ended client's connection, from lost, once it
// has ended; nil if it is still up after disconnectGrace. A setup step
// that fails because the connection went (a write that failed, paho's "no
// connection available", its context ended by client.Done) may return
// before paho has finished closing it.
func lostReason(client *paho.Client, lost <-chan error) error {
	t := time.NewTimer(disconnectGrace)
	defer t.Stop()
	select {
	case <-client.Done():
	case <-t.C:
		return nil
	}
	t.Reset(2 * disconnectGrace) // connect's watcher reports within one
	select {
	case err := <-lost:
		return err
	case <-t.C:
		return errConnectionClosed
	}
}

// markBacklog marks where the resumed session's backlog ends: it
// subscribes to Options.SessionMarker and publishes bl's token there, and
// publishes it again every markerResend until it is back or the
// connection is gone. A broker that refuses the marker leaves the backlog
// without an end, which is logged as an error; an error of the connection
// itself is returned.
func (c *Conn) markBacklog(ctx, gone context.Context, client *paho.Client, bl *backlog) error {
	topic := c.opts.SessionMarker
	if topic == "" {
		c.log.Info("mqtt: no session marker topic: every command on this resumed session counts as its backlog", "broker", c.opts.URL)
		return nil
	}
	const consequence = "until it is, every command on this connection counts as one that may have waited in the session since before Hearth came back"
	err := c.subscribeOn(ctx, client, []subscription{{filter: topic, qos: 1, marker: true}})
	var refused *subscribeRefused
	if errors.As(err, &refused) {
		c.log.Error("mqtt: the broker refused the subscription to Hearth's session marker, so the end of the session's backlog cannot be known: "+consequence+"; let Hearth's account subscribe to "+topic,
			"broker", c.opts.URL, "topic", topic, "reason_code", fmt.Sprintf("0x%02x", refused.code))
		return nil
	}
	if err != nil {
		return err
	}
	publish := func(ctx context.Context) error {
		resp, err := client.Publish(ctx, &paho.Publish{Topic: topic, QoS: 1, Payload: []byte(bl.token)})
		if resp != nil && resp.ReasonCode >= 0x80 {
			c.log.Error("mqtt: the broker refused Hearth's session marker, so the end of the session's backlog cannot be known: "+consequence+"; let Hearth's account publish to "+topic,
				"broker", c.opts.URL, "topic", topic, "reason_code", fmt.Sprintf("0x%02x", resp.ReasonCode))
			return nil
		}
		if err != nil {
			return fmt.Errorf("publish session marker: %w", err)
		}
		return nil
	}
	if err := publish(ctx); err != nil {
		return err
	}
	go func() {
		warned := false
		for {
			t := time.NewTimer(c.markerResend)
			select {
			case <-t.C:
			case <-bl.done:
				t.Stop()
				return
			case <-gone.Done():
				t.Stop()
				return
			}
			if !warned {
				warned = true
				c.log.Warn(fmt.Sprintf("mqtt: Hearth's session marker has not come back within %v; publishing it again: the session's backlog is long, or the broker does not deliver %s to Hearth (its ACL?); %s", c.markerResend, topic, consequence),
					"broker", c.opts.URL, "topic", topic, "backlog_so_far", bl.count.Load())
			}
			pctx, cancel := context.WithTimeout(gone, c.opts.ConnectTimeout)
			err := publish(pctx)
			cancel()
			if err != nil {
				c.log.Debug("mqtt: publish session marker", "err", err)
			}
		}
	}()
	return nil
}

// sessionSeconds is d as a Session Expiry Interval: whole seconds, below
// 0xFFFFFFFF ("never").
func sessionSeconds(d time.Duration) uint32 {
	s := d / time.Second
	if s >= 0xFFFFFFFF {
		s = 0xFFFFFFFE
	}
	return uint32(s)
}

// session reads what the broker's CONNACK says of the session and reports
// whether the broker had one for Hearth (Session Present). It logs a
// warning when the broker keeps the session for less than asked (once per
// grant), and when a reconnect finds no session that should still be
// there. It runs on Run's goroutine.
func (c *Conn) session(ca *paho.Connack) bool {
	asked := time.Duration(sessionSeconds(c.opts.SessionExpiry)) * time.Second
	if c.opts.SessionExpiry <= 0 {
		asked = 0
	}
	granted := asked
	if ca.Properties != nil && ca.Properties.SessionExpiryInterval != nil {
		// The broker's own, which replaces Hearth's (MQTT 5.0 §3.2.2.3.2).
		granted = time.Duration(*ca.Properties.SessionExpiryInterval) * time.Second
	}
	prev, lostAt := c.granted, c.lostAt
	c.granted = granted
	if asked == 0 {
		return ca.SessionPresent
	}
	if granted < asked && granted != c.warnedUpTo {
		c.warnedUpTo = granted
		if granted == 0 {
			c.log.Warn("mqtt: the broker keeps no session for Hearth: commands published while Hearth is away (restarting, or cut off) are lost",
				"broker", c.opts.URL, "asked", asked, "granted", granted)
		} else {
			c.log.Warn(fmt.Sprintf("mqtt: the broker keeps Hearth's session for %v, less than the %v asked: commands published while Hearth is away for longer are lost", granted, asked),
				"broker", c.opts.URL, "asked", asked, "granted", granted)
		}
	}
	if ca.SessionPresent || lostAt.IsZero() || prev == 0 {
		return ca.SessionPresent
	}
	away := c.opts.Clock.Since(lostAt)
	if away < prev {
		c.log.Warn("mqtt: the broker kept no session for Hearth although it was away for less than the session expiry: commands published meanwhile may be lost; is the broker's persistence on? (a broker restarted without it forgets sessions)",
			"broker", c.opts.URL, "away", away, "session_expiry", prev)
	} else {
		c.log.Warn("mqtt: Hearth was away for longer than its session expiry: commands published after the session ended were lost",
			"broker", c.opts.URL, "away", away, "session_expiry", prev)
	}
	return false
}

// dial opens the network connection for the URL's scheme: tcp:// and
// mqtt:// plain, ssl://, tls:// and mqtts:// with TLS.
func (c *Conn) dial(ctx context.Context) (net.Conn, error) {
	u, err := url.Parse(c.opts.URL)
	if err != nil {
		return nil, fmt.Errorf("broker URL: %w", err)
	}
	switch u.Scheme {
	case "tcp", "mqtt":
		var d net.Dialer
		return d.DialContext(ctx, "tcp", u.Host)
	case "ssl", "tls", "mqtts":
		conf := c.opts.TLS
		if conf == nil {
			conf = &tls.Config{MinVersion: tls.VersionTLS12}
		}
		if conf.ServerName == "" {
			conf = conf.Clone()
			conf.ServerName = u.Hostname()
		}
		d := tls.Dialer{Config: conf}
		return d.DialContext(ctx, "tcp", u.Host)
	}
	return nil, fmt.Errorf("broker URL scheme %q is not supported; use tcp://, mqtt://, ssl:// or mqtts://", u.Scheme)
}

// drop forgets a connection that failed.
func (c *Conn) drop(client *paho.Client) {
	c.connected.Store(false)
	c.mu.Lock()
	if c.client == client {
		c.client = nil
		c.dropped()
	}
	c.mu.Unlock()
	client.Disconnect(&paho.Disconnect{ReasonCode: 0x04}) // with will: this was not a clean stop
}

// stop announces offline and disconnects with reason "normal", so the
// broker does not send the will; the announcement says what the will
// would. A DISCONNECT without a Session Expiry Interval keeps the session
// for the one CONNECT asked for (MQTT 5.0 §3.14.2.2.2).
//
// Before the DISCONNECT it lets paho's acknowledgement ticker run twice
// after the last Ack, so that every message acknowledged before the stop
// has its PUBACK out: otherwise the broker would keep the last ones in
// the session and deliver them again at the next start.
func (c *Conn) stop(client *paho.Client) {
	if a := c.opts.Status; a.Topic != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if _, err := client.Publish(ctx, &paho.Publish{Topic: a.Topic, QoS: 1, Retain: true, Payload: []byte(a.Offline)}); err != nil {
			c.log.Warn("mqtt: could not publish offline status", "err", err)
		}
		cancel()
	}
	if wait := time.Until(time.Unix(0, c.lastAck.Load()).Add(2 * ackInterval)); wait > 0 {
		t := time.NewTimer(wait)
		<-t.C
	}
	c.connected.Store(false)
	c.mu.Lock()
	c.client = nil
	c.dropped()
	c.mu.Unlock()
	client.Disconnect(&paho.Disconnect{ReasonCode: 0})
	<-client.Done()
}
