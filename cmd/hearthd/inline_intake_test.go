package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	paho5 "github.com/eclipse/paho.golang/paho"
	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/devices"
)

// burstWait bounds a burst test's waits: thousands of commands on a small
// machine shared with other work. Waits end as soon as the work is done.
const burstWait = 3 * time.Minute

// probe is an MQTT 3.1.1 client's connection to hearthd's embedded broker
// that watches the client's commands go out and their acknowledgements
// come in: as the client reads each PUBACK (QoS 1) or PUBREC (QoS 2), and
// before the client itself sees it, it calls onAck with the op_id of the
// command acknowledged. It is a *net.TCPConn underneath.
type probe struct {
	*net.TCPConn
	onAck func(opID string)

	mu    sync.Mutex
	ops   map[uint16]string // packet ID → op_id, of the commands in flight
	sent  []string          // op_ids in the order written
	acked []string          // op_ids in the order acknowledged
	out   []byte            // written, not yet a whole packet (the client's writer only)
	in    []byte            // read, not yet a whole packet (the client's reader only)
}

func (p *probe) Write(b []byte) (int, error) {
	p.out = append(p.out, b...)
	p.out = splitPackets(p.out, func(kind byte, flags byte, body []byte) {
		if kind != 3 || flags&0x06 == 0 { // a PUBLISH at QoS 1 or 2
			return
		}
		topicLen := int(body[0])<<8 | int(body[1])
		id := uint16(body[2+topicLen])<<8 | uint16(body[3+topicLen])
		var cmd struct {
			OpID string `json:"op_id"`
		}
		json.Unmarshal(body[4+topicLen:], &cmd)
		p.mu.Lock()
		p.ops[id] = cmd.OpID
		p.sent = append(p.sent, cmd.OpID)
		p.mu.Unlock()
	})
	return p.TCPConn.Write(b)
}

func (p *probe) Read(b []byte) (int, error) {
	n, err := p.TCPConn.Read(b)
	p.in = append(p.in, b[:n]...)
	p.in = splitPackets(p.in, func(kind byte, _ byte, body []byte) {
		if kind != 4 && kind != 5 { // PUBACK, PUBREC
			return
		}
		id := uint16(body[0])<<8 | uint16(body[1])
		p.mu.Lock()
		opID, ok := p.ops[id]
		delete(p.ops, id)
		if ok {
			p.acked = append(p.acked, opID)
		}
		p.mu.Unlock()
		if ok && p.onAck != nil {
			p.onAck(opID)
		}
	})
	return n, err
}

// orders returns the op_ids in the order sent and in the order acked.
func (p *probe) orders() (sent, acked []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.sent), slices.Clone(p.acked)
}

// splitPackets calls f with each whole MQTT packet at the start of buf (its
// type, flags and body) and returns what is left.
func splitPackets(buf []byte, f func(kind, flags byte, body []byte)) []byte {
	for {
		length, header := 0, 1
		for shift := 0; ; shift += 7 {
			if header >= len(buf) {
				return buf
			}
			length |= int(buf[header]&0x7f) << shift
			header++
			if buf[header-1]&0x80 == 0 {
				break
			}
		}
		if len(buf) < header+length {
			return buf
		}
		f(buf[0]>>4, buf[0]&0x0f, buf[header:header+length])
		buf = buf[header+length:]
	}
}

// probedClient connects an MQTT 3.1.1 client (paho.mqtt.golang) to
// hearthd's embedded broker through a probe, until the test ends.
func (h *harness) probedClient(id string, l login, onAck func(opID string)) (paho.Client, *probe) {
	h.t.Helper()
	u, err := url.Parse(h.d.brokerURL)
	if err != nil {
		h.t.Fatal(err)
	}
	var p *probe
	c := paho.NewClient(paho.NewClientOptions().AddBroker(h.d.brokerURL).SetClientID(id).
		SetUsername(l.username).SetPassword(l.password).
		SetProtocolVersion(4).SetAutoReconnect(false).SetConnectRetry(false).SetOrderMatters(true).
		SetCustomOpenConnectionFn(func(*url.URL, paho.ClientOptions) (net.Conn, error) {
			conn, err := net.Dial("tcp", u.Host)
			if err != nil {
				return nil, err
			}
			p = &probe{TCPConn: conn.(*net.TCPConn), onAck: onAck, ops: map[uint16]string{}}
			return p, nil
		}))
	mustToken(h.t, c.Connect())
	h.t.Cleanup(func() { c.Disconnect(0) })
	return c, p
}

