// Package broker runs Hearth's embedded MQTT broker (mochi-mqtt), so that a
// hub needs no separate Mosquitto: it owns the listeners and the broker's
// limits, among them the accept guard that spreads out a reconnect flood
// (see Options.MaxConnectRate) and the limits before authentication that
// bound what a client costs before it has logged in (Options.ConnectTimeout,
// MaxConnectSize, MaxUnauthenticated, MaxKeepAlive, LoginFailuresPerMinute;
// counted in Broker.Stats). It never interprets payloads. Hearth's own
// traffic needs no socket: PublishInline and SubscribeInline are mochi's
// inline client, inside the broker's process, with the meaning an MQTT 5
// subscription with No Local has. Commands need no subscription: the
// PUBLISHes on Options.CommandFilter are handed to Options.OnCommand
// instead of being routed, and acknowledged only when Hearth says so
// (Command.Ack), so that a PUBACK can mean "stored"; a publisher that
// outruns Hearth has its connection's reads paused
// (Options.MaxPendingCommands), never its commands dropped.
//
// Without Options.Users every client that the accept guard lets in is
// admitted; with it, only a client that connects with a known username and
// its password (see SetUsers). Options.StampUsernameProperty tells
// subscribers who published each message, Options.DenyPublish keeps an
// authenticated client off topics, and no client may take over the
// session of a connected client of another user (Options.ClientIDOwners);
// subscriptions are never restricted.
package broker

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// DefaultMaxPacketSize is the largest MQTT packet the embedded broker
// accepts, 1 MiB: well above Hearth's 64 KiB command limit, so that an
// oversized command still reaches Hearth and is rejected with a result
// instead of costing the sender its connection.
const DefaultMaxPacketSize = 1 << 20

// DefaultMaxInflight is each client's receive maximum when
// Options.MaxInflight is 0: mochi-mqtt's own default.
const DefaultMaxInflight = 1024

