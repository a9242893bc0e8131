package main

import (
	"context"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	sdnotify "github.com/coreos/go-systemd/v22/daemon"
	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/health"
)

// readyPoll is how often the systemd notifier looks again at a daemon that
// connected but was not ready yet, when no watchdog sets a faster pace.
const readyPoll = time.Second

// systemdNotifier tells systemd how hearthd is, by the sd_notify(3)
// protocol (a datagram on the unix socket named by NOTIFY_SOCKET, sent
// with github.com/coreos/go-systemd/v22/daemon), for a unit of Type=notify
// such as deploy/hearth.service:
//
//   - READY=1 once /readyz first reports ready (the MQTT connection is up);
//   - WATCHDOG=1 every half WATCHDOG_USEC (systemd's WatchdogSec=) while
//     the daemon answers its readiness checks: a daemon that hangs stops
//     pinging and systemd restarts it. A daemon that answers "not ready"
//     (its broker is down) still pings, since a restart would not bring
//     the broker back;
//   - RELOADING=1 (with MONOTONIC_USEC) before a SIGHUP reload and READY=1
//     after it;
//   - STOPPING=1 when shutdown begins.
//
// Without NOTIFY_SOCKET (hearthd not started by systemd, or a unit of
// another type) every method does nothing. A failed send is logged, never
// fatal: systemd's own timeouts say what a lost notification means.
type systemdNotifier struct {
	enabled  bool
	watchdog time.Duration // WATCHDOG_USEC; 0 when systemd watches nothing
	clock    clockwork.Clock
	log      *slog.Logger

	ready atomic.Bool // READY=1 was sent: startup is over
}

// readiness is what the notifier asks the daemon: *health.Checker, whose
// Ready is /readyz.
type readiness interface {
	Ready() (bool, health.Report)
}

// newSystemdNotifier reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID
// from the environment. A WATCHDOG_USEC that is not a positive number of
// microseconds is logged and ignored; one meant for another process
// (WATCHDOG_PID) is ignored. clock paces the watchdog (nil: the real one).
func newSystemdNotifier(clock clockwork.Clock, log *slog.Logger) *systemdNotifier {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	n := &systemdNotifier{clock: clock, log: log.With("component", "systemd")}
	n.enabled = os.Getenv("NOTIFY_SOCKET") != ""
	if !n.enabled {
		return n
	}
	w, err := sdnotify.SdWatchdogEnabled(false)
	if err != nil {
		n.log.Warn("watchdog off: WATCHDOG_USEC is not usable", "err", err)
	}
	n.watchdog = w
	return n
}

// send sends state if systemd listens.
func (n *systemdNotifier) send(state string) {
	if !n.enabled {
		return
	}
	if _, err := sdnotify.SdNotify(false, state); err != nil {
		n.log.Warn("notify systemd", "state", state, "err", err)
	}
}

// watch sends READY=1 once up is closed (the first MQTT connect) and
// checks.Ready reports ready, and then, if systemd set a watchdog,
// WATCHDOG=1 every half of it, each after checks.Ready has returned, until
// ctx ends or stop is called. stop returns once watch's goroutine has
// ended.
func (n *systemdNotifier) watch(ctx context.Context, up <-chan struct{}, checks readiness) (stop func()) {
	if !n.enabled {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		n.run(ctx, up, checks)
	}()
	return func() {
		cancel()
		<-done
	}
}

func (n *systemdNotifier) run(ctx context.Context, up <-chan struct{}, checks readiness) {
	period := readyPoll
	if n.watchdog > 0 {
		period = n.watchdog / 2
	}
	connected := false
	for {
		// A timer per round, not a ticker: the next round is armed
		// only once this one has pinged, so a slow round never makes
		// two pings in a row, and a fake clock's waiter shows a test
		// that the round is over.
		timer := n.clock.NewTimer(period)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-up:
			timer.Stop()
			up, connected = nil, true
		case <-timer.Chan():
		}
		// Ready is also the liveness probe: its checks take the
		// connection's and the breakers' locks, so a hung daemon never
		// returns from it and stops pinging.
		ok, _ := checks.Ready()
		if connected && ok {
			n.markReady()
		}
		if n.watchdog > 0 {
			n.send(sdnotify.SdNotifyWatchdog)
		} else if n.ready.Load() {
			return // nothing more to watch
		}
	}
}

// markReady sends READY=1 the first time only.
func (n *systemdNotifier) markReady() {
	if n.ready.CompareAndSwap(false, true) {
		n.send(sdnotify.SdNotifyReady)
	}
}

// reload sends RELOADING=1, runs apply, and sends READY=1 again. Before
// startup is over (no READY=1 yet) it only runs apply: a READY=1 then
// would announce a daemon that is not ready.
func (n *systemdNotifier) reload(apply func()) {
	if !n.ready.Load() {
		apply()
		return
	}
	n.send(sdnotify.SdNotifyReloading + "\n" + sdnotify.SdNotifyMonotonicUsec())
	apply()
	n.send(sdnotify.SdNotifyReady)
}

// stopping sends STOPPING=1: hearthd is shutting down.
func (n *systemdNotifier) stopping() { n.send(sdnotify.SdNotifyStopping) }
