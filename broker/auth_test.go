package broker

import (
	"context"
	"log/slog"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	paho5 "github.com/eclipse/paho.golang/paho"
	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/jonboulle/clockwork"
)

// The CONNACK codes of a refused login: 0x86 "Bad User Name or Password"
// to MQTT 5 clients, 0x04 "bad user name or password" to 3.1.1 clients.
const (
	badLoginV5 = 0x86
	badLoginV3 = 0x04
	// notAuthorized is MQTT 5's reason code 0x87 "Not authorized".
	notAuthorized = 0x87
)

// stampKey is the stamp's property key in these tests.
const stampKey = "hearth-principal"

// With Users, a CONNECT without a username, without a password, with an
// unknown username or with a wrong password (even a prefix of the right
// one) is refused with 0x86 (MQTT 5) or 0x04 (3.1.1), reported as
// RefusedCredentials and logged at most once a second, naming the username
// and the remote address and never the password; the right password is
// accepted.
func TestUsersRefuseBadLogins(t *testing.T) {
	clock := clockwork.NewFakeClockAt(t0) // frozen: one line, the rest counted
	logs := &recorder{ch: make(chan slog.Record, 64)}
	events := make(chan ConnectEvent, 64)
	b := startBroker(t, Options{Listen: "127.0.0.1:0", Clock: clock, Logger: slog.New(logs),
		LoginFailuresPerMinute: 100, // the failed-login guard is tested on its own
		Users:                  map[string]string{"alice": "alice-secret-1"},
		OnConnect:              func(e ConnectEvent) { events <- e }})
	bad := []struct {
		name string
		cr   creds
	}{
		{"wrong password", creds{"alice", "alice-secret-2"}},
		{"no username", creds{}},
		{"no password", creds{username: "alice"}},
		{"unknown user", creds{"mallory", "alice-secret-1"}},
		{"a prefix of the password", creds{"alice", "alice-secret"}},
	}
	refused := 0
	for _, v5 := range []bool{true, false} {
		want := byte(badLoginV3)
		if v5 {
			want = badLoginV5
		}
		for _, tt := range bad {
			if r := connectAs(b, "c", v5, tt.cr); r.err != nil || r.code != want {
				t.Errorf("%s (MQTT 5: %v): CONNACK %#x, %v; want %#x", tt.name, v5, r.code, r.err, want)
			}
			expectEvent(t, events, ConnectEvent{At: t0, ClientID: "c", Refusal: RefusedCredentials})
			refused++
		}
		r := connectAs(b, "alice", v5, creds{"alice", "alice-secret-1"})
		if !r.accepted() {
			t.Fatalf("the right password (MQTT 5: %v): CONNACK %#x, %v; want accepted", v5, r.code, r.err)
		}
		r.disconnect()
		expectEvent(t, events, ConnectEvent{At: t0, ClientID: "alice", Accepted: true})
	}

	rec := nextRecord(t, logs)
	attrs := recordAttrs(rec)
	if rec.Level != slog.LevelWarn || attrs["username"] != "alice" || attrs["reason"] != "unknown user or wrong password" ||
		!strings.HasPrefix(attrs["remote"], "127.0.0.1:") || attrs["suppressed"] != "0" {
		t.Errorf("first line: %s %q %v; want a warning naming alice, the remote address and the reason", rec.Level, rec.Message, attrs)
	}
	if s := rec.Message + " " + strings.Join(values(attrs), " "); strings.Contains(s, "secret") {
		t.Errorf("the log line shows a password: %s", s)
	}
	logs.none(t)
	b.Close()
	rec = nextRecord(t, logs)
	if got := recordAttrs(rec)["suppressed"]; got != itoa(refused-1) {
		t.Errorf("at Close: suppressed=%s; want %d, the refusals not logged", got, refused-1)
	}
}