// Options configures the embedded broker. Zero values take the documented
// defaults.
type Options struct {
	// Listen is the TCP address to listen on, host:port; port 0 picks a
	// free port (see Broker.Addr). "" means no TCP listener: clients then
	// reach the broker through DialPipe only.
	Listen string
	// TLSListen is the TCP address of an MQTT over TLS listener beside
	// Listen (8883 by convention), host:port; port 0 picks a free port
	// (see Broker.TLSAddr). "" means none. Needs TLSConfig. Its
	// connections count under the same limits before authentication, and
	// the TLS handshake falls within ConnectTimeout.
	TLSListen string
	// TLSConfig is the TLS listener's server configuration (certificate,
	// or GetCertificate to change it while the broker runs; MinVersion).
	// The broker uses it as given.
	TLSConfig *tls.Config
	// MaxPacketSize bounds one MQTT packet in bytes; 0 means
	// DefaultMaxPacketSize.
	MaxPacketSize uint32
	// Logger receives the broker's own warnings and errors, a summary of
	// the CONNECTs the accept guard refused at most once per second, the
	// refused logins and publishes of Users and DenyPublish, the clients
	// SetUsers disconnects, a summary of the connections the limits
	// before authentication closed, at most once per second, and one line
	// per episode of a publisher slowed at MaxPendingCommands; mochi's
	// informational lines (every connect and disconnect) and its warning
	// for every client with a keep alive under 5 s (0 included, which a
	// client could send on every CONNECT) are left out. nil discards them.
	Logger *slog.Logger

	// MaxConnectRate is how many CONNECTs the broker accepts per second, a
	// token bucket (golang.org/x/time/rate) refilled at this rate; a
	// CONNECT beyond it gets CONNACK 0x89 "Server busy" (MQTT 5) or 0x03
	// "Server unavailable" (3.1.1), so that clients back off and retry. 0
	// means no limit.
	//
	// Only an accepted CONNECT takes a token: one refused for
	// MaxConnections, for its credentials (Users), by the failed-login
	// guard (LoginFailuresPerMinute) or by mochi's own checks (a bad
	// protocol version, say), spends none, so that a password-guessing
	// flood cannot use up the tokens legitimate clients need. Any one-second interval [k s, k+1 s) accepts at
	// most ConnectBurst + ⌈MaxConnectRate⌉ − 1 CONNECTs; with the default
	// burst of 1 and a whole rate, at most MaxConnectRate. (The bucket
	// counts in floating point, so a CONNECT may be refused a few
	// nanoseconds before its token is due; never accepted early.)
	MaxConnectRate float64
	// ConnectBurst is the bucket's size: how many CONNECTs an idle broker
	// accepts at once. 0 means 1, so that no second (half-open interval
	// [k s, k+1 s)) accepts more than MaxConnectRate. Unused without
	// MaxConnectRate.
	ConnectBurst int
	// MaxConnections refuses a CONNECT (with the codes of MaxConnectRate)
	// while this many clients are connected; 0 means no limit.
	//
	// A client counts from the moment the guard accepts its CONNECT until
	// the broker has finished with its connection, so a client that has
	// just disconnected may still count for a moment, refusing a CONNECT
	// early; the limit itself is exact under concurrent CONNECTs, with one
	// exception: a CONNECT that takes over the session of a connected
	// client (the same client ID, as a device reconnecting before its old
	// connection timed out) replaces that client and is not refused for
	// MaxConnections, so for the moment both are open the count can
	// exceed the limit by the number of takeovers in progress.
	MaxConnections int
	// Exempt lists client IDs the guard never refuses, neither for the
	// rate nor for MaxConnections (they still count as connected): the
	// daemon's own client, which must never be locked out of its own
	// broker by the crowd it guards against. The limits before
	// authentication (ConnectTimeout to LoginFailuresPerMinute) act before
	// a client ID is known and apply to it too; an address's share of
	// MaxUnauthenticated keeps another host from filling the cap.
	Exempt []string
	// MaxInflight is each client's receive maximum: how many QoS 1 and 2
	// publishes a client may have in flight to the broker (MQTT 5 Receive
	// Maximum, sent in the CONNACK). mochi enforces it on 3.1.1 clients
	// too, which cannot be told: a client beyond it is disconnected. 0
	// means DefaultMaxInflight; at most 65535.
	MaxInflight int
	// Clock times the token bucket, ConnectEvent.At and the refusal
	// summaries; nil means the real clock.
	Clock clockwork.Clock
	// OnConnect, if set, is called once for every CONNECT the broker
	// reads, after it has decided: accepted, or refused and why. It is
	// called on the connection's goroutine, concurrently for concurrent
	// CONNECTs and so not always in At order, before the CONNACK is
	// written: it must not block. For measurement (hearth-sim's
	// power-loss scenario) and logs.
	//
	// Every CONNECT counts, retries included. Note that paho.mqtt.golang,
	// unless told SetProtocolVersion(4), answers a refused 3.1.1 CONNECT
	// at once with a second one as MQTT 3.1.
	OnConnect func(ConnectEvent)

	// Users, when not empty, is who may connect: username → password. A
	// CONNECT without a username, with an unknown one or with the wrong
	// password is refused with CONNACK 0x86 "bad username or password"
	// (MQTT 5) or 0x04 "bad user name or password" (3.1.1), and logged as
	// a warning naming the username and remote address, never the
	// password, at most once per second (Clock) with a count of the
	// refusals in between. Passwords are compared in constant time. Empty
	// admits every client, verifying nobody. SetUsers replaces it while
	// the broker runs. The credentials are checked before the accept
	// guard: a refused CONNECT spends no token of MaxConnectRate, and
	// counts against its address's LoginFailuresPerMinute instead.
	Users map[string]string
	// StampUsernameProperty, when set, is the key of an MQTT 5 user
	// property that tells subscribers who published a message: from every
	// PUBLISH and will a client sends, the broker removes every user
	// property with this key (a client cannot forge it) and, when the
	// client's username and password were verified against Users, adds one
	// with that username, after the client's own properties. Messages of
	// MQTT 3.1.1 clients are stamped alike: mochi forwards user properties
	// to MQTT 5 subscribers whatever the publisher's version (3.1.1
	// subscribers receive no properties at all). A retained message keeps
	// the stamp of whoever published it.
	StampUsernameProperty string
	// DenyPublish, if set, is asked for every PUBLISH, and at CONNECT for
	// the will, of a client whose username and password were verified
	// against Users (never while Users is empty): true refuses it. A
	// refused PUBLISH reaches nobody and is not retained; at QoS 1 an
	// MQTT 5 client gets PUBACK 0x87 "not authorized", a 3.1.1 client a
	// plain PUBACK (3.1.1 cannot refuse one). A CONNECT whose will is
	// denied is refused with CONNACK 0x87 (0x05 to 3.1.1). Refusals are
	// logged like refused logins. It is called concurrently, on the
	// publisher's connection, and must be fast; topic is never a filter.
	DenyPublish func(username, topic string) bool
	// ClientIDOwners reserves client identifiers to a username: while
	// Users is not empty, a CONNECT with one of these client IDs and
	// another username is refused with CONNACK 0x87 "not authorized"
	// (0x05 to 3.1.1), since MQTT lets a CONNECT with a connected client's
	// ID throw that client off: no other user can take over the session
	// of the daemon's own client.
	//
	// Besides, whatever ClientIDOwners says: while Users is not empty, a
	// CONNECT with the client ID of a connected client that was verified
	// as another username is refused alike (0x87 / 0x05,
	// RefusedNotAuthorized, logged like the other refusals), so that no
	// account can throw another's client (a bridge) off the broker. The
	// same username may take its own session over, as a client that
	// reconnects before the broker noticed its old connection die does.
	ClientIDOwners map[string]string

	// The limits before authentication. They bound what a client costs
	// the broker before it has logged in, on every listener (DialPipe's
	// too, except MaxUnauthenticated), and are counted in Broker.Stats and
	// logged as a warning at most once per second (Clock) with the counts
	// since the last line, never one line per connection.

	// ConnectTimeout is how long a new connection has, from accept, to
	// send its whole CONNECT packet; then it is closed without an answer.
	// It is a socket deadline, on the real clock, not on Clock. 0 means
	// DefaultConnectTimeout (5 s).
	ConnectTimeout time.Duration
	// MaxConnectSize bounds the remaining length of the first packet, in
	// bytes: a first packet that is not a CONNECT, claims more, or has a
	// malformed length closes the connection without an answer, before
	// any buffer of the claimed size is allocated (mochi allocates the
	// claimed length up front, up to MaxPacketSize). 0 means
	// DefaultMaxConnectSize (16 KiB).
	MaxConnectSize int
	// MaxUnauthenticated is how many TCP connections may be open that the
	// broker has not admitted yet (from accept until their CONNECT is
	// accepted); a socket beyond it is closed at accept. One remote
	// address (an IPv6 /64) may hold at most a quarter of them (at least
	// 1), so that one host cannot keep everyone else, hearthd's own
	// reconnects included, from connecting. DialPipe's connections are not
	// counted. 0 means DefaultMaxUnauthenticated (64).
	MaxUnauthenticated int
	// MaxKeepAlive is the longest keep alive the broker grants, whole
	// seconds from 1 s to 65535 s. A client that asks for 0 (no keep
	// alive) or for more gets this one: an MQTT 5 client is told in the
	// CONNACK's Server Keep Alive, which it must then use [MQTT-3.1.2-21];
	// a 3.1.1 client cannot be told (MQTT 3.1.1 lets the server disconnect
	// an inactive client whatever its keep alive, §3.1.2.10). Either is
	// disconnected, as every client, when the broker hears nothing from it
	// for one and a half times its keep alive [MQTT-3.1.2-24]. 0 means
	// DefaultMaxKeepAlive (5 min).
	MaxKeepAlive time.Duration
	// LoginFailuresPerMinute is each remote address's (an IPv6 /64's)
	// budget of CONNECTs refused for their credentials: a token bucket of
	// this size, refilled at this rate per minute. While an address has
	// none left, its CONNECTs are refused before their password is
	// checked, with CONNACK 0x9F "Connection rate exceeded" (MQTT 5) or
	// 0x03 "Server unavailable" (3.1.1), whatever the password: admitting
	// the right one would tell a guesser that it is right. So a flood of
	// bad passwords from one address keeps back that address only, the
	// right password from the same host included, until the flood stops.
	// Concurrent CONNECTs from one address may overspend the budget by as
	// many as are in flight. 0 means DefaultLoginFailuresPerMinute (10).
	LoginFailuresPerMinute float64

	// CommandFilter, when set, is a topic filter (Hearth's
	// "<prefix>/+/set") whose PUBLISHes are commands: the broker hands
	// each to OnCommand instead of routing it to subscribers (a client
	// subscribed to the filter receives none) or retaining it, and
	// acknowledges it only when the command's Ack is called (or answers
	// that it was not taken, at Nack), so that a PUBACK can mean what
	// OnCommand's owner says it means (Hearth's: stored). A PUBLISH that
	// the ACL or DenyPublish refuses is answered as before and never
	// handed over; the broker's own (PublishInline) is routed as any. A
	// client's will on the filter (sent at once, without an MQTT 5 Will
	// Delay Interval) is handed over alike as its last command, with
	// nothing to acknowledge, and routed nowhere. "" means no commands:
	// every PUBLISH is routed. Needs OnCommand.
	CommandFilter string
	// OnCommand receives the commands of CommandFilter. It is called on
	// the publisher's read loop, so in the order each client sent its
	// commands, concurrently for different clients. It may block: that
	// pauses reading from this publisher only (TCP then slows it down),
	// never another client.
	OnCommand func(Command)
	// MaxPendingCommands is how many commands one client may have pending
	// (handed to OnCommand, their acknowledgement not yet written): at
	// the cap, the broker stops reading that client's connection until
	// one is acked, so that a publisher that outruns Hearth is slowed,
	// never dropped. Each episode of slowing down is logged once, as a
	// warning, when it ends (the client has no command pending, or has
	// disconnected), with how long it lasted and how many commands
	// waited. 0 means DefaultMaxPendingCommands.
	MaxPendingCommands int
}

