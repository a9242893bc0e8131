package mqtt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/hearthd/hearth/retry"
)

// waitClock is a fake clock that tells each wait a Conn starts on it
// (After), once the wait is registered, so that a test can advance the
// clock by exactly that wait. Several may share one fake clock, each with
// its own name.
type waitClock struct {
	*clockwork.FakeClock
	name  string
	waits chan<- wait
}

// wait is one After on a waitClock.
type wait struct {
	who string
	d   time.Duration
}

func (c *waitClock) After(d time.Duration) <-chan time.Time {
	ch := c.FakeClock.After(d)
	c.waits <- wait{c.name, d}
	return ch
}

// Two hearthd with one client ID on Mosquitto, with Hearth's production
// timings (reconnect: full jitter, base 1 s, cap 1 min; ShortConnection,
// ConflictAfter and ConflictBackoff at their defaults) and the longest
// delay every draw allows: Mosquitto closes the displaced connection
// without a DISCONNECT, yet one of the twins reports the conflict within a
// minute of the second one starting and the other within three, and after
// the first report the status topic gets at most three messages a minute (two, online
// and offline, with a clean session, when Mosquitto sends the will of the
// connection it closes; one with the session kept).
// Before, only a DISCONNECT 0x8E counted, the backoff started from zero
// at every connect, and the twins took the session from each other about
// twice a second for ever.
func TestConnTwinOnMosquittoIsAConflictWithinAMinute(t *testing.T) {
	for _, tc := range []struct {
		name   string
		expiry time.Duration
	}{
		// Mosquitto sends the will of the connection it closes only
		// when the session ends with it.
		{"session kept, as hearthd keeps it on an external broker", 5 * time.Minute},
		{"clean session", 0},
	} {
		t.Run(tc.name, func(t *testing.T) { testTwinOnMosquitto(t, tc.expiry) })
	}
}

func testTwinOnMosquitto(t *testing.T, expiry time.Duration) {
	m := startMosquitto(t)
	fc := clockwork.NewFakeClock()
	waits := make(chan wait, 4)
	connects := make(chan string, 16)
	watch := newClient(t, m.url(), status.Topic, "hearth-test/sync")
	opts := func(who string) Options {
		return Options{
			ClientID:      "hearth-twin",
			Status:        status,
			SessionExpiry: expiry,
			SessionMarker: "hearth/bridge/session",
			Clock:         &waitClock{FakeClock: fc, name: who, waits: waits},
			Rand:          ceilingRand{},
			OnConnect:     func(context.Context) { connects <- who },
		}
	}
	twins := map[string]*running{}
	twins["a"] = runConn(t, m.url(), opts("a"), nil)
	waitChan(t, connects, "a connects")
	fc.Advance(time.Hour) // a has run for a while when its twin starts
	start := fc.Now()
	twins["b"] = runConn(t, m.url(), opts("b"), nil)

	// One step at a time on the shared clock: the twin whose wait ends
	// first reconnects, and the test waits for what follows (it is up,
	// or waits again; the other, thrown off, waits) before the clock
	// moves on. Each twin is either up or waiting between steps.
	pending := map[string]time.Time{} // twin → when its wait ends
	up := map[string]bool{"a": true}
	other := map[string]string{"a": "b", "b": "a"}
	settle := func(who string) {
		t.Helper()
		for {
			if _, waiting := pending[who]; waiting || up[who] && !up[other[who]] {
				return
			}
			select {
			case c := <-connects:
				up[c] = true
			case w := <-waits:
				pending[w.who] = fc.Now().Add(w.d)
				up[w.who] = false
				if w.d >= 15*time.Minute {
					t.Fatalf("%s waits %v to reconnect; want less than ConflictBackoff plus the reconnect cap", w.who, w.d)
				}
			case <-time.After(deadline):
				t.Fatalf("%v after b started: %s neither came up nor waited again within %v (up %v, waiting %v)", fc.Since(start), who, deadline, up, pending)
			}
		}
	}
	settle("b")

	detected := map[string]time.Duration{}
	var first time.Duration
	before, offline := 0, 0
	const window = 10 * time.Minute
	for first == 0 || fc.Since(start) < first+window {
		for who := range pending {
			if err := twins[who].Conflict(); err != nil {
				if _, ok := detected[who]; !ok {
					detected[who] = fc.Since(start)
					if !strings.Contains(err.Error(), `client ID "hearth-twin"`) {
						t.Errorf("%s.Conflict() = %q; want it to name the client ID", who, err)
					}
				}
				if first == 0 {
					first = fc.Since(start)
					before, offline = syncStatus(t, watch)
				}
			}
		}
		if fc.Since(start) > 15*time.Minute {
			break
		}
		next := ""
		for who, at := range pending {
			if next == "" || at.Before(pending[next]) {
				next = who
			}
		}
		if next == "" {
			t.Fatalf("%v after b started: neither twin waits; both are up", fc.Since(start))
		}
		fc.Advance(pending[next].Sub(fc.Now()))
		delete(pending, next)
		settle(next)
	}
	after, off := syncStatus(t, watch)
	t.Logf("conflict reported by a after %v, by b after %v; %d status messages before the first report (%d offline), %d in the %v after it (%d offline)",
		detected["a"], detected["b"], before, offline, after, window, off)
	if first == 0 {
		t.Errorf("neither twin reported the conflict in %v; want a report within a minute", fc.Since(start))
	} else if first > time.Minute {
		t.Errorf("the first conflict report came %v after the twin started; want within a minute", first)
	}
	for _, who := range []string{"a", "b"} {
		if d, ok := detected[who]; !ok {
			t.Errorf("%s never reported the conflict; want it within 3 minutes", who)
		} else if d > 3*time.Minute {
			t.Errorf("%s reported the conflict after %v; want within 3 minutes", who, d)
		}
	}
	if perMinute := float64(after) / window.Minutes(); perMinute > 3 {
		t.Errorf("%s got %d messages in the %v after the conflict was reported, %.1f a minute; want at most 3 a minute",
			status.Topic, after, window, perMinute)
	}
}

