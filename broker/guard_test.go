package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	paho5 "github.com/eclipse/paho.golang/paho"
	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/jonboulle/clockwork"
)

// eventWait bounds every wait for something the broker or a client must
// do; waits end as soon as it happens.
const eventWait = 10 * time.Second

// t0 is when every fake clock starts: a whole second, so that fake
// seconds are [t0+k s, t0+k+1 s).
var t0 = time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)

// The CONNACK codes of a refusal: 0x89 "Server busy" to MQTT 5 clients,
// 0x03 "Server unavailable" to 3.1.1 clients.
const (
	busyV5        = 0x89
	unavailableV3 = 0x03
)

// Flood: 50 clients connect at once to a broker that accepts 10 CONNECTs
// a second with a burst of 1. Every refused client retries once per step
// of 100 ms of the fake clock. The guard accepts exactly one client per
// step, 10 per fake second and never more, refuses the others with the
// codes that make clients back off, and every client is in after 5 fake
// seconds.
func TestAcceptGuardRefusesAboveItsRateAndEveryClientConnectsEventually(t *testing.T) {
	clock := clockwork.NewFakeClockAt(t0)
	events := make(chan ConnectEvent, 4096)
	// All 50 dial at once from one address: room for them all before
	// authentication (MaxUnauthenticated gives an address a quarter).
	b := startBroker(t, Options{Listen: "127.0.0.1:0", MaxConnectRate: 10, Clock: clock, MaxUnauthenticated: 200,
		OnConnect: func(e ConnectEvent) { events <- e }})

	const clients = 50
	var pending []string
	for i := range clients {
		pending = append(pending, fmt.Sprintf("c%02d", i))
	}
	var connected []func()
	defer func() {
		for _, disconnect := range connected {
			disconnect()
		}
	}()
	perSecond := map[int]int{}
	for step := 0; len(pending) > 0; step++ {
		if step == 2*clients {
			t.Fatalf("after %d steps %d clients are still refused", step, len(pending))
		}
		results := make(chan attempt, len(pending))
		for i, id := range pending {
			go func() { results <- connect(b, id, i%2 == 0) }()
		}
		var refused []string
		for range pending {
			a := <-results
			switch {
			case a.err != nil:
				t.Fatalf("step %d: %s: %v", step, a.id, a.err)
			case a.accepted():
				connected = append(connected, a.disconnect)
			case a.code != a.busyCode():
				t.Errorf("step %d: %s refused with CONNACK %#x; want %#x", step, a.id, a.code, a.busyCode())
				refused = append(refused, a.id)
			default:
				refused = append(refused, a.id)
			}
		}
		accepted := 0
		for range pending {
			e := nextEvent(t, events)
			switch {
			case e.Accepted:
				accepted++
				perSecond[int(e.At.Sub(t0)/time.Second)]++
			case e.Refusal != RefusedRate:
				t.Errorf("step %d: %s refused for %q; want %q", step, e.ClientID, e.Refusal, RefusedRate)
			}
			if !e.At.Equal(clock.Now()) {
				t.Errorf("step %d: event at %v; want the fake clock's %v", step, e.At, clock.Now())
			}
		}
		if accepted != 1 || len(pending)-len(refused) != 1 {
			t.Fatalf("step %d: %d accepted events, %d of %d clients in; want 1 (rate 10/s, burst 1, 100 ms steps)", step, accepted, len(pending)-len(refused), len(pending))
		}
		pending = refused
		clock.Advance(100 * time.Millisecond)
	}
	for s := range 5 {
		if got := perSecond[s]; got != 10 {
			t.Errorf("fake second %d accepted %d clients; want 10", s, got)
		}
	}
	if len(perSecond) != 5 {
		t.Errorf("accepts spread over seconds %v; want 0–4", perSecond)
	}
}

