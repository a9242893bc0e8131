package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/health"
)

// notifySocket is systemd's end of sd_notify(3): a unixgram socket in a
// temp dir, named in NOTIFY_SOCKET as systemd does for a unit of
// Type=notify.
type notifySocket struct {
	t    *testing.T
	path string
	conn *net.UnixConn
}

// newNotifySocket listens and sets NOTIFY_SOCKET; WATCHDOG_USEC and
// WATCHDOG_PID are cleared (a test sets them after).
func newNotifySocket(t *testing.T) *notifySocket {
	t.Helper()
	// Not t.TempDir: a socket's path must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "sd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	t.Setenv("WATCHDOG_USEC", "")
	t.Setenv("WATCHDOG_PID", "")
	return &notifySocket{t: t, path: path, conn: conn}
}

// next returns the next datagram, failing the test if none comes within
// eventWait.
func (s *notifySocket) next() string {
	s.t.Helper()
	s.conn.SetReadDeadline(time.Now().Add(eventWait))
	buf := make([]byte, 4096)
	n, _, err := s.conn.ReadFromUnix(buf)
	if err != nil {
		s.t.Fatalf("no notification within %v: %v", eventWait, err)
	}
	return string(buf[:n])
}

// nextOther returns the next datagram that is not a watchdog ping,
// failing the test if none comes within eventWait.
func (s *notifySocket) nextOther() string {
	s.t.Helper()
	deadline := time.Now().Add(eventWait)
	for time.Now().Before(deadline) {
		if m := s.next(); m != "WATCHDOG=1" {
			return m
		}
	}
	s.t.Fatalf("only watchdog pings for %v", eventWait)
	return ""
}

// mark sends text to the socket, as if hearthd had: it orders what the
// test did among what hearthd sent.
func (s *notifySocket) mark(text string) {
	s.t.Helper()
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: s.path, Net: "unixgram"})
	if err != nil {
		s.t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(text)); err != nil {
		s.t.Fatal(err)
	}
}

// nothingSent asserts that nothing arrived so far: a marker sent now must
// be the next datagram (a unixgram socket keeps the order).
func (s *notifySocket) nothingSent(when string) {
	s.t.Helper()
	s.mark("-- marker --")
	if got := s.next(); got != "-- marker --" {
		s.t.Errorf("%s: got %q, want nothing sent", when, got)
		for s.next() != "-- marker --" {
		}
	}
}

// sdRig is a notifier on a fake clock watching a real health.Checker
// whose "mqtt" check fails while notReady is set; every call of Ready is
// signalled on probes.
type sdRig struct {
	t        *testing.T
	sock     *notifySocket
	clock    *clockwork.FakeClock
	up       chan struct{}
	notReady atomic.Bool
	probes   chan struct{}
	n        *systemdNotifier
	stop     func()
}

func newSDRig(t *testing.T, watchdogUSEC string) *sdRig {
	r := &sdRig{t: t, sock: newNotifySocket(t), clock: clockwork.NewFakeClockAt(t0), up: make(chan struct{}), probes: make(chan struct{}, 100)}
	if watchdogUSEC != "" {
		t.Setenv("WATCHDOG_USEC", watchdogUSEC)
		t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	}
	checks := health.NewChecker()
	checks.Add("mqtt", func() error {
		r.probes <- struct{}{}
		if r.notReady.Load() {
			return errors.New("not connected")
		}
		return nil
	})
	r.n = newSystemdNotifier(r.clock, testLogger(t))
	r.stop = r.n.watch(context.Background(), r.up, checks)
	t.Cleanup(r.stop)
	return r
}

// idle waits until the notifier waits on its timer again: the round that
// ran is over, its notifications sent.
func (r *sdRig) idle() {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	defer cancel()
	if err := r.clock.BlockUntilContext(ctx, 1); err != nil {
		r.t.Fatalf("the notifier never waited on its timer: %v", err)
	}
}

