package mqtt

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho3 "github.com/eclipse/paho.mqtt.golang"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// deadline bounds every wait for an event; tests never sleep.
const deadline = 5 * time.Second

// broker is a real embedded mochi-mqtt broker on a loopback port that can
// be stopped and started again on the same port.
type broker struct {
	t    *testing.T
	addr string // host:port
	srv  *mochi.Server
	ev   *events
	// caps, if set, changes mochi's default capabilities at every start.
	caps func(*mochi.Capabilities)
}

// startBroker runs a broker on a free loopback port until the test ends.
func startBroker(t *testing.T) *broker {
	t.Helper()
	return startBrokerWith(t, nil)
}

// startBrokerWith is startBroker with mochi's capabilities changed by caps.
func startBrokerWith(t *testing.T, caps func(*mochi.Capabilities)) *broker {
	t.Helper()
	b := &broker{t: t, addr: "127.0.0.1:0", caps: caps}
	b.start()
	t.Cleanup(b.stop)
	return b
}

// brokerAt returns a broker for addr that is not running yet.
func brokerAt(t *testing.T, addr string) *broker {
	b := &broker{t: t, addr: addr}
	t.Cleanup(b.stop)
	return b
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func (b *broker) url() string { return "tcp://" + b.addr }

// start runs a fresh broker (empty retained store) on b.addr.
func (b *broker) start() {
	b.t.Helper()
	ln, err := net.Listen("tcp", b.addr)
	if err != nil {
		b.t.Fatal(err)
	}
	b.addr = ln.Addr().String()
	b.ev = newEvents()
	opts := &mochi.Options{Logger: slog.New(endedHandler{b.ev.ended})}
	if b.caps != nil {
		opts.Capabilities = mochi.NewDefaultServerCapabilities()
		b.caps(opts.Capabilities)
	}
	srv := mochi.New(opts)
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		b.t.Fatal(err)
	}
	if err := srv.AddHook(b.ev, nil); err != nil {
		b.t.Fatal(err)
	}
	if err := srv.AddListener(listeners.NewNet("t", ln)); err != nil {
		b.t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		b.t.Fatal(err)
	}
	b.srv = srv
}

// stop closes the broker and its client connections.
func (b *broker) stop() {
	if b.srv != nil {
		closeBroker(b.srv)
		b.srv = nil
	}
}

// closeBroker closes srv. mochi v2.7.9's Server.Close can deadlock when a
// client goes away while it runs: Clients.GetByListener read-locks twice
// and a Clients.Delete waiting in between blocks both
// (mochi-mqtt/server#488). So close the listener without its clients and
// disconnect the clients here, then let Close wait for them.
func closeBroker(srv *mochi.Server) {
	if l, ok := srv.Listeners.Get("t"); ok {
		l.Close(func(string) {})
	}
	for _, cl := range srv.Clients.GetAll() {
		_ = srv.DisconnectClient(cl, packets.ErrServerShuttingDown)
	}
	_ = srv.Close()
}

// proxy forwards TCP connections to a broker. It can cut them all, as a
// failing router would (each side sees the connection closed, without a
// DISCONNECT), take the link down (connections made meanwhile are closed
// at once, before the broker sees them: every dial fails), black-hole it
// as a pulled cable or a Wi-Fi out of range does (nothing passes either
// way, and neither side's close reaches the other), and hold back what
// the broker sends.
type proxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	pairs  []*pair
	held   chan struct{} // non-nil while broker → client traffic is held
	isDown bool          // connections are closed as they come
	wg     sync.WaitGroup
}

// pair is one forwarded connection: down to the client, up to the broker.
type pair struct {
	down, up net.Conn
	// dead: black-holed. Nothing more is forwarded, and the client's
	// side stays open until the client closes it.
	dead atomic.Bool
}

// hold stops forwarding what the broker sends from now on.
func (p *proxy) hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil {
		p.held = make(chan struct{})
	}
}

// open forwards again, starting with what was held.
func (p *proxy) open() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != nil {
		close(p.held)
		p.held = nil
	}
}

func (p *proxy) waitOpen() {
	p.mu.Lock()
	held := p.held
	p.mu.Unlock()
	if held != nil {
		<-held
	}
}

