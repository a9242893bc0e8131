package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/simulator"
)

// restartableMochi is an external broker the test can stop and start
// again on the same address, with its retained store wiped, as a broker
// without persistence comes back after a power cut.
type restartableMochi struct {
	t    *testing.T
	addr string
	srv  *mochi.Server
}

// startRestartableMochi starts the broker with allow-all auth and extra
// hooks; a restart starts it with allow-all auth alone.
func startRestartableMochi(t *testing.T, hooks ...mochi.Hook) *restartableMochi {
	t.Helper()
	return startMochiWith(t, append([]mochi.Hook{new(auth.AllowHook)}, hooks...))
}

// startMochiWith starts the broker with exactly these hooks.
func startMochiWith(t *testing.T, hooks []mochi.Hook) *restartableMochi {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &restartableMochi{t: t, addr: ln.Addr().String()}
	m.serve(ln, hooks...)
	t.Cleanup(m.stop)
	return m
}

func (m *restartableMochi) url() string { return "tcp://" + m.addr }

func (m *restartableMochi) serve(ln net.Listener, hooks ...mochi.Hook) {
	m.t.Helper()
	srv := mochi.New(nil)
	for _, h := range hooks {
		if err := srv.AddHook(h, nil); err != nil {
			m.t.Fatal(err)
		}
	}
	if err := srv.AddListener(listeners.NewNet("t", ln)); err != nil {
		m.t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		m.t.Fatal(err)
	}
	m.srv = srv
}

// stop closes the broker as startMochi's cleanup does (mochi #488).
func (m *restartableMochi) stop() {
	if m.srv == nil {
		return
	}
	if l, ok := m.srv.Listeners.Get("t"); ok {
		l.Close(func(string) {})
	}
	for _, cl := range m.srv.Clients.GetAll() {
		m.srv.DisconnectClient(cl, packets.ErrServerShuttingDown)
	}
	m.srv.Close()
	m.srv = nil
}

// restart stops the broker and starts an empty one on the same address.
func (m *restartableMochi) restart() {
	m.t.Helper()
	m.stop()
	ln, err := net.Listen("tcp", m.addr)
	if err != nil {
		m.t.Fatalf("listen again on %s: %v", m.addr, err)
	}
	m.serve(ln, new(auth.AllowHook))
}

// manyDevices is a config with n switches sw000… on one Zigbee2MQTT
// service, plus extra YAML for the mqtt section.
func manyDevices(n int, mqttExtra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "mqtt:\n  listen: 127.0.0.1:0\n  reconnect: {base: 10ms, cap: 100ms}\n%shttp:\n  listen: 127.0.0.1:0\nservices:\n  zigbee:\n    protocol: zigbee2mqtt\ndevices:\n", mqttExtra)
	for i := range n {
		fmt.Fprintf(&b, "  sw%03d: {class: switch}\n", i)
	}
	return b.String()
}

