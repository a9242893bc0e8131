package mqtt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/hearthd/hearth/retry"
)

// logRecord is one record a recorder kept: its level, message and
// attributes as text.
type logRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

// recorder is a slog.Handler that keeps every record, for tests that check
// what the Conn logs.
type recorder struct {
	mu      sync.Mutex
	records []logRecord
}

func (r *recorder) Enabled(context.Context, slog.Level) bool { return true }

func (r *recorder) Handle(_ context.Context, rec slog.Record) error {
	l := logRecord{level: rec.Level, msg: rec.Message, attrs: map[string]string{}}
	rec.Attrs(func(a slog.Attr) bool {
		l.attrs[a.Key] = a.Value.String()
		return true
	})
	r.mu.Lock()
	r.records = append(r.records, l)
	r.mu.Unlock()
	return nil
}

func (r *recorder) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorder) WithGroup(string) slog.Handler      { return r }

// warnings returns the records at level WARN or above.
func (r *recorder) warnings() []logRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []logRecord
	for _, l := range r.records {
		if l.level >= slog.LevelWarn {
			out = append(out, l)
		}
	}
	return out
}

// about returns the warnings whose message contains s.
func (r *recorder) about(s string) []logRecord {
	var out []logRecord
	for _, l := range r.warnings() {
		if strings.Contains(l.msg, s) {
			out = append(out, l)
		}
	}
	return out
}

// connected returns the attributes of every "mqtt connected" record.
func (r *recorder) connected() []map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []map[string]string
	for _, l := range r.records {
		if l.msg == "mqtt connected" {
			out = append(out, l.attrs)
		}
	}
	return out
}

// acking is a manual-ack handler that acknowledges every message at once.
func (in inbox) acking(m Message) { in <- m; m.Ack() }

// A clean stop keeps the session: the command published while the Conn
// was away is delivered to the next Conn with the same client ID. A
// bridge's report published meanwhile is not (report subscriptions are
// QoS 0, which the broker does not queue): only the retained state,
// replayed at the subscribe, and live messages after it arrive.
func TestConnSessionKeepsCommandsPublishedWhileAwayButNotReports(t *testing.T) {
	b := startBroker(t)
	const id = "hearth-kept-session"
	opts := Options{ClientID: id, SessionExpiry: 5 * time.Minute}
	subscribe := func(cmds, states inbox) func(c *Conn) {
		return func(c *Conn) {
			if err := c.SubscribeManualAck(context.Background(), "cmd/#", 1, cmds.acking); err != nil {
				t.Fatal(err)
			}
			if err := c.Subscribe(context.Background(), "state/#", 1, states.handler); err != nil {
				t.Fatal(err)
			}
		}
	}
	first := runConn(t, b.url(), opts, subscribe(newInbox(), newInbox()))
	first.waitUp(t)
	first.stop(t)
	b.ev.waitDisconnected(t, id)

	pub := newClient(t, b.url())
	pub.publish(t, "cmd/lamp/set", false, "ON")     // PUBACKed: the broker holds it for the session
	pub.publish(t, "state/lamp", false, "old news") // a live report nobody is there to hear
	pub.publish(t, "state/door", true, "locked")    // the retained state
	pub.barrier(t)

	cmds, states := newInbox(), newInbox()
	second := runConn(t, b.url(), opts, subscribe(cmds, states))
	second.waitUp(t)
	if m := cmds.next(t); m.Topic != "cmd/lamp/set" || string(m.Payload) != "ON" || m.Retained {
		t.Errorf("command after the restart = {%s %q retained %v}, want {cmd/lamp/set \"ON\" retained false}", m.Topic, m.Payload, m.Retained)
	}
	second.barrier(t) // the retained replay is out
	pub.publish(t, "state/marker", false, "live")
	want := []struct {
		topic, payload string
		retained       bool
	}{
		{"state/door", "locked", true},
		{"state/marker", "live", false},
	}
	for i, w := range want {
		m := states.next(t)
		if m.Topic != w.topic || string(m.Payload) != w.payload || m.Retained != w.retained {
			t.Errorf("report %d after the restart = {%s %q retained %v}, want {%s %q retained %v}: a report queued while away must not arrive as live",
				i, m.Topic, m.Payload, m.Retained, w.topic, w.payload, w.retained)
		}
	}
	select {
	case m := <-cmds:
		t.Errorf("a second command {%s %q}, want the one only", m.Topic, m.Payload)
	default:
	}
}

