package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	paho5 "github.com/eclipse/paho.golang/paho"
	"github.com/jonboulle/clockwork"
)

// Attack: a CONNECT that starts and never ends. The broker closes it when
// ConnectTimeout has passed, counts it and logs it in the limits summary.
func TestPartialConnectIsClosedAtTheDeadline(t *testing.T) {
	logs := &limitsRecorder{ch: make(chan slog.Record, 16)}
	const timeout = 200 * time.Millisecond
	b := startBroker(t, Options{Listen: "127.0.0.1:0", ConnectTimeout: timeout, Logger: slog.New(logs)})
	// The deadline runs from the accept, within the dial: the clock starts
	// before it, so that the close is never measured early.
	start := time.Now()
	conn := dialFrom(t, b, "127.0.0.1")
	// The fixed header of a CONNECT of 100 bytes, and 10 of them.
	if _, err := conn.Write(append([]byte{0x10, 100}, make([]byte, 10)...)); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, conn, "the partial CONNECT")
	if took := time.Since(start); took < timeout {
		t.Errorf("closed after %v; want not before the deadline of %v", took, timeout)
	}
	if got := b.Stats().ConnectTimeouts; got != 1 {
		t.Errorf("Stats().ConnectTimeouts = %d; want 1", got)
	}
	logs.expect(t, "connect_timeout=1 bad_first_packet=0 max_unauthenticated=0 keepalive=0 login_failures=0")

	// A CONNECT that arrives whole, however slowly within the deadline,
	// is served.
	c := mustConnect(t, b, "in-time", false)
	c.disconnect()
}

