package broker

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
	"golang.org/x/time/rate"
)

// The defaults of the limits before authentication (Options).
const (
	// DefaultConnectTimeout is how long a new connection has to send its
	// whole CONNECT packet when Options.ConnectTimeout is 0.
	DefaultConnectTimeout = 5 * time.Second
	// DefaultMaxConnectSize is the largest remaining length of a CONNECT
	// packet, in bytes, when Options.MaxConnectSize is 0: 16 KiB, room
	// for a client ID, a username, a password, a will and its properties
	// many times over.
	DefaultMaxConnectSize = 16 << 10
	// DefaultMaxUnauthenticated is how many connections may be
	// unauthenticated at once when Options.MaxUnauthenticated is 0.
	DefaultMaxUnauthenticated = 64
	// DefaultMaxKeepAlive is the longest keep alive the broker grants when
	// Options.MaxKeepAlive is 0: 5 minutes, above the keep alives of
	// common clients (Hearth 30 s, Zigbee2MQTT, Home Assistant and
	// Mosquitto's clients 60 s).
	DefaultMaxKeepAlive = 5 * time.Minute
	// DefaultLoginFailuresPerMinute is each remote address's budget of
	// refused logins when Options.LoginFailuresPerMinute is 0.
	DefaultLoginFailuresPerMinute = 10
)

// maxTrackedAddresses bounds the failed-login guard's table: beyond it,
// addresses whose budget is full again are forgotten, and if none is, new
// addresses share one budget (so that a flood from many addresses, such
// as an IPv6 prefix, cannot grow the table without bound).
const maxTrackedAddresses = 4096

// Stats counts what the limits before authentication did since Start:
// for logs and metrics. Counters only grow; Unauthenticated is a gauge.
type Stats struct {
	// Unauthenticated is how many connections are open now that have not
	// yet been admitted (from accept to the authenticator's decision).
	Unauthenticated int
	// ConnectTimeouts counts connections closed because they had not sent
	// their whole CONNECT within Options.ConnectTimeout.
	ConnectTimeouts uint64
	// BadFirstPackets counts connections closed because their first
	// packet was not a CONNECT, claimed more than Options.MaxConnectSize
	// bytes or had a malformed remaining length: closed before any buffer
	// of the claimed size was allocated.
	BadFirstPackets uint64
	// UnauthenticatedFull counts sockets closed at accept because
	// Options.MaxUnauthenticated connections (or an address's share of
	// them) were unauthenticated, and unauthenticated connections closed
	// to make room for one from an address that held fewer.
	UnauthenticatedFull uint64
	// KeepAliveTimeouts counts admitted clients the broker disconnected
	// for silence beyond one and a half times their keep alive.
	KeepAliveTimeouts uint64
	// LoginFailures counts CONNECTs refused for a bad username or
	// password (ConnectEvent RefusedCredentials).
	LoginFailures uint64
	// LoginBackoffs counts CONNECTs refused, without their password being
	// checked, because their address had spent its budget of failed
	// logins (ConnectEvent RefusedLoginFailures).
	LoginBackoffs uint64

	// PublishersSlowed counts the episodes in which a publisher had
	// Options.MaxPendingCommands commands not yet acknowledged, so that
	// the broker paused reading its connection (each is logged once,
	// when it ends).
	PublishersSlowed uint64
	// CommandsNacked counts commands answered with Command.Nack: a
	// negative PUBACK to an MQTT 5 publisher, the end of a 3.1.1
	// publisher's connection.
	CommandsNacked uint64
	// MessagesDropped counts messages the broker dropped on their way to
	// a subscriber, after it had acknowledged them to their publisher:
	// the subscriber's in-flight store (Options.MaxInflight) or its
	// outbound queue was full. A slow automation misses results this
	// way; mochi logs each at WARN ("client store quota reached").
	MessagesDropped uint64
}