// A broker that comes back without its retained store has lost every
// device's state and availability: Hearth republishes them all on the
// reconnect, paced at mqtt.republish_rate (here 10 per second: one per
// tenth of a second), never assuming the broker kept them.
func TestWipedBrokerGetsStateAndAvailabilityBackWithinTheRateLimit(t *testing.T) {
	const n = 15 // devices: 2n retained mirrors
	m := startRestartableMochi(t)
	h := newHarness(t, harnessOptions{brokerURL: m.url(), config: manyDevices(n, "  republish_rate: 10\n")})

	topics := map[string]byte{}
	for i := range n {
		topics[fmt.Sprintf("hearth/sw%03d", i)] = 1
		topics[fmt.Sprintf("hearth/sw%03d/availability", i)] = 1
	}
	got := make(chan paho.Message, 4*n)
	watch := func() paho.Client {
		c := paho.NewClient(paho.NewClientOptions().AddBroker(m.url()).SetClientID("watch-" + fmt.Sprint(time.Now().UnixNano())).SetOrderMatters(false))
		mustToken(t, c.Connect())
		mustToken(t, c.SubscribeMultiple(topics, func(_ paho.Client, msg paho.Message) { got <- msg }))
		return c
	}
	// Hearth mirrors what the simulated bridge reports at start.
	w := watch()
	seen := map[string]bool{}
	for len(seen) < 2*n {
		select {
		case msg := <-got:
			seen[msg.Topic()] = true
		case <-time.After(eventWait):
			t.Fatalf("Hearth mirrored %d of %d topics at start", len(seen), 2*n)
		}
	}
	w.Disconnect(0)

	// Power cut of the broker. The simulator stays down, so every message
	// on the new broker is Hearth's republish.
	h.stopSim()
	h.stopSim = nil
	h.stopAutomation() // before its broker goes: paho's reconnect would outlive the test
	m.restart()
	w = watch()
	defer w.Disconnect(0)
	select {
	case msg := <-got:
		t.Fatalf("the wiped broker still had %s", msg.Topic())
	default:
	}
	h.elapse(10 * time.Millisecond) // towards Hearth's reconnect backoff

	// The sweep publishes one mirror per tenth of a second: the first at
	// once, then one each time the clock moves 100 ms. Move the clock
	// whenever Hearth waits on it, and count: by the time the clock has
	// moved k tenths, at most k+1 distinct mirrors may be out, plus one
	// for a sweep that a second reconnect started over (it sends its
	// first at once; a loaded machine can see Hearth reconnect twice).
	// Repeats of a value already seen are allowed: mochi may deliver one
	// publish twice to a subscription made as it arrives.
	received := map[string]string{}
	take := func(msg paho.Message) {
		if prev, seen := received[msg.Topic()]; seen && prev != string(msg.Payload()) {
			t.Errorf("%s republished with two values (%q, then %q)", msg.Topic(), prev, msg.Payload())
		}
		received[msg.Topic()] = string(msg.Payload())
	}
	ticks := 0
	deadline := time.Now().Add(3 * eventWait)
	for len(received) < 2*n {
		for more := true; more; {
			select {
			case msg := <-got:
				take(msg)
			default:
				more = false
			}
		}
		if len(received) > ticks+2 {
			t.Fatalf("%d mirrors republished after %d tenths of a second; the rate allows %d, and one more for a sweep started over", len(received), ticks, ticks+1)
		}
		if len(received) == 2*n {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		err := h.clock.BlockUntilContext(ctx, 1)
		cancel()
		if err == nil {
			h.clock.Advance(100 * time.Millisecond)
			ticks++
		} else if time.Now().After(deadline) {
			t.Fatalf("%d of %d mirrors republished", len(received), 2*n)
		}
	}
	if ticks < 2*n-2 {
		t.Errorf("all %d mirrors republished within %d tenths of a second; at 10 per second that takes %d", 2*n, ticks, 2*n-1)
	}
	for i := range n {
		if a := received[fmt.Sprintf("hearth/sw%03d/availability", i)]; a != "online" {
			t.Errorf("sw%03d availability republished as %q, want online", i, a)
		}
		if s := received[fmt.Sprintf("hearth/sw%03d", i)]; !strings.Contains(s, `"state":"OFF"`) {
			t.Errorf("sw%03d state republished as %s, want the reported OFF", i, s)
		}
	}
}

// loseSets is a broker that loses the bridge's set messages as a broker
// about to crash does: to even-numbered devices it acknowledges them and
// never delivers them; to odd-numbered ones it never even acknowledges.
type loseSets struct{ mochi.HookBase }

func (h *loseSets) ID() string           { return "lose-sets" }
func (h *loseSets) Provides(b byte) bool { return b == mochi.OnPublish }
func (h *loseSets) OnPublish(_ *mochi.Client, pk packets.Packet) (packets.Packet, error) {
	var i int
	if _, err := fmt.Sscanf(pk.TopicName, "zigbee2mqtt/sw%03d/set", &i); err != nil {
		return pk, nil
	}
	if i%2 == 0 {
		return pk, packets.CodeSuccessIgnore // PUBACK, then nothing
	}
	return pk, packets.ErrRejectPacket // no PUBACK
}

// The broker restarts, wiped, in the middle of dispatching 500 commands
// (each of 250 switches gets ON, then OFF), with every set in flight: sent
// and acknowledged but never delivered, or not even acknowledged. Every
// accepted command ends in exactly one terminal status, none is lost,
// none needs a second attempt (a send whose delivery is unknown is sent
// again, with the same op_id, once the bridge is back), and no device
// receives a stale target after a newer one.
func TestBrokerRestartWhileDispatching500Commands(t *testing.T) {
	const n = 250
	m := startRestartableMochi(t, new(loseSets))
	// A broker that shuts down sends its clients' wills: the bridge's
	// "offline" opens the breaker just before Hearth's own connection
	// drops, which makes Hearth forget it (Disconnected). A command that
	// asks the breaker in the instant between the two would fail fast
	// (about 4 in 125 did, once in 10 runs); held (breaker.hold), it
	// waits for the bridge like the others.
	cfg := strings.Replace(manyDevices(n, ""), "    protocol: zigbee2mqtt\n", "    protocol: zigbee2mqtt\n    breaker: {hold: true}\n", 1)
	h := newHarness(t, harnessOptions{brokerURL: m.url(), config: cfg})
	h.stopAutomation() // this test's automation resubscribes after the restart

	results := make(chan devices.Result, 4*n)
	topics := map[string]byte{}
	for i := range n {
		topics[fmt.Sprintf("hearth/sw%03d/result", i)] = 1
	}
	auto := paho.NewClient(paho.NewClientOptions().AddBroker(m.url()).SetClientID("automation-restart").
		SetConnectRetry(true).SetConnectRetryInterval(20 * time.Millisecond).SetMaxReconnectInterval(100 * time.Millisecond).
		SetOnConnectHandler(func(c paho.Client) {
			c.SubscribeMultiple(topics, func(_ paho.Client, msg paho.Message) {
				var r devices.Result
				if err := json.Unmarshal(msg.Payload(), &r); err != nil {
					t.Errorf("result is not JSON: %s", msg.Payload())
					return
				}
				results <- r
			}).Wait()
		}))
	mustToken(t, auto.Connect())
	defer auto.Disconnect(0)

	// Each device's sets in arrival order, as the device saw them.
	var setsMu sync.Mutex
	sets := map[string][]string{}
	setsDone := make(chan struct{})
	go func() {
		defer close(setsDone)
		for e := range h.sets {
			var v struct{ State string }
			json.Unmarshal(e.Payload, &v)
			setsMu.Lock()
			sets[e.Device] = append(sets[e.Device], v.State)
			setsMu.Unlock()
		}
	}()

	for _, state := range []string{"ON", "OFF"} {
		for i := range n {
			mustToken(t, auto.Publish(fmt.Sprintf("hearth/sw%03d/set", i), 1, false,
				fmt.Sprintf(`{"state":%q,"op_id":"%s-%03d"}`, state, state, i)))
		}
	}
	final := map[string][]devices.Status{} // op_id → every terminal status received
	accepted := 0
	take := func(r devices.Result) {
		switch {
		case r.Status == devices.Accepted:
			accepted++
		case r.Status.Terminal():
			final[r.OpID] = append(final[r.OpID], r.Status)
		}
	}
	for accepted < 2*n {
		select {
		case r := <-results:
			take(r)
		case <-time.After(eventWait):
			t.Fatalf("%d of %d commands accepted", accepted, 2*n)
		}
	}
	if pending, err := h.d.store.Pending(); err != nil || len(pending) != n {
		t.Fatalf("%d commands pending before the restart (%v); want the %d OFF commands in flight", len(pending), err, n)
	}

	// Power cut of the broker, mid-flight. Hearth reconnects after its
	// backoff on the fake clock, then waits for the bridge to announce
	// itself before sending again; the simulated bridge reconnects after
	// its own (real) delay. The fake clock moves no further: no attempt
	// times out, no retry is needed.
	m.restart()
	// Every worker waits on the clock (for a confirmation, or for the
	// connection), and so does Hearth's reconnect.
	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	defer cancel()
	if err := h.clock.BlockUntilContext(ctx, n+1); err != nil {
		t.Fatalf("hearthd did not settle after the broker went away: %v", err)
	}
	h.clock.Advance(10 * time.Millisecond)
	for pending := -1; pending != 0; {
		select {
		case r := <-results:
			take(r)
		case <-time.After(eventWait):
			t.Fatalf("%d commands still pending", pending)
		}
		p, err := h.d.store.Pending()
		if err != nil {
			t.Fatal(err)
		}
		pending = len(p)
	}

	for _, state := range []string{"ON", "OFF"} {
		for i := range n {
			id := fmt.Sprintf("%s-%03d", state, i)
			op, ok, err := h.d.store.Lookup(id)
			switch {
			case err != nil || !ok:
				t.Errorf("%s: lost (%v)", id, err)
			case state == "ON" && op.Status != devices.Superseded:
				t.Errorf("%s: %s/%s; want superseded by the OFF", id, op.Status, op.Reason)
			case state == "OFF" && (op.Status != devices.Succeeded || op.Attempts != 1):
				t.Errorf("%s: %s/%s after %d attempts (%s); want succeeded after 1", id, op.Status, op.Reason, op.Attempts, op.Detail)
			}
			for _, s := range final[id] {
				if s != op.Status {
					t.Errorf("%s: result %s, but the stored status is %s", id, s, op.Status)
				}
			}
		}
	}
	h.stopSim()
	h.stopSim = nil
	close(h.sets)
	<-setsDone
	for i := range n {
		dev := fmt.Sprintf("sw%03d", i)
		seq := sets[dev]
		if len(seq) == 0 || seq[len(seq)-1] != "OFF" {
			t.Errorf("%s received %v; want OFF last", dev, seq)
		}
		for j := 1; j < len(seq); j++ {
			if seq[j] == "ON" && slices.Contains(seq[:j], "OFF") {
				t.Errorf("%s received %v: a stale ON after the newer OFF", dev, seq)
				break
			}
		}
	}
}

// Regression: an attempt whose confirmation window ends while Hearth's
// own connection is down has an unknown delivery, not a failure: it is
// sent again, as the same attempt, once Hearth and the bridge are back.
// With max_attempts 1, counting it as a failure would end the command
// failed/timeout though the device never had a chance.
func TestAttemptWhoseWindowEndsDuringAnOutageIsResent(t *testing.T) {
	m := startRestartableMochi(t, new(loseSets))
	cfg := strings.Replace(manyDevices(1, "  reconnect: {base: 10s, cap: 10s}\n"), "  reconnect: {base: 10ms, cap: 100ms}\n", "", 1)
	cfg = strings.Replace(cfg, "    protocol: zigbee2mqtt\n", "    protocol: zigbee2mqtt\n    retry: {max_attempts: 1}\n", 1)
	h := newHarness(t, harnessOptions{brokerURL: m.url(), config: cfg})
	h.publish("sw000", `{"state":"ON","op_id":"outage"}`)
	h.result("outage") // accepted; its set is acknowledged and lost
	h.stopAutomation() // before its broker goes: paho's reconnect would outlive the test
	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	defer cancel()
	if err := h.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err) // the attempt is out and waits for its confirmation
	}

	m.restart()
	// The attempt's 5 s window and Hearth's 10 s reconnect backoff.
	if err := h.clock.BlockUntilContext(ctx, 2); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(5 * time.Second) // the window ends during the outage
	if err := h.clock.BlockUntilContext(ctx, 2); err != nil {
		t.Fatalf("the command stopped waiting during the outage: %v", err)
	}
	if op, _, _ := h.d.store.Lookup("outage"); op.Status.Terminal() {
		t.Fatalf("outage ended %s/%s during the outage (%s); want it to wait and resend", op.Status, op.Reason, op.Detail)
	}
	h.clock.Advance(5 * time.Second) // Hearth reconnects; the simulator on its own
	for {
		op, _, err := h.d.store.Lookup("outage")
		if err != nil {
			t.Fatal(err)
		}
		if op.Status.Terminal() {
			if op.Status != devices.Succeeded || op.Attempts != 1 {
				t.Fatalf("outage: %s/%s after %d attempts (%s); want succeeded after 1", op.Status, op.Reason, op.Attempts, op.Detail)
			}
			break
		}
		select {
		case <-time.After(5 * time.Millisecond): // the store is the witness: poll it
		case <-ctx.Done():
			t.Fatalf("outage still %s after the reconnect", op.Status)
		}
	}
}

