package dispatcher

import (
	"cmp"
	"context"
	"slices"
	"sync"
	"time"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/service"
)

// Fresh reads after the start. A safety-critical device's state as Hearth
// knows it right after a start is a replay: the store's last saved state
// and the broker's retained message, both from before the start, and both
// possibly wrong (a lock turned by hand while Hearth was down). So once
// each service's bridge is up after Run starts, Hearth asks it for the
// current state of every safety-critical device it serves (a Zigbee2MQTT
// /get), at most FreshReadBurst at once and then FreshReadRate a second;
// the answers arrive as ordinary live reports. Sleepy devices are not
// read (they would not answer before their next wake, when they report
// anyway), nor devices their bridge reports offline then. Where each
// device is its own MQTT client with its own will (a Bridge whose
// DeviceWills says so: Tasmota, Shelly), its service is up as soon as
// any one of them said online, while the others may not be connected
// yet: a read sent to one of those would be lost. So such a device is
// read once it said online itself, however long after the start (a
// device whose will says offline is read when it is back). The
// automations engine, for its part, takes no condition on a
// safety-critical device as holding until a live report came after the
// start (automations.Options.NeedsLive).

// FreshReadBurst and FreshReadRate bound the fresh reads after the start:
// the first FreshReadBurst go out at once, the rest at FreshReadRate a
// second, so that a house of many locks and valves does not flood its
// mesh at the moment every bridge reconnects.
const (
	FreshReadBurst = 4
	FreshReadRate  = 4
)

// freshReads reads every safety-critical device once its service's
// bridge is up after the start. It returns when every service has been
// read, or ctx ends.
func (d *Dispatcher) freshReads(ctx context.Context) {
	bySvc := map[string][]*deviceQueue{}
	for _, q := range d.devices {
		if q.dev.SafetyCritical() && !q.dev.Sleep.Sleepy && q.svc.Bridge != nil {
			bySvc[q.svc.Name] = append(bySvc[q.svc.Name], q)
		}
	}
	if len(bySvc) == 0 {
		return
	}
	// One pace for all services: the limit is the hub's radios and
	// Hearth's connection, not one bridge.
	var (
		mu   sync.Mutex
		sent int
		slot time.Time // when the last paced read may go out
	)
	pace := func() bool {
		mu.Lock()
		now := d.clock.Now()
		var wait time.Duration
		if sent >= FreshReadBurst {
			if slot.Before(now) {
				slot = now
			}
			slot = slot.Add(time.Second / FreshReadRate)
			wait = slot.Sub(now)
		}
		sent++
		mu.Unlock()
		if wait <= 0 {
			return true
		}
		timer := d.clock.NewTimer(wait)
		defer timer.Stop()
		select {
		case <-timer.Chan():
			return true
		case <-ctx.Done():
			return false
		}
	}
	// read sends q's fresh read; false if ctx ended first.
	read := func(q *deviceQueue) bool {
		if !pace() {
			return false
		}
		// Told before the next live report may answer it
		// (FreshReadSent), so that a hearer never hears the answer
		// (OnFreshState) of a read it has not heard of.
		if d.onFreshRead != nil {
			d.onFreshRead(q.dev.Device)
		}
		q.mu.Lock()
		q.m.FreshReadSent()
		q.mu.Unlock()
		readCtx, cancel := context.WithTimeout(ctx, q.svc.bound)
		err := q.svc.Bridge.Read(readCtx, q.dev.Device, freshReadTarget(q.dev.Device))
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return false
			}
			d.log.Warn("fresh read after the start not sent; the device's state stays a replay until it reports", "device", q.dev.ID, "service", q.svc.Name, "err", err)
		}
		return true
	}
	var wg sync.WaitGroup
	for _, qs := range bySvc {
		slices.SortFunc(qs, func(a, b *deviceQueue) int { return cmp.Compare(a.dev.ID, b.dev.ID) })
		wg.Go(func() {
			s := qs[0].svc
			if !d.awaitBridgeUp(ctx, s) {
				return
			}
			d.log.Info("reading the state of the safety-critical devices after the start", "service", s.Name, "devices", len(qs))
			wills := deviceWills(s.Bridge)
			for _, q := range qs {
				q.mu.Lock()
				online, known := q.m.Available()
				q.mu.Unlock()
				switch {
				case wills && !(known && online):
					// Not listening yet, or gone: read it once it says
					// online, without holding up the others.
					wg.Go(func() {
						if q.awaitSaidOnline(ctx) {
							read(q)
						}
					})
					continue
				case known && !online:
					continue // it would not answer; it reports when back
				}
				if !read(q) {
					return
				}
			}
		})
	}
	wg.Wait()
}

// awaitSaidOnline waits until q's device is reported online (true), or ctx
// ends (false).
func (q *deviceQueue) awaitSaidOnline(ctx context.Context) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	for {
		if online, known := q.m.Available(); known && online {
			return true
		}
		if q.waitLocked(ctx, nil, nil, nil) == waitStop {
			return false
		}
	}
}

// awaitBridgeUp waits until s's bridge said it is up (or a live report
// showed it); false if ctx ended first. It waits on the link alone, with
// no timer: a bridge that never speaks is never read.
func (d *Dispatcher) awaitBridgeUp(ctx context.Context, s *Service) bool {
	for {
		up, _ := s.link.Watch()
		if s.link.Current() == service.Up {
			return true
		}
		select {
		case <-up:
		case <-ctx.Done():
			return false
		}
	}
}

// freshReadTarget names the attributes a read of dev asks for: a cover's
// position, every other class's state (a Zigbee2MQTT lock answers a get
// of state with lock_state too).
func freshReadTarget(dev devices.Device) devices.Target {
	if dev.Class == devices.Cover {
		return devices.Target{"position": ""}
	}
	return devices.Target{"state": ""}
}