// A broker at MaxConnections refuses the next client with 0x89 (MQTT 5)
// or 0x03 (3.1.1), spending no token of its rate, and accepts it once a
// client has left.
func TestMaxConnectionsRefusesUntilAClientLeaves(t *testing.T) {
	clock := clockwork.NewFakeClockAt(t0) // frozen: the bucket never refills
	events := make(chan ConnectEvent, 64)
	b := startBroker(t, Options{Listen: "127.0.0.1:0", MaxConnections: 2, MaxConnectRate: 1, ConnectBurst: 3, Clock: clock,
		OnConnect: func(e ConnectEvent) { events <- e }})
	released := watchReleases(b)

	a := mustConnect(t, b, "a", false)
	bb := mustConnect(t, b, "b", true)
	defer bb.disconnect()
	expectEvent(t, events, ConnectEvent{At: t0, ClientID: "a", Accepted: true})
	expectEvent(t, events, ConnectEvent{At: t0, ClientID: "b", Accepted: true})
	for _, v5 := range []bool{true, false} {
		r := connect(b, "c", v5)
		if r.err != nil || r.code != r.busyCode() {
			t.Fatalf("third client (MQTT 5: %v): CONNACK %#x, %v; want %#x", v5, r.code, r.err, r.busyCode())
		}
		expectEvent(t, events, ConnectEvent{At: t0, ClientID: "c", Refusal: RefusedMaxConnections})
	}

	a.disconnect()
	waitFor(t, released, "the slot of the client that left")
	c := mustConnect(t, b, "c", true) // the last token: the refusals spent none
	defer c.disconnect()
	expectEvent(t, events, ConnectEvent{At: t0, ClientID: "c", Accepted: true})

	bb.disconnect()
	waitFor(t, released, "the slot of the second client that left")
	if r := connect(b, "d", false); r.err != nil || r.code != unavailableV3 {
		t.Fatalf("client beyond the burst: CONNACK %#x, %v; want %#x", r.code, r.err, unavailableV3)
	}
	expectEvent(t, events, ConnectEvent{At: t0, ClientID: "d", Refusal: RefusedRate})
}

// A device that reconnects before its old connection timed out takes over
// its session even at MaxConnections: it replaces a client rather than
// adding one.
func TestTakeoverIsNotRefusedAtMaxConnections(t *testing.T) {
	b := startBroker(t, Options{Listen: "127.0.0.1:0", MaxConnections: 1})
	old := mustConnect(t, b, "bridge", false)
	defer old.disconnect()
	if r := connect(b, "other", false); r.code != unavailableV3 {
		t.Fatalf("second client: CONNACK %#x, %v; want %#x", r.code, r.err, unavailableV3)
	}
	again := mustConnect(t, b, "bridge", false)
	defer again.disconnect()
}

// MaxInflight is the Receive Maximum that MQTT 5 clients read in the
// CONNACK; mochi's 1024 by default.
func TestMaxInflightIsTheReceiveMaximum(t *testing.T) {
	for _, tt := range []struct{ opt, want int }{{0, 1024}, {7, 7}, {65535, 65535}} {
		b := startBroker(t, Options{Listen: "127.0.0.1:0", MaxInflight: tt.opt})
		r := connect(b, "v5", true)
		if r.err != nil || !r.accepted() {
			t.Fatalf("MaxInflight %d: connect: %v (CONNACK %#x)", tt.opt, r.err, r.code)
		}
		r.disconnect()
		if r.receiveMaximum != tt.want {
			t.Errorf("MaxInflight %d: CONNACK Receive Maximum %d; want %d", tt.opt, r.receiveMaximum, tt.want)
		}
	}
}

// A CONNECT that mochi refuses itself, before the guard sees it, is still
// reported once, as refused for another reason, and spends no token.
func TestOnConnectReportsOtherRefusals(t *testing.T) {
	clock := clockwork.NewFakeClockAt(t0)
	events := make(chan ConnectEvent, 16)
	b := startBroker(t, Options{Listen: "127.0.0.1:0", MaxConnectRate: 1, Clock: clock,
		OnConnect: func(e ConnectEvent) { events <- e }})
	conn, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(eventWait))
	// MQTT 3.1.1 CONNECT, client ID "x", with the reserved connect flag set.
	connect := []byte{0x10, 13, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x03, 0, 60, 0, 1, 'x'}
	if _, err := conn.Write(connect); err != nil {
		t.Fatal(err)
	}
	ack := make([]byte, 4)
	if _, err := io.ReadFull(conn, ack); err != nil {
		t.Fatal(err)
	}
	if ack[0] != 0x20 || ack[3] == 0 {
		t.Fatalf("answer % x; want a CONNACK that refuses", ack)
	}
	expectEvent(t, events, ConnectEvent{At: t0, ClientID: "x", Refusal: RefusedOther})
	c := mustConnect(t, b, "y", false) // the one token is still there
	defer c.disconnect()
	expectEvent(t, events, ConnectEvent{At: t0, ClientID: "y", Accepted: true})
}

