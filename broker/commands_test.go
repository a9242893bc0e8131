package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
	paho5 "github.com/eclipse/paho.golang/paho"
	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/jonboulle/clockwork"
	mqtt "github.com/mochi-mqtt/server/v2"
)

// commandFilter is the filter of the tests' command hook.
const commandFilter = "hearth/+/set"

// commandBroker starts a broker whose commands go to the returned
// channel, unacknowledged.
func commandBroker(t *testing.T, opts Options) (*Broker, <-chan Command) {
	t.Helper()
	cmds := make(chan Command, 1024)
	opts.Listen = "127.0.0.1:0"
	opts.CommandFilter = commandFilter
	opts.OnCommand = func(c Command) { cmds <- c }
	return startBroker(t, opts), cmds
}

func nextCommand(t *testing.T, cmds <-chan Command) Command {
	t.Helper()
	select {
	case c := <-cmds:
		return c
	case <-time.After(eventWait):
		t.Fatal("timed out waiting for a command")
		panic("unreachable")
	}
}

// noCommand fails if a command has been handed over.
func noCommand(t *testing.T, cmds <-chan Command) {
	t.Helper()
	select {
	case c := <-cmds:
		t.Fatalf("command %s %q handed over; want none", c.Topic, c.Payload)
	default:
	}
}

// ackEvent is one acknowledgement a client read from the broker.
type ackEvent struct {
	kind string // "puback", "pubrec" or "pubcomp"
	id   uint16
}

func (a ackEvent) String() string { return fmt.Sprintf("%s %d", a.kind, a.id) }

// tap is a client's connection that reports every acknowledgement the
// broker sends on it, in the order the client reads them. It is a
// *net.TCPConn underneath, writes included: paho.golang writes a packet
// as net.Buffers, in one writev only to a connection of package net, and
// its concurrent publishes would interleave on any other.
type tap struct {
	*net.TCPConn
	acks chan ackEvent
	buf  []byte // read, not yet a whole packet; the client's reader only
}

func newTap(conn net.Conn) *tap {
	return &tap{TCPConn: conn.(*net.TCPConn), acks: make(chan ackEvent, 1<<16)}
}

func (c *tap) Read(p []byte) (int, error) {
	n, err := c.TCPConn.Read(p)
	c.buf = append(c.buf, p[:n]...)
	for {
		length, header := 0, 1
		for shift := 0; ; shift += 7 {
			if header >= len(c.buf) {
				return n, err
			}
			length |= int(c.buf[header]&0x7f) << shift
			header++
			if c.buf[header-1]&0x80 == 0 {
				break
			}
		}
		if len(c.buf) < header+length {
			return n, err
		}
		kind := map[byte]string{packets.PUBACK: "puback", packets.PUBREC: "pubrec", packets.PUBCOMP: "pubcomp"}[c.buf[0]>>4]
		if kind != "" {
			c.acks <- ackEvent{kind, uint16(c.buf[header])<<8 | uint16(c.buf[header+1])}
		}
		c.buf = c.buf[header+length:]
	}
}

// seen returns the acknowledgements read so far.
func (c *tap) seen() []ackEvent {
	var got []ackEvent
	for {
		select {
		case a := <-c.acks:
			got = append(got, a)
		default:
			return got
		}
	}
}

// next waits for the next acknowledgement.
func (c *tap) next(t *testing.T) ackEvent {
	t.Helper()
	select {
	case a := <-c.acks:
		return a
	case <-time.After(eventWait):
		t.Fatal("timed out waiting for an acknowledgement")
		panic("unreachable")
	}
}

// tappedV3 connects an MQTT 3.1.1 client (paho.mqtt.golang) through a
// tap, until the test ends.
func tappedV3(t *testing.T, b *Broker, id string, cr creds) (paho.Client, *tap) {
	t.Helper()
	var tp *tap
	o := paho.NewClientOptions().AddBroker(b.URL()).SetClientID(id).SetProtocolVersion(4).
		SetAutoReconnect(false).SetConnectRetry(false).SetOrderMatters(true).
		SetUsername(cr.username).SetPassword(cr.password).
		SetCustomOpenConnectionFn(func(*url.URL, paho.ClientOptions) (net.Conn, error) {
			conn, err := net.Dial("tcp", b.Addr())
			if err != nil {
				return nil, err
			}
			tp = newTap(conn)
			return tp, nil
		})
	c := paho.NewClient(o)
	mustWait(t, c.Connect())
	t.Cleanup(func() { c.Disconnect(0) })
	return c, tp
}