// Without a session expiry every connect starts clean: what is published
// while the Conn is away is lost, as before sessions were kept.
func TestConnWithoutSessionExpiryStartsCleanEveryTime(t *testing.T) {
	b := startBroker(t)
	const id = "hearth-clean-session"
	first := runConn(t, b.url(), Options{ClientID: id}, func(c *Conn) {
		c.SubscribeManualAck(context.Background(), "cmd/#", 1, newInbox().acking)
	})
	first.waitUp(t)
	first.stop(t)
	b.ev.waitDisconnected(t, id)
	pub := newClient(t, b.url())
	pub.publish(t, "cmd/lamp/set", false, "lost")
	pub.barrier(t) // fanned out (to nobody) before the next Conn subscribes

	cmds := newInbox()
	second := runConn(t, b.url(), Options{ClientID: id}, func(c *Conn) {
		c.SubscribeManualAck(context.Background(), "cmd/#", 1, cmds.acking)
	})
	second.waitUp(t)
	pub.publish(t, "cmd/lamp/set", false, "live")
	if m := cmds.next(t); string(m.Payload) != "live" {
		t.Errorf("first command after a clean start = %q, want %q: the clean session kept what came while away", m.Payload, "live")
	}
}

// A command whose PUBACK never reached the broker before the connection
// was cut comes again on the next connection, from the session, with the
// DUP flag set; once acknowledged, the broker has it done.
func TestConnRedeliversAnUnacknowledgedCommandFlaggedDuplicate(t *testing.T) {
	b := startBroker(t)
	link := startProxy(t, b.addr)
	fc := clockwork.NewFakeClock()
	const id = "hearth-redelivery"
	connects := make(chan struct{}, 8)
	cmds := newInbox()
	runConn(t, link.url(), Options{
		ClientID:      id,
		SessionExpiry: 5 * time.Minute,
		Clock:         fc,
		Rand:          ceilingRand{},
		Reconnect:     retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 8 * time.Second},
		OnConnect:     func(context.Context) { connects <- struct{}{} },
	}, func(c *Conn) { c.SubscribeManualAck(context.Background(), "cmd/#", 1, cmds.handler) })
	waitChan(t, connects, "first connect")

	newClient(t, b.url()).publish(t, "cmd/lamp/set", false, `{"state":"ON","op_id":"o1"}`)
	first := cmds.next(t) // not acknowledged
	if first.Duplicate || first.Backlog {
		t.Errorf("first delivery: DUP %v, Backlog %v; want neither (live, on a connection that resumed nothing)", first.Duplicate, first.Backlog)
	}
	link.cut()
	b.ev.waitDisconnected(t, id)
	b.ev.waitEnded(t)
	blockUntil(t, fc, 1, "reconnect backoff")
	fc.Advance(time.Second)
	waitChan(t, connects, "reconnect")

	again := cmds.next(t)
	if again.Topic != first.Topic || string(again.Payload) != string(first.Payload) || !again.Duplicate || !again.Backlog {
		t.Fatalf("redelivery = {%s %q dup %v backlog %v}, want {%s %q dup true backlog true}", again.Topic, again.Payload, again.Duplicate, again.Backlog, first.Topic, first.Payload)
	}
	first.Ack() // on the connection that is gone: does nothing
	again.Ack()
	if ev := waitChan(t, b.ev.completed, "PUBACK of the redelivery"); ev != (qosEvent{client: id, topic: "cmd/lamp/set"}) {
		t.Errorf("PUBACK = %+v, want cmd/lamp/set from %s", ev, id)
	}
}