// DialPipe connects paho clients without a socket, with or without a TCP
// listener, through the same guard, and fails once the broker is closed.
func TestDialPipe(t *testing.T) {
	for _, listen := range []string{"", "127.0.0.1:0"} {
		t.Run("listen="+listen, func(t *testing.T) {
			events := make(chan ConnectEvent, 16)
			b, err := Start(Options{Listen: listen, OnConnect: func(e ConnectEvent) { events <- e }})
			if err != nil {
				t.Fatal(err)
			}
			if listen == "" && (b.Addr() != "" || b.URL() != "") {
				t.Errorf("without Listen: Addr %q, URL %q; want none", b.Addr(), b.URL())
			}
			got := make(chan string, 1)
			sub := pipeClient(t, b, "sub")
			wait(t, sub.Subscribe("pipe/test", 1, func(_ paho.Client, m paho.Message) { got <- string(m.Payload()) }))
			pub := pipeClient(t, b, "pub")
			if listen != "" { // a TCP client and a pipe client talk to each other
				pub.Disconnect(0)
				pub = paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("pub"))
				wait(t, pub.Connect())
			}
			wait(t, pub.Publish("pipe/test", 1, false, "hello"))
			select {
			case m := <-got:
				if m != "hello" {
					t.Errorf("received %q; want hello", m)
				}
			case <-time.After(eventWait):
				t.Fatal("the message never arrived")
			}
			expectEvent(t, events, ConnectEvent{ClientID: "sub", Accepted: true})
			pub.Disconnect(0)
			sub.Disconnect(0)

			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if c, err := b.DialPipe(); !errors.Is(err, net.ErrClosed) {
				t.Errorf("DialPipe after Close = %v, %v; want an error that is net.ErrClosed", c, err)
			}
		})
	}
}

// Refusals are logged as warnings at most once per second, summarised,
// and never one line per CONNECT.
func TestRefusalsAreLoggedOncePerSecond(t *testing.T) {
	clock := clockwork.NewFakeClockAt(t0) // frozen: only the first CONNECT gets a token
	logs := &recorder{ch: make(chan slog.Record, 64)}
	events := make(chan ConnectEvent, 16)
	b := startBroker(t, Options{Listen: "127.0.0.1:0", MaxConnectRate: 0.001, Clock: clock, Logger: slog.New(logs),
		OnConnect: func(e ConnectEvent) { events <- e }})
	c := mustConnect(t, b, "in", false)
	defer c.disconnect()
	nextEvent(t, events)

	refuse := func(n int) {
		t.Helper()
		for i := range n {
			if r := connect(b, fmt.Sprint("late", i), i%2 == 0); r.err != nil || r.accepted() {
				t.Fatalf("connect: %v, CONNACK %#x; want refused", r.err, r.code)
			}
			nextEvent(t, events)
		}
	}
	refuse(1)
	logs.expect(t, "max_connections=0 rate=1 over=0s") // the first at once
	refuse(3)
	logs.none(t)
	clock.Advance(999 * time.Millisecond)
	logs.none(t)
	clock.Advance(time.Millisecond)
	logs.expect(t, "max_connections=0 rate=3 over=1s") // a second after the first
	refuse(1)
	logs.none(t)
	c.disconnect()
	b.Close() // less than a second later: Close logs the rest
	logs.expect(t, "max_connections=0 rate=1 over=0s")
	logs.none(t)
}

