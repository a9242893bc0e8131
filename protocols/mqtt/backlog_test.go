package mqtt

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/packets"
	"github.com/eclipse/paho.golang/paho"
	mochi "github.com/mochi-mqtt/server/v2"
	mochipk "github.com/mochi-mqtt/server/v2/packets"
)

// testMarker is the session marker topic of these tests.
const testMarker = "hearth-test/session"

// backlogOver is closed when the current connection's backlog is over.
func (c *Conn) backlogOver() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.backlog.done
}

// waitBacklogOver waits until the current connection's marker is back.
func (r *running) waitBacklogOver(t *testing.T) {
	t.Helper()
	select {
	case <-r.backlogOver():
	case <-time.After(deadline):
		t.Fatalf("the session's backlog was not over within %v", deadline)
	}
}

// Message.Backlog, message by message, as route decides it: on a manual-ack
// subscription a message is backlog while its connection's backlog is not
// over, or when it carries DUP; on any other subscription never; the
// marker with this connection's token ends the backlog and reaches no
// handler, and one with another token (an earlier connection's, or
// anyone's) ends nothing.
func TestRouteFlagsBacklog(t *testing.T) {
	type delivery struct {
		topic, payload string
		dup            bool
	}
	type got struct {
		handler string
		backlog bool
	}
	tests := []struct {
		name     string
		over     bool // the backlog is over before the deliveries
		delivers []delivery
		want     []got
		wantOver bool
	}{
		{"a command while the backlog is pending", false,
			[]delivery{{"cmd/lamp/set", "ON", false}},
			[]got{{"cmd", true}}, false},
		{"a command after the backlog", true,
			[]delivery{{"cmd/lamp/set", "ON", false}},
			[]got{{"cmd", false}}, true},
		{"a command flagged DUP after the backlog", true,
			[]delivery{{"cmd/lamp/set", "ON", true}},
			[]got{{"cmd", true}}, true},
		{"a report while the backlog is pending", false,
			[]delivery{{"state/lamp", "ON", false}},
			[]got{{"state", false}}, false},
		{"the marker ends the backlog between two commands", false,
			[]delivery{{"cmd/a/set", "1", false}, {testMarker, "token", false}, {"cmd/b/set", "2", false}},
			[]got{{"cmd", true}, {"cmd", false}}, true},
		{"another connection's marker ends nothing", false,
			[]delivery{{testMarker, "an earlier token", false}, {"cmd/b/set", "2", false}},
			[]got{{"cmd", true}}, false},
		{"a marker flagged DUP ends the backlog", false,
			[]delivery{{testMarker, "token", true}, {"cmd/b/set", "2", false}},
			[]got{{"cmd", false}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := New(Options{ClientID: "hearth-route", SessionExpiry: time.Minute, SessionMarker: testMarker})
			var gots []got
			record := func(name string) Handler {
				return func(m Message) { gots = append(gots, got{name, m.Backlog}) }
			}
			c.subs = []subscription{
				{filter: "cmd/#", qos: 1, handler: record("cmd"), manualAck: true},
				{filter: "state/#", qos: 1, handler: record("state")},
				// A wildcard that covers the marker topic does not get it.
				{filter: "#", qos: 0, handler: func(m Message) {
					if m.Topic == testMarker {
						t.Errorf("the marker reached a handler")
					}
				}},
			}
			bl := newBacklog()
			bl.token = "token"
			if tt.over {
				bl.end()
			}
			route := c.route(paho.NewClient(paho.ClientConfig{}), bl)
			for _, d := range tt.delivers {
				p := paho.PublishFromPacketPublish(&packets.Publish{Topic: d.topic, Payload: []byte(d.payload), QoS: 1, Duplicate: d.dup, Properties: &packets.Properties{}})
				if _, err := route(paho.PublishReceived{Packet: p}); err != nil {
					t.Fatal(err)
				}
			}
			if fmt.Sprint(gots) != fmt.Sprint(tt.want) {
				t.Errorf("handlers got (handler, Backlog) %v, want %v", gots, tt.want)
			}
			if over := bl.over.Load(); over != tt.wantOver {
				t.Errorf("backlog over = %v, want %v", over, tt.wantOver)
			}
		})
	}
}