// Hearth's own publish that a lost connection left unacknowledged is not
// sent again by the client library when the next connection resumes the
// session: the caller got a LostError and is the one to decide (the
// dispatcher resends with the same op_id). The broker sees it once.
func TestConnDoesNotResendItsOwnPublishOnTheResumedSession(t *testing.T) {
	b := startBroker(t)
	link := startProxy(t, b.addr)
	fc := clockwork.NewFakeClock()
	const id = "hearth-no-resend"
	logs := &recorder{}
	seen := make(chan struct{}, 8)
	b.ev.setOnPublish(func(cl *mochi.Client, pk packets.Packet) error {
		if cl.ID == id && pk.TopicName == "bridge/lamp/set" {
			seen <- struct{}{}
		}
		return nil
	})
	connects := make(chan struct{}, 8)
	r := runConn(t, link.url(), Options{
		ClientID:      id,
		SessionExpiry: 5 * time.Minute,
		Clock:         fc,
		Rand:          ceilingRand{},
		Reconnect:     retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 8 * time.Second},
		OnConnect:     func(context.Context) { connects <- struct{}{} },
		Logger:        slog.New(logs),
	}, nil)
	waitChan(t, connects, "first connect")

	link.hold() // the PUBACK will not come back
	done := make(chan error, 1)
	go func() { done <- r.Publish(context.Background(), "bridge/lamp/set", 1, false, []byte("ON")) }()
	waitChan(t, seen, "the publish at the broker")
	link.cut()
	link.open()
	var lost *LostError
	if err := waitChan(t, done, "Publish after the cut"); !errors.As(err, &lost) {
		t.Fatalf("Publish after the cut = %v, want a LostError: its delivery is unknown, and the caller resends it", err)
	}
	b.ev.waitDisconnected(t, id)
	b.ev.waitEnded(t)
	blockUntil(t, fc, 1, "reconnect backoff")
	fc.Advance(time.Second)
	waitChan(t, connects, "reconnect")
	r.barrier(t) // whatever the client sent on the new connection is in

	select {
	case <-seen:
		t.Errorf("the broker received the unacknowledged publish again on the resumed session: it would go out twice")
	default:
	}
	c := logs.connected()
	if len(c) != 2 || c[1]["session_present"] != "true" {
		t.Errorf("connects logged %v, want two, the second with session_present=true (the session was resumed)", c)
	}
}

// A broker whose longest session is shorter than Hearth asks for says so
// in its CONNACK, and the Conn warns once, saying what it means, not at
// every reconnect.
func TestConnWarnsOnceWhenTheBrokerGrantsAShorterSession(t *testing.T) {
	tests := []struct {
		name    string
		max     uint32 // mochi's MaximumSessionExpiryInterval, seconds
		warning string
		granted string
	}{
		{"shorter", 60, "mqtt: the broker keeps Hearth's session for 1m0s, less than the 5m0s asked: commands published while Hearth is away for longer are lost", "1m0s"},
		{"none", 0, "mqtt: the broker keeps no session for Hearth: commands published while Hearth is away (restarting, or cut off) are lost", "0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := startBrokerWith(t, func(c *mochi.Capabilities) { c.MaximumSessionExpiryInterval = tt.max })
			link := startProxy(t, b.addr)
			fc := clockwork.NewFakeClock()
			logs := &recorder{}
			connects := make(chan struct{}, 8)
			id := "hearth-short-" + tt.name
			runConn(t, link.url(), Options{
				ClientID:      id,
				SessionExpiry: 5 * time.Minute,
				Clock:         fc,
				Rand:          ceilingRand{},
				Reconnect:     retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 8 * time.Second},
				OnConnect:     func(context.Context) { connects <- struct{}{} },
				Logger:        slog.New(logs),
			}, nil)
			waitChan(t, connects, "first connect")
			link.cut()
			b.ev.waitDisconnected(t, id)
			b.ev.waitEnded(t)
			blockUntil(t, fc, 1, "reconnect backoff")
			fc.Advance(time.Second)
			waitChan(t, connects, "reconnect")

			got := logs.about("session")
			if len(got) != 1 || got[0].msg != tt.warning || got[0].attrs["asked"] != "5m0s" || got[0].attrs["granted"] != tt.granted {
				t.Fatalf("session warnings over two connects: %+v\nwant one: %q with asked=5m0s granted=%s", got, tt.warning, tt.granted)
			}
			if c := logs.connected(); len(c) != 2 || c[1]["session_expiry"] != tt.granted {
				t.Errorf("connects logged %v, want two with session_expiry=%s", c, tt.granted)
			}
		})
	}
}