// Regression: a bridge that flaps while an attempt waits for its
// confirmation gets the attempt again at most twice (its delivery is
// unknown each time); past that, the silence counts, and with
// max_attempts 1 the command fails. Unbounded resends would let a
// flapping bridge be hammered outside max_attempts and the budget.
func TestFlappingBridgeResendsAtMostTwice(t *testing.T) {
	cfg := strings.Replace(manyDevices(1, ""), "    protocol: zigbee2mqtt\n", "    protocol: zigbee2mqtt\n    retry: {max_attempts: 1}\n", 1)
	h := newHarness(t, harnessOptions{config: cfg, faults: simulator.Faults{DropRate: 1}})
	h.publish("sw000", `{"state":"ON","op_id":"flap"}`)
	h.result("flap")
	h.nextSet() // the attempt
	flap := func() {
		for _, st := range []string{"offline", "online"} {
			mustToken(t, h.client.Publish("zigbee2mqtt/bridge/state", 1, false, st))
		}
	}
	for resend := 1; resend <= 2; resend++ {
		flap()
		h.nextSet() // the same attempt again
	}
	flap()
	r := h.await(func(r devices.Result) bool { return r.OpID == "flap" && r.Status.Terminal() }, "flap's end")
	if r.Status != devices.Failed || r.Reason != devices.ReasonTimeout || r.Attempts != 1 {
		t.Errorf("flap: %s/%s after %d attempts; want failed/timeout after 1", r.Status, r.Reason, r.Attempts)
	}
	if n := h.sim.Sets("sw000"); n != 3 {
		t.Errorf("the device received %d sets; want 3: the attempt and two resends", n)
	}
}