// probed waits for a call of the readiness checks.
func (r *sdRig) probed() {
	r.t.Helper()
	select {
	case <-r.probes:
	case <-time.After(eventWait):
		r.t.Fatal("the notifier never asked whether the daemon is ready")
	}
}

// READY=1 is sent once the MQTT connection is up and /readyz says ready,
// not before either, and only once.
func TestSystemdReadyOnlyOnceConnectedAndReady(t *testing.T) {
	r := newSDRig(t, "")
	r.idle()
	r.clock.Advance(readyPoll) // ready by its checks, but never connected
	r.probed()
	r.idle()
	r.sock.nothingSent("checks pass, not connected yet")

	r.notReady.Store(true)
	close(r.up) // connected, but a check fails
	r.probed()
	r.idle()
	r.sock.nothingSent("connected, a check fails")

	r.notReady.Store(false)
	r.clock.Advance(readyPoll)
	if got := r.sock.next(); got != "READY=1" {
		t.Fatalf("got %q, want READY=1", got)
	}
	r.stop() // returns: without a watchdog, nothing is left to watch
	r.sock.nothingSent("after READY=1")
}

// With WATCHDOG_USEC=10s the watchdog is pinged every 5 s, from the
// start, and READY=1 still comes at the connect.
func TestSystemdWatchdogPingsAtHalfWatchdogUSEC(t *testing.T) {
	r := newSDRig(t, "10000000")
	r.idle()
	close(r.up)
	if got := r.sock.next(); got != "READY=1" {
		t.Fatalf("got %q, want READY=1", got)
	}
	if got := r.sock.next(); got != "WATCHDOG=1" {
		t.Fatalf("got %q, want WATCHDOG=1 with the round that found it ready", got)
	}
	for i := range 3 {
		r.idle()
		r.clock.Advance(5*time.Second - time.Millisecond)
		r.idle()
		r.sock.nothingSent("4.999 s after a ping")
		r.clock.Advance(time.Millisecond)
		if got := r.sock.next(); got != "WATCHDOG=1" {
			t.Fatalf("ping %d: got %q, want WATCHDOG=1 5 s after the last", i, got)
		}
	}
	// Not ready (the broker is down) is not hung: the pings go on.
	r.notReady.Store(true)
	r.idle()
	r.clock.Advance(5 * time.Second)
	if got := r.sock.next(); got != "WATCHDOG=1" {
		t.Fatalf("not ready: got %q, want WATCHDOG=1", got)
	}
}

// A daemon whose readiness checks hang stops pinging, so that systemd's
// WatchdogSec restarts it; the pings resume once the checks answer.
func TestSystemdWatchdogStopsWhileTheDaemonHangs(t *testing.T) {
	sock := newNotifySocket(t)
	t.Setenv("WATCHDOG_USEC", "10000000")
	clock := clockwork.NewFakeClockAt(t0)
	hang := make(chan struct{})
	var hung atomic.Bool
	entered := make(chan struct{}, 10)
	checks := health.NewChecker()
	checks.Add("mqtt", func() error {
		if hung.Load() {
			entered <- struct{}{}
			<-hang
		}
		return nil
	})
	n := newSystemdNotifier(clock, testLogger(t))
	up := make(chan struct{})
	close(up)
	stop := n.watch(context.Background(), up, checks)
	defer stop()
	if got := sock.next(); got != "READY=1" {
		t.Fatalf("got %q, want READY=1", got)
	}
	if got := sock.next(); got != "WATCHDOG=1" {
		t.Fatalf("got %q, want WATCHDOG=1", got)
	}
	hung.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), eventWait)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(5 * time.Second)
	select {
	case <-entered:
	case <-time.After(eventWait):
		t.Fatal("the notifier never ran the checks")
	}
	clock.Advance(30 * time.Second) // three watchdog periods, all silent
	sock.nothingSent("while the checks hang")
	hung.Store(false)
	close(hang)
	if got := sock.next(); got != "WATCHDOG=1" {
		t.Fatalf("after the hang: got %q, want WATCHDOG=1", got)
	}
}