func TestStartRejectsOptionsOutOfRange(t *testing.T) {
	tests := []struct {
		opts Options
		want string
	}{
		{Options{MaxConnectRate: -1}, "MaxConnectRate -1"},
		{Options{MaxConnectRate: math.NaN()}, "MaxConnectRate NaN"},
		{Options{MaxConnectRate: math.Inf(1)}, "MaxConnectRate +Inf"},
		{Options{ConnectBurst: -1}, "ConnectBurst -1"},
		{Options{MaxConnections: -1}, "MaxConnections -1"},
		{Options{MaxInflight: -1}, "MaxInflight -1"},
		{Options{MaxInflight: 65536}, "MaxInflight 65536"},
	}
	for _, tt := range tests {
		b, err := Start(tt.opts)
		if err == nil {
			b.Close()
			t.Errorf("Start(%+v) succeeded; want an error", tt.opts)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Start(%+v): %v; want it to name %s", tt.opts, err, tt.want)
		}
	}
}

func startBroker(t *testing.T, opts Options) *Broker {
	t.Helper()
	b, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// attempt is the outcome of one CONNECT by a paho client.
type attempt struct {
	id             string
	v5             bool
	code           byte // the CONNACK's return code (3.1.1) or reason code (5)
	receiveMaximum int  // MQTT 5 only
	err            error
	disconnect     func()
}

func (a attempt) accepted() bool { return a.err == nil && a.code == 0 }

func (a attempt) busyCode() byte {
	if a.v5 {
		return busyV5
	}
	return unavailableV3
}

// connect connects a client over TCP: paho.golang for MQTT 5,
// paho.mqtt.golang for 3.1.1. A refusal is not an error: it is a non-zero
// code.
func connect(b *Broker, id string, v5 bool) attempt {
	return connectAs(b, id, v5, creds{})
}

// creds are the username and password of a CONNECT; each is sent only if
// not empty.
type creds struct{ username, password string }

// connectAs connects as connect does, with credentials.
func connectAs(b *Broker, id string, v5 bool, cr creds) attempt {
	a := attempt{id: id, v5: v5}
	if !v5 {
		// Version 4 (3.1.1) said outright: otherwise paho.mqtt.golang
		// answers a refusal with a second CONNECT, as MQTT 3.1.
		o := paho.NewClientOptions().AddBroker(b.URL()).SetClientID(id).SetProtocolVersion(4).
			SetAutoReconnect(false).SetConnectRetry(false).SetConnectTimeout(eventWait)
		if cr.username != "" {
			o.SetUsername(cr.username)
		}
		if cr.password != "" {
			o.SetPassword(cr.password)
		}
		c := paho.NewClient(o)
		tok := c.Connect()
		if !tok.WaitTimeout(eventWait) {
			a.err = errors.New("no CONNACK")
			return a
		}
		a.code = tok.(*paho.ConnectToken).ReturnCode()
		if a.code == 0 {
			a.disconnect = func() { c.Disconnect(0) }
		}
		return a
	}
	conn, err := net.Dial("tcp", b.Addr())
	if err != nil {
		a.err = err
		return a
	}
	c := paho5.NewClient(paho5.ClientConfig{Conn: conn})
	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	defer cancel()
	ca, err := c.Connect(ctx, &paho5.Connect{ClientID: id, KeepAlive: 30, CleanStart: true,
		UsernameFlag: cr.username != "", Username: cr.username,
		PasswordFlag: cr.password != "", Password: []byte(cr.password)})
	if ca == nil {
		a.err = err
		conn.Close()
		return a
	}
	a.code = ca.ReasonCode
	if ca.Properties != nil && ca.Properties.ReceiveMaximum != nil {
		a.receiveMaximum = int(*ca.Properties.ReceiveMaximum)
	}
	if a.code == 0 {
		a.disconnect = func() { c.Disconnect(&paho5.Disconnect{}) }
	}
	return a
}

func mustConnect(t *testing.T, b *Broker, id string, v5 bool) attempt {
	t.Helper()
	a := connect(b, id, v5)
	if !a.accepted() {
		t.Fatalf("%s: %v (CONNACK %#x); want accepted", id, a.err, a.code)
	}
	var once sync.Once
	disconnect := a.disconnect
	a.disconnect = func() { once.Do(disconnect) }
	return a
}

// pipeClient connects a paho client through b.DialPipe.
func pipeClient(t *testing.T, b *Broker, id string) paho.Client {
	t.Helper()
	c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://pipe").SetClientID(id).SetAutoReconnect(false).
		SetCustomOpenConnectionFn(func(*url.URL, paho.ClientOptions) (net.Conn, error) { return b.DialPipe() }))
	wait(t, c.Connect())
	return c
}