// tappedV5 connects an MQTT 5 client (paho.golang) through a tap, until
// the test ends.
func tappedV5(t *testing.T, b *Broker, id string, cr creds) (*paho5.Client, *tap) {
	t.Helper()
	return tappedV5Login(t, b, id, cr, paho5.ClientConfig{})
}

// tappedV5Config is tappedV5 with the client's config (its Conn is the
// tap's) and no login.
func tappedV5Config(t *testing.T, b *Broker, id string, cfg paho5.ClientConfig) (*paho5.Client, *tap) {
	t.Helper()
	return tappedV5Login(t, b, id, creds{}, cfg)
}

func tappedV5Login(t *testing.T, b *Broker, id string, cr creds, cfg paho5.ClientConfig) (*paho5.Client, *tap) {
	t.Helper()
	conn, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	tp := newTap(conn)
	cfg.Conn = tp
	c := paho5.NewClient(cfg)
	t.Cleanup(func() {
		c.Disconnect(&paho5.Disconnect{})
		conn.Close()
		<-c.Done()
	})
	if _, err := c.Connect(ctxFor(t), &paho5.Connect{ClientID: id, KeepAlive: 30, CleanStart: true,
		UsernameFlag: cr.username != "", Username: cr.username,
		PasswordFlag: cr.password != "", Password: []byte(cr.password)}); err != nil {
		t.Fatalf("%s: connect: %v", id, err)
	}
	return c, tp
}

// A command is handed over instead of routed, and its publisher gets its
// PUBACK only when the command is acked, once however often Ack is
// called: a PUBACK that the client reads before the Ack would break the
// promise that a PUBACK means stored.
func TestCommandIsAcknowledgedOnlyWhenAcked(t *testing.T) {
	b, cmds := commandBroker(t, Options{})
	watcher := dialV5(t, b, "watcher", creds{})
	watcher.subscribe(t, "hearth/#")
	c, tp := tappedV3(t, b, "automation", creds{})

	tok := c.Publish("hearth/lamp/set", 1, false, `{"state":"ON"}`)
	cmd := nextCommand(t, cmds)
	want := Command{Topic: "hearth/lamp/set", Payload: []byte(`{"state":"ON"}`), QoS: 1, ClientID: "automation"}
	if cmd.Topic != want.Topic || string(cmd.Payload) != string(want.Payload) || cmd.QoS != want.QoS ||
		cmd.Retained || cmd.ClientID != want.ClientID || cmd.Username != "" {
		t.Errorf("command %+v; want %+v", cmd, want)
	}
	// The broker reads one connection's packets in order: once the next
	// publish is acknowledged, a PUBACK of the command by mochi, and its
	// routing to the watcher, would have come first.
	mustWait(t, c.Publish("hearth/lamp/result", 1, false, "not a command"))
	if got := tp.seen(); len(got) != 1 || got[0].kind != "puback" || got[0].id == cmd.ack.id {
		t.Fatalf("before the Ack the client read %v; want only the other publish's PUBACK", got)
	}
	if m := recv(t, watcher.msgs); m.Topic != "hearth/lamp/result" {
		t.Errorf("the watcher received %s first; want hearth/lamp/result: a command is not routed", m.Topic)
	}

	cmd.Ack()
	cmd.Ack()
	mustWait(t, tok)
	// The publisher's acknowledgements are written one after the other:
	// a second PUBACK of the first would come before the second's.
	tok = c.Publish("hearth/lamp/set", 1, false, "OFF")
	second := nextCommand(t, cmds)
	second.Ack()
	mustWait(t, tok)
	if got, want := []ackEvent{tp.next(t), tp.next(t)}, []ackEvent{{"puback", cmd.ack.id}, {"puback", second.ack.id}}; !slices.Equal(got, want) {
		t.Errorf("after the Acks the client read %v; want %v", got, want)
	}
	if got := tp.seen(); len(got) != 0 {
		t.Errorf("then the client read %v; want nothing more: Ack acknowledges once", got)
	}
	noCommand(t, cmds)
}