// waitTerminal waits until every op of opIDs is stored and terminal, and
// returns how many are.
func (h *harness) waitTerminal(opIDs []string) int {
	h.t.Helper()
	left := slices.Clone(opIDs)
	deadline := time.Now().Add(burstWait)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for len(left) > 0 && time.Now().Before(deadline) {
		left = slices.DeleteFunc(left, func(opID string) bool {
			op, found, err := h.d.store.Lookup(opID)
			return err == nil && found && op.Status.Terminal()
		})
		if len(left) > 0 {
			<-tick.C
		}
	}
	return len(opIDs) - len(left)
}

// The burst: an MQTT 3.1.1 client, which Receive Maximum cannot
// hold back, publishes 20,000 commands at once, far above the broker's
// per-client cap, the dispatcher's queue and the 8,192 after which mochi
// used to drop PUBACKed commands. Nothing is lost: every command is
// PUBACKed, found in the store at the moment its PUBACK reaches the
// client, and ends terminal.
func TestBurstFromMQTT311ClientLosesNothing(t *testing.T) {
	const n = 20000
	h := newHarness(t, harnessOptions{})
	h.stopAutomation() // its results channel would fill
	var mu sync.Mutex
	storedAtPuback, missing := 0, []string(nil)
	c, _ := h.probedClient("burst", login{}, func(opID string) {
		_, found, err := h.d.store.Lookup(opID)
		mu.Lock()
		defer mu.Unlock()
		if found && err == nil {
			storedAtPuback++
		} else if len(missing) < 10 {
			missing = append(missing, opID)
		}
	})

	targets := []struct{ device, on, off string }{
		{"hall_light", `"state":"ON"`, `"state":"OFF"`},
		{"plug", `"state":"ON"`, `"state":"OFF"`},
		{"blinds", `"position":40`, `"position":60`},
	}
	opIDs := make([]string, n)
	toks := make([]paho.Token, n)
	for i := range n {
		d := targets[i%len(targets)]
		target := d.on
		if i/len(targets)%2 == 1 {
			target = d.off
		}
		opIDs[i] = fmt.Sprintf("burst-%d", i)
		toks[i] = c.Publish("hearth/"+d.device+"/set", 1, false, fmt.Sprintf(`{%s,"op_id":%q}`, target, opIDs[i]))
	}
	pubacked := 0
	deadline := time.Now().Add(burstWait)
	for i, tok := range toks {
		if !tok.WaitTimeout(time.Until(deadline)) {
			t.Fatalf("%d of %d commands PUBACKed before the deadline", i, n)
		}
		if tok.Error() == nil {
			pubacked++
		}
	}
	terminal := h.waitTerminal(opIDs)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("sent %d, PUBACKed %d, stored at its PUBACK %d, terminal %d", n, pubacked, storedAtPuback, terminal)
	if pubacked != n || storedAtPuback != n || terminal != n {
		t.Errorf("sent %d, PUBACKed %d, stored at its PUBACK %d (not: %v), terminal %d; want all %d",
			n, pubacked, storedAtPuback, missing, terminal, n)
	}
}