// Attack: fixed headers that claim a huge packet, and a first packet that
// is not a CONNECT. Each connection is closed at once, before the broker
// allocates the claimed length: mochi alone would allocate 1 MiB for each
// header claiming just under its MaxPacketSize, and wait for it.
func TestOversizedFirstPacketIsClosedWithoutAllocation(t *testing.T) {
	// Room for all the sockets of this one address before authentication.
	b := startBroker(t, Options{Listen: "127.0.0.1:0", MaxUnauthenticated: 200})
	const sockets = 20
	claim1MiB := []byte{0x10, 0xff, 0xff, 0x3f} // remaining length 1 MiB − 1, in 4 bytes
	var conns []net.Conn
	for range sockets {
		conns = append(conns, dialFrom(t, b, "127.0.0.1"))
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, conn := range conns {
		if _, err := conn.Write(claim1MiB); err != nil {
			t.Fatal(err)
		}
	}
	for i, conn := range conns {
		waitClosed(t, conn, fmt.Sprintf("connection %d claiming 1 MiB", i))
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > sockets<<20/4 {
		t.Errorf("the broker allocated %d KiB for %d headers claiming 1 MiB each; want far less than %d KiB", grew>>10, sockets, sockets<<10)
	}

	for _, first := range [][]byte{
		{0x10, 0xff, 0xff, 0xff, 0x7f},       // 256 MiB − 1, the largest MQTT length
		{0x10, 0xff, 0xff, 0xff, 0xff, 0x01}, // a remaining length of 5 bytes
		{0x10, 0x81, 0x80, 0x01},             // 16 KiB + 1
		{0xc0, 0x00},                         // PINGREQ before CONNECT
		{0x11, 0x00},                         // CONNECT with reserved flags
	} {
		conn := dialFrom(t, b, "127.0.0.1")
		if _, err := conn.Write(first); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, conn, fmt.Sprintf("first packet % x", first))
	}
	if s, want := b.Stats(), uint64(sockets+5); s.BadFirstPackets != want || s.UnauthenticatedFull != 0 {
		t.Errorf("Stats() = %+v; want %d bad first packets, none closed for the cap", s, want)
	}
}

// Attack: a client with keep alive 0 that then says nothing. The broker
// holds it to MaxKeepAlive: an MQTT 3.1.1 client, which cannot be told, is
// disconnected after one and a half times it of silence (1 s here, as
// mochi rounds 1.5 × 1 s down to whole seconds), and mochi's warning about
// the short keep alive, one per CONNECT, is not logged.
func TestKeepAliveZeroClientIsReaped(t *testing.T) {
	logs := &limitsRecorder{ch: make(chan slog.Record, 16)}
	b := startBroker(t, Options{Listen: "127.0.0.1:0", MaxKeepAlive: time.Second, Logger: slog.New(logs)})
	conn := dialFrom(t, b, "127.0.0.1")
	if code := rawConnect(t, conn, rawLogin{id: "silent", keepAlive: 0}); code != 0 {
		t.Fatalf("CONNACK %#x; want accepted", code)
	}
	waitClosed(t, conn, "the silent keepalive-0 client")
	// Counted and logged once mochi has let go of the connection.
	logs.expect(t, "connect_timeout=0 bad_first_packet=0 max_unauthenticated=0 keepalive=1 login_failures=0")
	if got := b.Stats().KeepAliveTimeouts; got != 1 {
		t.Errorf("Stats().KeepAliveTimeouts = %d; want 1", got)
	}

	if n := logs.perConnection.Load(); n != 0 {
		t.Errorf("%d warnings of mochi's about the short keep alive; want none: a client can send one on every CONNECT", n)
	}
}

// An MQTT 5 client that asks for keep alive 0 or more than MaxKeepAlive is
// told MaxKeepAlive in the CONNACK's Server Keep Alive, which it must then
// use; one that asks for less is told nothing and keeps its own.
func TestServerKeepAliveTellsMQTT5Clients(t *testing.T) {
	b := startBroker(t, Options{Listen: "127.0.0.1:0", MaxKeepAlive: time.Second})
	for _, tt := range []struct {
		keepAlive uint16
		want      *uint16
	}{{0, ptr(uint16(1))}, {600, ptr(uint16(1))}, {1, nil}} {
		conn := dialFrom(t, b, "127.0.0.1")
		c := paho5.NewClient(paho5.ClientConfig{Conn: conn})
		ctx, cancel := context.WithTimeout(context.Background(), eventWait)
		ca, err := c.Connect(ctx, &paho5.Connect{ClientID: "v5", KeepAlive: tt.keepAlive, CleanStart: true})
		cancel()
		if err != nil || ca.ReasonCode != 0 {
			t.Fatalf("keep alive %d: connect: %v", tt.keepAlive, err)
		}
		got := ca.Properties.ServerKeepAlive
		if (got == nil) != (tt.want == nil) || got != nil && *got != *tt.want {
			t.Errorf("keep alive %d: CONNACK Server Keep Alive %v; want %v", tt.keepAlive, deref(got), deref(tt.want))
		}
		c.Disconnect(&paho5.Disconnect{})
	}
}

// Attack: a flood of bad passwords from one address. Refused logins spend
// no token of the accept guard, so that 20 legitimate CONNECTs from
// another address all get in (20 of 20) on a frozen clock whose bucket
// holds exactly 20; the flooding address gets 10 answers about its
// passwords, then only "Server unavailable" without a check. The same
// host is kept back too, right password or not (what a guesser must not
// tell apart), until its budget refills: 6 s for one try at 10 a minute.
func TestLegitimateConnectsSucceedDuringBadPasswordFlood(t *testing.T) {
	clock := clockwork.NewFakeClockAt(t0)
	events := make(chan ConnectEvent, 256)
	b := startBroker(t, Options{Listen: "127.0.0.1:0", Clock: clock, MaxConnectRate: 20, ConnectBurst: 20,
		Users:     map[string]string{"alice": "alice-secret-1"},
		OnConnect: func(e ConnectEvent) { events <- e }})

	const flood = 100
	codes := map[byte]int{}
	for i := range flood {
		conn := dialFrom(t, b, "127.0.0.2")
		codes[rawConnect(t, conn, rawLogin{id: fmt.Sprint("guess", i), username: "alice", password: fmt.Sprint("guess", i), keepAlive: 30})]++
		conn.Close()
		nextEvent(t, events)
	}
	if codes[badLoginV3] != DefaultLoginFailuresPerMinute || codes[unavailableV3] != flood-DefaultLoginFailuresPerMinute {
		t.Errorf("the flood's CONNACKs: %v; want %d × %#x (bad password), then %d × %#x (no check)",
			codes, DefaultLoginFailuresPerMinute, badLoginV3, flood-DefaultLoginFailuresPerMinute, unavailableV3)
	}

	accepted := 0
	for i := range 20 {
		r := connectAs(b, fmt.Sprint("alice", i), i%2 == 0, creds{"alice", "alice-secret-1"})
		if r.accepted() {
			accepted++
			r.disconnect()
		}
		nextEvent(t, events)
	}
	if accepted != 20 {
		t.Errorf("%d of 20 legitimate CONNECTs accepted during the flood; want 20", accepted)
	}
	if r := connectAs(b, "one-too-many", false, creds{"alice", "alice-secret-1"}); r.code != unavailableV3 {
		t.Errorf("a 21st CONNECT on the frozen clock: CONNACK %#x, %v; want %#x: the rate still holds", r.code, r.err, unavailableV3)
	}
	nextEvent(t, events)

	right := rawLogin{id: "alice-on-flooding-host", username: "alice", password: "alice-secret-1", keepAlive: 30}
	conn := dialFrom(t, b, "127.0.0.2")
	if code := rawConnect(t, conn, right); code != unavailableV3 {
		t.Errorf("the right password from the flooding address: CONNACK %#x; want %#x until its budget refills", code, unavailableV3)
	}
	conn.Close()
	expectEvent(t, events, ConnectEvent{At: t0, ClientID: right.id, Refusal: RefusedLoginFailures})
	clock.Advance(6 * time.Second)
	conn = dialFrom(t, b, "127.0.0.2")
	defer conn.Close()
	if code := rawConnect(t, conn, right); code != 0 {
		t.Errorf("the right password from that address 6 s later: CONNACK %#x; want accepted", code)
	}
	if s := b.Stats(); s.LoginFailures != DefaultLoginFailuresPerMinute || s.LoginBackoffs != flood-DefaultLoginFailuresPerMinute+1 {
		t.Errorf("Stats() = %+v; want %d login failures and %d backoffs", s, DefaultLoginFailuresPerMinute, flood-DefaultLoginFailuresPerMinute+1)
	}
}

// Attack: many sockets that never finish their CONNECT. Beyond
// MaxUnauthenticated (8 here) a new socket is closed at accept, and one
// address may hold only a quarter (2); a client counts until it is
// admitted, so a legitimate client gets in as soon as a place is free.
// DialPipe's in-process clients are not counted.
// fillTheCap starts a broker with MaxUnauthenticated 8 and fills it with
// sockets that never finish their CONNECT, two from each of 127.0.0.2 to
// 127.0.0.5 (each address's share); counted receives once each time a
// connection starts or stops counting as unauthenticated.
func fillTheCap(t *testing.T) (*Broker, chan struct{}, []net.Conn) {
	t.Helper()
	b := startBroker(t, Options{Listen: "127.0.0.1:0", MaxUnauthenticated: 8})
	counted := make(chan struct{}, 64)
	b.limits.mu.Lock()
	b.limits.counted = func() { counted <- struct{}{} }
	b.limits.mu.Unlock()
	var held []net.Conn
	for i := range 8 {
		conn := dialFrom(t, b, fmt.Sprintf("127.0.0.%d", 2+i/2))
		conn.Write([]byte{0x10, 100}) // a CONNECT that never ends
		held = append(held, conn)
		waitFor(t, counted, "a held socket counted")
	}
	return b, counted, held
}

func TestUnauthenticatedCapHolds(t *testing.T) {
	b, _, held := fillTheCap(t)
	if got := b.Stats().Unauthenticated; got != 8 {
		t.Fatalf("Stats().Unauthenticated = %d; want 8", got)
	}
	// An address at its share (a quarter of the cap) gets no more.
	waitClosed(t, dialFrom(t, b, "127.0.0.3"), "a third socket of one address")
	p := pipeClient(t, b, "in-process") // not counted
	p.Disconnect(0)
	if s := b.Stats(); s.Unauthenticated != 8 || s.UnauthenticatedFull != 1 {
		t.Errorf("Stats() = %+v; want 8 unauthenticated, 1 closed at accept", s)
	}
	for _, conn := range held {
		conn.Close()
	}
}

// Four addresses that fill the cap with sockets that never log in keep
// nobody out: a client from another address takes the place of the
// oldest socket of the address that holds the most, and logs in.
func TestFewAddressesCannotFillTheCapAgainstOthers(t *testing.T) {
	b, counted, held := fillTheCap(t)
	c := mustConnect(t, b, "legit", false) // from 127.0.0.1
	defer c.disconnect()
	waitFor(t, counted, "the client counted")
	waitFor(t, counted, "the admitted client no longer counted")
	// The oldest socket of an address holding the most (all hold 2) made
	// room for it: 7 are left.
	if s := b.Stats(); s.Unauthenticated != 7 || s.UnauthenticatedFull != 1 {
		t.Errorf("Stats() = %+v; want 7 unauthenticated and 1 closed to make room", s)
	}
	for _, conn := range held {
		conn.Close()
	}
}

func TestStartRejectsLimitsOutOfRange(t *testing.T) {
	for _, tt := range []struct {
		opts Options
		want string
	}{
		{Options{ConnectTimeout: -time.Second}, "ConnectTimeout -1s"},
		{Options{MaxConnectSize: -1}, "MaxConnectSize -1"},
		{Options{MaxUnauthenticated: -1}, "MaxUnauthenticated -1"},
		{Options{MaxKeepAlive: 1500 * time.Millisecond}, "MaxKeepAlive 1.5s"},
		{Options{MaxKeepAlive: 65536 * time.Second}, "MaxKeepAlive 18h12m16s"},
		{Options{LoginFailuresPerMinute: -1}, "LoginFailuresPerMinute -1"},
	} {
		b, err := Start(tt.opts)
		if err == nil {
			b.Close()
			t.Errorf("Start(%+v) succeeded; want an error", tt.opts)
		} else if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Start(%+v): %v; want it to name %s", tt.opts, err, tt.want)
		}
	}
}