// Acknowledgements go out in the order their commands came (MQTT 5.0
// §4.6), whatever order they were acked in, from a 3.1.1 and an MQTT 5
// client.
func TestPubacksFollowThePublishOrder(t *testing.T) {
	const n = 64
	b, cmds := commandBroker(t, Options{MaxPendingCommands: n})
	v3, tp3 := tappedV3(t, b, "v3", creds{})
	v5, tp5 := tappedV5(t, b, "v5", creds{})
	for _, tc := range []struct {
		name    string
		tap     *tap
		publish func(i int) func() error
	}{
		{"3.1.1", tp3, func(i int) func() error {
			tok := v3.Publish("hearth/lamp/set", 1, false, fmt.Sprint(i))
			return func() error {
				if !tok.WaitTimeout(eventWait) {
					return errors.New("timed out")
				}
				return tok.Error()
			}
		}},
		{"5", tp5, func(i int) func() error {
			done := make(chan error, 1)
			go func() {
				_, err := v5.Publish(ctxFor(t), &paho5.Publish{Topic: "hearth/lamp/set", QoS: 1, Payload: []byte(fmt.Sprint(i))})
				done <- err
			}()
			return func() error { return <-done }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			waits := make([]func() error, n)
			for i := range n {
				waits[i] = tc.publish(i)
			}
			got := make([]Command, n)
			for i := range n {
				select {
				case got[i] = <-cmds:
				case <-time.After(eventWait):
					t.Fatalf("%d commands handed over; want %d", i, n)
				}
			}
			if tc.name == "3.1.1" {
				// paho.mqtt.golang sends in the order published.
				for i, c := range got {
					if string(c.Payload) != fmt.Sprint(i) {
						t.Fatalf("command %d: %q; want %q", i, c.Payload, fmt.Sprint(i))
					}
				}
			}
			for i := n - 1; i >= 0; i-- {
				got[i].Ack()
			}
			for i, c := range got {
				if a := tc.tap.next(t); a != (ackEvent{"puback", c.ack.id}) {
					t.Fatalf("acknowledgement %d: %v; want puback %d, of the command that came %d.", i, a, c.ack.id, i)
				}
			}
			for _, wait := range waits {
				if err := wait(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// A QoS 2 command gets its PUBREC only when acked, and mochi completes
// the exchange (PUBREL, PUBCOMP) as for any QoS 2 publish: from an MQTT 5
// and a 3.1.1 client.
func TestQoS2CommandIsReceivedOnlyWhenAcked(t *testing.T) {
	b, cmds := commandBroker(t, Options{})
	v5, tp5 := tappedV5(t, b, "v5", creds{})
	done := make(chan *paho5.PublishResponse, 1)
	go func() {
		pr, err := v5.Publish(ctxFor(t), &paho5.Publish{Topic: "hearth/lock/set", QoS: 2, Payload: []byte("LOCK")})
		if err != nil {
			t.Error(err)
		}
		done <- pr
	}()
	cmd := nextCommand(t, cmds)
	if cmd.QoS != 2 {
		t.Errorf("command QoS %d; want 2", cmd.QoS)
	}
	if _, err := v5.Publish(ctxFor(t), &paho5.Publish{Topic: "hearth/lock/result", QoS: 2, Payload: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if got := tp5.seen(); len(got) != 2 || got[0].kind != "pubrec" || got[1] != (ackEvent{"pubcomp", got[0].id}) || got[0].id == cmd.ack.id {
		t.Fatalf("before the Ack the MQTT 5 client read %v; want only the other publish's PUBREC and PUBCOMP", got)
	}
	cmd.Ack()
	if pr := <-done; pr == nil || pr.ReasonCode != 0 {
		t.Errorf("the QoS 2 command's outcome: %+v; want reason code 0 (success)", pr)
	}
	if got, want := []ackEvent{tp5.next(t), tp5.next(t)}, []ackEvent{{"pubrec", cmd.ack.id}, {"pubcomp", cmd.ack.id}}; !slices.Equal(got, want) {
		t.Errorf("after the Ack the MQTT 5 client read %v; want %v", got, want)
	}

	v3, tp3 := tappedV3(t, b, "v3", creds{})
	tok := v3.Publish("hearth/lock/set", 2, false, "UNLOCK")
	cmd = nextCommand(t, cmds)
	cmd.Ack()
	mustWait(t, tok)
	if got, want := []ackEvent{tp3.next(t), tp3.next(t)}, []ackEvent{{"pubrec", cmd.ack.id}, {"pubcomp", cmd.ack.id}}; !slices.Equal(got, want) {
		t.Errorf("the 3.1.1 client read %v; want %v", got, want)
	}
	// mochi counts an exchange as done after writing its PUBCOMP.
	eventually(t, "no message in flight", func() bool { return atomic.LoadInt64(&b.srv.Info.Inflight) == 0 })
}

// A command Hearth could not take is never acknowledged as received: an
// MQTT 5 publisher gets PUBACK, or PUBREC, 0x80 in its turn; a 3.1.1
// publisher, which has no negative PUBACK, is disconnected in its turn,
// after the PUBACKs of the commands before it and without those after.
func TestNackIsNeverAReceipt(t *testing.T) {
	b, cmds := commandBroker(t, Options{})
	v5, _ := tappedV5(t, b, "v5", creds{})
	for _, qos := range []byte{1, 2} {
		done := make(chan *paho5.PublishResponse, 1)
		go func() {
			pr, _ := v5.Publish(ctxFor(t), &paho5.Publish{Topic: "hearth/lamp/set", QoS: qos, Payload: []byte("ON")})
			done <- pr
		}()
		nextCommand(t, cmds).Nack()
		if pr := <-done; pr == nil || pr.ReasonCode != 0x80 {
			t.Errorf("a nacked QoS %d command from an MQTT 5 client: %+v; want reason code 0x80", qos, pr)
		}
	}

	lost := make(chan struct{})
	var tp *tap
	c := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("v3").SetProtocolVersion(4).
		SetAutoReconnect(false).SetOrderMatters(true).
		SetConnectionLostHandler(func(paho.Client, error) { close(lost) }).
		SetCustomOpenConnectionFn(func(*url.URL, paho.ClientOptions) (net.Conn, error) {
			conn, err := net.Dial("tcp", b.Addr())
			if err != nil {
				return nil, err
			}
			tp = newTap(conn)
			return tp, nil
		}))
	mustWait(t, c.Connect())
	defer c.Disconnect(0)
	toks := []paho.Token{c.Publish("hearth/lamp/set", 1, false, "0"), c.Publish("hearth/lamp/set", 1, false, "1"), c.Publish("hearth/lamp/set", 1, false, "2")}
	first, second, third := nextCommand(t, cmds), nextCommand(t, cmds), nextCommand(t, cmds)
	third.Ack()
	second.Nack()
	first.Ack()
	waitFor(t, lost, "the 3.1.1 client to be disconnected at the nack")
	if got, want := tp.seen(), []ackEvent{{"puback", first.ack.id}}; !slices.Equal(got, want) {
		t.Errorf("the 3.1.1 client read %v; want %v: the PUBACK before the nack, none after", got, want)
	}
	mustWait(t, toks[0])
	for i, tok := range toks[1:] {
		if tok.WaitTimeout(eventWait) && tok.Error() == nil {
			t.Errorf("command %d completed; want it failed with the connection", i+1)
		}
	}
	if got := b.Stats().CommandsNacked; got != 3 {
		t.Errorf("Stats().CommandsNacked = %d; want 3 (two MQTT 5 commands, one 3.1.1)", got)
	}
}

// A 3.1.1 publisher that sends far more commands than MaxPendingCommands
// (which Receive Maximum cannot tell a 3.1.1 client) has its reads paused
// at the cap and loses nothing: every command is handed over exactly
// once and acknowledged. The episode is logged once, when it ends (its
// pending commands ran out and none waited for slowQuiet), with how long
// it lasted on the broker's clock and how many commands waited.
func TestPublisherAtTheCapIsSlowedNotDropped(t *testing.T) {
	const maxPending, n = 4, 200
	clock := clockwork.NewFakeClockAt(time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC))
	logs := &slowLog{ch: make(chan slog.Record, 16)}
	b, cmds := commandBroker(t, Options{MaxPendingCommands: maxPending, Clock: clock, Logger: slog.New(logs)})
	c, tp := tappedV3(t, b, "flood", creds{})
	toks := make([]paho.Token, n)
	for i := range n {
		toks[i] = c.Publish("hearth/lamp/set", 1, false, fmt.Sprint(i))
	}
	var pending []Command
	for range maxPending {
		pending = append(pending, nextCommand(t, cmds))
	}
	p := publisherOf(t, b, "flood")
	eventually(t, "the next command to wait for a place", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.waited == 1
	})
	noCommand(t, cmds)
	clock.Advance(3 * time.Second)

	seen := map[string]bool{}
	for _, c := range pending {
		seen[string(c.Payload)] = true
	}
	for len(pending) > 0 {
		pending[0].Ack()
		pending = pending[1:]
		if len(seen) < n {
			c := nextCommand(t, cmds)
			if seen[string(c.Payload)] {
				t.Fatalf("command %q handed over twice", c.Payload)
			}
			seen[string(c.Payload)] = true
			pending = append(pending, c)
		}
	}
	for i, tok := range toks {
		if !tok.WaitTimeout(eventWait) || tok.Error() != nil {
			t.Fatalf("command %d: %v; want PUBACKed", i, tok.Error())
		}
	}
	if acks := len(tp.seen()); acks != n {
		t.Errorf("the client read %d PUBACKs; want %d", acks, n)
	}
	noCommand(t, cmds)

	// The episode ends slowQuiet after the last drain, with none waiting
	// meanwhile: then it is logged, its length up to that drain.
	eventually(t, "the pending commands to run out", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return len(p.queue) == 0 && !p.drained.IsZero()
	})
	select {
	case rec := <-logs.ch:
		t.Fatalf("logged %q before the quiet spell was over", rec.Message)
	default:
	}
	clock.Advance(slowQuiet)
	rec := logs.next(t)
	attrs := recordAttrs(rec)
	waited := 0
	fmt.Sscan(attrs["commands_waited"], &waited)
	if rec.Level != slog.LevelWarn || attrs["client_id"] != "flood" || attrs["for"] != "3s" || waited < 1 || waited > n-maxPending ||
		attrs["max_pending"] != itoa(maxPending) || attrs["disconnected"] != "false" {
		t.Errorf("logged %s %q %v; want one warning for client flood, for 3s, 1 to %d commands waited, max_pending %d, not disconnected",
			rec.Level, rec.Message, attrs, n-maxPending, maxPending)
	}
	select {
	case rec := <-logs.ch:
		t.Errorf("logged a second line %q %v; want one per episode", rec.Message, recordAttrs(rec))
	default:
	}
	if got := b.Stats().PublishersSlowed; got != 1 {
		t.Errorf("Stats().PublishersSlowed = %d; want 1 episode", got)
	}
}

// A client that disconnects with commands pending, one of them waiting
// for a place: the commands it sent before are handed over as places
// free, their Acks do nothing, and the broker forgets the client.
func TestDisconnectWithPendingCommands(t *testing.T) {
	b, cmds := commandBroker(t, Options{MaxPendingCommands: 2})
	c, _ := tappedV3(t, b, "leaver", creds{})
	for i := range 3 {
		c.Publish("hearth/lamp/set", 1, false, fmt.Sprint(i))
	}
	first, second := nextCommand(t, cmds), nextCommand(t, cmds)
	p := publisherOf(t, b, "leaver")
	eventually(t, "the third command to wait", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.waited == 1
	})
	c.Disconnect(0)
	first.Ack()
	third := nextCommand(t, cmds)
	if string(third.Payload) != "2" {
		t.Errorf("third command %q; want \"2\"", third.Payload)
	}
	eventually(t, "the broker to forget the client", func() bool {
		b.cmds.mu.Lock()
		defer b.cmds.mu.Unlock()
		return len(b.cmds.publishers) == 0
	})
	second.Ack()
	third.Ack()
	noCommand(t, cmds)
}

// A client waiting for a place ends with its connection: a takeover of
// its client ID, or the broker's Close, does not wait for Hearth to ack.
func TestConnectionEndReleasesAPublisherAtTheCap(t *testing.T) {
	b, cmds := commandBroker(t, Options{MaxPendingCommands: 1})
	c, _ := tappedV3(t, b, "device", creds{})
	c.Publish("hearth/lamp/set", 1, false, "0")
	c.Publish("hearth/lamp/set", 1, false, "1")
	held := nextCommand(t, cmds)
	p := publisherOf(t, b, "device")
	eventually(t, "the second command to wait", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.waited == 1
	})
	again, _ := tappedV3(t, b, "device", creds{}) // takes the session over
	tok := again.Publish("hearth/lamp/set", 1, false, "2")
	c2 := nextCommand(t, cmds)
	if string(c2.Payload) != "2" {
		t.Errorf("after the takeover %q was handed over; want the new connection's \"2\": the old one's waiting command goes with it", c2.Payload)
	}
	c2.Ack()
	mustWait(t, tok)
	held.Ack() // its client is gone: nothing to do

	again.Publish("hearth/lamp/set", 1, false, "3")
	again.Publish("hearth/lamp/set", 1, false, "4")
	nextCommand(t, cmds)
	p = publisherOf(t, b, "device")
	eventually(t, "the fourth command to wait", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.waited == 1
	})
	closed := make(chan struct{})
	go func() { b.Close(); close(closed) }()
	waitFor(t, closed, "Close with a publisher waiting at the cap")
	noCommand(t, cmds)
}

// A command's place among the pending ones is free before its PUBACK is
// written: a publisher that sends each command on the PUBACK of the one
// before, at a cap of one, never waits for a place and is never counted
// as slowed.
func TestPublisherSendingOnEachPubackNeverWaitsAtTheCap(t *testing.T) {
	b, cmds := commandBroker(t, Options{MaxPendingCommands: 1})
	c, _ := tappedV3(t, b, "stepper", creds{})
	var p *publisher
	for i := range 50 {
		tok := c.Publish("hearth/lamp/set", 1, false, fmt.Sprint(i))
		cmd := nextCommand(t, cmds)
		if p == nil {
			p = publisherOf(t, b, "stepper")
		}
		cmd.Ack()
		mustWait(t, tok)
	}
	p.mu.Lock()
	waited := p.waited
	p.mu.Unlock()
	if waited != 0 {
		t.Errorf("%d of 50 commands, each sent on the PUBACK of the one before, waited for a place; want 0", waited)
	}
}

// The ACL and DenyPublish decide first: a refused publish on the command
// filter is answered as before (PUBACK 0x87) and never handed over, and
// an admitted command carries the username its publisher was verified
// as.
func TestRefusedCommandIsNeverHandedOver(t *testing.T) {
	b, cmds := commandBroker(t, Options{
		Users:       map[string]string{"bridge": "bridge-pw", "tablet": "tablet-pw"},
		DenyPublish: func(username, topic string) bool { return username == "bridge" && strings.HasSuffix(topic, "/set") },
	})
	bridge, _ := tappedV5(t, b, "bridge-client", creds{"bridge", "bridge-pw"})
	pr, err := bridge.Publish(ctxFor(t), &paho5.Publish{Topic: "hearth/lock/set", QoS: 1, Payload: []byte("UNLOCK")})
	if pr == nil || pr.ReasonCode != 0x87 {
		t.Errorf("the bridge's command: %+v, %v; want PUBACK 0x87 (not authorized)", pr, err)
	}
	// One connection's packets are handled in order: once this is
	// acknowledged, the refused one is done with.
	if _, err := bridge.Publish(ctxFor(t), &paho5.Publish{Topic: "bridge/state", QoS: 1, Payload: []byte("online")}); err != nil {
		t.Fatal(err)
	}
	noCommand(t, cmds)

	tablet, _ := tappedV3(t, b, "tablet-client", creds{"tablet", "tablet-pw"})
	tok := tablet.Publish("hearth/lock/set", 1, false, "LOCK")
	if c := nextCommand(t, cmds); c.Username != "tablet" || c.ClientID != "tablet-client" {
		t.Errorf("the tablet's command: username %q, client %q; want tablet, tablet-client", c.Username, c.ClientID)
	} else {
		c.Ack()
	}
	mustWait(t, tok)
}

// A retained command is handed over with its flag, for Hearth to refuse,
// and the broker never retains it; an empty retained message (clearing a
// retained command) and a QoS 0 command are handed over alike, and Ack
// frees a QoS 0 command's place.
func TestRetainedAndQoS0CommandsAreHandedOverNotRetained(t *testing.T) {
	b, cmds := commandBroker(t, Options{MaxPendingCommands: 1})
	c, _ := tappedV3(t, b, "automation", creds{})
	for _, tc := range []struct {
		payload  string
		qos      byte
		retained bool
	}{
		{`{"state":"ON"}`, 1, true},
		{"", 1, true},
		{"OFF", 0, false},
		{"ON", 0, false}, // a place only if Ack freed the QoS 0 one's
	} {
		tok := c.Publish("hearth/lamp/set", tc.qos, tc.retained, tc.payload)
		cmd := nextCommand(t, cmds)
		if string(cmd.Payload) != tc.payload || cmd.QoS != tc.qos || cmd.Retained != tc.retained {
			t.Errorf("command %q QoS %d retained %v; want %q QoS %d retained %v",
				cmd.Payload, cmd.QoS, cmd.Retained, tc.payload, tc.qos, tc.retained)
		}
		cmd.Ack()
		mustWait(t, tok)
	}
	if m, ok := b.srv.Topics.Retained.Get("hearth/lamp/set"); ok {
		t.Errorf("the broker retains %q on hearth/lamp/set; want nothing", m.Payload)
	}
}

// A will on the command filter is its client's last command: handed over
// when the client dies, with nothing to acknowledge, and routed to no
// subscriber. The broker's own publish there (PublishInline: Hearth's) is
// no command and is routed as any.
func TestWillIsACommandAndInlinePublishIsNot(t *testing.T) {
	b, cmds := commandBroker(t, Options{})
	watcher := dialV5(t, b, "watcher", creds{})
	watcher.subscribe(t, "hearth/#")
	dying := dialV5With(t, b, "dying", creds{}, &paho5.WillMessage{Topic: "hearth/heater/set", QoS: 1, Payload: []byte("OFF")}, nil)
	dying.conn.Close()
	c := nextCommand(t, cmds)
	if c.Topic != "hearth/heater/set" || string(c.Payload) != "OFF" || c.ClientID != "dying" {
		t.Errorf("the will: %+v; want the command OFF on hearth/heater/set from dying", c)
	}
	c.Ack() // nothing to acknowledge: does nothing
	// mochi routes a will before it forgets its client.
	eventually(t, "the broker to forget the dying client", func() bool {
		_, ok := b.srv.Clients.Get("dying")
		return !ok
	})
	if err := b.PublishInline("hearth/heater/set", []byte("ON"), false, 1); err != nil {
		t.Fatal(err)
	}
	if m := recv(t, watcher.msgs); m.Topic != "hearth/heater/set" || string(m.Payload) != "ON" {
		t.Errorf("the watcher received %s %q first; want the inline publish ON: the will is routed nowhere", m.Topic, m.Payload)
	}
	noCommand(t, cmds)
}

func TestStartRejectsCommandOptionsOutOfRange(t *testing.T) {
	on := func(Command) {}
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{CommandFilter: "hearth/+/set"}, "needs an OnCommand"},
		{Options{CommandFilter: "hearth/#/set", OnCommand: on}, "CommandFilter"},
		{Options{CommandFilter: "hearth/a+/set", OnCommand: on}, "CommandFilter"},
		{Options{CommandFilter: "$share/g/hearth/+/set", OnCommand: on}, "shared subscription"},
		{Options{CommandFilter: "hearth/+/set", OnCommand: on, MaxPendingCommands: -1}, "MaxPendingCommands -1"},
	} {
		if b, err := Start(tc.opts); err == nil || !strings.Contains(err.Error(), tc.want) {
			if b != nil {
				b.Close()
			}
			t.Errorf("Start(%+v): %v; want an error containing %q", tc.opts, err, tc.want)
		}
	}
}

