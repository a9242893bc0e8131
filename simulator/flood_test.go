package simulator

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// refuseFirst is a mochi hook that refuses the first n CONNECTs of every
// client ID (mochi answers an MQTT 3.1.1 client CONNACK 0x05, not
// authorised) and allows everything else.
type refuseFirst struct {
	mochi.HookBase
	n    int
	mu   sync.Mutex
	seen map[string]int
}

func (h *refuseFirst) ID() string { return "refuse-first" }

func (h *refuseFirst) Provides(b byte) bool {
	return b == mochi.OnConnectAuthenticate || b == mochi.OnACLCheck
}

func (h *refuseFirst) OnConnectAuthenticate(cl *mochi.Client, _ packets.Packet) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.seen == nil {
		h.seen = map[string]int{}
	}
	h.seen[cl.ID]++
	return h.seen[cl.ID] > h.n
}

func (h *refuseFirst) OnACLCheck(*mochi.Client, string, bool) bool { return true }

// floodBroker is a real mochi broker on a loopback port that a test can
// restart on the same address.
type floodBroker struct {
	t    *testing.T
	hook mochi.Hook // nil: allow everything
	mu   sync.Mutex
	srv  *mochi.Server
	addr string
}

// startFloodBroker starts a broker with hook (nil allows every client) on a
// free loopback port; it is closed when the test ends.
func startFloodBroker(t *testing.T, hook mochi.Hook) *floodBroker {
	t.Helper()
	b := &floodBroker{t: t, hook: hook}
	b.start("127.0.0.1:0")
	t.Cleanup(b.stop)
	return b
}

func (b *floodBroker) start(addr string) {
	b.t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		b.t.Fatal(err)
	}
	srv := mochi.New(&mochi.Options{Logger: slog.New(slog.DiscardHandler)})
	hook := b.hook
	if hook == nil {
		hook = new(auth.AllowHook)
	}
	if err := srv.AddHook(hook, nil); err != nil {
		b.t.Fatal(err)
	}
	if err := srv.AddListener(listeners.NewNet("t", ln)); err != nil {
		b.t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		b.t.Fatal(err)
	}
	b.mu.Lock()
	b.srv, b.addr = srv, ln.Addr().String()
	b.mu.Unlock()
}

// stop closes the broker the way startBroker's cleanup does (mochi
// v2.7.9's Close can deadlock otherwise).
func (b *floodBroker) stop() {
	b.mu.Lock()
	srv := b.srv
	b.srv = nil
	b.mu.Unlock()
	if srv == nil {
		return
	}
	srv.Listeners.Close("t", func(string) {})
	for _, cl := range srv.Clients.GetAll() {
		cl.Stop(errors.New("broker closing"))
	}
	_ = srv.Close()
}

// restart closes the broker and starts a new one on the same address.
func (b *floodBroker) restart() {
	b.t.Helper()
	b.stop()
	b.start(b.addr)
}

// dial connects to the broker's address over TCP.
func (b *floodBroker) dial(ctx context.Context) (net.Conn, error) {
	b.mu.Lock()
	addr := b.addr
	b.mu.Unlock()
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// attempts collects AttemptEvents from FloodOptions.OnAttempt.
type attempts chan AttemptEvent

func (a attempts) observe(ev AttemptEvent) { a <- ev }

// take returns the next n events, in any order, indexed by device.
func (a attempts) take(t *testing.T, n int) map[int]AttemptEvent {
	t.Helper()
	got := map[int]AttemptEvent{}
	for range n {
		select {
		case ev := <-a:
			if _, dup := got[ev.Device]; dup {
				t.Fatalf("device %d made two attempts where one was due: %+v", ev.Device, ev)
			}
			got[ev.Device] = ev
		case <-time.After(deadline):
			t.Fatalf("%d of %d attempts within %v", len(got), n, deadline)
		}
	}
	return got
}

// runFlood creates a Flood from opts, runs it and waits until every
// device has connected once. When the test ends it stops the flood and
// waits for Run to return.
func runFlood(t *testing.T, opts FloodOptions) *Flood {
	t.Helper()
	f, err := NewFlood(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(deadline):
			t.Errorf("Run did not return within %v of cancel", deadline)
		}
	})
	return f
}

// waitClosed waits for ch to close.
func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(deadline):
		t.Fatalf("%s not within %v", what, deadline)
	}
}

// blockUntil waits until n goroutines wait on the fake clock.
func blockUntil(t *testing.T, clock *clockwork.FakeClock, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, n); err != nil {
		t.Fatalf("%d backoff waits not within %v", n, deadline)
	}
}