// Stats returns the broker's counts: the limits before authentication,
// the command hand-off and the messages dropped. It is safe to call at
// any time, also after Close.
func (b *Broker) Stats() Stats {
	s := b.limits.stats()
	if b.cmds != nil {
		s.PublishersSlowed, s.CommandsNacked = b.cmds.slowed.Load(), b.cmds.nacked.Load()
	}
	s.MessagesDropped = uint64(atomic.LoadInt64(&b.srv.Info.MessagesDropped) + atomic.LoadInt64(&b.srv.Info.InflightDropped))
	return s
}

// Reasons the limits log counts, as its line names them.
const (
	limitConnectTimeout   = "connect_timeout"
	limitBadFirstPacket   = "bad_first_packet"
	limitUnauthenticated  = "max_unauthenticated"
	limitKeepAlive        = "keepalive"
	limitLoginFailures    = "login_failures"
	limitsLogMessage      = "embedded broker closed connections at its limits before authentication or for silence"
	v5ConnectionRateCode  = 0x9F // MQTT 5 CONNACK "Connection rate exceeded"
	v3ServerUnavailable   = 0x03 // MQTT 3.1.1 CONNACK "Server unavailable"
	mqttConnectFixedFirst = 0x10 // CONNECT, flags 0 [MQTT-2.2.2-1]
)

// limits enforces what the broker allows before authentication, and the
// keep alive after it: it reads the CONNECT itself before mochi sees the
// connection, counts unauthenticated connections, grants keep alives and
// keeps the failed-login budgets. It is also a mochi hook (OnConnect,
// OnSessionEstablish), added before the authenticator.
type limits struct {
	mqtt.HookBase
	guard          *guard
	connectTimeout time.Duration
	maxConnectSize int
	maxUnauth      int
	perAddress     int    // an address's share of maxUnauth
	maxKeepAlive   uint16 // seconds
	failures       rate.Limit
	failureBurst   int
	log            *refusalLog

	mu      sync.Mutex
	pending map[*primedConn]struct{} // counted and not yet admitted
	byAddr  map[string]int           // pending, per address key
	budgets map[string]*rate.Limiter // failed logins, per address key
	// counted, if set, is called after a connection starts or stops
	// counting as unauthenticated: for tests.
	counted func()

	connectTimeouts, badFirstPackets, unauthFull, keepAliveTimeouts, loginFailures, loginBackoffs atomic.Uint64
}

func newLimits(g *guard, opts Options) *limits {
	l := &limits{
		guard:          g,
		connectTimeout: opts.ConnectTimeout,
		maxConnectSize: opts.MaxConnectSize,
		maxUnauth:      opts.MaxUnauthenticated,
		maxKeepAlive:   uint16(opts.MaxKeepAlive / time.Second),
		pending:        map[*primedConn]struct{}{},
		byAddr:         map[string]int{},
		budgets:        map[string]*rate.Limiter{},
	}
	if l.connectTimeout == 0 {
		l.connectTimeout = DefaultConnectTimeout
	}
	if l.maxConnectSize == 0 {
		l.maxConnectSize = DefaultMaxConnectSize
	}
	if l.maxUnauth == 0 {
		l.maxUnauth = DefaultMaxUnauthenticated
	}
	l.perAddress = max(l.maxUnauth/4, 1)
	if l.maxKeepAlive == 0 {
		l.maxKeepAlive = uint16(DefaultMaxKeepAlive / time.Second)
	}
	perMinute := opts.LoginFailuresPerMinute
	if perMinute == 0 {
		perMinute = DefaultLoginFailuresPerMinute
	}
	l.failures = rate.Limit(perMinute / 60)
	l.failureBurst = max(int(perMinute), 1)
	l.log = &refusalLog{clock: g.clock, log: g.log.log, msg: limitsLogMessage,
		keys: []string{limitConnectTimeout, limitBadFirstPacket, limitUnauthenticated, limitKeepAlive, limitLoginFailures}}
	return l
}