// An MQTT 5 client's burst alike, held back by the broker's Receive
// Maximum as much as by the intake: every command is stored when its
// PUBACK arrives, and ends terminal.
func TestBurstFromMQTT5ClientLosesNothing(t *testing.T) {
	const n = 3000
	h := newHarness(t, harnessOptions{})
	h.stopAutomation()
	c := h.v5ClientWith("burst5", login{}, burstWait)
	var wg sync.WaitGroup
	var mu sync.Mutex
	pubacked, stored := 0, 0
	opIDs := make([]string, n)
	for i := range n {
		opIDs[i] = fmt.Sprintf("burst5-%d", i)
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), burstWait)
			defer cancel()
			payload := fmt.Sprintf(`{"state":%q,"op_id":%q}`, []string{"ON", "OFF"}[i%2], opIDs[i])
			_, err := c.c.Publish(ctx, &paho5.Publish{Topic: "hearth/hall_light/set", QoS: 1, Payload: []byte(payload)})
			if err != nil {
				return
			}
			_, found, _ := h.d.store.Lookup(opIDs[i])
			mu.Lock()
			pubacked++
			if found {
				stored++
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	terminal := h.waitTerminal(opIDs)
	t.Logf("sent %d, PUBACKed %d, stored at its PUBACK %d, terminal %d", n, pubacked, stored, terminal)
	if pubacked != n || stored != n || terminal != n {
		t.Errorf("sent %d, PUBACKed %d, stored at its PUBACK %d, terminal %d; want all %d", n, pubacked, stored, terminal, n)
	}
}

// PUBACKs reach a client in the order it sent its commands (MQTT 5.0
// §4.6), accepted and rejected ones mixed: an unknown device, a relative
// command, a repeated op_id, a retained command.
func TestPubacksFollowTheCommandOrder(t *testing.T) {
	const n = 300
	h := newHarness(t, harnessOptions{})
	h.stopAutomation() // its results channel would fill
	c, p := h.probedClient("orderly", login{}, nil)
	toks := make([]paho.Token, n)
	for i := range n {
		device, payload, retained := "hall_light", fmt.Sprintf(`{"state":"ON","op_id":"o-%d"}`, i), false
		switch i % 7 {
		case 1:
			device = "nowhere"
		case 2:
			payload = fmt.Sprintf(`{"state":"TOGGLE","op_id":"o-%d"}`, i)
		case 3:
			payload = fmt.Sprintf(`{"state":"ON","op_id":"o-%d"}`, i-3) // a repeat
		case 4:
			retained = true
		}
		toks[i] = c.Publish("hearth/"+device+"/set", 1, retained, payload)
	}
	for _, tok := range toks {
		mustToken(t, tok)
	}
	sent, acked := p.orders()
	if len(sent) != n || !slices.Equal(sent, acked) {
		t.Errorf("PUBACKs in the order %v…; want the order sent %v…", acked[:min(len(acked), 20)], sent[:min(len(sent), 20)])
	}
}

// A QoS 2 command is received (PUBREC) once stored, and its exchange
// completes, from an MQTT 5 and a 3.1.1 client.
func TestQoS2CommandIsStoredWhenReceived(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	v5 := h.v5ClientWith("qos2-v5", login{}, eventWait)
	pr, err := v5.c.Publish(ctxFor(t), &paho5.Publish{Topic: "hearth/plug/set", QoS: 2, Payload: []byte(`{"state":"ON","op_id":"q2-v5"}`)})
	if err != nil || pr.ReasonCode != 0 {
		t.Fatalf("QoS 2 command: %+v, %v; want completed", pr, err)
	}
	if _, found, _ := h.d.store.Lookup("q2-v5"); !found {
		t.Error("q2-v5 not stored when its exchange completed")
	}
	storedAtPubrec := make(chan bool, 1)
	c, _ := h.probedClient("qos2-v3", login{}, func(opID string) {
		_, found, _ := h.d.store.Lookup(opID)
		storedAtPubrec <- found
	})
	mustToken(t, c.Publish("hearth/hall_light/set", 2, false, `{"state":"ON","op_id":"q2-v3"}`))
	if !<-storedAtPubrec {
		t.Error("q2-v3 not stored at its PUBREC")
	}
	for _, opID := range []string{"q2-v5", "q2-v3"} {
		if r := h.final(opID); r.Status != devices.Succeeded {
			t.Errorf("%s: %s (%s); want succeeded", opID, r.Status, r.Reason)
		}
	}
}

