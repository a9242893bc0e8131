package broker

import (
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/hearthd/hearth/topic"
)

// DefaultMaxPendingCommands is each client's Options.MaxPendingCommands
// when it is 0.
const DefaultMaxPendingCommands = 256

// Command is a PUBLISH on Options.CommandFilter, handed to
// Options.OnCommand instead of being routed to subscribers. Its publisher
// gets no PUBACK (QoS 1) or PUBREC (QoS 2) until Ack is called, and none
// that says received if Nack is. A command neither acked nor nacked keeps
// its place (and holds back the acknowledgements of the publisher's later
// commands) until the publisher disconnects.
type Command struct {
	// Topic is the PUBLISH's topic, a topic alias resolved.
	Topic string
	// Payload is the message as sent; the broker keeps no reference to it.
	Payload []byte
	// QoS is the PUBLISH's QoS, 0 to 2.
	QoS byte
	// Retained is the PUBLISH's retain flag. A command is never retained
	// by the broker, whatever the flag says.
	Retained bool
	// ClientID is the publisher's client identifier.
	ClientID string
	// Username is the username the publisher connected with, when
	// Options.Users verified it with its password; "" for a client
	// admitted without verification (while Users is empty).
	Username string

	ack *pendingAck // nil for a will: nothing to acknowledge
}

// Ack sends the publisher its PUBACK (QoS 1) or PUBREC (QoS 2, after which
// the broker completes the exchange with PUBREL and PUBCOMP as for any
// publish), and frees the command's place among the publisher's pending
// commands (Options.MaxPendingCommands). Only the first call of Ack or
// Nack counts; later ones do nothing. It never blocks: the acknowledgement
// is written by the publisher's own writer, in the order the publisher
// sent its commands (MQTT 5.0 §4.6), so that a command acked early waits
// for the ones before it. A QoS 0 command has nothing to send; Ack still
// frees its place. After the publisher has disconnected, Ack does nothing.
func (c Command) Ack() {
	if c.ack != nil {
		c.ack.done(acked)
	}
}

// Nack tells the publisher that the command was not taken (Hearth could
// not store it), in its turn as Ack would: an MQTT 5 publisher gets PUBACK
// (or PUBREC) 0x80 "unspecified error", which ends the exchange; a 3.1.1
// publisher, which MQTT 3.1.1 gives no way to tell, is disconnected
// there, before the acknowledgements of its later commands, so that it
// never takes them for received (a client with a persistent session sends
// them again when it reconnects). At QoS 0 it only frees the command's
// place. Only the first call of Ack or Nack counts.
func (c Command) Nack() {
	if c.ack != nil {
		c.ack.done(nacked)
	}
}

// commands is the broker's command hook, added after every other hook: a
// PUBLISH on Options.CommandFilter that has passed the ACL and DenyPublish
// is handed to Options.OnCommand and rejected to mochi (ErrRejectPacket),
// which then neither acknowledges, retains nor routes it; the hook writes
// the acknowledgement itself once the command is acked.
//
// Each publisher has at most max commands pending (handed over, their
// acknowledgement not yet written). At the cap the hook waits, on the
// publisher's read loop, for one to be acked: the broker stops reading
// that connection, and TCP slows the publisher down. mochi reads each
// connection on one goroutine, so a wait holds up no other client.
type commands struct {
	mqtt.HookBase
	srv    *mqtt.Server
	auth   *authenticator
	filter string
	on     func(Command)
	max    int
	clock  clockwork.Clock
	log    *slog.Logger
	nacks  *throttledLog // 3.1.1 publishers disconnected at a Nack

	// Counts for Stats.
	slowed, nacked atomic.Uint64

	mu         sync.Mutex
	publishers map[*mqtt.Client]*publisher
}

func newCommands(srv *mqtt.Server, auth *authenticator, clock clockwork.Clock, opts Options) *commands {
	h := &commands{
		srv:    srv,
		auth:   auth,
		filter: opts.CommandFilter,
		on:     opts.OnCommand,
		max:    opts.MaxPendingCommands,
		clock:  clock,
		log:    auth.log,
		nacks: &throttledLog{clock: clock, log: auth.log,
			msg: "embedded broker disconnected an MQTT 3.1.1 publisher: Hearth could not take its command, and 3.1.1 has no negative PUBACK"},
		publishers: map[*mqtt.Client]*publisher{},
	}
	if h.max == 0 {
		h.max = DefaultMaxPendingCommands
	}
	return h
}

// ID names the hook in mochi.
func (h *commands) ID() string { return "hearth-commands" }

// Provides says which hooks the command hook implements.
func (h *commands) Provides(b byte) bool {
	return b == mqtt.OnPublish || b == mqtt.OnDisconnect || b == mqtt.OnWill
}

