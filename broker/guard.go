package broker

import (
	"bytes"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
	"golang.org/x/time/rate"
)

// errRefused is what the guard's and the authenticator's OnConnect hooks
// return for a CONNECT they refused, after writing the CONNACK; mochi then
// closes the connection.
var errRefused = errors.New("connect refused")

// guard is the broker's accept guard: a mochi hook that decides each
// CONNECT by MaxConnections and MaxConnectRate, after mochi's own checks
// of the packet and before authentication.
//
// mochi's Capabilities.MaximumClients is left unlimited: it is checked
// before any hook, where no ConnectEvent could report it. The guard counts
// connections itself, as slots: a slot is taken, under mu, when a CONNECT
// is accepted, and given back by the guarded listener when mochi has
// finished with the connection (its establish function returns), which
// covers every way a connection ends, also those on which mochi calls no
// OnDisconnect hook (a CONNACK that cannot be written).
type guard struct {
	mqtt.HookBase
	srv       *mqtt.Server
	clock     clockwork.Clock
	maxConns  int
	exempt    map[string]bool // client IDs the guard never refuses
	limiter   *rate.Limiter   // nil: no rate limit
	onConnect func(ConnectEvent)
	log       *refusalLog

	mu sync.Mutex
	// slots holds, per connection the guard accepted and mochi still
	// serves, when the guard accepted it.
	slots map[net.Conn]time.Time
	// refusing holds the clients whose refusal the guard is writing, so
	// that OnPacketSent tells its CONNACKs from mochi's own.
	refusing map[*mqtt.Client]struct{}

	// released, if set, is called after a slot is given back: for tests.
	released func()

	// serving holds every connection mochi is serving, from accept to the
	// end of its session, so that Close can end them all and wait for
	// mochi to let go of them before it closes the server.
	serving map[net.Conn]struct{}
	closing bool
	wg      sync.WaitGroup
}

// serve registers conn as served; false once the broker is closing.
func (g *guard) serve(conn net.Conn) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closing {
		return false
	}
	g.serving[conn] = struct{}{}
	g.wg.Add(1)
	return true
}

func (g *guard) served(conn net.Conn) {
	g.mu.Lock()
	delete(g.serving, conn)
	g.mu.Unlock()
	g.wg.Done()
}

// endAll closes every connection mochi still serves and waits until mochi
// has finished with each, after which no connection is accepted: mochi
// v2.7.9 races its own Close against a connection it is still
// establishing.
func (g *guard) endAll() {
	g.mu.Lock()
	g.closing = true
	for conn := range g.serving {
		conn.Close()
	}
	g.mu.Unlock()
	g.wg.Wait()
}