// Regression: a republish sweep reads each value when it pushes it. At
// one mirror a second, the sweep sends sw000's state, then waits; the
// bridge reports sw000 offline meanwhile, and Hearth mirrors that at
// once; the sweep's next push must carry offline too, never the online it
// would have read at the start of the sweep.
func TestRepublishNeverOverwritesANewerMirror(t *testing.T) {
	m := startRestartableMochi(t)
	h := newHarness(t, harnessOptions{brokerURL: m.url(), config: manyDevices(1, "  republish_rate: 1\n")})
	avail := make(chan string, 16)
	watch := func() paho.Client {
		c := paho.NewClient(paho.NewClientOptions().AddBroker(m.url()).SetClientID("watch-" + fmt.Sprint(time.Now().UnixNano())))
		mustToken(t, c.Connect())
		mustToken(t, c.Subscribe("hearth/sw000/availability", 1, func(_ paho.Client, msg paho.Message) { avail <- string(msg.Payload()) }))
		return c
	}
	next := func(what string) string {
		t.Helper()
		select {
		case v := <-avail:
			return v
		case <-time.After(eventWait):
			t.Fatalf("no %s", what)
			return ""
		}
	}
	w := watch()
	if v := next("availability at start"); v != "online" {
		t.Fatalf("availability at start: %q, want online", v)
	}
	w.Disconnect(0)

	h.stopSim()
	h.stopSim = nil
	h.stopAutomation()
	m.restart()
	w = watch()
	defer w.Disconnect(0)
	// The first sweep (1 message a second) may still wait on the clock
	// when the loss is noticed: the clock is driven until Hearth is back.
	h.driveReconnect() // its sweep sends the breaker's state, then waits 1 s
	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	defer cancel()
	if err := h.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("the sweep did not wait on the clock: %v", err)
	}
	mustToken(t, w.Publish("zigbee2mqtt/sw000/availability", 1, true, `{"state":"offline"}`))
	if v := next("the live offline"); v != "offline" {
		t.Fatalf("live availability: %q, want offline", v)
	}
	// The sweep sends the breaker's state, then sw000's state, then its
	// availability, one a second.
	h.clock.Advance(time.Second) // sw000's state
	if err := h.clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("the sweep did not wait on the clock: %v", err)
	}
	h.clock.Advance(time.Second) // the sweep's turn for sw000's availability
	if v := next("the sweep's availability"); v != "offline" {
		t.Errorf("the sweep republished availability %q after the live offline; want offline", v)
	}
}