// ConnectEvent is one CONNECT and the broker's decision.
type ConnectEvent struct {
	// At is when the broker decided, on Options.Clock.
	At time.Time
	// ClientID is the client identifier of the CONNECT, or the one the
	// broker assigned when it was empty.
	ClientID string
	// Accepted reports whether the client was let in.
	Accepted bool
	// Refusal says why a CONNECT was refused: RefusedRate,
	// RefusedMaxConnections, RefusedCredentials, RefusedLoginFailures or
	// RefusedNotAuthorized; "" when accepted. A CONNECT refused for
	// another reason, such as an unsupported protocol version, is
	// reported with RefusedOther when its CONNACK is sent.
	Refusal string
}

// Reasons of ConnectEvent.Refusal.
const (
	// RefusedRate: the CONNECT came faster than Options.MaxConnectRate.
	RefusedRate = "rate"
	// RefusedMaxConnections: Options.MaxConnections clients were connected.
	RefusedMaxConnections = "max_connections"
	// RefusedCredentials: Options.Users does not admit the username and
	// password, or the CONNECT had no username.
	RefusedCredentials = "credentials"
	// RefusedLoginFailures: the CONNECT's address had spent its budget of
	// failed logins (Options.LoginFailuresPerMinute).
	RefusedLoginFailures = "login_failures"
	// RefusedNotAuthorized: Options.DenyPublish denied the will's topic,
	// Options.ClientIDOwners reserves the client ID to another username,
	// or a client verified as another username is connected with it.
	RefusedNotAuthorized = "not_authorized"
	// RefusedOther: mochi refused the CONNECT itself, such as for a bad
	// protocol version or an invalid client identifier.
	RefusedOther = "other"
)