// publisherOf returns the pending commands of the connected client id.
func publisherOf(t *testing.T, b *Broker, id string) *publisher {
	t.Helper()
	var p *publisher
	eventually(t, "client "+id+"'s first command", func() bool {
		b.cmds.mu.Lock()
		defer b.cmds.mu.Unlock()
		for cl, q := range b.cmds.publishers {
			if cl.ID == id && !cl.Closed() {
				p = q
				return true
			}
		}
		return false
	})
	return p
}

// eventually polls cond every millisecond until it holds, and fails the
// test after eventWait: for states the broker shows no client.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.After(eventWait)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// slowLog is a slog.Handler that hands every record about a slowed
// publisher to ch.
type slowLog struct {
	mu sync.Mutex
	ch chan slog.Record
	// match is what the records kept say; "" means "slowed".
	match string
}

func (l *slowLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *slowLog) Handle(_ context.Context, rec slog.Record) error {
	match := l.match
	if match == "" {
		match = "slowed"
	}
	if strings.Contains(rec.Message, match) {
		l.ch <- rec
	}
	return nil
}
func (l *slowLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *slowLog) WithGroup(string) slog.Handler      { return l }

func (l *slowLog) next(t *testing.T) slog.Record {
	t.Helper()
	select {
	case rec := <-l.ch:
		return rec
	case <-time.After(eventWait):
		t.Fatal("nothing logged about a slowed publisher")
		panic("unreachable")
	}
}