// The CONNECT reader takes any bytes: it never panics, returns either an
// error or exactly one CONNECT no larger than its limit, the input's
// first bytes, and refuses what is not a CONNECT with errBadFirstPacket.
func FuzzReadConnectPacket(f *testing.F) {
	for _, seed := range [][]byte{
		{0x10, 0},
		{0x10, 13, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x02, 0, 60, 0, 1, 'x', 0xc0, 0},
		{0x10, 0xff, 0xff, 0xff, 0x7f},
		{0x10, 0x80, 0x80, 0x80, 0x80, 0x01},
		{0xc0, 0},
		{0x10, 5, 1},
	} {
		f.Add(seed, uint16(64))
	}
	f.Fuzz(func(t *testing.T, in []byte, limit uint16) {
		got, err := readConnectPacket(bytes.NewReader(in), int(limit))
		if err != nil {
			if len(in) > 0 && in[0] != 0x10 && !errors.Is(err, errBadFirstPacket) {
				t.Errorf("first byte %#x: %v; want errBadFirstPacket", in[0], err)
			}
			return
		}
		if !bytes.HasPrefix(in, got) || got[0] != 0x10 || len(got) > int(limit)+5 {
			t.Errorf("read % x from % x (limit %d); want one CONNECT from the input's start", got, in, limit)
		}
	})
}