// SetUsers disconnects every client the new table does not admit: a
// removed user and a user whose password changed; the others stay. The
// removed user cannot come back, the other can with the new password, and
// an empty table admits everyone again.
func TestSetUsersDisconnectsClientsItNoLongerAdmits(t *testing.T) {
	b := startBroker(t, Options{Listen: "127.0.0.1:0", Users: map[string]string{
		"alice": "alice-password", "bob": "bob-password", "carol": "carol-password"}})
	alice := dialV5(t, b, "alice", creds{"alice", "alice-password"})
	bob := dialV3(t, b, "bob", creds{"bob", "bob-password"})
	carol := dialV5(t, b, "carol", creds{"carol", "carol-password"})

	b.SetUsers(map[string]string{"bob": "bob-new-password", "carol": "carol-password"})
	waitFor(t, alice.gone, "the removed user to be disconnected")
	if got := alice.disconnectReason(); got != notAuthorized {
		t.Errorf("the removed user's DISCONNECT: reason %#x; want %#x", got, notAuthorized)
	}
	waitFor(t, bob.gone, "the user whose password changed to be disconnected")
	carol.subscribe(t, "check")
	carol.publish(t, "check", nil)
	if m := recv(t, carol.msgs); m.Topic != "check" {
		t.Errorf("carol received %s; want her own message: she stays connected", m.Topic)
	}

	if r := connectAs(b, "alice", true, creds{"alice", "alice-password"}); r.err != nil || r.code != badLoginV5 {
		t.Errorf("the removed user again: CONNACK %#x, %v; want %#x", r.code, r.err, badLoginV5)
	}
	if r := connectAs(b, "bob", false, creds{"bob", "bob-password"}); r.err != nil || r.code != badLoginV3 {
		t.Errorf("the old password again: CONNACK %#x, %v; want %#x", r.code, r.err, badLoginV3)
	}
	r := connectAs(b, "bob", false, creds{"bob", "bob-new-password"})
	if !r.accepted() {
		t.Fatalf("the new password: CONNACK %#x, %v; want accepted", r.code, r.err)
	}
	r.disconnect()

	b.SetUsers(nil)
	if r := connect(b, "anyone", true); !r.accepted() {
		t.Fatalf("after SetUsers(nil): CONNACK %#x, %v; want accepted", r.code, r.err)
	} else {
		r.disconnect()
	}
}

// SetUsers on a broker that admitted everyone turns authentication on:
// an anonymous client is disconnected, a client whose username and
// password are in the new table stays, and its messages are stamped from
// then on.
func TestSetUsersTurnsAuthenticationOn(t *testing.T) {
	b := startBroker(t, Options{Listen: "127.0.0.1:0", StampUsernameProperty: stampKey})
	anon := dialV3(t, b, "anon", creds{})
	alice := dialV5(t, b, "alice", creds{"alice", "alice-password"})
	alice.subscribe(t, "own")
	alice.publish(t, "own", nil)
	if m := recv(t, alice.msgs); m.Properties != nil && len(m.Properties.User) > 0 {
		t.Errorf("before SetUsers: properties %v; want none (nobody is verified)", m.Properties.User)
	}

	b.SetUsers(map[string]string{"alice": "alice-password"})
	waitFor(t, anon.gone, "the anonymous client to be disconnected")
	alice.publish(t, "own", nil)
	want := paho5.UserProperties{{Key: stampKey, Value: "alice"}}
	if m := recv(t, alice.msgs); !reflect.DeepEqual(userProps(m), want) {
		t.Errorf("after SetUsers: properties %v; want %v", userProps(m), want)
	}
}