// A will with a delay on the command filter is dropped, with a warning:
// mochi sends a delayed will when the delay is over without asking any
// hook, and would route it to the filter's other subscribers and retain
// it, never hand it to Hearth. What the hook returns is what mochi's
// delayed send uses: no topic, not retained.
func TestDelayedWillOnACommandTopicIsDropped(t *testing.T) {
	logs := &slowLog{ch: make(chan slog.Record, 16), match: "delayed will"}
	b, cmds := commandBroker(t, Options{Logger: slog.New(logs)})
	cl := b.srv.NewClient(nil, "test", "willer", false)
	will, err := b.cmds.OnWill(cl, mqtt.Will{TopicName: "hearth/front_door/set", Payload: []byte("UNLOCK"), Qos: 1, Retain: true, WillDelayInterval: 1})
	if err != nil {
		t.Fatal(err)
	}
	if will.TopicName != "" || will.Retain {
		t.Errorf("the delayed will mochi keeps: topic %q, retain %v; want no topic, not retained", will.TopicName, will.Retain)
	}
	noCommand(t, cmds)
	rec := logs.next(t)
	if attrs := recordAttrs(rec); rec.Level != slog.LevelWarn || attrs["client_id"] != "willer" || attrs["topic"] != "hearth/front_door/set" {
		t.Errorf("logged %s %q %v; want a warning naming the client and the topic", rec.Level, rec.Message, attrs)
	}
	// A delayed will elsewhere is mochi's, untouched.
	other := mqtt.Will{TopicName: "home/status", Payload: []byte("gone"), Retain: true, WillDelayInterval: 1}
	if got, _ := b.cmds.OnWill(cl, other); got.TopicName != other.TopicName || !got.Retain {
		t.Errorf("a delayed will on home/status became %+v; want it unchanged", got)
	}
}