// A reconnect that finds no session although one should be there (a broker
// restarted without persistence) is warned about, with how long Hearth was
// away; so is one after an absence longer than the session expiry. The
// first connect of a process, which cannot know, warns of nothing.
func TestConnWarnsWhenAReconnectFindsNoSession(t *testing.T) {
	tests := []struct {
		name    string
		away    time.Duration // on the fake clock, from the loss to the reconnect
		warning string
	}{
		{"within the expiry", time.Second, "mqtt: the broker kept no session for Hearth although it was away for less than the session expiry: commands published meanwhile may be lost; is the broker's persistence on? (a broker restarted without it forgets sessions)"},
		{"beyond the expiry", time.Minute, "mqtt: Hearth was away for longer than its session expiry: commands published after the session ended were lost"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := startBroker(t)
			fc := clockwork.NewFakeClock()
			logs := &recorder{}
			connects := make(chan struct{}, 8)
			runConn(t, b.url(), Options{
				SessionExpiry: 30 * time.Second,
				Clock:         fc,
				Rand:          ceilingRand{},
				Reconnect:     retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 8 * time.Second},
				OnConnect:     func(context.Context) { connects <- struct{}{} },
				Logger:        slog.New(logs),
			}, nil)
			waitChan(t, connects, "first connect")
			if w := logs.about("session"); len(w) != 0 {
				t.Fatalf("the first connect warned %+v, want nothing", w)
			}

			b.stop() // a broker without persistence: its sessions go with it
			blockUntil(t, fc, 1, "reconnect backoff")
			b.start()
			fc.Advance(tt.away)
			waitChan(t, connects, "reconnect to the restarted broker")

			got := logs.about("session")
			wantAway := fmt.Sprint(tt.away)
			if len(got) != 1 || got[0].msg != tt.warning || got[0].attrs["away"] != wantAway || got[0].attrs["session_expiry"] != "30s" {
				t.Fatalf("warnings after the reconnect: %+v\nwant one: %q with away=%s session_expiry=30s", got, tt.warning, wantAway)
			}
		})
	}
}

// A clean stop sends the PUBACK of every message acknowledged before it,
// ahead of its DISCONNECT, although paho writes acknowledgements on a
// ticker: otherwise the broker would keep the last commands in the session
// and deliver them again at the next start.
func TestConnCleanStopSendsEveryAcknowledgementBeforeItsDisconnect(t *testing.T) {
	b := startBroker(t)
	const id = "hearth-ack-then-stop"
	opts := Options{ClientID: id, SessionExpiry: 5 * time.Minute}
	cmds := newInbox()
	r := runConn(t, b.url(), opts, func(c *Conn) {
		c.SubscribeManualAck(context.Background(), "cmd/#", 1, cmds.handler)
	})
	r.waitUp(t)
	newClient(t, b.url()).publish(t, "cmd/lamp/set", false, "ON")
	m := cmds.next(t)
	m.Ack()
	r.stop(t) // at once
	b.ev.waitDisconnected(t, id)
	select {
	case ev := <-b.ev.completed:
		if ev != (qosEvent{client: id, topic: "cmd/lamp/set"}) {
			t.Errorf("PUBACK = %+v, want cmd/lamp/set from %s", ev, id)
		}
	default:
		t.Fatalf("the broker had no PUBACK for the acknowledged command when the clean stop's DISCONNECT arrived")
	}

	again := newInbox()
	next := runConn(t, b.url(), opts, func(c *Conn) {
		c.SubscribeManualAck(context.Background(), "cmd/#", 1, again.acking)
	})
	next.waitUp(t)
	next.barrier(t)
	select {
	case m := <-again:
		t.Errorf("the next start got {%s %q dup %v} again", m.Topic, m.Payload, m.Duplicate)
	default:
	}
}