// OnPublish hands a PUBLISH on the command filter to OnCommand, once the
// publisher has a place for it, and tells mochi to drop it. Any other
// PUBLISH passes unchanged, and so does the broker's own (PublishInline:
// Hearth's, which never comes back to Hearth, by No Local).
func (h *commands) OnPublish(cl *mqtt.Client, pk packets.Packet) (packets.Packet, error) {
	if cl.Net.Inline || !topic.Match(h.filter, pk.TopicName) {
		return pk, nil
	}
	cmd := Command{
		Topic:    pk.TopicName,
		Payload:  pk.Payload,
		QoS:      pk.FixedHeader.Qos,
		Retained: pk.FixedHeader.Retain,
		ClientID: cl.ID,
	}
	if username, verified := h.auth.identity(cl); verified {
		cmd.Username = username
	}
	p := h.publisher(cl)
	a, ok := p.take(pk)
	if !ok {
		return pk, packets.ErrRejectPacket // the publisher is gone: nothing was handed over
	}
	cmd.ack = a
	h.on(cmd)
	return pk, packets.ErrRejectPacket
}

// OnWill hands a will on the command filter to OnCommand as the
// publisher's last command, with nothing to acknowledge, and makes mochi
// route it nowhere (no topic, not retained): mochi sends a will to
// subscribers without asking OnPublish. A will with a delay (MQTT 5 Will
// Delay Interval) on the filter is dropped, with a warning: mochi would
// send it when the delay is over without asking any hook, routed to the
// filter's other subscribers and retained if flagged, and never to Hearth.
func (h *commands) OnWill(cl *mqtt.Client, will mqtt.Will) (mqtt.Will, error) {
	if !topic.Match(h.filter, will.TopicName) {
		return will, nil
	}
	if will.WillDelayInterval > 0 {
		h.log.Warn("embedded broker dropped a delayed will on a command topic: a command is taken at once or not at all",
			"client_id", printable(cl.ID), "topic", printable(will.TopicName), "will_delay_s", will.WillDelayInterval)
		will.TopicName, will.Retain = "", false
		return will, nil
	}
	cmd := Command{
		Topic:    will.TopicName,
		Payload:  will.Payload,
		QoS:      will.Qos,
		Retained: will.Retain,
		ClientID: cl.ID,
	}
	if username, verified := h.auth.identity(cl); verified {
		cmd.Username = username
	}
	h.on(cmd)
	will.TopicName, will.Retain = "", false
	return will, nil
}

// publisher returns cl's pending commands, starting its writer at its
// first command.
func (h *commands) publisher(cl *mqtt.Client) *publisher {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p, ok := h.publishers[cl]; ok {
		return p
	}
	p := &publisher{
		h:     h,
		cl:    cl,
		slots: make(chan struct{}, h.max),
		wake:  make(chan struct{}, 1),
		gone:  make(chan struct{}),
	}
	if pc, ok := cl.Net.Conn.(*primedConn); ok {
		p.closed = pc.closed
	}
	h.publishers[cl] = p
	go p.write()
	return p
}

// OnDisconnect forgets cl's pending commands: their acknowledgements are
// never written, and their places are free with the connection. mochi may
// call it twice for a client (at its end and when the server closes).
func (h *commands) OnDisconnect(cl *mqtt.Client, _ error, _ bool) {
	h.mu.Lock()
	p, ok := h.publishers[cl]
	delete(h.publishers, cl)
	h.mu.Unlock()
	if ok {
		close(p.gone)
	}
}

// publisher is one connection's pending commands, in the order it sent
// them, and the writer of their acknowledgements.
type publisher struct {
	h  *commands
	cl *mqtt.Client
	// slots holds a token per pending command: its capacity is
	// MaxPendingCommands.
	slots chan struct{}
	// wake tells the writer that a command was acked.
	wake chan struct{}
	// closed is closed when the connection is (nil if it is not one of
	// the broker's listeners' own); gone when mochi has finished with the
	// client (OnDisconnect).
	closed <-chan struct{}
	gone   chan struct{}

	mu    sync.Mutex
	queue []*pendingAck // pending, in arrival order
	// The episode of slowing down under way, if slowSince is not zero:
	// since when the publisher's commands wait for a place, and how many
	// have waited. drained is when its pending commands last ran out;
	// the episode ends slowQuiet later unless one waits again (quiet
	// counts the drains, so that an older timer finds itself stale).
	slowSince time.Time
	waited    int
	drained   time.Time
	quiet     uint64
}

// slowQuiet is how long a slowed publisher must have had no command
// waiting for a place before its episode ends and is logged: a burst that
// drains and refills the pending commands many times is one episode, one
// line.
const slowQuiet = time.Second

// pendingAck is one pending command's acknowledgement.
type pendingAck struct {
	p     *publisher
	id    uint16
	qos   byte
	state atomic.Int32 // pending, acked or nacked
}

// The states of a pendingAck.
const (
	pending int32 = iota
	acked
	nacked
)

func (a *pendingAck) done(state int32) {
	if !a.state.CompareAndSwap(pending, state) {
		return
	}
	select {
	case a.p.wake <- struct{}{}:
	default: // the writer is woken already
	}
}