// Every user property named the stamp key that a publisher sets is
// removed, and one with the publisher's username added after its own
// properties: for an MQTT 5 publisher, a 3.1.1 publisher (whose message
// reaches an MQTT 5 subscriber with the stamp) and a will.
func TestStampReplacesForgedPropertiesWithTheUsername(t *testing.T) {
	b := startBroker(t, Options{Listen: "127.0.0.1:0", StampUsernameProperty: stampKey, Users: map[string]string{
		"sub": "sub-password", "alice": "alice-password", "carol": "carol-password", "dave": "dave-password"}})
	sub := dialV5(t, b, "sub", creds{"sub", "sub-password"})
	sub.subscribe(t, "cmd/#")
	forged := paho5.UserProperties{{Key: stampKey, Value: "mallory"}, {Key: "note", Value: "kept"}, {Key: stampKey, Value: "eve"}}

	alice := dialV5(t, b, "alice", creds{"alice", "alice-password"})
	alice.publish(t, "cmd/a", forged)
	want := paho5.UserProperties{{Key: "note", Value: "kept"}, {Key: stampKey, Value: "alice"}}
	if m := recv(t, sub.msgs); !reflect.DeepEqual(userProps(m), want) {
		t.Errorf("from MQTT 5: properties %v; want %v", userProps(m), want)
	}

	carol := dialV3(t, b, "carol", creds{"carol", "carol-password"})
	mustWait(t, carol.c.Publish("cmd/c", 1, false, "v3"))
	want = paho5.UserProperties{{Key: stampKey, Value: "carol"}}
	if m := recv(t, sub.msgs); m.Topic != "cmd/c" || !reflect.DeepEqual(userProps(m), want) {
		t.Errorf("from MQTT 3.1.1: %s with properties %v; want cmd/c with %v", m.Topic, userProps(m), want)
	}

	dave := dialV5With(t, b, "dave", creds{"dave", "dave-password"}, &paho5.WillMessage{Topic: "cmd/will", QoS: 1, Payload: []byte("gone")},
		&paho5.WillProperties{User: forged})
	dave.conn.Close() // an unclean loss: the broker publishes the will
	want = paho5.UserProperties{{Key: "note", Value: "kept"}, {Key: stampKey, Value: "dave"}}
	if m := recv(t, sub.msgs); m.Topic != "cmd/will" || !reflect.DeepEqual(userProps(m), want) {
		t.Errorf("the will: %s with properties %v; want cmd/will with %v", m.Topic, userProps(m), want)
	}
}

// Without Users nobody is verified: forged stamps are still removed, and
// none is added, even for a client that gave a username.
func TestNoStampWithoutUsers(t *testing.T) {
	b := startBroker(t, Options{Listen: "127.0.0.1:0", StampUsernameProperty: stampKey})
	sub := dialV5(t, b, "sub", creds{})
	sub.subscribe(t, "cmd/#")
	for _, cr := range []creds{{}, {"alice", "anything"}} {
		pub := dialV5(t, b, "pub-"+cr.username, cr)
		pub.publish(t, "cmd/x", paho5.UserProperties{{Key: stampKey, Value: "alice"}, {Key: "note", Value: "kept"}})
		want := paho5.UserProperties{{Key: "note", Value: "kept"}}
		if m := recv(t, sub.msgs); !reflect.DeepEqual(userProps(m), want) {
			t.Errorf("username %q: properties %v; want %v", cr.username, userProps(m), want)
		}
	}
}