func (l *limits) stats() Stats {
	l.mu.Lock()
	n := len(l.pending)
	l.mu.Unlock()
	return Stats{
		Unauthenticated:     n,
		ConnectTimeouts:     l.connectTimeouts.Load(),
		BadFirstPackets:     l.badFirstPackets.Load(),
		UnauthenticatedFull: l.unauthFull.Load(),
		KeepAliveTimeouts:   l.keepAliveTimeouts.Load(),
		LoginFailures:       l.loginFailures.Load(),
		LoginBackoffs:       l.loginBackoffs.Load(),
	}
}

// ID names the hook in mochi.
func (l *limits) ID() string { return "hearth-limits" }

// Provides says which hooks the limits implement.
func (l *limits) Provides(b byte) bool {
	return b == mqtt.OnConnect || b == mqtt.OnSessionEstablish
}

// OnConnect grants the client its keep alive and refuses a CONNECT from
// an address that has spent its budget of failed logins, before its
// password is checked: CONNACK 0x9F "Connection rate exceeded" to MQTT 5,
// 0x03 "Server unavailable" to 3.1.1, so that the client backs off.
//
// Keep alive: MQTT says that a server disconnects a client it hears
// nothing from for one and a half times its keep alive [MQTT-3.1.2-24],
// which mochi does, and that a keep alive of 0 turns this off. MQTT 5 lets
// the server answer with its own Server Keep Alive, which the client must
// then use [MQTT-3.1.2-21], [MQTT-3.2.2-21]: a client that asks for 0 or
// for more than the maximum is sent the maximum. MQTT 3.1.1 cannot tell a
// client, but permits a server to disconnect a client it finds inactive
// whatever its keep alive (§3.1.2.10, non-normative): such a client is
// held to the maximum without being told, and disconnected after one and
// a half times it without a packet.
func (l *limits) OnConnect(cl *mqtt.Client, _ packets.Packet) error {
	if ka := cl.State.Keepalive; ka == 0 || ka > l.maxKeepAlive {
		cl.State.Keepalive = l.maxKeepAlive
		cl.State.ServerKeepalive = true // sent in the CONNACK to MQTT 5
	}
	if !l.overBudget(cl.Net.Remote) {
		return nil
	}
	l.loginBackoffs.Add(1)
	l.log.add(limitLoginFailures)
	code := byte(v5ConnectionRateCode)
	if cl.Properties.ProtocolVersion < 5 {
		code = v3ServerUnavailable
	}
	l.guard.refuse(cl, l.guard.clock.Now(), RefusedLoginFailures, func() { writeConnack(cl, code) })
	return errRefused
}

// OnSessionEstablish marks the client admitted: it no longer counts as
// unauthenticated.
func (l *limits) OnSessionEstablish(cl *mqtt.Client, _ packets.Packet) {
	pc, ok := cl.Net.Conn.(*primedConn)
	if !ok {
		return
	}
	pc.established.Store(true)
	l.done(pc)
}

// overBudget reports whether remote has no failed login left.
func (l *limits) overBudget(remote string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.budgets[l.budgetKey(remote)]
	return ok && lim.TokensAt(l.guard.clock.Now()) < 1
}

// loginFailed spends one failed login of remote's budget; the
// authenticator calls it for every CONNECT it refuses for a bad username
// or password.
func (l *limits) loginFailed(remote string) {
	l.loginFailures.Add(1)
	now := l.guard.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	key := l.budgetKey(remote)
	lim, ok := l.budgets[key]
	if !ok {
		lim = rate.NewLimiter(l.failures, l.failureBurst)
		l.budgets[key] = lim
	}
	lim.AllowN(now, 1) // may find none left under concurrent failures: then it is already spent
}

// budgetKey returns the table's key of remote: its address key, or the
// shared key "" when the table is full of addresses still failing. Call
// with mu held.
func (l *limits) budgetKey(remote string) string {
	key := addressKey(remote)
	if _, ok := l.budgets[key]; ok || len(l.budgets) < maxTrackedAddresses {
		return key
	}
	now := l.guard.clock.Now()
	for k, lim := range l.budgets {
		if k != "" && lim.TokensAt(now) >= float64(l.failureBurst) {
			delete(l.budgets, k)
		}
	}
	if len(l.budgets) < maxTrackedAddresses {
		return key
	}
	return ""
}