// Broker is a running embedded broker.
type Broker struct {
	srv     *mqtt.Server
	addr    string
	tlsAddr string
	pipe    *pipeListener
	guard   *guard
	auth    *authenticator
	limits  *limits
	cmds    *commands // nil without Options.CommandFilter
	inline  inline

	closeOnce sync.Once
	closeErr  error
}

// Start listens on opts.Listen, if set, and serves MQTT 3.1, 3.1.1 and 5
// clients there and through DialPipe until Close. It fails if the address
// cannot be listened on, with an error naming it, or if an option is out
// of range.
func Start(opts Options) (*Broker, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	caps := mqtt.NewDefaultServerCapabilities()
	caps.MaximumPacketSize = opts.MaxPacketSize
	if caps.MaximumPacketSize == 0 {
		caps.MaximumPacketSize = DefaultMaxPacketSize
	}
	// mochi copies a PUBLISH's properties into its PUBACK unless told not
	// to: the publisher would get its user properties back, with the
	// stamp of StampUsernameProperty among them.
	caps.Compatibilities.NoInheritedPropertiesOnAck = true
	caps.ReceiveMaximum = DefaultMaxInflight
	if opts.MaxInflight > 0 {
		caps.ReceiveMaximum = uint16(opts.MaxInflight)
	}
	logger := slog.New(slog.DiscardHandler)
	if opts.Logger != nil {
		logger = slog.New(warnAndAbove{opts.Logger.Handler()})
	}
	srv := mqtt.New(&mqtt.Options{
		Capabilities: caps,
		Logger:       logger,
		// Hearth's own traffic: PublishInline and SubscribeInline.
		InlineClient: true,
	})
	b := &Broker{srv: srv, pipe: newPipeListener(), guard: newGuard(srv, opts)}
	b.limits = newLimits(b.guard, opts)
	b.auth = newAuthenticator(srv, b.guard, opts, b.guard.log.log)
	b.auth.loginFailed = b.limits.loginFailed
	b.inline.log = b.guard.log.log
	b.inline.refused = &throttledLog{clock: b.guard.clock, log: b.guard.log.log,
		msg: "embedded broker refused a CONNECT: its client ID is the broker's own inline client's"}
	var tcp net.Listener
	if opts.Listen != "" {
		var err error
		if tcp, err = net.Listen("tcp", opts.Listen); err != nil {
			return nil, fmt.Errorf("embedded broker: listen on %s: %w", opts.Listen, err)
		}
		b.addr = tcp.Addr().String()
	}
	var tlsLn net.Listener
	if opts.TLSListen != "" {
		var err error
		if tlsLn, err = net.Listen("tcp", opts.TLSListen); err != nil {
			if tcp != nil {
				tcp.Close()
			}
			return nil, fmt.Errorf("embedded broker: listen on %s: %w", opts.TLSListen, err)
		}
		b.tlsAddr = tlsLn.Addr().String()
	}
	fail := func(err error) (*Broker, error) {
		if tcp != nil {
			tcp.Close()
		}
		if tlsLn != nil {
			tlsLn.Close()
		}
		b.pipe.Close()
		b.guard.stop()
		b.auth.stop()
		b.limits.stop()
		b.closeInline()
		return nil, fmt.Errorf("embedded broker: %w", err)
	}
	// The failed-login guard and the credentials decide before the accept
	// guard, so that only an admitted login spends a token of the rate.
	// (A password check is a SHA-256 of at most MaxConnectSize bytes.)
	if err := srv.AddHook(b.limits, nil); err != nil {
		return fail(err)
	}
	if err := srv.AddHook(b.auth, nil); err != nil {
		return fail(err)
	}
	// After the credentials, so that a bad password is a failed login
	// whatever the client ID; before the guard, which spends a token.
	if err := srv.AddHook(&inlineID{log: b.inline.refused}, nil); err != nil {
		return fail(err)
	}
	if err := srv.AddHook(b.guard, nil); err != nil {
		return fail(err)
	}
	// Last: a command is handed over only once every other hook (the ACL
	// and DenyPublish among them) has let it through.
	if opts.CommandFilter != "" {
		b.cmds = newCommands(srv, b.auth, b.guard.clock, opts)
		if err := srv.AddHook(b.cmds, nil); err != nil {
			return fail(err)
		}
	}
	if tcp != nil {
		if err := srv.AddListener(b.listener(tcpListenerID, tcp, true)); err != nil {
			return fail(err)
		}
	}
	if tlsLn != nil {
		if err := srv.AddListener(b.listener(tlsListenerID, tls.NewListener(tlsLn, opts.TLSConfig), true)); err != nil {
			return fail(err)
		}
	}
	if err := srv.AddListener(b.listener(pipeListenerID, b.pipe, false)); err != nil {
		return fail(err)
	}
	if err := srv.Serve(); err != nil {
		b.Close()
		return nil, fmt.Errorf("embedded broker: %w", err)
	}
	return b, nil
}

