package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/hearthd/hearth/devices"
)

// logTap is hearthd's log for tests that check what it says: every record
// goes to the test's log (testLogger) and is kept.
type logTap struct {
	next    slog.Handler
	attrs   []slog.Attr
	mu      *sync.Mutex
	records *[]tapped
}

// tapped is one record a logTap kept, its attributes as text.
type tapped struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func newLogTap(t testing.TB) *logTap {
	return &logTap{next: testLogger(t).Handler(), mu: new(sync.Mutex), records: new([]tapped)}
}

func (l *logTap) logger() *slog.Logger { return slog.New(l) }

func (l *logTap) Enabled(context.Context, slog.Level) bool { return true }

func (l *logTap) Handle(ctx context.Context, r slog.Record) error {
	rec := tapped{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	for _, a := range l.attrs {
		rec.attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	l.mu.Lock()
	*l.records = append(*l.records, rec)
	l.mu.Unlock()
	if l.next.Enabled(ctx, r.Level) {
		return l.next.Handle(ctx, r)
	}
	return nil
}

func (l *logTap) WithAttrs(as []slog.Attr) slog.Handler {
	c := *l
	c.next = l.next.WithAttrs(as)
	c.attrs = append(append([]slog.Attr(nil), l.attrs...), as...)
	return &c
}

func (l *logTap) WithGroup(name string) slog.Handler {
	c := *l
	c.next = l.next.WithGroup(name)
	return &c
}

// find returns the records whose message contains s.
func (l *logTap) find(s string) []tapped {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []tapped
	for _, r := range *l.records {
		if strings.Contains(r.msg, s) {
			out = append(out, r)
		}
	}
	return out
}

// startMochiWithCaps is startMochiWith for a broker whose capabilities caps
// changes from mochi's defaults, with allow-all auth and hooks.
func startMochiWithCaps(t *testing.T, caps func(*mochi.Capabilities), hooks ...mochi.Hook) *restartableMochi {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := mochi.NewDefaultServerCapabilities()
	caps(c)
	srv := mochi.New(&mochi.Options{Capabilities: c, Logger: slog.New(slog.DiscardHandler)})
	for _, h := range append([]mochi.Hook{new(auth.AllowHook)}, hooks...) {
		if err := srv.AddHook(h, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := srv.AddListener(listeners.NewNet("t", ln)); err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	m := &restartableMochi{t: t, addr: ln.Addr().String(), srv: srv}
	t.Cleanup(m.stop)
	return m
}

// With an external broker, hearthd keeps an MQTT session: commands an
// automation publishes while hearthd is stopped (a restart, an upgrade)
// wait in the broker and every one of them ends when hearthd is back,
// each once. The broker had PUBACKed them all: before sessions, it
// dropped them.
func TestCommandsPublishedWhileHearthdIsStoppedAllEnd(t *testing.T) {
	const n = 20
	m := startRestartableMochi(t)
	dir := t.TempDir()
	cfg := manyDevices(n, "")
	h := newHarness(t, harnessOptions{dataDir: dir, brokerURL: m.url(), config: cfg})
	h.stopHearth() // a clean stop: the session stays

	for i := range n {
		h.publish(fmt.Sprintf("sw%03d", i), fmt.Sprintf(`{"state":"ON","op_id":"away-%02d","ttl":"1h"}`, i))
	}

	logs := newLogTap(t)
	h2 := newHarness(t, harnessOptions{dataDir: dir, clock: h.clock, brokerURL: m.url(), automation: h, config: cfg, logger: logs.logger()})
	for i := range n {
		id := fmt.Sprintf("away-%02d", i)
		if r := h2.final(id); r.Status != devices.Succeeded || r.Attempts != 1 {
			t.Errorf("%s after the restart: %s/%s after %d attempts (%s); want succeeded after 1", id, r.Status, r.Reason, r.Attempts, r.Detail)
		}
	}
	for i := range n {
		if got := h2.sim.Sets(fmt.Sprintf("sw%03d", i)); got != 1 {
			t.Errorf("sw%03d received %d sets; want 1", i, got)
		}
	}
	if c := logs.find("mqtt connected"); len(c) == 0 || c[0].attrs["session_present"] != "true" {
		t.Errorf("hearthd's connect after the restart logged %+v; want session_present=true", c)
	}
	for _, w := range logs.find("session") {
		if w.level >= slog.LevelWarn {
			t.Errorf("hearthd warned %+v; want no warning about the session", w)
		}
	}
	if d := logs.find("the session's backlog is delivered"); len(d) != 1 || d[0].attrs["messages"] != fmt.Sprint(n) {
		t.Errorf("hearthd logged the backlog as %+v; want once, messages=%d", d, n)
	}
}

// A broker whose longest session is shorter than mqtt.session_expiry
// (mochi's Capabilities.MaximumSessionExpiryInterval) is warned about at
// connect, once, saying what it means for commands.
func TestBrokerWithAShortMaximumSessionIsWarnedAbout(t *testing.T) {
	m := startMochiWithCaps(t, func(c *mochi.Capabilities) { c.MaximumSessionExpiryInterval = 60 })
	logs := newLogTap(t)
	newHarness(t, harnessOptions{brokerURL: m.url(), config: manyDevices(1, ""), logger: logs.logger()})

	want := "mqtt: the broker keeps Hearth's session for 1m0s, less than the 5m0s asked: commands published while Hearth is away for longer are lost"
	got := logs.find("keeps Hearth's session")
	if len(got) != 1 || got[0].msg != want || got[0].level != slog.LevelWarn || got[0].attrs["component"] != "mqtt" {
		t.Fatalf("warnings about the session: %+v\nwant one WARN from component mqtt: %q", got, want)
	}
}

// losePUBACK is a broker that loses hearthd's first PUBACK for a command
// it delivered, together with the connection, as a network cut just then
// would: the command stays in the session and is delivered again, with
// DUP set, when hearthd reconnects.
type losePUBACK struct {
	mochi.HookBase
	mu         sync.Mutex
	commands   map[string]map[uint16]bool // client ID → packet IDs of commands delivered to it
	deliveries []bool                     // every delivery of a command to hearthd: its DUP flag
	lost       atomic.Bool
}

func (h *losePUBACK) ID() string { return "lose-puback" }
func (h *losePUBACK) Provides(b byte) bool {
	return b == mochi.OnQosPublish || b == mochi.OnPacketRead
}

// isHearthd tells hearthd's client (defaultClientID) from the
// simulator's (hearth-sim-…).
func isHearthd(cl *mochi.Client) bool {
	return strings.HasPrefix(cl.ID, "hearth-") && !strings.HasPrefix(cl.ID, "hearth-sim-")
}

func (h *losePUBACK) OnQosPublish(cl *mochi.Client, pk packets.Packet, _ int64, _ int) {
	if !isHearthd(cl) || pk.FixedHeader.Type != packets.Publish || !strings.HasSuffix(pk.TopicName, "/set") || !strings.HasPrefix(pk.TopicName, "hearth/") {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.commands == nil {
		h.commands = map[string]map[uint16]bool{}
	}
	if h.commands[cl.ID] == nil {
		h.commands[cl.ID] = map[uint16]bool{}
	}
	h.commands[cl.ID][pk.PacketID] = true
	h.deliveries = append(h.deliveries, pk.FixedHeader.Dup)
}

func (h *losePUBACK) OnPacketRead(cl *mochi.Client, pk packets.Packet) (packets.Packet, error) {
	if !isHearthd(cl) || pk.FixedHeader.Type != packets.Puback {
		return pk, nil
	}
	h.mu.Lock()
	command := h.commands[cl.ID][pk.PacketID]
	h.mu.Unlock()
	if command && !h.lost.Swap(true) {
		return pk, packets.ErrRejectPacket // mochi drops the connection, the PUBACK unread
	}
	return pk, nil
}

func (h *losePUBACK) seen() []bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]bool(nil), h.deliveries...)
}

// A command whose PUBACK the connection's loss took with it is delivered
// again from the session, flagged DUP, after hearthd reconnects; its op_id
// is known, so hearthd answers it with the stored command and runs
// nothing twice.
func TestRedeliveredCommandIsDeduplicatedByItsOpID(t *testing.T) {
	hook := new(losePUBACK)
	m := startRestartableMochi(t, hook)
	h := newHarness(t, harnessOptions{brokerURL: m.url(), config: manyDevices(1, "")})
	h.publish("sw000", `{"state":"ON","op_id":"dup-1"}`)
	if r := h.result("dup-1"); r.Status != devices.Accepted {
		t.Fatalf("dup-1: %s/%s; want accepted", r.Status, r.Reason)
	}
	h.driveReconnect() // the broker dropped the connection on its PUBACK
	h.eventually("the command delivered again", func() bool { return len(hook.seen()) >= 2 })
	if d := hook.seen(); !hook.lost.Load() || len(d) != 2 || d[0] || !d[1] {
		t.Fatalf("deliveries of dup-1 to hearthd (their DUP flags): %v, PUBACK lost %v; want [false true] after the lost PUBACK", d, hook.lost.Load())
	}

	r := h.await(func(r devices.Result) bool { return r.OpID == "dup-1" && r.Status.Terminal() }, "dup-1's end")
	if r.Status != devices.Succeeded || r.Attempts != 1 {
		t.Errorf("dup-1: %s/%s after %d attempts; want succeeded after 1", r.Status, r.Reason, r.Attempts)
	}
	op, ok, err := h.d.store.Lookup("dup-1")
	if err != nil || !ok || op.Status != devices.Succeeded || op.Attempts != 1 {
		t.Errorf("stored dup-1: %+v (found %v, %v); want succeeded after 1 attempt", op, ok, err)
	}
	// The attempt's set, and at most its resend if the reconnect came
	// while it waited for its confirmation (README, "After a power cut"):
	// never a second command's.
	if n := h.sim.Sets("sw000"); n < 1 || n > 2 {
		t.Errorf("sw000 received %d sets; want the one attempt's (once, or twice with its resend)", n)
	}
	if p, err := h.d.store.Pending(); err != nil || len(p) != 0 {
		t.Errorf("pending after the end: %d (%v); want none", len(p), err)
	}
}