// A burst that drains its pending commands and fills them again within
// slowQuiet is one episode: one line, with the waits of both rounds.
func TestSlowedPublisherIsLoggedOncePerBurst(t *testing.T) {
	const maxPending, perRound = 2, 6
	clock := clockwork.NewFakeClockAt(time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC))
	logs := &slowLog{ch: make(chan slog.Record, 16)}
	b, cmds := commandBroker(t, Options{MaxPendingCommands: maxPending, Clock: clock, Logger: slog.New(logs)})
	c, _ := tappedV3(t, b, "bursty", creds{})
	var p *publisher
	round := func() {
		t.Helper()
		before := 0
		if p != nil {
			p.mu.Lock()
			before = p.waited
			p.mu.Unlock()
		}
		toks := make([]paho.Token, perRound)
		for i := range perRound {
			toks[i] = c.Publish("hearth/lamp/set", 1, false, fmt.Sprint(i))
		}
		var held []Command
		for range maxPending {
			held = append(held, nextCommand(t, cmds))
		}
		if p == nil {
			p = publisherOf(t, b, "bursty")
		}
		eventually(t, "the next command to wait for a place", func() bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			return p.waited > before
		})
		for _, c := range held {
			c.Ack()
		}
		for range perRound - maxPending {
			nextCommand(t, cmds).Ack()
		}
		for _, tok := range toks {
			mustWait(t, tok)
		}
		eventually(t, "the pending commands to run out", func() bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			return len(p.queue) == 0 && !p.drained.IsZero()
		})
	}
	round()
	round() // within slowQuiet of the first: the clock has not moved
	clock.Advance(slowQuiet)
	rec := logs.next(t)
	waited := 0
	fmt.Sscan(recordAttrs(rec)["commands_waited"], &waited)
	if waited < 2 {
		t.Errorf("the episode's line says %d commands waited; want the waits of both rounds (at least 2)", waited)
	}
	select {
	case rec := <-logs.ch:
		t.Errorf("logged a second line %q %v; want one for the burst", rec.Message, recordAttrs(rec))
	default:
	}
	if got := b.Stats().PublishersSlowed; got != 1 {
		t.Errorf("Stats().PublishersSlowed = %d; want 1", got)
	}
}