// holdSecondSet withholds the PUBACK of the bridge's second set message,
// as a broker that dies while taking it.
type holdSecondSet struct {
	mochi.HookBase
	sets atomic.Int32
}

func (h *holdSecondSet) ID() string           { return "hold-second-set" }
func (h *holdSecondSet) Provides(b byte) bool { return b == mochi.OnPublish }
func (h *holdSecondSet) OnPublish(_ *mochi.Client, pk packets.Packet) (packets.Packet, error) {
	if strings.HasSuffix(pk.TopicName, "/set") && strings.HasPrefix(pk.TopicName, "zigbee2mqtt/") && h.sets.Add(1) == 2 {
		return pk, packets.ErrRejectPacket // no PUBACK
	}
	return pk, nil
}

// Regression: a retry whose publish loses its connection before the
// PUBACK is resent only until the policy's deadline (5 s here), then the
// command ends deadline_exceeded, not whenever the broker comes back nor
// expired at the TTL.
//
// Without a breaker: the simulated bridge's will, sent as the broker
// stops, would open it, and a command asking it in the instant before
// Hearth notices its own loss fails breaker_open (about 1 run in 30);
// that is the breaker's subject, not this test's.
func TestLostRetryKeepsThePolicyDeadline(t *testing.T) {
	m := startRestartableMochi(t, new(holdSecondSet))
	h := newHarness(t, harnessOptions{brokerURL: m.url(), config: withoutBreaker(deadlineConfig), faults: simulator.Faults{Silent: []string{"plug"}}})
	h.publish("plug", `{"state":"ON","op_id":"lost-retry"}`)
	h.result("lost-retry")
	h.nextSet()            // attempt 1, unconfirmed: the device is offline
	h.advance(time.Second) // its window ends; the retry waits 1 s
	h.advance(time.Second) // the retry goes out; the broker keeps its PUBACK
	h.stopAutomation()     // before its broker goes
	h.stopSim()
	h.stopSim = nil
	m.stop()                                 // the connection goes before the PUBACK: delivery unknown
	op := h.driveUntilEnded("lost-retry", 2) // the resend's wait and Hearth's reconnect
	if op.Status != devices.Failed || op.Reason != devices.ReasonDeadlineExceeded {
		t.Fatalf("lost-retry: %s/%s (%s); want failed/deadline_exceeded", op.Status, op.Reason, op.Detail)
	}
	if ended := op.UpdatedAt.Sub(t0); ended > 5500*time.Millisecond {
		t.Errorf("lost-retry ended at +%v; want by the policy deadline, +5s", ended)
	}
}