// A reload is framed by RELOADING=1 (with MONOTONIC_USEC, as sd_notify(3)
// asks) and READY=1; a reload before startup is over is not announced.
func TestSystemdReloadIsFramedByReloadingAndReady(t *testing.T) {
	r := newSDRig(t, "")
	r.n.reload(func() { r.sock.mark("apply") })
	if got := r.sock.next(); got != "apply" {
		t.Fatalf("reload before READY=1: got %q, want only the reload itself", got)
	}
	r.sock.nothingSent("after a reload before READY=1")
	close(r.up)
	if got := r.sock.next(); got != "READY=1" {
		t.Fatalf("got %q, want READY=1", got)
	}
	r.n.reload(func() { r.sock.mark("apply") })
	got := r.sock.next()
	if !regexp.MustCompile(`^RELOADING=1\nMONOTONIC_USEC=[0-9]+\n?$`).MatchString(got) {
		t.Errorf("got %q, want RELOADING=1 and MONOTONIC_USEC", got)
	}
	for _, want := range []string{"apply", "READY=1"} {
		if got := r.sock.next(); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	r.n.stopping()
	if got := r.sock.next(); got != "STOPPING=1" {
		t.Errorf("got %q, want STOPPING=1", got)
	}
}

// Without NOTIFY_SOCKET nothing is sent, whatever WATCHDOG_USEC says.
func TestSystemdNothingWithoutNotifySocket(t *testing.T) {
	sock := newNotifySocket(t)
	t.Setenv("NOTIFY_SOCKET", "")
	t.Setenv("WATCHDOG_USEC", "10000000")
	clock := clockwork.NewFakeClockAt(t0)
	n := newSystemdNotifier(clock, testLogger(t))
	up := make(chan struct{})
	close(up)
	stop := n.watch(context.Background(), up, health.NewChecker())
	clock.Advance(time.Minute)
	n.reload(func() { sock.mark("apply") })
	n.stopping()
	stop()
	if got := sock.next(); got != "apply" {
		t.Fatalf("got %q, want nothing from the notifier", got)
	}
	sock.nothingSent("without NOTIFY_SOCKET")
}

// hearthd under systemd: READY=1 when /readyz answers 200, watchdog pings,
// RELOADING=1 and READY=1 around a SIGHUP, STOPPING=1 at shutdown.
func TestHearthdNotifiesSystemd(t *testing.T) {
	sock := newNotifySocket(t)
	t.Setenv("WATCHDOG_USEC", "200000") // a ping every 100 ms
	t.Setenv("WATCHDOG_PID", strconv.Itoa(os.Getpid()))
	file := filepath.Join(t.TempDir(), "hearth.yaml")
	if err := os.WriteFile(file, []byte(testConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	// SIGHUP goes to every channel registered for it: this one keeps the
	// test process alive should hearthd's not be registered yet.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-config", file, "-data-dir", t.TempDir()}, &stdout, &stderr) }()
	if got := sock.nextOther(); got != "READY=1" {
		t.Fatalf("got %q, want READY=1\n%s", got, stderr.String())
	}
	m := regexp.MustCompile(`msg="hearthd started".* http=(\S+)`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no HTTP address in the log:\n%s", stderr.String())
	}
	resp, err := http.Get("http://" + m[1] + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /readyz after READY=1: %s, want 200 OK", resp.Status)
	}
	if got := sock.next(); got != "WATCHDOG=1" {
		t.Errorf("got %q, want WATCHDOG=1", got)
	}

	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if got := sock.nextOther(); !strings.HasPrefix(got, "RELOADING=1\n") {
		t.Errorf("after SIGHUP: got %q, want RELOADING=1", got)
	}
	if got := sock.nextOther(); got != "READY=1" {
		t.Errorf("after the reload: got %q, want READY=1", got)
	}

	cancel()
	if got := sock.nextOther(); got != "STOPPING=1" {
		t.Errorf("at shutdown: got %q, want STOPPING=1", got)
	}
	if err := <-done; err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
}