// Each device waits exactly Backoff(n, previous delay) before attempt n,
// on the injected clock: after refusals at start, and again after a cut,
// where n starts over at 1.
func TestFloodReconnectDelaysFollowTheBackoff(t *testing.T) {
	const devices = 3
	b := startFloodBroker(t, &refuseFirst{n: 2})
	clock := clockwork.NewFakeClock()
	t0 := clock.Now()
	evs := make(attempts, 64)
	// A backoff that depends on both n and prev, so that a wrong n or a
	// wrong previous delay shows.
	backoff := func(n int, prev time.Duration, _ Rand) time.Duration {
		return time.Duration(n)*100*time.Millisecond + prev/2
	}
	f := runFlood(t, FloodOptions{Devices: devices, Dial: b.dial, Backoff: backoff, Clock: clock, OnAttempt: evs.observe})

	check := func(step string, got map[int]AttemptEvent, n int, delay time.Duration, at time.Time, outcome Outcome) {
		t.Helper()
		for id, ev := range got {
			if ev.N != n || ev.Delay != delay || !ev.At.Equal(at) || ev.Outcome != outcome {
				t.Errorf("%s: device %d: n %d, delay %v, at t0+%v, %v (%v); want n %d, delay %v, at t0+%v, %v",
					step, id, ev.N, ev.Delay, ev.At.Sub(t0), ev.Outcome, ev.Err, n, delay, at.Sub(t0), outcome)
			}
		}
	}
	check("first connection", evs.take(t, devices), 0, 0, t0, AttemptRefused)
	blockUntil(t, clock, devices)
	clock.Advance(100 * time.Millisecond) // Backoff(1, 0)
	check("retry 1", evs.take(t, devices), 1, 100*time.Millisecond, t0.Add(100*time.Millisecond), AttemptRefused)
	blockUntil(t, clock, devices)
	clock.Advance(249 * time.Millisecond) // Backoff(2, 100ms) = 250ms: one short
	clock.Advance(time.Millisecond)
	check("retry 2", evs.take(t, devices), 2, 250*time.Millisecond, t0.Add(350*time.Millisecond), AttemptAccepted)
	waitClosed(t, f.Ready(), "every device connected")

	res := f.Result()
	for i, d := range res.Devices {
		if want := (DeviceResult{Attempts: 3, Refusals: 2, LastCode: 0x05 /* not authorised */, Back: t0.Add(350 * time.Millisecond)}); d != want {
			t.Errorf("first round, device %d: %+v, want %+v", i, d, want)
		}
	}

	clock.Advance(time.Hour)
	cut := f.Cut()
	if !cut.Equal(t0.Add(time.Hour + 350*time.Millisecond)) {
		t.Errorf("Cut returned t0+%v, want the clock's now", cut.Sub(t0))
	}
	blockUntil(t, clock, devices) // every device lost its connection and waits Backoff(1, 0)
	clock.Advance(100 * time.Millisecond)
	check("after the cut", evs.take(t, devices), 1, 100*time.Millisecond, cut.Add(100*time.Millisecond), AttemptAccepted)
	waitClosed(t, f.Back(), "every device back after the cut")
	res = f.Result()
	if !res.Start.Equal(cut) {
		t.Errorf("round start t0+%v, want the cut's t0+%v", res.Start.Sub(t0), cut.Sub(t0))
	}
	for i, d := range res.Devices {
		if want := (DeviceResult{Attempts: 1, Back: cut.Add(100 * time.Millisecond)}); d != want {
			t.Errorf("after the cut, device %d: %+v, want %+v", i, d, want)
		}
	}
}

// Without a backoff a refused device retries at once, and its attempt
// numbers still count up.
func TestFloodWithoutBackoffRetriesAtOnce(t *testing.T) {
	const devices, refused = 5, 3
	b := startFloodBroker(t, &refuseFirst{n: refused})
	evs := make(attempts, devices*(refused+1))
	f := runFlood(t, FloodOptions{Devices: devices, Dial: b.dial, OnAttempt: evs.observe})
	waitClosed(t, f.Ready(), "every device connected")
	next := make([]int, devices)
	for range devices * (refused + 1) {
		ev := <-evs // all were sent before Ready closed
		if ev.N != next[ev.Device] || ev.Delay != 0 {
			t.Errorf("device %d: attempt n %d, delay %v; want n %d, delay 0", ev.Device, ev.N, ev.Delay, next[ev.Device])
		}
		if want := ev.N == refused; (ev.Outcome == AttemptAccepted) != want {
			t.Errorf("device %d: attempt %d %v (%v)", ev.Device, ev.N, ev.Outcome, ev.Err)
		}
		next[ev.Device]++
	}
	for i, d := range f.Result().Devices {
		if d.Attempts != refused+1 || d.Refusals != refused || d.Failures != 0 || d.Back.IsZero() {
			t.Errorf("device %d: %+v, want %d attempts, %d refusals, back", i, d, refused+1, refused)
		}
	}
}