// DenyPublish keeps a user off topics: a denied QoS 1 publish gets PUBACK
// 0x87 over MQTT 5 and a plain PUBACK over 3.1.1 (whose connection
// stays), and reaches nobody; other users and topics are untouched; a
// CONNECT whose will is on a denied topic is refused with 0x87.
func TestDenyPublishKeepsAUserOffTopics(t *testing.T) {
	deny := func(username, topic string) bool {
		return username == "alice" && strings.HasPrefix(topic, "zigbee2mqtt/")
	}
	b := startBroker(t, Options{Listen: "127.0.0.1:0", DenyPublish: deny, Users: map[string]string{
		"alice": "alice-password", "bridge": "bridge-password"}})
	bridge := dialV5(t, b, "bridge", creds{"bridge", "bridge-password"})
	bridge.subscribe(t, "#")

	alice := dialV5(t, b, "alice", creds{"alice", "alice-password"})
	pr, err := alice.c.Publish(ctxFor(t), &paho5.Publish{Topic: "zigbee2mqtt/front_door/set", QoS: 1, Payload: []byte(`{"state":"UNLOCK"}`)})
	if pr == nil || pr.ReasonCode != notAuthorized {
		t.Errorf("denied publish over MQTT 5: %+v, %v; want PUBACK %#x", pr, err, notAuthorized)
	}
	alice3 := dialV3(t, b, "alice3", creds{"alice", "alice-password"})
	mustWait(t, alice3.c.Publish("zigbee2mqtt/front_door/set", 1, false, `{"state":"UNLOCK"}`))
	mustWait(t, alice3.c.Publish("zigbee2mqtt/front_door/set", 0, true, `{"state":"UNLOCK"}`))
	mustWait(t, alice3.c.Publish("hearth/front_door/set", 1, false, "UNLOCK"))
	// A client's messages reach a subscriber in order: the first is the
	// one allowed.
	if m := recv(t, bridge.msgs); m.Topic != "hearth/front_door/set" {
		t.Errorf("the bridge received %s; want hearth/front_door/set (denied publishes reach nobody)", m.Topic)
	}
	if _, ok := b.srv.Topics.Retained.Get("zigbee2mqtt/front_door/set"); ok {
		t.Error("the denied retained publish is retained; want it dropped")
	}
	bridge.publish(t, "zigbee2mqtt/front_door", nil)
	if m := recv(t, bridge.msgs); m.Topic != "zigbee2mqtt/front_door" {
		t.Errorf("the bridge received %s; want its own zigbee2mqtt/front_door", m.Topic)
	}

	_, ca, err := tryV5(t, b, "alice-will", creds{"alice", "alice-password"}, &paho5.WillMessage{Topic: "zigbee2mqtt/front_door/set", QoS: 1, Payload: []byte("UNLOCK")}, nil)
	if ca == nil || ca.ReasonCode != notAuthorized {
		t.Errorf("a will on a denied topic: CONNACK %+v, %v; want %#x", ca, err, notAuthorized)
	}
}

// v5Client is a connected paho.golang (MQTT 5) client.
type v5Client struct {
	c    *paho5.Client
	conn net.Conn
	msgs chan *paho5.Publish
	gone chan struct{} // closed when the connection ends

	mu     sync.Mutex
	reason byte // of the broker's DISCONNECT
}

func dialV5(t *testing.T, b *Broker, id string, cr creds) *v5Client {
	t.Helper()
	return dialV5With(t, b, id, cr, nil, nil)
}

func dialV5With(t *testing.T, b *Broker, id string, cr creds, will *paho5.WillMessage, willProps *paho5.WillProperties) *v5Client {
	t.Helper()
	c, ca, err := tryV5(t, b, id, cr, will, willProps)
	if err != nil || ca.ReasonCode != 0 {
		t.Fatalf("%s: connect: %v", id, err)
	}
	return c
}

// tryV5 connects an MQTT 5 client; the client is closed at the end of the
// test.
func tryV5(t *testing.T, b *Broker, id string, cr creds, will *paho5.WillMessage, willProps *paho5.WillProperties) (*v5Client, *paho5.Connack, error) {
	t.Helper()
	conn, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	cl := &v5Client{conn: conn, msgs: make(chan *paho5.Publish, 64), gone: make(chan struct{})}
	var once sync.Once
	end := func() { once.Do(func() { close(cl.gone) }) }
	cl.c = paho5.NewClient(paho5.ClientConfig{
		Conn: conn,
		OnPublishReceived: []func(paho5.PublishReceived) (bool, error){func(pr paho5.PublishReceived) (bool, error) {
			cl.msgs <- pr.Packet
			return true, nil
		}},
		OnServerDisconnect: func(d *paho5.Disconnect) {
			cl.mu.Lock()
			cl.reason = d.ReasonCode
			cl.mu.Unlock()
			end()
		},
		OnClientError: func(error) { end() },
	})
	t.Cleanup(func() {
		cl.c.Disconnect(&paho5.Disconnect{})
		conn.Close()
		<-cl.c.Done()
	})
	ca, err := cl.c.Connect(ctxFor(t), &paho5.Connect{ClientID: id, KeepAlive: 30, CleanStart: true,
		UsernameFlag: cr.username != "", Username: cr.username,
		PasswordFlag: cr.password != "", Password: []byte(cr.password),
		WillMessage: will, WillProperties: willProps})
	return cl, ca, err
}

func (c *v5Client) disconnectReason() byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reason
}