// addressKey is the host of a remote address, host:port, and for IPv6 its
// /64 prefix: the unit one attacker controls.
func addressKey(remote string) string {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return remote
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.To4() != nil {
		return host
	}
	return ip.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// accept counts a new connection as unauthenticated, or reports false when
// its address's share is reached, or when the cap is reached and no
// address holds at least two more than this one's. When the cap is
// reached, a connection from an address that holds fewer takes the place
// of the oldest connection of the address that holds the most, which is
// closed: a few addresses that fill the cap with sockets that never log in
// (a LAN host can take four IPv4 addresses) cannot keep a bridge from
// another address out, since its CONNECT, read within a round trip, would
// have to be pushed out by that many new sockets in that time.
func (l *limits) accept(pc *primedConn) bool {
	key := addressKey(pc.RemoteAddr().String())
	l.mu.Lock()
	var evict *primedConn
	if l.byAddr[key] < l.perAddress && len(l.pending) >= l.maxUnauth {
		evict = l.evictable(l.byAddr[key])
	}
	if l.byAddr[key] >= l.perAddress || (len(l.pending) >= l.maxUnauth && evict == nil) {
		l.mu.Unlock()
		l.unauthFull.Add(1)
		l.log.add(limitUnauthenticated)
		return false
	}
	if evict != nil {
		l.forget(evict)
	}
	pc.addr, pc.since = key, time.Now()
	l.pending[pc] = struct{}{}
	l.byAddr[key]++
	counted := l.counted
	l.mu.Unlock()
	if evict != nil {
		evict.Conn.Close() // its reader ends; done finds it forgotten
		l.unauthFull.Add(1)
		l.log.add(limitUnauthenticated)
	}
	if counted != nil {
		counted()
	}
	return true
}

// evictable returns the oldest pending connection of the address that
// holds the most, if that address holds at least two more than held (the
// newcomer's address), else nil. Call with mu held; the cap is small, so a
// scan is cheap.
func (l *limits) evictable(held int) *primedConn {
	heaviest, most := "", 0
	for addr, n := range l.byAddr {
		if n > most {
			heaviest, most = addr, n
		}
	}
	if held+1 >= most {
		return nil
	}
	var oldest *primedConn
	for pc := range l.pending {
		if pc.addr == heaviest && (oldest == nil || pc.since.Before(oldest.since)) {
			oldest = pc
		}
	}
	return oldest
}

// forget stops counting pc. Call with mu held.
func (l *limits) forget(pc *primedConn) {
	delete(l.pending, pc)
	if l.byAddr[pc.addr]--; l.byAddr[pc.addr] <= 0 {
		delete(l.byAddr, pc.addr)
	}
}

// limitedListener closes, at accept and on the accepting goroutine, a
// connection beyond Options.MaxUnauthenticated (if counted), so that a
// socket refused costs no goroutine; it returns the others as
// *primedConn, counted.
type limitedListener struct {
	net.Listener
	lim     *limits
	counted bool
}

func (l limitedListener) Accept() (net.Conn, error) {
	for {
		conn, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		pc := newPrimedConn(conn)
		if !l.counted || l.lim.accept(pc) {
			return pc, nil
		}
		conn.Close()
	}
}

// done stops counting pc as unauthenticated, if it was.
func (l *limits) done(pc *primedConn) {
	l.mu.Lock()
	if _, ok := l.pending[pc]; !ok {
		l.mu.Unlock()
		return
	}
	l.forget(pc)
	counted := l.counted
	l.mu.Unlock()
	if counted != nil {
		counted()
	}
}

// readConnect reads pc's first packet within the CONNECT deadline and
// keeps it for mochi. It reports false, having counted and logged why,
// when the connection must be closed.
func (l *limits) readConnect(pc *primedConn) bool {
	pc.SetReadDeadline(time.Now().Add(l.connectTimeout))
	first, err := readConnectPacket(pc.Conn, l.maxConnectSize)
	switch {
	case err == nil:
		pc.pending = first
		return true
	case errors.Is(err, os.ErrDeadlineExceeded):
		l.connectTimeouts.Add(1)
		l.log.add(limitConnectTimeout)
	case errors.Is(err, errBadFirstPacket):
		l.badFirstPackets.Add(1)
		l.log.add(limitBadFirstPacket)
	}
	return false // any other error: the client went away
}

// ended reports a connection mochi has finished with; true when its error
// was the keep alive's deadline, counted and logged here rather than by
// mochi once per connection.
func (l *limits) ended(pc *primedConn, err error) bool {
	l.done(pc)
	if pc.established.Load() && errors.Is(err, os.ErrDeadlineExceeded) {
		l.keepAliveTimeouts.Add(1)
		l.log.add(limitKeepAlive)
		return true
	}
	return false
}

func (l *limits) stop() { l.log.stop() }

// errBadFirstPacket is what readConnectPacket returns for a first packet
// that the broker closes the connection for.
var errBadFirstPacket = errors.New("bad first packet")

// readConnectPacket reads one MQTT control packet from r, which must be a
// CONNECT (fixed header byte 0x10 [MQTT-3.1.0-1], [MQTT-2.2.2-1]) whose
// remaining length, a variable byte integer of at most four bytes
// (MQTT 5 §1.5.5), is at most maxSize, and returns its bytes, fixed header
// included. It reads no byte beyond the packet, and its buffer grows with
// the bytes that arrive, never to the claimed length at once. Errors: one
// wrapping errBadFirstPacket for a packet it refuses, else r's error (EOF
// before the packet's end is io.ErrUnexpectedEOF).
func readConnectPacket(r io.Reader, maxSize int) ([]byte, error) {
	var header [5]byte
	if _, err := io.ReadFull(r, header[:1]); err != nil {
		return nil, err
	}
	if header[0] != mqttConnectFixedFirst {
		return nil, fmt.Errorf("%w: fixed header %#02x, want a CONNECT (0x10)", errBadFirstPacket, header[0])
	}
	remaining, n := 0, 1
	for shift := 0; ; shift += 7 {
		if n == len(header) {
			return nil, fmt.Errorf("%w: remaining length longer than 4 bytes", errBadFirstPacket)
		}
		if _, err := io.ReadFull(r, header[n:n+1]); err != nil {
			return nil, noEOF(err)
		}
		remaining |= int(header[n]&0x7f) << shift
		n++
		if header[n-1]&0x80 == 0 {
			break
		}
	}
	if remaining > maxSize {
		return nil, fmt.Errorf("%w: CONNECT of %d bytes, more than %d", errBadFirstPacket, remaining, maxSize)
	}
	var buf bytes.Buffer
	buf.Write(header[:n])
	if _, err := io.CopyN(&buf, r, int64(remaining)); err != nil {
		return nil, noEOF(err)
	}
	return buf.Bytes(), nil
}

func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// primedConn is a connection whose first packet the limits have read:
// mochi reads that packet from pending first, then the connection.
type primedConn struct {
	net.Conn
	pending     []byte    // read by mochi's goroutine only
	addr        string    // address key, while counted as unauthenticated
	since       time.Time // when it was counted
	established atomic.Bool
	// closed is closed at the first Close: the command hook's waits on a
	// connection whose read loop they hold up end with it.
	closed    chan struct{}
	closeOnce sync.Once
}

func newPrimedConn(conn net.Conn) *primedConn {
	return &primedConn{Conn: conn, closed: make(chan struct{})}
}

// Close closes the connection and closed.
func (c *primedConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func (c *primedConn) Read(p []byte) (int, error) {
	if len(c.pending) > 0 {
		n := copy(p, c.pending)
		c.pending = c.pending[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