// syncStatus returns how many messages w received on the status topic
// since the last call, and how many of them said offline: it publishes a
// message of its own and counts what arrives before it, which is every
// message the broker took before it.
func syncStatus(t *testing.T, w *client) (n, offline int) {
	t.Helper()
	token := fmt.Sprint(time.Now().UnixNano())
	w.publish(t, "hearth-test/sync", false, token)
	for {
		m := w.next(t)
		if m.topic == "hearth-test/sync" {
			if m.payload == token {
				return n, offline
			}
			continue
		}
		n++
		if m.payload == status.Offline {
			offline++
		}
	}
}

// A connection lost soon after it was made does not start the reconnect
// backoff again from its first step: two clients that throw each other
// off, or a broker that drops Hearth as soon as it is in, meet delays that
// grow as after failed attempts (here 1 s, 2 s, 4 s, 8 s: full jitter
// drawing its ceiling), and only a connection that lasted ShortConnection
// brings the first step (1 s) back. Before, every connect reset it.
func TestConnBackoffGrowsUntilAConnectionLasts(t *testing.T) {
	b := startBroker(t)
	link := startProxy(t, b.addr)
	fc := clockwork.NewFakeClock()
	waits := make(chan wait, 4)
	connects := make(chan struct{}, 8)
	const id = "hearth-dropped"
	r := runConn(t, link.url(), Options{
		ClientID:        id,
		Clock:           &waitClock{FakeClock: fc, name: id, waits: waits},
		Rand:            ceilingRand{},
		Reconnect:       retry.Backoff{Base: time.Second, Multiplier: 2, Cap: time.Minute},
		ShortConnection: 10 * time.Second,
		ConflictAfter:   100, // this test is about the backoff alone
		OnConnect:       func(context.Context) { connects <- struct{}{} },
	}, nil)
	waitChan(t, connects, "first connect")
	drop := func(lasted time.Duration, want time.Duration, what string) {
		t.Helper()
		fc.Advance(lasted)
		link.cut()
		b.ev.waitDisconnected(t, id)
		b.ev.waitEnded(t)
		w := waitChan(t, waits, what)
		if w.d != want {
			t.Errorf("%s: the Conn waits %v to reconnect; want %v", what, w.d, want)
		}
		fc.Advance(w.d)
		waitChan(t, connects, what+": reconnected")
	}
	drop(0, time.Second, "a connection dropped at once")
	drop(time.Second, 2*time.Second, "dropped again after 1 s")
	drop(9*time.Second, 4*time.Second, "again after 9 s")
	drop(0, 8*time.Second, "again at once")
	drop(10*time.Second, time.Second, "after a connection that lasted 10 s")
	if err := r.Conflict(); err != nil {
		t.Errorf("Conflict() = %v; want nil with ConflictAfter 100", err)
	}
}

// A connection lost while it is being set up (here while its SUBSCRIBE
// waits for the SUBACK) ends that setup at once, and the Conn waits to
// reconnect; before, the setup waited out ConnectTimeout (here a minute),
// because paho answers nothing still awaited on a connection that ended,
// and a twin's takeover during another's setup held that one for 10 s.
func TestConnSetupEndsWithItsConnection(t *testing.T) {
	b := startBroker(t)
	link := startProxy(t, b.addr)
	subscribing := make(chan struct{}, 1)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	b.ev.setOnSubscribed(func(*mochi.Client, packets.Packet) {
		subscribing <- struct{}{}
		<-release // no SUBACK until the test ends
	})
	fc := clockwork.NewFakeClock()
	waits := make(chan wait, 4)
	runConn(t, link.url(), Options{
		ConnectTimeout: time.Minute,
		Clock:          &waitClock{FakeClock: fc, name: "conn", waits: waits},
	}, func(c *Conn) {
		c.Subscribe(context.Background(), "some/topic", 1, func(Message) {})
	})
	waitChan(t, subscribing, "the Conn subscribes")
	link.cut()
	waitChan(t, waits, "the Conn, its connection gone during the setup, waits to reconnect")
}

// What ends a connection the way a broker ends a client's whose session
// another client took, and what a network or the broker's own reasons do.
func TestClosedByBrokerTellsATakeoverFromACut(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"DISCONNECT 0x8E session taken over", &DisconnectError{ReasonCode: 0x8E}, true},
		{"closed without a DISCONNECT (Mosquitto)", io.EOF, true},
		{"closed mid-packet", io.ErrUnexpectedEOF, true},
		{"reset by the peer", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, true},
		{"a write after the peer closed", fmt.Errorf("subscribe: %w", &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EPIPE)}), true},
		{"DISCONNECT 0x8B server shutting down", &DisconnectError{ReasonCode: 0x8B}, false},
		{"DISCONNECT 0x8D keep alive timeout", &DisconnectError{ReasonCode: 0x8D}, false},
		{"the keep-alive gave up", errors.New("ping handler error: PINGRESP timed out"), false},
		{"the network is unreachable", &net.OpError{Op: "write", Net: "tcp", Err: os.NewSyscallError("write", syscall.EHOSTUNREACH)}, false},
		{"timed out", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ETIMEDOUT)}, false},
		{"Hearth's own drop", errConnectionClosed, false},
	} {
		if got := closedByBroker(tc.err); got != tc.want {
			t.Errorf("%s: closedByBroker(%v) = %v; want %v", tc.name, tc.err, got, tc.want)
		}
	}
}