// startProxy forwards a loopback port to target until the test ends.
func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.open()
		p.cut()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) url() string { return "tcp://" + p.ln.Addr().String() }

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		isDown := p.isDown
		p.mu.Unlock()
		if isDown {
			down.Close()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			down.Close()
			continue
		}
		pr := &pair{down: down, up: up}
		p.mu.Lock()
		p.pairs = append(p.pairs, pr)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(pr, false)
		go p.pipe(pr, true)
	}
}

// pipe copies one direction of pr; fromBroker traffic waits while held.
// A black-holed pair forwards nothing more and passes no close on: the
// client's side is closed only once the client closed it.
func (p *proxy) pipe(pr *pair, fromBroker bool) {
	defer p.wg.Done()
	src, dst := pr.down, pr.up
	if fromBroker {
		src, dst = pr.up, pr.down
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !pr.dead.Load() {
			if fromBroker {
				p.waitOpen()
			}
			if _, werr := dst.Write(buf[:n]); werr != nil && !pr.dead.Load() {
				break
			}
		}
		if err != nil {
			break
		}
	}
	if pr.dead.Load() {
		if !fromBroker {
			pr.down.Close() // the client closed it, or the test ends
		}
		return
	}
	src.Close()
	dst.Close()
}

// cut closes every forwarded connection on both sides.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pr := range p.pairs {
		pr.down.Close()
		pr.up.Close()
	}
	p.pairs = nil
}

// takeDown cuts every connection and closes the ones that come until
// bringUp.
func (p *proxy) takeDown() {
	p.mu.Lock()
	p.isDown = true
	p.mu.Unlock()
	p.cut()
}

// bringUp forwards new connections again.
func (p *proxy) bringUp() {
	p.mu.Lock()
	p.isDown = false
	p.mu.Unlock()
}

// blackHole stops every forwarded connection dead: nothing passes either
// way any more, the broker's side is closed (so the broker, not hearing
// from the client, ends its session as it would after its keep-alive),
// and the client learns of nothing until its own keep-alive gives up.
// New connections are forwarded as usual: the network is back.
func (p *proxy) blackHole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pr := range p.pairs {
		pr.dead.Store(true)
		pr.up.Close()
	}
}

// qosEvent is an outbound QoS 1 message to a client whose PUBACK the
// broker has processed.
type qosEvent struct {
	client, topic string
}

// events is a mochi hook that reports what the broker saw.
type events struct {
	mochi.HookBase

	mu           sync.Mutex
	wills        map[string]int               // client ID → wills sent
	inflight     map[string]map[uint16]string // client ID → packet ID → topic
	onPublish    func(cl *mochi.Client, pk packets.Packet) error
	onSubscribed func(cl *mochi.Client, pk packets.Packet)

	disconnected chan string   // client IDs, as the broker finishes with them
	completed    chan qosEvent // PUBACKs from clients for QoS 1 deliveries
	ended        chan struct{} // a connection that ended with an error is fully cleaned up
}

func newEvents() *events {
	return &events{
		wills:        map[string]int{},
		inflight:     map[string]map[uint16]string{},
		disconnected: make(chan string, 64),
		completed:    make(chan qosEvent, 1024),
		ended:        make(chan struct{}, 64),
	}
}

// endedHandler turns mochi's listener log line for a connection that ended
// with an error into an event. The listener logs it after attachClient has
// returned, that is after the broker removed the client's subscriptions and
// forgot its ID: the one moment from which a reconnect with the same ID is
// safe (see waitEnded).
type endedHandler struct{ ended chan struct{} }

func (h endedHandler) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (h endedHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "" {
		select {
		case h.ended <- struct{}{}:
		default:
		}
	}
	return nil
}

func (h endedHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h endedHandler) WithGroup(string) slog.Handler      { return h }

// waitEnded waits until the broker has fully cleaned up a connection that
// ended with an error. mochi v2.7.9 removes a gone client's subscriptions
// and deletes its ID from the client map after OnDisconnect
// (server.go:488-491), keyed by client ID: a client that reconnects with the
// same ID inside that window loses its new subscriptions and its map entry,
// and silently receives nothing.
func (h *events) waitEnded(t *testing.T) {
	t.Helper()
	select {
	case <-h.ended:
	case <-time.After(deadline):
		t.Fatalf("broker did not finish with the connection within %v", deadline)
	}
}