func (c *v5Client) subscribe(t *testing.T, filter string) {
	t.Helper()
	if _, err := c.c.Subscribe(ctxFor(t), &paho5.Subscribe{Subscriptions: []paho5.SubscribeOptions{{Topic: filter, QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
}

// publish publishes at QoS 1 with user properties props.
func (c *v5Client) publish(t *testing.T, topic string, props paho5.UserProperties) {
	t.Helper()
	if _, err := c.c.Publish(ctxFor(t), &paho5.Publish{Topic: topic, QoS: 1, Payload: []byte("x"),
		Properties: &paho5.PublishProperties{User: props}}); err != nil {
		t.Fatal(err)
	}
}

// v3Client is a connected paho.mqtt.golang (MQTT 3.1.1) client.
type v3Client struct {
	c    paho.Client
	gone chan struct{} // closed when the connection is lost
}

func dialV3(t *testing.T, b *Broker, id string, cr creds) *v3Client {
	t.Helper()
	cl := &v3Client{gone: make(chan struct{})}
	o := paho.NewClientOptions().AddBroker(b.URL()).SetClientID(id).SetProtocolVersion(4).
		SetAutoReconnect(false).SetUsername(cr.username).SetPassword(cr.password).
		SetConnectionLostHandler(func(paho.Client, error) { close(cl.gone) })
	cl.c = paho.NewClient(o)
	mustWait(t, cl.c.Connect())
	t.Cleanup(func() { cl.c.Disconnect(0) })
	return cl
}

func recv(t *testing.T, ch <-chan *paho5.Publish) *paho5.Publish {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(eventWait):
		t.Fatal("timed out waiting for a message")
		panic("unreachable")
	}
}

func userProps(m *paho5.Publish) paho5.UserProperties {
	if m.Properties == nil {
		return nil
	}
	return m.Properties.User
}

func mustWait(t *testing.T, tok paho.Token) {
	t.Helper()
	if !tok.WaitTimeout(eventWait) || tok.Error() != nil {
		t.Fatalf("mqtt: %v", tok.Error())
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	t.Cleanup(cancel)
	return ctx
}

func nextRecord(t *testing.T, r *recorder) slog.Record {
	t.Helper()
	select {
	case rec := <-r.ch:
		return rec
	case <-time.After(eventWait):
		t.Fatal("nothing logged")
		panic("unreachable")
	}
}

func recordAttrs(rec slog.Record) map[string]string {
	m := map[string]string{}
	rec.Attrs(func(a slog.Attr) bool { m[a.Key] = a.Value.String(); return true })
	return m
}

func values(m map[string]string) []string {
	var v []string
	for _, s := range m {
		v = append(v, s)
	}
	return v
}

func itoa(n int) string { return slog.IntValue(n).String() }

// A client ID reserved to a user cannot be taken by another: its CONNECT
// is refused with 0x87 and the owner stays connected.
func TestClientIDOwnersKeepOthersOffAReservedClientID(t *testing.T) {
	b := startBroker(t, Options{Listen: "127.0.0.1:0", ClientIDOwners: map[string]string{"hearthd-1": "hearthd"},
		Users: map[string]string{"hearthd": "internal-password", "bridge": "bridge-password"}})
	owner := dialV5(t, b, "hearthd-1", creds{"hearthd", "internal-password"})
	owner.subscribe(t, "own")
	for _, v5 := range []bool{true, false} {
		want := byte(0x05)
		if v5 {
			want = notAuthorized
		}
		if r := connectAs(b, "hearthd-1", v5, creds{"bridge", "bridge-password"}); r.err != nil || r.code != want {
			t.Errorf("another user with the reserved client ID (MQTT 5: %v): CONNACK %#x, %v; want %#x", v5, r.code, r.err, want)
		}
	}
	owner.publish(t, "own", nil)
	if m := recv(t, owner.msgs); m.Topic != "own" {
		t.Errorf("the owner received %s; want its own message: it stays connected", m.Topic)
	}
	select {
	case <-owner.gone:
		t.Error("the owner was disconnected")
	default:
	}
}

// Whatever ClientIDOwners says, a CONNECT with the client ID of a
// connected client verified as another user is refused with 0x87 (0x05 to
// 3.1.1), reported as RefusedNotAuthorized and logged, and that client
// stays connected; the same user may take its own session over, and an
// ID nobody connected with is free.
func TestNoUserTakesOverAnotherUsersConnectedClient(t *testing.T) {
	clock := clockwork.NewFakeClockAt(t0)
	logs := &recorder{ch: make(chan slog.Record, 64)}
	events := make(chan ConnectEvent, 64)
	b := startBroker(t, Options{Listen: "127.0.0.1:0", Clock: clock, Logger: slog.New(logs),
		Users:     map[string]string{"bridge": "bridge-password", "tablet": "tablet-password"},
		OnConnect: func(e ConnectEvent) { events <- e }})
	bridge := dialV5(t, b, "zigbee2mqtt-bridge", creds{"bridge", "bridge-password"})
	bridge.subscribe(t, "own")
	expectEvent(t, events, ConnectEvent{ClientID: "zigbee2mqtt-bridge", Accepted: true})
	for _, v5 := range []bool{true, false} {
		want := byte(0x05)
		if v5 {
			want = notAuthorized
		}
		if r := connectAs(b, "zigbee2mqtt-bridge", v5, creds{"tablet", "tablet-password"}); r.err != nil || r.code != want {
			t.Errorf("another user with the bridge's client ID (MQTT 5: %v): CONNACK %#x, %v; want %#x", v5, r.code, r.err, want)
		}
		expectEvent(t, events, ConnectEvent{ClientID: "zigbee2mqtt-bridge", Refusal: RefusedNotAuthorized})
	}
	rec := nextRecord(t, logs)
	if attrs := recordAttrs(rec); rec.Level != slog.LevelWarn || attrs["username"] != "tablet" || attrs["client_id"] != "zigbee2mqtt-bridge" ||
		attrs["what"] != "client ID of a connected client of another user" {
		t.Errorf("logged %s %q %v; want a warning naming the tablet, the client ID and why", rec.Level, rec.Message, attrs)
	}
	bridge.publish(t, "own", nil)
	if m := recv(t, bridge.msgs); m.Topic != "own" {
		t.Errorf("the bridge received %s; want its own message: it stays connected", m.Topic)
	}
	select {
	case <-bridge.gone:
		t.Fatal("the bridge was disconnected")
	default:
	}

	if r := connectAs(b, "tablet-1", true, creds{"tablet", "tablet-password"}); !r.accepted() {
		t.Errorf("the tablet with a free client ID: CONNACK %#x, %v; want accepted", r.code, r.err)
	} else {
		r.disconnect()
	}
	expectEvent(t, events, ConnectEvent{ClientID: "tablet-1", Accepted: true})

	again := connectAs(b, "zigbee2mqtt-bridge", true, creds{"bridge", "bridge-password"})
	if !again.accepted() {
		t.Fatalf("the bridge taking its own session over: CONNACK %#x, %v; want accepted", again.code, again.err)
	}
	defer again.disconnect()
	select {
	case <-bridge.gone:
	case <-time.After(eventWait):
		t.Error("the bridge's old connection is still there after its own user took the session over")
	}
}

// A PUBACK carries none of the PUBLISH's properties: the publisher never
// gets its user properties back, nor the username the broker stamped.
func TestPubackEchoesNoProperties(t *testing.T) {
	b := startBroker(t, Options{Listen: "127.0.0.1:0", StampUsernameProperty: stampKey, Users: map[string]string{"alice": "alice-password"}})
	alice := dialV5(t, b, "alice", creds{"alice", "alice-password"})
	pr, err := alice.c.Publish(ctxFor(t), &paho5.Publish{Topic: "cmd/x", QoS: 1, Payload: []byte("x"),
		Properties: &paho5.PublishProperties{User: paho5.UserProperties{{Key: "note", Value: "mine"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if pr.Properties != nil && len(pr.Properties.User) > 0 {
		t.Errorf("PUBACK user properties %v; want none", pr.Properties.User)
	}
}