// listener makes ln one of the broker's listeners, named id: its
// connections pass the limits before authentication (counted against
// MaxUnauthenticated if counted: every network listener) and the accept
// guard. A listener that wraps ln in TLS hands it here wrapped, so that
// the handshake, which happens at the first read, falls within the
// CONNECT deadline.
func (b *Broker) listener(id string, ln net.Listener, counted bool) listeners.Listener {
	return guarded{listeners.NewNet(id, limitedListener{ln, b.limits, counted}), b.guard, b.auth, b.limits}
}

// check reports an option out of range.
func (o Options) check() error {
	switch r := o.MaxConnectRate; {
	case o.TLSListen != "" && o.TLSConfig == nil:
		return fmt.Errorf("embedded broker: TLSListen %s needs a TLSConfig", o.TLSListen)
	case math.IsNaN(r) || math.IsInf(r, 0) || r < 0:
		return fmt.Errorf("embedded broker: MaxConnectRate %v: want a finite number ≥ 0 (0: no limit)", r)
	case o.ConnectBurst < 0:
		return fmt.Errorf("embedded broker: ConnectBurst %d: want ≥ 0 (0: 1)", o.ConnectBurst)
	case o.MaxConnections < 0:
		return fmt.Errorf("embedded broker: MaxConnections %d: want ≥ 0 (0: no limit)", o.MaxConnections)
	case o.MaxInflight < 0 || o.MaxInflight > math.MaxUint16:
		return fmt.Errorf("embedded broker: MaxInflight %d: want 0 to 65535 (0: %d)", o.MaxInflight, DefaultMaxInflight)
	case o.ConnectTimeout < 0:
		return fmt.Errorf("embedded broker: ConnectTimeout %v: want ≥ 0 (0: %v)", o.ConnectTimeout, DefaultConnectTimeout)
	case o.MaxConnectSize < 0:
		return fmt.Errorf("embedded broker: MaxConnectSize %d: want ≥ 0 (0: %d)", o.MaxConnectSize, DefaultMaxConnectSize)
	case o.MaxUnauthenticated < 0:
		return fmt.Errorf("embedded broker: MaxUnauthenticated %d: want ≥ 0 (0: %d)", o.MaxUnauthenticated, DefaultMaxUnauthenticated)
	case o.MaxKeepAlive < 0 || o.MaxKeepAlive%time.Second != 0 || o.MaxKeepAlive > math.MaxUint16*time.Second:
		return fmt.Errorf("embedded broker: MaxKeepAlive %v: want whole seconds from 0 to 65535s (0: %v)", o.MaxKeepAlive, DefaultMaxKeepAlive)
	case o.CommandFilter != "" && !validFilter(o.CommandFilter):
		return fmt.Errorf("embedded broker: CommandFilter %q: want a topic filter, its wildcards (+, a final #) each a whole level, not a shared subscription", o.CommandFilter)
	case o.CommandFilter != "" && o.OnCommand == nil:
		return fmt.Errorf("embedded broker: CommandFilter %q needs an OnCommand", o.CommandFilter)
	case o.MaxPendingCommands < 0:
		return fmt.Errorf("embedded broker: MaxPendingCommands %d: want ≥ 0 (0: %d)", o.MaxPendingCommands, DefaultMaxPendingCommands)
	case math.IsNaN(o.LoginFailuresPerMinute) || math.IsInf(o.LoginFailuresPerMinute, 0) || o.LoginFailuresPerMinute < 0:
		return fmt.Errorf("embedded broker: LoginFailuresPerMinute %v: want a finite number ≥ 0 (0: %d)", o.LoginFailuresPerMinute, DefaultLoginFailuresPerMinute)
	}
	return nil
}