// watchReleases returns a channel that receives once for every guard slot
// given back.
func watchReleases(b *Broker) <-chan struct{} {
	ch := make(chan struct{}, 64)
	b.guard.mu.Lock()
	b.guard.released = func() { ch <- struct{}{} }
	b.guard.mu.Unlock()
	return ch
}

func waitFor(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(eventWait):
		t.Fatalf("timed out waiting for %s", what)
	}
}

func nextEvent(t *testing.T, events <-chan ConnectEvent) ConnectEvent {
	t.Helper()
	select {
	case e := <-events:
		return e
	case <-time.After(eventWait):
		t.Fatal("timed out waiting for a ConnectEvent")
		panic("unreachable")
	}
}

// expectEvent checks the next event; a zero want.At matches any time.
func expectEvent(t *testing.T, events <-chan ConnectEvent, want ConnectEvent) {
	t.Helper()
	got := nextEvent(t, events)
	if want.At.IsZero() {
		got.At = time.Time{}
	}
	if got != want {
		t.Errorf("ConnectEvent %+v; want %+v", got, want)
	}
}

// recorder is a slog.Handler that hands every record about refused
// CONNECTs to ch.
type recorder struct{ ch chan slog.Record }

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }
func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	if strings.Contains(rec.Message, "refused") {
		r.ch <- rec
	}
	return nil
}
func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

// expect waits for the next record and checks that it is a warning about
// refusals with the given attributes.
func (r *recorder) expect(t *testing.T, attrs string) {
	t.Helper()
	select {
	case rec := <-r.ch:
		var got []string
		rec.Attrs(func(a slog.Attr) bool { got = append(got, a.String()); return true })
		if rec.Level != slog.LevelWarn || !strings.Contains(rec.Message, "refused") || strings.Join(got, " ") != attrs {
			t.Errorf("logged %s %q %v; want a warning about refusals with %s", rec.Level, rec.Message, got, attrs)
		}
	case <-time.After(eventWait):
		t.Fatalf("nothing logged; want refusals with %s", attrs)
	}
}

// none checks that nothing has been logged. A line due at a refusal is
// logged before the refused client reads its CONNACK, and a summary only
// when the fake clock reaches it, so nothing can be on its way.
func (r *recorder) none(t *testing.T) {
	t.Helper()
	select {
	case rec := <-r.ch:
		t.Errorf("logged %s %q; want nothing yet", rec.Level, rec.Message)
	default:
	}
}

// Regression: the daemon's own client is never refused, neither at
// MaxConnections nor beyond the rate, so the crowd it guards against can
// never lock hearthd out of its own broker; it still counts as connected.
func TestExemptClientIsNeverRefused(t *testing.T) {
	clock := clockwork.NewFakeClockAt(t0) // frozen: the bucket never refills
	b := startBroker(t, Options{Listen: "127.0.0.1:0", MaxConnections: 1, MaxConnectRate: 1, ConnectBurst: 1, Clock: clock,
		Exempt: []string{"hearthd"}})
	other := mustConnect(t, b, "device", true) // takes the slot and the token
	defer other.disconnect()
	self := mustConnect(t, b, "hearthd", true)
	defer self.disconnect()
	if r := connect(b, "late", true); r.err != nil || r.code != r.busyCode() {
		t.Fatalf("a third client: CONNACK %#x, %v; want %#x: the exempt client counts", r.code, r.err, r.busyCode())
	}
}