func newGuard(srv *mqtt.Server, opts Options) *guard {
	g := &guard{
		srv:       srv,
		clock:     opts.Clock,
		maxConns:  opts.MaxConnections,
		onConnect: opts.OnConnect,
		slots:     map[net.Conn]time.Time{},
		refusing:  map[*mqtt.Client]struct{}{},
		exempt:    map[string]bool{},
		serving:   map[net.Conn]struct{}{},
	}
	for _, id := range opts.Exempt {
		g.exempt[id] = true
	}
	if g.clock == nil {
		g.clock = clockwork.NewRealClock()
	}
	if opts.MaxConnectRate > 0 {
		// A new limiter is full: an idle broker accepts a burst at once.
		g.limiter = rate.NewLimiter(rate.Limit(opts.MaxConnectRate), max(opts.ConnectBurst, 1))
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g.log = &refusalLog{clock: g.clock, log: log,
		msg:  "embedded broker refused CONNECTs (server busy); clients back off and retry",
		keys: []string{RefusedMaxConnections, RefusedRate}}
	return g
}

// ID names the hook in mochi.
func (g *guard) ID() string { return "hearth-accept-guard" }

// Provides says which hooks the guard implements: OnPacketSent only when
// someone listens to ConnectEvents, since it sees every packet.
func (g *guard) Provides(b byte) bool {
	if b == mqtt.OnPacketSent {
		return g.onConnect != nil
	}
	return bytes.Contains([]byte{mqtt.OnConnect, mqtt.OnSessionEstablish}, []byte{b})
}

// OnConnect decides a CONNECT that passed mochi's checks. MaxConnections
// is checked first, so that a CONNECT refused for it spends no token; a
// CONNECT refused for the rate takes no slot.
func (g *guard) OnConnect(cl *mqtt.Client, _ packets.Packet) error {
	g.mu.Lock()
	now := g.clock.Now()
	refusal := ""
	switch {
	case g.exempt[cl.ID]:
		g.slots[cl.Net.Conn] = now // counted, never refused
	case g.maxConns > 0 && len(g.slots) >= g.maxConns && !g.takesOver(cl):
		refusal = RefusedMaxConnections
	case g.limiter != nil && !g.limiter.AllowN(now, 1):
		refusal = RefusedRate
	default:
		g.slots[cl.Net.Conn] = now
	}
	g.mu.Unlock()
	if refusal == "" {
		return nil // reported in OnSessionEstablish, once authenticated
	}

	g.log.add(refusal)
	code := packets.ErrServerBusy // 0x89
	if cl.Properties.ProtocolVersion < 5 {
		code = packets.ErrServerUnavailable // 0x88, sent to 3.1.1 as 0x03
	}
	// An error writing the CONNACK closes the connection anyway.
	g.refuse(cl, now, refusal, func() { g.srv.SendConnack(cl, code, false, nil) })
	return errRefused
}

// refuse reports the refusal of cl's CONNECT, decided at at, and writes
// its CONNACK with send, so that OnPacketSent knows that CONNACK for a
// refusal already reported.
func (g *guard) refuse(cl *mqtt.Client, at time.Time, refusal string, send func()) {
	g.mu.Lock()
	g.refusing[cl] = struct{}{}
	g.mu.Unlock()
	g.report(ConnectEvent{At: at, ClientID: cl.ID, Refusal: refusal})
	send()
	g.mu.Lock()
	delete(g.refusing, cl)
	g.mu.Unlock()
}

// takesOver reports whether cl takes over the session of a client that
// is connected: it replaces that client rather than adding one.
func (g *guard) takesOver(cl *mqtt.Client) bool {
	old, ok := g.srv.Clients.Get(cl.ID)
	return ok && !old.Closed()
}

// OnSessionEstablish reports an accepted CONNECT: it runs once the client
// is authenticated, right before its CONNACK.
func (g *guard) OnSessionEstablish(cl *mqtt.Client, _ packets.Packet) {
	if g.onConnect == nil {
		return
	}
	g.mu.Lock()
	at, ok := g.slots[cl.Net.Conn]
	g.mu.Unlock()
	if !ok {
		at = g.clock.Now()
	}
	g.report(ConnectEvent{At: at, ClientID: cl.ID, Accepted: true})
}

// OnPacketSent reports the CONNECTs that mochi refused itself, before the
// guard saw them (a bad protocol version, an invalid client identifier)
// or after it (authentication), by their CONNACK.
func (g *guard) OnPacketSent(cl *mqtt.Client, pk packets.Packet, _ []byte) {
	if pk.FixedHeader.Type != packets.Connack || pk.ReasonCode == packets.CodeSuccess.Code {
		return
	}
	g.mu.Lock()
	_, ours := g.refusing[cl]
	g.mu.Unlock()
	if !ours {
		g.report(ConnectEvent{At: g.clock.Now(), ClientID: cl.ID, Refusal: RefusedOther})
	}
}

func (g *guard) report(e ConnectEvent) {
	if g.onConnect != nil {
		g.onConnect(e)
	}
}

// release gives back the slot of conn, if the guard accepted it.
func (g *guard) release(conn net.Conn) {
	g.mu.Lock()
	_, held := g.slots[conn]
	delete(g.slots, conn)
	released := g.released
	g.mu.Unlock()
	if held && released != nil {
		released()
	}
}

// stop logs what the refusal log still holds.
func (g *guard) stop() { g.log.stop() }

// guarded is a listener whose connections give back their guard slot when
// mochi has finished with them. It leaves the guard's refusals, which the
// refusal log summarises, out of mochi's per-connection warnings.
//
// It is also where the limits before authentication act, before mochi sees
// a connection: mochi reads a packet by allocating a buffer of the length
// its fixed header claims before reading it (Client.ReadPacket), gives a
// connection no deadline until its CONNECT has passed the hooks, and
// allocates each client's queues as it accepts it. So its net.Listener is
// a limitedListener, which counts each connection against
// Options.MaxUnauthenticated (closing it at accept beyond), and the
// listener reads the CONNECT itself within Options.ConnectTimeout and at
// most Options.MaxConnectSize bytes before it hands mochi the connection
// with that packet replayed.
type guarded struct {
	listeners.Listener
	g   *guard
	a   *authenticator
	lim *limits
}

func (l guarded) Serve(establish listeners.EstablishFn) {
	l.Listener.Serve(func(id string, conn net.Conn) error {
		pc, ok := conn.(*primedConn)
		if !ok {
			pc = newPrimedConn(conn)
		}
		if !l.g.serve(pc) {
			l.lim.done(pc)
			pc.Close() // accepted as the broker closes
			return nil
		}
		defer l.g.served(pc)
		if !l.lim.readConnect(pc) {
			l.lim.done(pc)
			pc.Close()
			return nil
		}
		err := establish(id, pc)
		l.g.release(pc)
		l.a.forget(pc)
		if l.lim.ended(pc, err) || errors.Is(err, errRefused) {
			return nil
		}
		return err
	})
}

// refusalLog logs the guard's refusals as a warning at most once per
// second of its clock: the first of a quiet spell at once, the rest
// summarised a second after the previous line.
type refusalLog struct {
	clock clockwork.Clock
	log   *slog.Logger
	msg   string   // the line's message
	keys  []string // the reasons each line counts, in this order

	mu      sync.Mutex
	counts  map[string]int
	since   time.Time       // first refusal not logged yet
	last    time.Time       // when the last line was logged
	pending clockwork.Timer // the summary due, if any
	stopped bool
}

// refusalInterval is the least time between two refusal lines.
const refusalInterval = time.Second

func (r *refusalLog) add(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	if r.counts == nil {
		r.counts = map[string]int{}
		r.since = now
	}
	r.counts[reason]++
	if r.pending != nil || r.stopped {
		return
	}
	if wait := r.last.Add(refusalInterval).Sub(now); wait > 0 && !r.last.IsZero() {
		r.pending = r.clock.AfterFunc(wait, r.flush)
		return
	}
	r.logLocked(now)
}

func (r *refusalLog) flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending = nil
	if !r.stopped {
		r.logLocked(r.clock.Now())
	}
}

// stop logs what is left and stops the timer.
func (r *refusalLog) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending != nil {
		r.pending.Stop()
		r.pending = nil
	}
	r.logLocked(r.clock.Now())
	r.stopped = true
}

func (r *refusalLog) logLocked(now time.Time) {
	if r.counts == nil {
		return
	}
	args := make([]any, 0, 2*len(r.keys)+2)
	for _, k := range r.keys {
		args = append(args, k, r.counts[k])
	}
	r.log.Warn(r.msg, append(args, "over", now.Sub(r.since))...)
	r.counts = nil
	r.last = now
}