// The commands a kept session held while the Conn was away arrive with
// Backlog set, every one of them, and the marker comes back only after
// the last; a command published after that is live. The first connection
// of a session, which resumes nothing, has no backlog.
func TestConnFlagsTheSessionsBacklogUntilItsMarkerComesBack(t *testing.T) {
	b := startBroker(t)
	const id = "hearth-backlog"
	logs := &recorder{}
	opts := Options{ClientID: id, SessionExpiry: 5 * time.Minute, SessionMarker: testMarker, Logger: slog.New(logs)}
	cmds := newInbox()
	subscribe := func(c *Conn) {
		if err := c.SubscribeManualAck(context.Background(), "cmd/#", 1, cmds.acking); err != nil {
			t.Fatal(err)
		}
	}
	first := runConn(t, b.url(), opts, subscribe)
	first.waitUp(t)
	pub := newClient(t, b.url())
	pub.publish(t, "cmd/first/set", false, "live")
	if m := cmds.next(t); m.Backlog {
		t.Errorf("a live command on a connection that resumed no session: Backlog true, want false")
	}
	first.stop(t)
	b.ev.waitDisconnected(t, id)

	const n = 50
	for i := range n {
		pub.publish(t, fmt.Sprintf("cmd/dev%02d/set", i), false, "ON")
	}
	pub.barrier(t) // fanned out into the session before the Conn is back
	second := runConn(t, b.url(), opts, subscribe)
	second.waitUp(t)
	seen := map[string]bool{}
	for range n {
		m := cmds.next(t)
		if !m.Backlog {
			t.Errorf("%s, kept while the Conn was away: Backlog false, want true", m.Topic)
		}
		seen[m.Topic] = true
	}
	if len(seen) != n {
		t.Errorf("the backlog brought %d distinct commands, want %d", len(seen), n)
	}
	second.waitBacklogOver(t)
	pub.publish(t, "cmd/live/set", false, "ON")
	if m := cmds.next(t); m.Topic != "cmd/live/set" || m.Backlog {
		t.Errorf("the command published after the backlog: {%s backlog %v}, want {cmd/live/set backlog false}", m.Topic, m.Backlog)
	}
	var done []logRecord
	logs.mu.Lock()
	for _, l := range logs.records {
		if l.msg == "mqtt: the session's backlog is delivered" {
			done = append(done, l)
		}
	}
	logs.mu.Unlock()
	if len(done) != 1 || done[0].attrs["messages"] != fmt.Sprint(n) {
		t.Errorf("backlog records %+v, want one with messages=%d", done, n)
	}
	if w := logs.warnings(); len(w) != 0 {
		t.Errorf("warnings %+v, want none", w)
	}
}

// onPublishMarker makes b's broker run f on every session marker Hearth
// publishes (its n-th, from 1): a packets.Code refuses it, CodeSuccessIgnore
// acknowledges it and delivers it to nobody, as a full queue would drop it.
func onPublishMarker(b *broker, f func(n int64) error) {
	var count atomic.Int64
	b.ev.setOnPublish(func(_ *mochi.Client, pk mochipk.Packet) error {
		if pk.TopicName != testMarker {
			return nil
		}
		return f(count.Add(1))
	})
}