// take waits for a place for pk among the pending commands and queues
// its acknowledgement; false if the connection closed first.
func (p *publisher) take(pk packets.Packet) (*pendingAck, bool) {
	select {
	case p.slots <- struct{}{}:
	default:
		p.mu.Lock()
		if p.slowSince.IsZero() {
			p.slowSince = p.h.clock.Now()
		}
		p.waited++
		p.mu.Unlock()
		select {
		case p.slots <- struct{}{}:
		case <-p.closed:
			return nil, false
		case <-p.gone:
			return nil, false
		}
	}
	a := &pendingAck{p: p, id: pk.PacketID, qos: pk.FixedHeader.Qos}
	p.mu.Lock()
	p.queue = append(p.queue, a)
	if !p.slowSince.IsZero() {
		p.drained = time.Time{}
		p.quiet++ // the timer of the last drain, if under way, is stale
	}
	p.mu.Unlock()
	return a, true
}

// write writes the acknowledgements of acked commands from the head of
// the queue, in order, until the connection ends.
func (p *publisher) write() {
	for {
		select {
		case <-p.wake:
		case <-p.closed:
			p.end()
			return
		case <-p.gone:
			p.end()
			return
		}
		for {
			p.mu.Lock()
			if len(p.queue) == 0 || p.queue[0].state.Load() == pending {
				p.mu.Unlock()
				break
			}
			a := p.queue[0]
			p.queue[0] = nil
			p.queue = p.queue[1:]
			p.mu.Unlock()
			// Its place is free before its PUBACK goes out: a publisher
			// that sends its next command on the PUBACK must find it.
			<-p.slots
			p.acknowledge(a)
			p.mu.Lock()
			if len(p.queue) == 0 && !p.slowSince.IsZero() {
				p.drained = p.h.clock.Now()
				p.quiet++
				quiet := p.quiet
				p.h.clock.AfterFunc(slowQuiet, func() {
					p.mu.Lock()
					if p.quiet == quiet {
						p.summaryLocked(false)
					}
					p.mu.Unlock()
				})
			}
			p.mu.Unlock()
		}
	}
}

// acknowledge writes a's PUBACK, or its PUBREC with the in-flight record
// that mochi's PUBREL handling looks for (as mochi's own processPublish
// does for QoS 2), to the publisher; for a nacked command, the PUBACK or
// PUBREC 0x80 of MQTT 5, or the end of a 3.1.1 publisher's connection.
func (p *publisher) acknowledge(a *pendingAck) {
	cl := p.cl
	if cl.Closed() {
		return
	}
	if a.state.Load() == nacked {
		p.h.nacked.Add(1)
		switch {
		case a.qos == 0:
		case cl.Properties.ProtocolVersion >= 5:
			kind := packets.Puback
			if a.qos == 2 {
				kind = packets.Pubrec
			}
			cl.WritePacket(packets.Packet{FixedHeader: packets.FixedHeader{Type: kind}, PacketID: a.id,
				ReasonCode: packets.ErrUnspecifiedError.Code})
		default:
			p.h.nacks.warn("client_id", printable(cl.ID), "remote", cl.Net.Remote)
			cl.Stop(packets.ErrUnspecifiedError)
		}
		return
	}
	switch a.qos {
	case 1:
		cl.WritePacket(packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Puback}, PacketID: a.id})
	case 2:
		rec := packets.Packet{FixedHeader: packets.FixedHeader{Type: packets.Pubrec}, PacketID: a.id, Created: time.Now().Unix()}
		cl.State.Inflight.DecreaseReceiveQuota() // given back at PUBCOMP by processPubrel
		if cl.State.Inflight.Set(rec) {
			atomic.AddInt64(&p.h.srv.Info.Inflight, 1)
		}
		cl.WritePacket(rec)
	}
}

// end logs the episode under way, if any, for a publisher that is gone.
func (p *publisher) end() {
	p.mu.Lock()
	p.summaryLocked(true)
	p.mu.Unlock()
}

// summaryLocked logs the episode of slowing down under way, if any, and
// ends it: one line per episode, from the first command that waited for a
// place until the publisher last had none pending, with none waiting for
// slowQuiet after (or until it is gone). Call with mu held.
func (p *publisher) summaryLocked(gone bool) {
	if p.slowSince.IsZero() {
		return
	}
	end := p.drained
	if end.IsZero() {
		end = p.h.clock.Now()
	}
	p.h.slowed.Add(1)
	username, _ := p.h.auth.identity(p.cl)
	p.h.log.Warn("embedded broker slowed a publisher: its commands came faster than Hearth stored them, so the broker paused reading its connection",
		"client_id", printable(p.cl.ID), "username", printable(username), "remote", p.cl.Net.Remote,
		"for", end.Sub(p.slowSince), "commands_waited", p.waited,
		"max_pending", p.h.max, "disconnected", gone)
	p.slowSince, p.waited, p.drained = time.Time{}, 0, time.Time{}
	p.quiet++
}

// validFilter reports whether filter is a topic filter by MQTT's rules
// (topic.ValidFilter) and not a shared subscription ("$share/…", MQTT 5.0
// §4.8.2), which names no topic of its own.
func validFilter(filter string) bool {
	return topic.ValidFilter(filter) == nil && !strings.HasPrefix(strings.ToLower(filter), "$share/")
}
