package dispatcher

import (
	"context"
	"slices"
	"time"
)

// RepublishWindow is how far back, from the last command that ended
// before a restart, Run republishes terminal results: the results still
// in the outbox at a crash are those of the last moments (a healthy
// broker takes one in milliseconds; the outbox drops a publish that
// keeps failing after a few tries, under a minute). A result held
// longer, while the broker was away for more than this, is not
// republished; the HTTP API still answers it. It is counted from the
// last end, not from the restart, so an outage of any length keeps it.
const RepublishWindow = 5 * time.Minute

// RepublishMax bounds how many results Run republishes, the newest kept:
// a burst of more ends than this within RepublishWindow just before a
// crash loses the oldest ones' republish.
const RepublishMax = 1000

// DefaultRepublishRate is the republish rate when Options leaves it 0:
// enough for a few hundred devices within seconds, little beside the
// reconnecting crowd after a power cut.
const DefaultRepublishRate = 100

// Disconnected tells the dispatcher that the MQTT connection is lost:
// every link is down until the next session, so an attempt waiting for
// confirmation knows that its silence may be the outage's, and a
// republish sweep stops.
func (d *Dispatcher) Disconnected() {
	now := d.now()
	for _, s := range d.services {
		if !s.Direct {
			s.link.Reset(now)
		}
		if s.breaker == nil {
			continue
		}
		s.breaker.DeferOffline(time.Time{}) // the next session replays the bridge's state anew
		if s.breaker.Snapshot(now).Offline {
			// A broker that shuts down sends every client's will: the
			// bridge's offline just before Hearth's own connection
			// dropped may be the broker's doing. Commands wait for the
			// bridge's word after the reconnect, as with a replayed
			// offline (see BridgeState).
			d.log.Info("connection lost: the bridge's offline is no longer trusted; waiting for its word after the reconnect", "service", s.Name)
			s.breaker.Replay(func() { s.breaker.ForgetOffline(now) })
		}
	}
	d.connMu.Lock()
	close(d.lost)
	d.lost = make(chan struct{})
	d.connMu.Unlock()
}

// nextLoss returns a channel closed at the next Disconnected.
func (d *Dispatcher) nextLoss() <-chan struct{} {
	d.connMu.Lock()
	defer d.connMu.Unlock()
	return d.lost
}

// Session tells the dispatcher that a new MQTT session starts, before its
// subscriptions are made: every bridge's state is unknown until the bridge
// (or its retained state) says again, since a restarted broker may have
// lost it; commands wait for it up to BridgeStateGrace.
func (d *Dispatcher) Session() {
	now := d.now()
	for _, s := range d.services {
		if !s.Direct {
			s.link.Reset(now)
		}
	}
}

// Reconnected tells the dispatcher that the MQTT connection is back: it
// resumes publishing results that waited for the connection, lets
// commands whose send found the connection down go out again, with the
// same op_id, and republishes every device's retained state and
// availability at RepublishRate, since a restarted broker may have lost
// them (Hearth never assumes it kept them).
func (d *Dispatcher) Reconnected() {
	d.connMu.Lock()
	close(d.conn)
	d.conn = make(chan struct{})
	d.connMu.Unlock()
	d.out.Kick()
	signal(d.sweep)
}

// republisher runs a republish sweep after each Reconnected. A reconnect
// during a sweep starts it again from the first device: the broker may
// have lost what was republished before.
func (d *Dispatcher) republisher(ctx context.Context) {
	ids := make([]string, 0, len(d.devices))
	for id := range d.devices {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for {
		select {
		case <-d.sweep:
		case <-ctx.Done():
			return
		}
		d.republishAll(ctx, ids)
	}
}

// republishAll pushes the retained mirrors of every device in ids to the
// outbox, at most republishRate per second: republishRate/10 (at least
// one) per tenth of a second, or one per 1/rate below 10 per second. Each
// value is read when its turn comes (see republishMirror). It returns
// early when ctx ends, the connection is lost, or another sweep is wanted
// (which is left signalled for the caller's loop).
func (d *Dispatcher) republishAll(ctx context.Context, ids []string) {
	perTick, tick := d.republishRate/10, 100*time.Millisecond
	if perTick < 1 {
		perTick, tick = 1, time.Second/time.Duration(d.republishRate)
	}
	lost := d.nextLoss()
	// Each value is read when its turn comes: breakers' states first,
	// then every device's (see republishMirror).
	var pushes []func() bool
	for _, name := range d.serviceNames {
		if s := d.services[name]; s.breaker != nil {
			pushes = append(pushes, func() bool {
				d.republishServiceState(s)
				return true
			})
		}
	}
	for _, id := range ids {
		q := d.devices[id]
		pushes = append(pushes, func() bool { return q.republishMirror(false) }, func() bool { return q.republishMirror(true) })
	}
	sent := 0
	for _, push := range pushes {
		if sent > 0 && sent%perTick == 0 {
			timer := d.clock.NewTimer(tick)
			select {
			case <-timer.Chan():
			case <-lost:
				// The outbox would hold the rest and flush it at once
				// on the reconnect, whose own sweep sends it again.
				timer.Stop()
				return
			case <-d.sweep:
				timer.Stop()
				signal(d.sweep)
				return
			case <-ctx.Done():
				timer.Stop()
				return
			}
		}
		if push() {
			sent++
		}
	}
	if sent > 0 {
		d.log.Info("republished retained state and availability", "messages", sent)
	}
}

// nextReconnect returns a channel closed at the next Reconnected.
func (d *Dispatcher) nextReconnect() <-chan struct{} {
	d.connMu.Lock()
	defer d.connMu.Unlock()
	return d.conn
}