// Addr returns the address the broker listens on, host:port, with the port
// chosen when Options.Listen asked for port 0; "" without a TCP listener.
func (b *Broker) Addr() string { return b.addr }

// TLSAddr returns the address the TLS listener listens on, host:port,
// with the port chosen when Options.TLSListen asked for port 0; "" without
// one.
func (b *Broker) TLSAddr() string { return b.tlsAddr }

// URL returns the broker's address as an MQTT client URL, tcp://host:port;
// "" without a TCP listener.
func (b *Broker) URL() string {
	if b.addr == "" {
		return ""
	}
	return "tcp://" + b.addr
}

// SetUsers replaces Options.Users, who may connect, while the broker
// runs: from then on CONNECTs are checked against users, and every
// connected client that users would not admit with the username and
// password it connected with (its user removed, its password changed,
// authentication turned on) is disconnected, with DISCONNECT 0x87 "not
// authorized" to MQTT 5 clients. An empty users admits everyone again.
// Clients are stamped and checked by DenyPublish by the table in force
// when they publish. The broker keeps no reference to users.
func (b *Broker) SetUsers(users map[string]string) { b.auth.setUsers(users) }

// DialPipe returns an in-memory connection to the broker (net.Pipe handed
// to an in-memory listener), as if dialled over TCP but without a file
// descriptor: load scenarios with more clients than the process may open
// files use it (paho.mqtt.golang's ClientOptions.SetCustomOpenConnectionFn
// can return it). Its CONNECT passes the same accept guard as one over
// TCP. It works whether or not Options.Listen is set. After Close it
// returns an error that wraps net.ErrClosed.
func (b *Broker) DialPipe() (net.Conn, error) {
	return b.pipe.dial()
}