// A marker the broker drops (a full queue) is published again after
// markerResend, with a warning that says what it means, and the backlog
// ends when that one comes back.
func TestConnPublishesTheSessionMarkerAgainWhenItDoesNotComeBack(t *testing.T) {
	b := startBroker(t)
	const id = "hearth-marker-dropped"
	logs := &recorder{}
	opts := Options{ClientID: id, SessionExpiry: 5 * time.Minute, SessionMarker: testMarker, Logger: slog.New(logs)}
	cmds := newInbox()
	subscribe := func(c *Conn) {
		c.markerResend = 50 * time.Millisecond
		c.SubscribeManualAck(context.Background(), "cmd/#", 1, cmds.acking)
	}
	first := runConn(t, b.url(), opts, subscribe)
	first.waitUp(t)
	first.stop(t)
	b.ev.waitDisconnected(t, id)
	pub := newClient(t, b.url())
	pub.publish(t, "cmd/kept/set", false, "ON")
	pub.barrier(t)
	markers := make(chan int64, 8)
	onPublishMarker(b, func(n int64) error {
		markers <- n
		if n == 1 {
			return mochipk.CodeSuccessIgnore
		}
		return nil
	})

	second := runConn(t, b.url(), opts, subscribe)
	second.waitUp(t)
	if m := cmds.next(t); m.Topic != "cmd/kept/set" || !m.Backlog {
		t.Errorf("the kept command: {%s backlog %v}, want {cmd/kept/set backlog true}", m.Topic, m.Backlog)
	}
	waitChan(t, markers, "the first marker")
	waitChan(t, markers, "the marker published again")
	second.waitBacklogOver(t)
	pub.publish(t, "cmd/live/set", false, "ON")
	if m := cmds.next(t); m.Backlog {
		t.Errorf("the command after the second marker came back: Backlog true, want false")
	}
	w := logs.about("session marker has not come back")
	if len(w) != 1 || w[0].attrs["topic"] != testMarker {
		t.Errorf("warnings about the marker: %+v, want one naming topic %s", w, testMarker)
	}
}

// A broker that refuses the marker (its ACL) leaves the backlog without an
// end, said as an error: every command on that connection stays Backlog,
// and a message on the marker topic from anyone else ends nothing.
func TestConnBacklogNeverEndsWhenTheBrokerRefusesTheMarker(t *testing.T) {
	b := startBroker(t)
	const id = "hearth-marker-refused"
	logs := &recorder{}
	opts := Options{ClientID: id, SessionExpiry: 5 * time.Minute, SessionMarker: testMarker, Logger: slog.New(logs)}
	cmds := newInbox()
	subscribe := func(c *Conn) { c.SubscribeManualAck(context.Background(), "cmd/#", 1, cmds.acking) }
	first := runConn(t, b.url(), opts, subscribe)
	first.waitUp(t)
	first.stop(t)
	b.ev.waitDisconnected(t, id)
	pub := newClient(t, b.url())
	pub.publish(t, "cmd/kept/set", false, "ON")
	pub.barrier(t)
	onPublishMarker(b, func(int64) error { return mochipk.ErrNotAuthorized })

	second := runConn(t, b.url(), opts, subscribe)
	second.waitUp(t) // the refusal is no reason to stay offline
	if m := cmds.next(t); !m.Backlog {
		t.Errorf("the kept command: Backlog false, want true")
	}
	e := logs.about("refused Hearth's session marker")
	if len(e) != 1 || e[0].level != slog.LevelError || e[0].attrs["reason_code"] != "0x87" {
		t.Fatalf("records about the refused marker: %+v, want one ERROR with reason_code=0x87", e)
	}
	pub.publish(t, testMarker, false, "forged")
	pub.publish(t, "cmd/later/set", false, "ON")
	if m := cmds.next(t); m.Topic != "cmd/later/set" || !m.Backlog {
		t.Errorf("a command after the refusal: {%s backlog %v}, want {cmd/later/set backlog true}: the end of the backlog is unknown", m.Topic, m.Backlog)
	}
	select {
	case <-second.backlogOver():
		t.Errorf("the backlog ended without this connection's marker")
	default:
	}
	if !strings.Contains(e[0].msg, "let Hearth's account publish to "+testMarker) {
		t.Errorf("the error %q does not say what to allow", e[0].msg)
	}
}

// Without a session expiry nothing is kept, so nothing is backlog, and no
// marker is published.
func TestConnWithoutSessionHasNoBacklog(t *testing.T) {
	b := startBroker(t)
	onPublishMarker(b, func(int64) error {
		t.Errorf("a marker published on a clean session")
		return nil
	})
	cmds := newInbox()
	r := runConn(t, b.url(), Options{SessionMarker: testMarker}, func(c *Conn) {
		c.SubscribeManualAck(context.Background(), "cmd/#", 1, cmds.acking)
	})
	r.waitUp(t)
	newClient(t, b.url()).publish(t, "cmd/lamp/set", false, "ON")
	if m := cmds.next(t); m.Backlog {
		t.Errorf("a command on a clean session: Backlog true, want false")
	}
}