// dialFrom dials the broker over TCP from the loopback address local
// (Linux answers on all of 127.0.0.0/8), so that tests can play several
// hosts.
func dialFrom(t *testing.T, b *Broker, local string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: eventWait}
	conn, err := d.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// waitClosed waits until the broker closes conn (a read ends in EOF or a
// reset), failing if it is still open after eventWait.
func waitClosed(t *testing.T, conn net.Conn, what string) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(eventWait))
	_, err := io.Copy(io.Discard, conn)
	if errors.Is(err, net.ErrClosed) || isTimeout(err) {
		t.Fatalf("%s: still open after %v (%v); want it closed", what, eventWait, err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// rawLogin is what rawConnect sends.
type rawLogin struct {
	id, username, password string
	keepAlive              uint16
}

// rawConnect writes an MQTT 3.1.1 CONNECT (clean session) on conn and
// returns the CONNACK's return code.
func rawConnect(t *testing.T, conn net.Conn, l rawLogin) byte {
	t.Helper()
	str := func(s string) []byte { return append([]byte{byte(len(s) >> 8), byte(len(s))}, s...) }
	flags := byte(0x02)
	payload := str(l.id)
	if l.username != "" {
		flags |= 0x80
		payload = append(payload, str(l.username)...)
	}
	if l.password != "" {
		flags |= 0x40
		payload = append(payload, str(l.password)...)
	}
	body := append(append(str("MQTT"), 4, flags, byte(l.keepAlive>>8), byte(l.keepAlive)), payload...)
	if len(body) > 127 {
		t.Fatal("rawConnect: CONNECT too long for a 1-byte length")
	}
	conn.SetDeadline(time.Now().Add(eventWait))
	defer conn.SetDeadline(time.Time{})
	if _, err := conn.Write(append([]byte{0x10, byte(len(body))}, body...)); err != nil {
		t.Fatal(err)
	}
	ack := make([]byte, 4)
	if _, err := io.ReadFull(conn, ack); err != nil {
		t.Fatalf("CONNECT as %q: no CONNACK: %v", l.id, err)
	}
	if ack[0] != 0x20 || ack[1] != 2 {
		t.Fatalf("answer % x; want a CONNACK", ack)
	}
	return ack[3]
}

// limitsRecorder hands the limits' summary lines to ch, and counts
// mochi's warnings about a short keep alive.
type limitsRecorder struct {
	ch            chan slog.Record
	perConnection atomic.Int64
}

func (r *limitsRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *limitsRecorder) Handle(_ context.Context, rec slog.Record) error {
	if rec.Message == limitsLogMessage {
		r.ch <- rec
	}
	if strings.Contains(rec.Message, "keepalive") {
		r.perConnection.Add(1)
	}
	return nil
}
func (r *limitsRecorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *limitsRecorder) WithGroup(string) slog.Handler      { return r }

// expect waits for the next summary and checks its counts (the line's
// "over" left out).
func (r *limitsRecorder) expect(t *testing.T, attrs string) {
	t.Helper()
	select {
	case rec := <-r.ch:
		var got []string
		rec.Attrs(func(a slog.Attr) bool {
			if a.Key != "over" {
				got = append(got, a.String())
			}
			return true
		})
		if rec.Level != slog.LevelWarn || strings.Join(got, " ") != attrs {
			t.Errorf("logged %s %v; want a warning with %s", rec.Level, got, attrs)
		}
	case <-time.After(eventWait):
		t.Fatalf("nothing logged; want %s", attrs)
	}
}

func ptr[T any](v T) *T { return &v }

func deref(p *uint16) any {
	if p == nil {
		return "none"
	}
	return *p
}