// A command that cannot be stored gets no PUBACK, which would say it was:
// with the store gone, an MQTT 5 publisher gets PUBACK 0x80 and a 3.1.1
// publisher, which MQTT 3.1.1 cannot tell, loses its connection.
func TestCommandNotStoredIsNotPubacked(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	v5 := h.v5ClientWith("v5", login{}, eventWait)
	lost := make(chan struct{})
	v3 := paho.NewClient(paho.NewClientOptions().AddBroker(h.d.brokerURL).SetClientID("v3").SetProtocolVersion(4).
		SetAutoReconnect(false).SetConnectionLostHandler(func(paho.Client, error) { close(lost) }))
	mustToken(t, v3.Connect())
	defer v3.Disconnect(0)
	if err := h.d.store.Close(); err != nil {
		t.Fatal(err)
	}

	pr, _ := v5.c.Publish(ctxFor(t), &paho5.Publish{Topic: "hearth/hall_light/set", QoS: 1, Payload: []byte(`{"state":"ON"}`)})
	if pr == nil || pr.ReasonCode != 0x80 {
		t.Errorf("an MQTT 5 command the store could not take: %+v; want PUBACK 0x80", pr)
	}
	tok := v3.Publish("hearth/plug/set", 1, false, `{"state":"ON"}`)
	waitClosed(t, lost, "the 3.1.1 publisher to lose its connection")
	if tok.WaitTimeout(eventWait) && tok.Error() == nil {
		t.Error("a 3.1.1 command the store could not take was PUBACKed")
	}
}

// With the embedded broker a command reaches Hearth alone: another client
// subscribed to the command topics receives none (the results are the
// public feed).
func TestCommandsAreNotRoutedToOtherSubscribers(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	got := make(chan string, 16)
	spy := paho.NewClient(paho.NewClientOptions().AddBroker(h.d.brokerURL).SetClientID("spy").SetOrderMatters(true))
	mustToken(t, spy.Connect())
	defer spy.Disconnect(0)
	mustToken(t, spy.Subscribe("hearth/+/set", 1, func(_ paho.Client, m paho.Message) { got <- m.Topic() }))
	mustToken(t, spy.Subscribe("hearth/+/result", 1, func(_ paho.Client, m paho.Message) { got <- m.Topic() }))
	h.publish("hall_light", `{"state":"ON","op_id":"private"}`)
	h.result("private")
	// The broker writes to one subscriber in order: the command, routed,
	// would have come before its result.
	if topic := <-got; topic != "hearth/hall_light/result" {
		t.Errorf("the spy received %s first; want the result, never the command", topic)
	}
}

// A principal's command for a device it may not command is still refused
// (rejected, unauthorized), and its publisher still gets its PUBACK: the
// command is answered. A bridge account's command is still refused by the
// broker itself.
func TestUnauthorizedPrincipalIsStillRefused(t *testing.T) {
	h := newHarness(t, harnessOptions{config: mqttPrincipalsConfig, simLogin: bridgeLogin, automationLogin: phoneLogin})
	tablet, _ := h.probedClient("tablet-client", tabletLogin, nil)
	mustToken(t, tablet.Publish("hearth/hall_light/set", 1, false, `{"state":"ON","op_id":"not-yours"}`))
	if r := h.result("not-yours"); r.Status != devices.Rejected || r.Reason != devices.ReasonUnauthorized {
		t.Errorf("the tablet's command for the hall light: %s/%s; want rejected/unauthorized", r.Status, r.Reason)
	}
	mustToken(t, tablet.Publish("hearth/front_door/set", 1, false, `{"state":"LOCK","op_id":"yours"}`))
	h.expectPrincipal("yours", "wall_tablet")

	bridge, _ := h.probedClient("bridge-client", bridgeLogin, nil)
	mustToken(t, bridge.Publish("hearth/front_door/set", 1, false, `{"state":"UNLOCK","op_id":"from-bridge"}`))
	mustToken(t, tablet.Publish("hearth/front_door/set", 1, false, `{"state":"LOCK","op_id":"after-bridge"}`))
	h.result("after-bridge")
	if _, found, _ := h.d.store.Lookup("from-bridge"); found {
		t.Error("the bridge's command was stored; want it refused by the broker")
	}
}