// Close stops listening, disconnects every client (sending their wills) and
// stops the broker. A last summary of refused CONNECTs, if any are not
// logged yet, goes to the logger. Closing again does nothing.
//
// It closes the listeners and the clients itself before the server: mochi
// v2.7.9's own Close takes its clients' read lock twice and can deadlock
// when a client disconnects at that moment (mochi-mqtt/server#488).
func (b *Broker) Close() error {
	b.closeOnce.Do(func() { b.closeErr = b.close() })
	return b.closeErr
}

func (b *Broker) close() error {
	b.closeInline()
	for _, id := range []string{tcpListenerID, tlsListenerID, pipeListenerID} {
		if l, ok := b.srv.Listeners.Get(id); ok {
			l.Close(func(string) {})
		}
	}
	for _, cl := range b.srv.Clients.GetAll() {
		// An in-memory connection has no kernel buffer: a client that has
		// stopped reading would block the DISCONNECT forever.
		if cl.Net.Conn != nil {
			cl.Net.Conn.SetWriteDeadline(time.Now().Add(closeWriteTimeout))
		}
		b.srv.DisconnectClient(cl, packets.ErrServerShuttingDown)
	}
	b.guard.endAll()
	err := b.srv.Close()
	b.guard.stop()
	b.auth.stop()
	b.limits.stop()
	if b.cmds != nil {
		b.cmds.nacks.stop()
	}
	return err
}

// closeWriteTimeout bounds the DISCONNECT that Close writes to each client.
const closeWriteTimeout = time.Second

// The broker's listeners: TCP, when Options.Listen is set, TLS, when
// Options.TLSListen is, and the in-memory one of DialPipe.
const (
	tcpListenerID  = "tcp"
	tlsListenerID  = "mqtts"
	pipeListenerID = "pipe"
)

// warnAndAbove passes on only warnings and errors, less the read errors of
// connections that the broker itself closed while stopping and mochi's
// warning about a short keep alive, which it logs for every such CONNECT
// before any hook (MaxKeepAlive replaces a keep alive of 0).
type warnAndAbove struct{ slog.Handler }

func (h warnAndAbove) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

func (h warnAndAbove) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == mqtt.ErrMinimumKeepalive.Error() {
		return nil
	}
	closed := false
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && errors.Is(err, net.ErrClosed) {
			closed = true
			return false
		}
		return true
	})
	if closed {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h warnAndAbove) WithAttrs(attrs []slog.Attr) slog.Handler {
	return warnAndAbove{h.Handler.WithAttrs(attrs)}
}

func (h warnAndAbove) WithGroup(name string) slog.Handler {
	return warnAndAbove{h.Handler.WithGroup(name)}
}