func (h *events) ID() string { return "hearth-test-events" }

func (h *events) Provides(b byte) bool {
	switch b {
	case mochi.OnDisconnect, mochi.OnWillSent, mochi.OnQosPublish, mochi.OnQosComplete, mochi.OnPublish, mochi.OnSubscribed:
		return true
	}
	return false
}

func (h *events) OnDisconnect(cl *mochi.Client, _ error, _ bool) {
	h.disconnected <- cl.ID
}

func (h *events) OnWillSent(cl *mochi.Client, _ packets.Packet) {
	h.mu.Lock()
	h.wills[cl.ID]++
	h.mu.Unlock()
}

func (h *events) willsSent(id string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.wills[id]
}

func (h *events) OnQosPublish(cl *mochi.Client, pk packets.Packet, _ int64, _ int) {
	if pk.FixedHeader.Type != packets.Publish {
		return // the broker's own PUBACK to an inbound publish
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.inflight[cl.ID]
	if m == nil {
		m = map[uint16]string{}
		h.inflight[cl.ID] = m
	}
	m[pk.PacketID] = pk.TopicName
}

func (h *events) OnQosComplete(cl *mochi.Client, pk packets.Packet) {
	h.mu.Lock()
	topic, ok := h.inflight[cl.ID][pk.PacketID]
	if ok {
		delete(h.inflight[cl.ID], pk.PacketID)
	}
	h.mu.Unlock()
	if ok {
		h.completed <- qosEvent{client: cl.ID, topic: topic}
	}
}

// setOnPublish installs f to run as the broker processes each inbound
// PUBLISH; a packets.Code error refuses the message with that reason code.
func (h *events) setOnPublish(f func(cl *mochi.Client, pk packets.Packet) error) {
	h.mu.Lock()
	h.onPublish = f
	h.mu.Unlock()
}

func (h *events) OnPublish(cl *mochi.Client, pk packets.Packet) (packets.Packet, error) {
	h.mu.Lock()
	f := h.onPublish
	h.mu.Unlock()
	if f != nil {
		if err := f(cl, pk); err != nil {
			return pk, err
		}
	}
	return pk, nil
}

// setOnSubscribed installs f to run after the broker has added a client's
// subscriptions and before it writes the SUBACK.
func (h *events) setOnSubscribed(f func(cl *mochi.Client, pk packets.Packet)) {
	h.mu.Lock()
	h.onSubscribed = f
	h.mu.Unlock()
}

func (h *events) OnSubscribed(cl *mochi.Client, pk packets.Packet, _ []byte) {
	h.mu.Lock()
	f := h.onSubscribed
	h.mu.Unlock()
	if f != nil {
		f(cl, pk)
	}
}

// waitDisconnected waits until the broker has finished with client id
// (will sent or discarded).
func (h *events) waitDisconnected(t *testing.T, id string) {
	t.Helper()
	timeout := time.After(deadline)
	for {
		select {
		case got := <-h.disconnected:
			if got == id {
				return
			}
		case <-timeout:
			t.Fatalf("broker did not see %s disconnect within %v", id, deadline)
		}
	}
}

// received is one message a paho (MQTT 3.1.1) test client got.
type received struct {
	topic    string
	payload  string
	retained bool
}

// client is an independent MQTT client that watches and publishes, playing
// an automation or a bridge.
type client struct {
	c    paho3.Client
	msgs chan received // every message, in arrival order
}

var clientSeq atomic.Int64

// newClient connects an MQTT 3.1.1 client and subscribes it to filters at
// QoS 1.
func newClient(t *testing.T, url string, filters ...string) *client {
	t.Helper()
	w := &client{msgs: make(chan received, 1024)}
	o := paho3.NewClientOptions().AddBroker(url).
		SetClientID(fmt.Sprintf("test-%d", clientSeq.Add(1))).
		SetAutoReconnect(false).SetCleanSession(true).SetOrderMatters(true)
	w.c = paho3.NewClient(o)
	waitToken(t, w.c.Connect())
	t.Cleanup(func() { w.c.Disconnect(0) })
	for _, f := range filters {
		waitToken(t, w.c.Subscribe(f, 1, func(_ paho3.Client, m paho3.Message) {
			w.msgs <- received{topic: m.Topic(), payload: string(m.Payload()), retained: m.Retained()}
		}))
	}
	w.barrier(t)
	return w
}

// barrierTopic matches none of the filters the tests subscribe to.
const barrierTopic = "zz-barrier"

// barrier makes one more round trip, so that the broker has finished
// processing everything this client sent before. mochi acknowledges a
// SUBSCRIBE before it sends the retained messages, and a PUBLISH before it
// fans the message out; it processes one client's packets in order.
func (w *client) barrier(t *testing.T) {
	t.Helper()
	waitToken(t, w.c.Publish(barrierTopic, 1, false, ""))
}

// next returns the next message the client received.
func (w *client) next(t *testing.T) received {
	t.Helper()
	select {
	case m := <-w.msgs:
		return m
	case <-time.After(deadline):
		t.Fatalf("no message within %v", deadline)
		return received{}
	}
}

// publish publishes at QoS 1 and waits for the broker's PUBACK.
func (w *client) publish(t *testing.T, topic string, retained bool, payload string) {
	t.Helper()
	waitToken(t, w.c.Publish(topic, 1, retained, payload))
}

func waitToken(t *testing.T, tok paho3.Token) {
	t.Helper()
	if !tok.WaitTimeout(deadline) {
		t.Fatalf("MQTT operation did not complete within %v", deadline)
	}
	if err := tok.Error(); err != nil {
		t.Fatal(err)
	}
}

// retainedOn returns the retained message on topic as a fresh subscriber
// sees it. Live messages that race with the subscription are skipped.
func retainedOn(t *testing.T, url, topic string) received {
	t.Helper()
	w := newClient(t, url, topic)
	defer w.c.Disconnect(0)
	for {
		if m := w.next(t); m.retained {
			return m
		}
	}
}

// inbox collects the messages a Conn handler receives.
type inbox chan Message

func newInbox() inbox { return make(inbox, 1024) }

func (in inbox) handler(m Message) { in <- m }

// next returns the next message the handler received.
func (in inbox) next(t *testing.T) Message {
	t.Helper()
	select {
	case m := <-in:
		return m
	case <-time.After(deadline):
		t.Fatalf("handler received nothing within %v", deadline)
		return Message{}
	}
}

// ceilingRand draws the top of every interval, so a full-jitter delay is
// exactly the backoff ceiling.
type ceilingRand struct{}

func (ceilingRand) Int64N(n int64) int64 { return n - 1 }

// running is a Conn whose Run goroutine the test owns.
type running struct {
	*Conn
	cancel context.CancelFunc
	done   chan error
}

var connSeq atomic.Int64

// runConn creates a Conn for url with opts (URL and ClientID filled in when
// empty), lets setup register subscriptions, and runs it until the test
// ends or stop is called.
func runConn(t *testing.T, url string, opts Options, setup func(c *Conn)) *running {
	t.Helper()
	if opts.URL == "" {
		opts.URL = url
	}
	if opts.ClientID == "" {
		opts.ClientID = fmt.Sprintf("hearth-%d", connSeq.Add(1))
	}
	c := New(opts)
	if setup != nil {
		setup(c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Conn: c, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- c.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels Run and waits for it to return nil.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok && err != nil {
			t.Errorf("Run returned %v, want nil", err)
		}
		if ok {
			close(r.done)
		}
	case <-time.After(deadline):
		t.Fatalf("Run did not return within %v of cancel", deadline)
	}
}

// barrier makes one QoS 1 round trip from the Conn, so that the broker has
// finished (fanned out) everything the Conn published before.
func (r *running) barrier(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := r.Publish(ctx, barrierTopic, 1, false, nil); err != nil {
		t.Fatalf("barrier publish: %v", err)
	}
}

// waitUp waits for the first connection.
func (r *running) waitUp(t *testing.T) {
	t.Helper()
	select {
	case <-r.Up():
	case <-time.After(deadline):
		t.Fatalf("Conn not up within %v", deadline)
	}
}

// waitChan waits for one value on ch.
func waitChan[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(deadline):
		t.Fatalf("%s: nothing within %v", what, deadline)
		var zero T
		return zero
	}
}