// Commands the broker had read from a client that then left are carried
// out all the same (the client never hears of them), and hearthd goes on
// serving other clients.
func TestCommandsOfAClientThatLeftAreCarriedOut(t *testing.T) {
	const n = 500
	h := newHarness(t, harnessOptions{})
	h.stopAutomation() // its results channel would fill
	c, _ := h.probedClient("leaver", login{}, nil)
	opIDs := make([]string, n)
	for i := range n {
		opIDs[i] = fmt.Sprintf("left-%d", i)
		c.Publish("hearth/plug/set", 1, false, fmt.Sprintf(`{"state":%q,"op_id":%q}`, []string{"ON", "OFF"}[i%2], opIDs[i]))
	}
	c.Disconnect(0)
	next, _ := h.probedClient("next", login{}, nil)
	mustToken(t, next.Publish("hearth/hall_light/set", 1, false, `{"state":"ON","op_id":"after"}`))
	h.waitTerminal([]string{"after"})
	if op, _, _ := h.d.store.Lookup("after"); op.Status != devices.Succeeded {
		t.Errorf("a command after the client left: %s (%s); want succeeded", op.Status, op.Reason)
	}
	var stored []string
	for _, opID := range opIDs {
		if _, found, _ := h.d.store.Lookup(opID); found {
			stored = append(stored, opID)
		}
	}
	if got := h.waitTerminal(stored); got != len(stored) {
		t.Errorf("%d of the %d stored commands of the client that left are terminal; want all", got, len(stored))
	}
	t.Logf("%d of %d commands reached the store before the client left", len(stored), n)
}

// The intake may be handed a command before the dispatcher runs (the
// embedded broker starts first): the command waits, and is taken once the
// dispatcher is there; at a stop before that, it is dropped, never
// stored.
func TestIntakeWaitsForTheDispatcher(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	early := newIntake("hearth", testLogger(t))
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		early.command(broker.Command{Topic: "hearth/hall_light/set", Payload: []byte(`{"state":"ON","op_id":"early"}`), QoS: 1})
	}()
	select {
	case <-returned:
		t.Fatal("the intake returned before the dispatcher was there")
	default:
	}
	if _, found, _ := h.d.store.Lookup("early"); found {
		t.Fatal("early stored before the dispatcher was there")
	}
	early.open(h.d.disp)
	waitClosed(t, returned, "the early command to be taken")
	if r := h.final("early"); r.Status != devices.Succeeded {
		t.Errorf("early: %s (%s); want succeeded", r.Status, r.Reason)
	}

	late := newIntake("hearth", testLogger(t))
	returned = make(chan struct{})
	go func() {
		defer close(returned)
		late.command(broker.Command{Topic: "hearth/hall_light/set", Payload: []byte(`{"state":"OFF","op_id":"dropped"}`), QoS: 1})
	}()
	late.stop()
	waitClosed(t, returned, "the intake to let go of the command at stop")
	h.publish("hall_light", `{"state":"OFF","op_id":"then"}`)
	h.result("then")
	if _, found, _ := h.d.store.Lookup("dropped"); found {
		t.Error("a command the intake dropped at stop was stored")
	}
}

// v5ClientWith is v5Client with a longer packet timeout, for bursts.
func (h *harness) v5ClientWith(id string, l login, timeout time.Duration) v5Publisher {
	h.t.Helper()
	u, err := url.Parse(h.d.brokerURL)
	if err != nil {
		h.t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		h.t.Fatal(err)
	}
	c := paho5.NewClient(paho5.ClientConfig{Conn: conn, PacketTimeout: timeout})
	h.t.Cleanup(func() {
		c.Disconnect(&paho5.Disconnect{})
		conn.Close()
		<-c.Done()
	})
	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	defer cancel()
	if _, err := c.Connect(ctx, &paho5.Connect{ClientID: id, KeepAlive: 30, CleanStart: true,
		UsernameFlag: l.username != "", Username: l.username, PasswordFlag: l.password != "", Password: []byte(l.password)}); err != nil {
		h.t.Fatalf("%s: connect: %v", id, err)
	}
	return v5Publisher{c}
}
