package dispatcher

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
)

// After the start, once the bridge is up, every safety-critical device
// that is always listening is read once, and nothing else: the first
// FreshReadBurst at once, the rest at FreshReadRate a second on the
// dispatcher's clock. Before the bridge is up, nothing is read, and a
// device the bridge reports offline is not read.
func TestSafetyCriticalDevicesAreReadOnceAfterTheStart(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC))
	bridge := &scriptedBridge{clock: clock, msgs: make(chan bridgeMsg, 64)}
	r := &sleepyRig{t: t, clock: clock, bridge: bridge}
	const locks = FreshReadBurst + 2
	devs := []Device{
		{Device: devices.Device{ID: "hall_light", Service: "zb", Class: devices.Light}, TTL: time.Hour},
		{Device: devices.Device{ID: "shed_lock", Service: "zb", Class: devices.Lock,
			Sleep: devices.Sleep{Sleepy: true, WakeInterval: time.Hour, AwakeWindow: 10 * time.Second}}, TTL: time.Hour},
	}
	devs = append(devs, Device{Device: devices.Device{ID: "lock_offline", Service: "zb", Class: devices.Lock}, TTL: time.Hour})
	for i := range locks {
		devs = append(devs, Device{Device: devices.Device{ID: fmt.Sprintf("lock%d", i), Service: "zb", Class: devices.Lock}, TTL: time.Hour})
	}
	d, err := New(Options{
		Services: []Service{{Name: "zb", Bridge: bridge,
			Policy: retry.Policy{MaxAttempts: 2, AttemptTimeout: 5 * time.Second, Backoff: retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 10 * time.Second}}}},
		Devices:   devs,
		Journal:   &memJournal{ops: map[string]devices.Op{}},
		Publisher: nopPublisher{},
		Clock:     clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	r.d = d
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	r.none("before the bridge is up")
	d.Availability("lock_offline", false)
	d.BridgeState("zb", true, false)
	start := clock.Now()
	for i := range FreshReadBurst {
		m := r.next()
		if m.verb != "get" || !m.at.Equal(start) {
			t.Fatalf("read %d: a %s at %s; want a get at once", i, m.verb, m.at.Sub(start))
		}
	}
	for i := FreshReadBurst; i < locks; i++ {
		r.advance(1, time.Second/FreshReadRate)
		if m := r.next(); m.verb != "get" || m.target.Attributes()[0] != "state" {
			t.Fatalf("read %d: a %s of %v; want a get of state", i, m.verb, m.target)
		}
	}
	clock.Advance(time.Minute)
	r.none("after every lock was read once (the light, the sleepy lock and the offline lock are not read)")
}

// willsBridge hands the device of every read to the test; its devices
// each have their own will (DeviceWills), as Tasmotas do.
type willsBridge struct{ reads chan string }

func (b willsBridge) Send(context.Context, devices.Device, devices.Target) error { return nil }
func (b willsBridge) Read(_ context.Context, dev devices.Device, _ devices.Target) error {
	b.reads <- dev.ID
	return nil
}
func (willsBridge) DeviceWills() bool { return true }

// Where each device is its own MQTT client with its own will, the
// service is up as soon as one of them said online; a fresh read sent
// then to another, not yet connected, would be lost. So each is read
// once it said online itself: the one that did at once, the one not yet
// heard when it says online, the one whose will said offline when it is
// back.
func TestAFreshReadWaitsForTheDeviceItselfToSayOnlineWhereEachHasAWill(t *testing.T) {
	clock := clockwork.NewFakeClockAt(time.Date(2026, 12, 3, 4, 0, 0, 0, time.UTC))
	bridge := willsBridge{reads: make(chan string, 16)}
	var devs []Device
	for _, id := range []string{"a_gate", "b_garage", "c_gate"} {
		devs = append(devs, Device{Device: devices.Device{ID: id, Service: "wifi", Class: devices.Cover, Safety: devices.SafetyCritical}, TTL: time.Hour})
	}
	d, err := New(Options{
		Services: []Service{{Name: "wifi", Bridge: bridge,
			Policy: retry.Policy{MaxAttempts: 3, AttemptTimeout: 5 * time.Second, Backoff: retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 10 * time.Second}}}},
		Devices:   devs,
		Journal:   &memJournal{ops: map[string]devices.Op{}},
		Publisher: nopPublisher{},
		Clock:     clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	next := func(want string) {
		t.Helper()
		select {
		case id := <-bridge.reads:
			if id != want {
				t.Fatalf("a fresh read of %s; want %s", id, want)
			}
		case <-time.After(rigWait):
			t.Fatalf("timed out waiting for the fresh read of %s", want)
		}
	}

	// b_garage says online, and so the service is up; a_gate has said
	// nothing yet (it sorts first: read in order, it would go first), and
	// c_gate's will said offline.
	d.Availability("b_garage", true)
	d.Availability("c_gate", false)
	d.BridgeState("wifi", true, false)
	next("b_garage")
	d.Availability("a_gate", true)
	next("a_gate")
	d.Availability("c_gate", true)
	next("c_gate")
}

// boundedBridge tells, for each read, whether its context has a deadline.
type boundedBridge struct {
	*scriptedBridge
	bounded chan bool
}

func (b boundedBridge) Read(ctx context.Context, d devices.Device, target devices.Target) error {
	_, ok := ctx.Deadline()
	b.bounded <- ok
	return b.scriptedBridge.Read(ctx, d, target)
}

// The fresh read after the start is bounded like every other read: a
// bridge that never takes it cannot hold up the reads of the devices
// after it for ever.
func TestFreshReadAfterTheStartHasADeadline(t *testing.T) {
	bounded := make(chan bool, 4)
	startSleepy(t, sleepyOptions{awake: true, class: devices.Lock, bridge: func(b *scriptedBridge) Bridge {
		return boundedBridge{scriptedBridge: b, bounded: bounded}
	}})
	select {
	case ok := <-bounded:
		if !ok {
			t.Error("the fresh read after the start had no deadline")
		}
	case <-timeAfter():
		t.Fatal("no fresh read after the start")
	}
}