// A cut drops every connection from below MQTT at once; every device comes
// back with its jittered backoff, twice in a row.
func TestFloodEveryDeviceComesBackAfterACut(t *testing.T) {
	const devices = 50
	b := startFloodBroker(t, nil)
	fullJitter := func(_ int, _ time.Duration, r Rand) time.Duration {
		return time.Duration(r.Int64N(int64(20 * time.Millisecond)))
	}
	f := runFlood(t, FloodOptions{Devices: devices, Dial: b.dial, Backoff: fullJitter, Seed: 7})
	waitClosed(t, f.Ready(), "every device connected")

	for round := range 2 {
		cut := f.Cut()
		waitClosed(t, f.Back(), "every device back after the cut")
		res := f.Result()
		for i, d := range res.Devices {
			if d.Back.Before(cut) || d.Attempts < 1 || d.Refusals != 0 {
				t.Errorf("round %d, device %d: %+v; want back after the cut %v", round, i, d, cut)
			}
		}
	}
}

// A round started without a cut leaves the connections alone; restarting
// the broker is the cut, and every device comes back to the new broker.
func TestFloodComesBackAfterABrokerRestart(t *testing.T) {
	const devices = 20
	b := startFloodBroker(t, nil)
	jitter := func(_ int, _ time.Duration, r Rand) time.Duration {
		return time.Duration(r.Int64N(int64(10 * time.Millisecond)))
	}
	f := runFlood(t, FloodOptions{Devices: devices, Dial: b.dial, Backoff: jitter})
	waitClosed(t, f.Ready(), "every device connected")
	start := f.StartRound()
	b.restart()
	waitClosed(t, f.Back(), "every device back after the restart")
	for i, d := range f.Result().Devices {
		if d.Back.Before(start) || d.Attempts < 1 {
			t.Errorf("device %d: %+v; want back after %v", i, d, start)
		}
	}
}

// Devices publish their availability online after connecting, and the
// broker publishes their retained will, offline, when a cut drops them.
func TestFloodAvailabilityAndWill(t *testing.T) {
	const devices = 3
	b := startFloodBroker(t, nil)
	clock := clockwork.NewFakeClock()
	fixed := func(int, time.Duration, Rand) time.Duration { return time.Second }
	w := watch(t, "tcp://"+b.addr, DefaultBaseTopic+"/+/availability")
	f := runFlood(t, FloodOptions{Devices: devices, Dial: b.dial, Backoff: fixed, Clock: clock, Availability: true})
	waitClosed(t, f.Ready(), "every device connected")
	for i := range devices {
		if got := string(w.live(t, f.AvailabilityTopic(i)).payload); got != `{"state":"online"}` {
			t.Errorf("device %d availability %s, want online", i, got)
		}
	}
	f.Cut()
	for i := range devices {
		if got := string(w.live(t, f.AvailabilityTopic(i)).payload); got != `{"state":"offline"}` {
			t.Errorf("device %d will %s, want offline", i, got)
		}
	}
	blockUntil(t, clock, devices)
	clock.Advance(time.Second)
	waitClosed(t, f.Back(), "every device back after the cut")
	for i := range devices {
		if got := string(w.live(t, f.AvailabilityTopic(i)).payload); got != `{"state":"online"}` {
			t.Errorf("device %d availability %s after the cut, want online", i, got)
		}
	}
}

// A failed dial is an attempt that failed, retried with the backoff.
func TestFloodCountsFailedDials(t *testing.T) {
	b := startFloodBroker(t, nil)
	var mu sync.Mutex
	fails := 2
	dial := func(ctx context.Context) (net.Conn, error) {
		mu.Lock()
		defer mu.Unlock()
		if fails > 0 {
			fails--
			return nil, errors.New("broker down")
		}
		return b.dial(ctx)
	}
	f := runFlood(t, FloodOptions{Devices: 1, Dial: dial})
	waitClosed(t, f.Ready(), "the device connected")
	if d := f.Result().Devices[0]; d.Attempts != 3 || d.Failures != 2 || d.Refusals != 0 {
		t.Errorf("result %+v, want 3 attempts of which 2 failed", d)
	}
}

func TestNewFloodRejectsBadOptions(t *testing.T) {
	dial := func(context.Context) (net.Conn, error) { return nil, errors.New("unused") }
	for _, opts := range []FloodOptions{
		{Dial: dial},
		{Devices: 1},
		{Devices: 1, Dial: dial, KeepAlive: -time.Second},
		{Devices: 1, Dial: dial, BaseTopic: "a/#"},
	} {
		if _, err := NewFlood(opts); err == nil {
			t.Errorf("NewFlood(%+v) accepted", opts)
		}
	}
}

func TestFloodRunTwice(t *testing.T) {
	b := startFloodBroker(t, nil)
	f := runFlood(t, FloodOptions{Devices: 1, Dial: b.dial})
	waitClosed(t, f.Ready(), "the device connected")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.Run(ctx); !errors.Is(err, ErrAlreadyRun) {
		t.Errorf("second Run: %v, want ErrAlreadyRun", err)
	}
}
