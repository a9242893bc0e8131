package simulator

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

func TestBridgeBirthAvailabilityAndCleanStop(t *testing.T) {
	_, broker := startBroker(t)
	_, _, stop := startSim(t, Options{
		Broker:  broker,
		Devices: []Device{{Name: "hall/lamp", Class: ClassLight}},
	})

	if got := string(retained(t, broker, "zigbee2mqtt/bridge/state").payload); got != `{"state":"online"}` {
		t.Errorf("bridge state = %s, want online", got)
	}
	if got := string(retained(t, broker, "zigbee2mqtt/hall/lamp/availability").payload); got != `{"state":"online"}` {
		t.Errorf("availability = %s, want online", got)
	}

	stop()
	if got := string(retained(t, broker, "zigbee2mqtt/bridge/state").payload); got != `{"state":"offline"}` {
		t.Errorf("bridge state after stop = %s, want offline", got)
	}
}

func TestLightSetReportsTarget(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zigbee2mqtt/#")
	sim, _, _ := startSim(t, Options{
		Broker:  broker,
		Devices: []Device{{Name: "living/floor lamp", Class: ClassLight, LinkQuality: 120}},
	})
	const topic = "zigbee2mqtt/living/floor lamp"

	first := w.next(t, topic)
	if first.retained {
		t.Error("initial state was retained; Z2M state messages are not")
	}
	wantState(t, first.json(t), map[string]any{"state": "OFF", "brightness": 0, "linkquality": 120})

	w.publish(t, topic+"/set", `{"brightness":128,"color_temp":370}`)
	wantState(t, w.next(t, topic).json(t), map[string]any{"state": "ON", "brightness": 128, "color_temp": 370, "linkquality": 120})

	w.publish(t, topic+"/set", `{"state":"off"}`)
	wantState(t, w.next(t, topic).json(t), map[string]any{"state": "OFF", "brightness": 128, "color_temp": 370})

	if got := sim.State("living/floor lamp"); got["state"] != "OFF" || got["brightness"] != 128 {
		t.Errorf("State = %v, want OFF at brightness 128", got)
	}
	if got := sim.Sets("living/floor lamp"); got != 2 {
		t.Errorf("Sets = %d, want 2", got)
	}
}

func TestSwitchPlainStringSetAndUnchangedSetStillReport(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zigbee2mqtt/#")
	startSim(t, Options{Broker: broker, Devices: []Device{{Name: "kettle", Class: ClassSwitch}}})
	const topic = "zigbee2mqtt/kettle"
	w.next(t, topic) // initial state

	w.publish(t, topic+"/set", `OFF`) // already off: Z2M still publishes the state
	wantState(t, w.next(t, topic).json(t), map[string]any{"state": "OFF"})

	w.publish(t, topic+"/set", `on`)
	wantState(t, w.next(t, topic).json(t), map[string]any{"state": "ON"})
}

func TestLockReportsLockState(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zigbee2mqtt/#")
	startSim(t, Options{Broker: broker, Devices: []Device{{Name: "front door", Class: ClassLock}}})
	const topic = "zigbee2mqtt/front door"
	wantState(t, w.next(t, topic).json(t), map[string]any{"state": "LOCK", "lock_state": "locked"})

	w.publish(t, topic+"/set", `{"state":"unlock"}`)
	wantState(t, w.next(t, topic).json(t), map[string]any{"state": "UNLOCK", "lock_state": "unlocked"})

	w.publish(t, topic+"/set", `LOCK`)
	wantState(t, w.next(t, topic).json(t), map[string]any{"state": "LOCK", "lock_state": "locked"})
}

func TestCoverPosition(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zigbee2mqtt/#")
	startSim(t, Options{Broker: broker, Devices: []Device{{Name: "blind", Class: ClassCover}}})
	const topic = "zigbee2mqtt/blind"
	wantState(t, w.next(t, topic).json(t), map[string]any{"state": "CLOSE", "position": 0})

	steps := []struct {
		set  string
		want map[string]any
	}{
		{`{"position":40}`, map[string]any{"state": "OPEN", "position": 40}},
		{`{"state":"STOP"}`, map[string]any{"state": "OPEN", "position": 40}},
		{`{"state":"close"}`, map[string]any{"state": "CLOSE", "position": 0}},
		{`OPEN`, map[string]any{"state": "OPEN", "position": 100}},
		{`{"tilt":30}`, map[string]any{"state": "OPEN", "position": 100, "tilt": 30}},
		{`{"position":0}`, map[string]any{"state": "CLOSE", "position": 0}},
	}
	for _, s := range steps {
		w.publish(t, topic+"/set", s.set)
		wantState(t, w.next(t, topic).json(t), s.want)
	}
}

func TestGetReportsState(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zigbee2mqtt/#")
	_, evs, _ := startSim(t, Options{Broker: broker, Devices: []Device{{Name: "lock", Class: ClassLock}}})
	w.next(t, "zigbee2mqtt/lock") // initial state

	w.publish(t, "zigbee2mqtt/lock/get", `{"state":""}`)
	wantState(t, w.next(t, "zigbee2mqtt/lock").json(t), map[string]any{"state": "LOCK", "lock_state": "locked"})
	select {
	case ev := <-evs:
		t.Errorf("a get produced a SetEvent: %+v", ev)
	default:
	}
}

func TestIgnoreGetsLeavesGetsUnansweredButAppliesSets(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zigbee2mqtt/#")
	gets := make(chan GetEvent, 4)
	_, evs, _ := startSim(t, Options{
		Broker:  broker,
		Devices: []Device{{Name: "lock", Class: ClassLock}},
		Faults:  Faults{IgnoreGets: []string{"lock"}},
		OnGet:   func(e GetEvent) { gets <- e },
	})
	w.next(t, "zigbee2mqtt/lock") // initial state

	w.publish(t, "zigbee2mqtt/lock/get", `{"state":""}`)
	select {
	case ev := <-gets:
		if !ev.Ignored || ev.Reason != ReasonIgnoreGets || ev.Device != "lock" || string(ev.Payload) != `{"state":""}` {
			t.Errorf("get event = %+v, want ignored by %q", ev, ReasonIgnoreGets)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no GetEvent")
	}
	// Reports leave in order: the next one answers the set, not the get.
	w.publish(t, "zigbee2mqtt/lock/set", `{"state":"UNLOCK"}`)
	if ev := evs.next(t); ev.Dropped {
		t.Errorf("set dropped: %q", ev.Reason)
	}
	wantState(t, w.next(t, "zigbee2mqtt/lock").json(t), map[string]any{"state": "UNLOCK", "lock_state": "unlocked"})
}

func TestDropFirstDropsExactlyTheFirstSet(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zigbee2mqtt/#")
	sim, evs, _ := startSim(t, Options{
		Broker:  broker,
		Devices: []Device{{Name: "lamp", Class: ClassLight}},
		Faults:  Faults{DropFirst: 1},
	})
	w.next(t, "zigbee2mqtt/lamp") // initial state

	w.publish(t, "zigbee2mqtt/lamp/set", `{"brightness":10}`)
	if ev := evs.next(t); !ev.Dropped || ev.Reason != ReasonDropFirst {
		t.Errorf("first set: Dropped=%v Reason=%q, want dropped by %q", ev.Dropped, ev.Reason, ReasonDropFirst)
	}
	w.publish(t, "zigbee2mqtt/lamp/set", `{"brightness":20}`)
	if ev := evs.next(t); ev.Dropped {
		t.Errorf("second set dropped: %q", ev.Reason)
	}
	// Reports leave in order, so the first report after the initial state
	// would belong to the first set if it had not been dropped.
	wantState(t, w.next(t, "zigbee2mqtt/lamp").json(t), map[string]any{"state": "ON", "brightness": 20})
	if got := sim.Sets("lamp"); got != 2 {
		t.Errorf("Sets = %d, want 2 (dropped ones included)", got)
	}
}

func TestDropRateDropsTheSeededDraws(t *testing.T) {
	const (
		seed1, seed2 = 7, 11
		rate         = 0.5
		n            = 12
	)
	// The sim draws once per set that passes DropFirst, so the same seed
	// predicts exactly which sets are lost.
	predict := rand.New(rand.NewPCG(seed1, seed2))
	var kept []int
	drop := make([]bool, n)
	for i := range n {
		drop[i] = predict.Float64() < rate
		if !drop[i] {
			kept = append(kept, 10*(i+1))
		}
	}
	if len(kept) == 0 || len(kept) == n {
		t.Fatalf("seed drops %d of %d sets; pick a seed that drops some but not all", n-len(kept), n)
	}

	_, broker := startBroker(t)
	w := watch(t, broker, "zigbee2mqtt/#")
	_, evs, _ := startSim(t, Options{
		Broker:  broker,
		Devices: []Device{{Name: "lamp", Class: ClassLight}},
		Faults:  Faults{DropFirst: 1, DropRate: rate},
		Rand:    rand.New(rand.NewPCG(seed1, seed2)),
	})
	w.next(t, "zigbee2mqtt/lamp") // initial state

	w.publish(t, "zigbee2mqtt/lamp/set", `{"brightness":5}`) // DropFirst: no draw
	if ev := evs.next(t); ev.Reason != ReasonDropFirst {
		t.Fatalf("set 0: Reason = %q, want %q", ev.Reason, ReasonDropFirst)
	}
	for i := range n {
		w.publish(t, "zigbee2mqtt/lamp/set", `{"brightness":`+strconv.Itoa(10*(i+1))+`}`)
		ev := evs.next(t)
		if ev.Dropped != drop[i] {
			t.Errorf("set %d: Dropped = %v (%q), want %v", i+1, ev.Dropped, ev.Reason, drop[i])
		}
		if ev.Dropped && ev.Reason != ReasonDropRate {
			t.Errorf("set %d: Reason = %q, want %q", i+1, ev.Reason, ReasonDropRate)
		}
	}
	// A get as a barrier: its report comes after every report of the sets.
	w.publish(t, "zigbee2mqtt/lamp/get", `{"state":""}`)
	for _, b := range append(kept, kept[len(kept)-1]) {
		wantState(t, w.next(t, "zigbee2mqtt/lamp").json(t), map[string]any{"brightness": b})
	}
}

func TestOfflineDeviceIgnoresSetsUntilOnline(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zigbee2mqtt/#")
	sim, evs, _ := startSim(t, Options{
		Broker:  broker,
		Devices: []Device{{Name: "porch", Class: ClassSwitch}, {Name: "hall", Class: ClassSwitch}},
		Faults:  Faults{Offline: []string{"porch"}},
	})
	const (
		state = "zigbee2mqtt/porch"
		avail = "zigbee2mqtt/porch/availability"
	)
	if got := string(retained(t, broker, avail).payload); got != `{"state":"offline"}` {
		t.Errorf("availability = %s, want offline", got)
	}
	if got := string(retained(t, broker, "zigbee2mqtt/hall/availability").payload); got != `{"state":"online"}` {
		t.Errorf("hall availability = %s, want online", got)
	}
	if got := string(w.live(t, avail).payload); got != `{"state":"offline"}` {
		t.Errorf("availability at start = %s, want offline", got)
	}

	w.publish(t, state+"/set", `{"state":"ON"}`)
	if ev := evs.next(t); !ev.Dropped || ev.Reason != ReasonOffline {
		t.Errorf("set to offline device: Dropped=%v Reason=%q, want %q", ev.Dropped, ev.Reason, ReasonOffline)
	}
	w.publish(t, state+"/get", `{"state":""}`)
	// A barrier: the bridge handles its messages in order, so once the
	// hall's set is seen, the get to the offline porch was handled too.
	w.publish(t, "zigbee2mqtt/hall/set", `ON`)
	if ev := evs.next(t); ev.Device != "hall" {
		t.Fatalf("event for %s, want hall", ev.Device)
	}
	if got := sim.State("porch")["state"]; got != "OFF" {
		t.Errorf("offline device applied a set: state %v", got)
	}

	if err := sim.SetOnline("porch", true); err != nil {
		t.Fatal(err)
	}
	if got := string(w.live(t, avail).payload); got != `{"state":"online"}` {
		t.Errorf("availability after SetOnline(true) = %s, want online", got)
	}
	w.publish(t, state+"/set", `{"state":"ON"}`)
	// Reports leave in order: had the offline device sent its initial state,
	// a report for the ignored set or an answer to the get, it would come first.
	wantState(t, w.next(t, state).json(t), map[string]any{"state": "ON"})

	if err := sim.SetOnline("porch", false); err != nil {
		t.Fatal(err)
	}
	if got := string(w.live(t, avail).payload); got != `{"state":"offline"}` {
		t.Errorf("availability after SetOnline(false) = %s, want offline", got)
	}
	if got := string(retained(t, broker, avail).payload); got != `{"state":"offline"}` {
		t.Errorf("retained availability = %s, want offline", got)
	}
	if err := sim.SetOnline("nobody", true); !errors.Is(err, ErrUnknownDevice) {
		t.Errorf("SetOnline(unknown) = %v, want ErrUnknownDevice", err)
	}
}

func TestLatencyWaitsForTheClock(t *testing.T) {
	clock := clockwork.NewFakeClock()
	_, broker := startBroker(t)
	w := watch(t, broker, "zigbee2mqtt/#")
	sim, evs, _ := startSim(t, Options{
		Broker:  broker,
		Devices: []Device{{Name: "lamp", Class: ClassLight}},
		Faults:  Faults{Latency: 2 * time.Second},
		Clock:   clock,
	})
	const topic = "zigbee2mqtt/lamp"
	w.next(t, topic) // the initial state is not delayed

	w.publish(t, topic+"/set", `{"brightness":100}`)
	if ev := evs.next(t); ev.Dropped {
		t.Fatalf("set dropped: %q", ev.Reason)
	}
	if got := sim.State("lamp")["brightness"]; got != 100 {
		t.Errorf("State brightness = %v, want 100 at once", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("report never waited on the clock: %v", err)
	}
	w.none(t, topic)
	clock.Advance(time.Second)
	w.none(t, topic) // 1 s of 2 s: the timer cannot have fired
	clock.Advance(time.Second)
	wantState(t, w.next(t, topic).json(t), map[string]any{"state": "ON", "brightness": 100})
}

func TestMalformedSetIsIgnored(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zigbee2mqtt/#")
	sim, evs, _ := startSim(t, Options{Broker: broker, Devices: []Device{{Name: "lamp", Class: ClassLight}}})
	const topic = "zigbee2mqtt/lamp"
	w.next(t, topic) // initial state

	bad := []struct{ payload, reason string }{
		{`{"state":`, ReasonMalformed},
		{`[1,2]`, ReasonMalformed},
		{`42`, ReasonMalformed},
		{`null`, ReasonMalformed},
		{`{"colour":"red"}`, ReasonNoValidAttribute},
		{`{"state":"BANANA","brightness":"high"}`, ReasonNoValidAttribute},
	}
	for _, b := range bad {
		w.publish(t, topic+"/set", b.payload)
		if ev := evs.next(t); !ev.Dropped || ev.Reason != b.reason {
			t.Errorf("set %s: Dropped=%v Reason=%q, want %q", b.payload, ev.Dropped, ev.Reason, b.reason)
		}
	}
	w.publish(t, topic+"/set", `{"state":"ON","op_id":"abc"}`) // unknown keys are ignored
	if ev := evs.next(t); ev.Dropped || ev.Attrs["op_id"] != "abc" {
		t.Errorf("valid set: Dropped=%v Attrs=%v", ev.Dropped, ev.Attrs)
	}
	// The first report after the initial state is the valid set's.
	wantState(t, w.next(t, topic).json(t), map[string]any{"state": "ON", "brightness": 254})
	if got := sim.Sets("lamp"); got != len(bad)+1 {
		t.Errorf("Sets = %d, want %d", got, len(bad)+1)
	}
}

func TestRetainedSetIsAppliedAndFlagged(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zigbee2mqtt/#")
	// A controller that wrongly retains a command: the broker replays it to
	// the bridge when it subscribes, and Z2M acts on it.
	waitToken(t, w.client.Publish("zigbee2mqtt/lamp/set", 1, true, `{"state":"ON"}`))
	// The broker acks before it fans out; once the message is back here it
	// is stored and delivered, so the sim only sees the retained copy.
	w.next(t, "zigbee2mqtt/lamp/set")
	_, evs, _ := startSim(t, Options{Broker: broker, Devices: []Device{{Name: "lamp", Class: ClassLight}}})

	ev := evs.next(t)
	if !ev.Retained || ev.Dropped {
		t.Errorf("retained set: Retained=%v Dropped=%v, want retained and applied", ev.Retained, ev.Dropped)
	}
	wantState(t, w.next(t, "zigbee2mqtt/lamp").json(t), map[string]any{"state": "OFF"}) // initial
	wantState(t, w.next(t, "zigbee2mqtt/lamp").json(t), map[string]any{"state": "ON"})
}

func TestWillThenJitteredReconnect(t *testing.T) {
	clock := clockwork.NewFakeClock()
	const reconnectDelay = 1234 * time.Millisecond
	asked := make(chan [2]time.Duration, 8)
	srv, broker := startBroker(t)
	w := watch(t, broker, "zigbee2mqtt/#")
	startSim(t, Options{
		Broker:   broker,
		ClientID: "sim-will",
		Devices:  []Device{{Name: "lamp", Class: ClassLight}},
		Clock:    clock,
		Rand:     rand.New(rand.NewPCG(1, 1)),
		Reconnect: func(n int, prev time.Duration, r Rand) time.Duration {
			asked <- [2]time.Duration{time.Duration(n), prev}
			return reconnectDelay
		},
	})
	const bridgeState = "zigbee2mqtt/bridge/state"
	if got := string(w.live(t, bridgeState).payload); got != `{"state":"online"}` {
		t.Fatalf("bridge state = %s, want online", got)
	}
	w.next(t, "zigbee2mqtt/lamp") // initial state

	cl, ok := srv.Clients.Get("sim-will")
	if !ok {
		t.Fatal("sim's client not found on the broker")
	}
	// A power cut: the connection ends without DISCONNECT, so the broker
	// sends the will. (Closing the socket, not cl.Stop: mochi skips the will
	// when its read loop sees the client stopped before the read error.)
	if err := cl.Net.Conn.Close(); err != nil {
		t.Fatal(err)
	}
	if got := string(w.live(t, bridgeState).payload); got != `{"state":"offline"}` {
		t.Fatalf("bridge state after the connection dropped = %s, want the offline will", got)
	}

	// mochi v2.7.9 tears a dropped clean session down after sending its will,
	// by client ID: a reconnect with the same ID in between can lose its new
	// subscription. Let the teardown finish before the sim may reconnect.
	brokerForgets(t, srv, "sim-will")

	// The sim asks Options.Reconnect for the delay before its first
	// reconnect and waits it on its clock, not a moment less.
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("reconnect never waited on the clock: %v", err)
	}
	if got, want := <-asked, [2]time.Duration{1, 0}; got != want {
		t.Errorf("Reconnect asked with (n, prev) = %v, want %v", got, want)
	}
	clock.Advance(reconnectDelay - 1)
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatalf("the sim stopped waiting before the delay: %v", err)
	}
	clock.Advance(1)
	if got := string(w.live(t, bridgeState).payload); got != `{"state":"online"}` {
		t.Fatalf("bridge state after reconnect = %s, want online", got)
	}
	// The initial state is not sent again: the next report is the set's.
	w.publish(t, "zigbee2mqtt/lamp/set", `{"state":"ON"}`)
	wantState(t, w.next(t, "zigbee2mqtt/lamp").json(t), map[string]any{"state": "ON"})
}

func TestEachBaseTopicIsOneBridge(t *testing.T) {
	srv, broker := startBroker(t)
	w := watch(t, broker, "#")
	startSim(t, Options{
		Broker:   broker,
		ClientID: "multi",
		Devices: []Device{
			{Name: "lamp", Class: ClassLight},
			{Name: "door", Class: ClassLock, BaseTopic: "z2m/upstairs"},
		},
	})
	for _, id := range []string{"multi-0", "multi-1"} {
		if _, ok := srv.Clients.Get(id); !ok {
			t.Errorf("no connection %s", id)
		}
	}
	for _, topic := range []string{"zigbee2mqtt/bridge/state", "z2m/upstairs/bridge/state"} {
		if got := string(retained(t, broker, topic).payload); got != `{"state":"online"}` {
			t.Errorf("%s = %s, want online", topic, got)
		}
	}
	w.next(t, "z2m/upstairs/door") // initial state
	w.publish(t, "z2m/upstairs/door/set", `UNLOCK`)
	wantState(t, w.next(t, "z2m/upstairs/door").json(t), map[string]any{"lock_state": "unlocked"})
	w.publish(t, "zigbee2mqtt/door/set", `UNLOCK`) // not a device of that bridge
	w.next(t, "zigbee2mqtt/lamp")                  // initial state
	w.publish(t, "zigbee2mqtt/lamp/set", `ON`)
	wantState(t, w.next(t, "zigbee2mqtt/lamp").json(t), map[string]any{"state": "ON"})
	w.none(t, "zigbee2mqtt/door")
}

func TestRunTwice(t *testing.T) {
	_, broker := startBroker(t)
	sim, _, _ := startSim(t, Options{Broker: broker, Devices: []Device{{Name: "lamp", Class: ClassLight}}})
	if err := sim.Run(context.Background()); !errors.Is(err, ErrAlreadyRun) {
		t.Errorf("second Run = %v, want ErrAlreadyRun", err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	lamp := []Device{{Name: "lamp", Class: ClassLight}}
	tests := []struct {
		name string
		opts Options
	}{
		{"no broker", Options{Devices: lamp}},
		{"broker not a URL", Options{Broker: "127.0.0.1:1883", Devices: lamp}},
		{"no devices", Options{Broker: "tcp://x:1"}},
		{"unknown class", Options{Broker: "tcp://x:1", Devices: []Device{{Name: "t", Class: "thermostat"}}}},
		{"empty name", Options{Broker: "tcp://x:1", Devices: []Device{{Class: ClassLight}}}},
		{"wildcard name", Options{Broker: "tcp://x:1", Devices: []Device{{Name: "a/+", Class: ClassLight}}}},
		{"name ends in set", Options{Broker: "tcp://x:1", Devices: []Device{{Name: "a/set", Class: ClassLight}}}},
		{"bridge name", Options{Broker: "tcp://x:1", Devices: []Device{{Name: "bridge/x", Class: ClassLight}}}},
		{"duplicate name", Options{Broker: "tcp://x:1", Devices: []Device{{Name: "a", Class: ClassLight}, {Name: "a", Class: ClassLock, BaseTopic: "b"}}}},
		{"bad base topic", Options{Broker: "tcp://x:1", Devices: []Device{{Name: "a", Class: ClassLight, BaseTopic: "z2m/"}}}},
		{"link quality", Options{Broker: "tcp://x:1", Devices: []Device{{Name: "a", Class: ClassLight, LinkQuality: 300}}}},
		{"negative DropFirst", Options{Broker: "tcp://x:1", Devices: lamp, Faults: Faults{DropFirst: -1}}},
		{"DropRate above 1", Options{Broker: "tcp://x:1", Devices: lamp, Faults: Faults{DropRate: 1.5}}},
		{"negative latency", Options{Broker: "tcp://x:1", Devices: lamp, Faults: Faults{Latency: -time.Second}}},
		{"unknown offline device", Options{Broker: "tcp://x:1", Devices: lamp, Faults: Faults{Offline: []string{"garage"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.opts); err == nil {
				t.Error("New accepted invalid options")
			}
		})
	}
}

// An announced outage: the bridge says offline on its retained bridge
// state, ignores the sets and gets of every device it holds (and nothing of
// another bridge), and says online again at its end, when sets work again.
func TestAnnouncedBridgeOutageIgnoresSetsAndGets(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "#")
	sim, evs, _ := startSim(t, Options{
		Broker: broker,
		Devices: []Device{
			{Name: "lamp", Class: ClassLight},
			{Name: "door", Class: ClassLock},
			{Name: "landing", Class: ClassLight, BaseTopic: "z2m/upstairs"},
		},
	})
	const bridgeState = "zigbee2mqtt/bridge/state"
	if got := string(w.live(t, bridgeState).payload); got != `{"state":"online"}` {
		t.Fatalf("bridge state = %s, want online", got)
	}
	w.next(t, "zigbee2mqtt/lamp") // initial states
	w.next(t, "zigbee2mqtt/door")
	w.next(t, "z2m/upstairs/landing")

	if err := sim.SetBridgeOnline("", false, true); err != nil {
		t.Fatal(err)
	}
	if got := string(w.live(t, bridgeState).payload); got != `{"state":"offline"}` {
		t.Fatalf("bridge state in an announced outage = %s, want offline", got)
	}
	if got := string(retained(t, broker, bridgeState).payload); got != `{"state":"offline"}` {
		t.Errorf("retained bridge state = %s, want offline", got)
	}
	w.publish(t, "zigbee2mqtt/lamp/set", `{"state":"ON"}`)
	if ev := evs.next(t); ev.Device != "lamp" || !ev.Dropped || ev.Reason != ReasonBridgeOffline {
		t.Errorf("set in the outage: %s Dropped=%v Reason=%q, want dropped by %q", ev.Device, ev.Dropped, ev.Reason, ReasonBridgeOffline)
	}
	w.publish(t, "zigbee2mqtt/door/get", `{"state":""}`)
	// The other bridge still works.
	w.publish(t, "z2m/upstairs/landing/set", `ON`)
	wantState(t, w.next(t, "z2m/upstairs/landing").json(t), map[string]any{"state": "ON"})
	// A barrier: one bridge handles its messages in order, so once this
	// set is seen, the get before it was handled.
	w.publish(t, "zigbee2mqtt/lamp/set", `{"state":"ON"}`)
	if ev := evs.next(t); ev.Device != "landing" {
		t.Fatalf("event for %s, want landing", ev.Device)
	}
	if ev := evs.next(t); ev.Reason != ReasonBridgeOffline {
		t.Fatalf("second set in the outage: Reason = %q, want %q", ev.Reason, ReasonBridgeOffline)
	}
	if got := sim.State("lamp")["state"]; got != "OFF" {
		t.Errorf("a set in the outage was applied: state %v", got)
	}
	if got := string(retained(t, broker, "zigbee2mqtt/lamp/availability").payload); got != `{"state":"online"}` {
		t.Errorf("device availability in the outage = %s, want it unchanged (online)", got)
	}

	if err := sim.SetBridgeOnline("zigbee2mqtt", true, true); err != nil {
		t.Fatal(err)
	}
	if got := string(w.live(t, bridgeState).payload); got != `{"state":"online"}` {
		t.Fatalf("bridge state after the outage = %s, want online", got)
	}
	w.publish(t, "zigbee2mqtt/lamp/set", `{"brightness":50}`)
	// Reports leave in order: had the ignored set or get been answered,
	// its report would come first.
	wantState(t, w.next(t, "zigbee2mqtt/lamp").json(t), map[string]any{"state": "ON", "brightness": 50})
	w.none(t, "zigbee2mqtt/door")
	if err := sim.SetBridgeOnline("z2m/nowhere", false, true); !errors.Is(err, ErrUnknownBridge) {
		t.Errorf("SetBridgeOnline(unknown base) = %v, want ErrUnknownBridge", err)
	}
}

// A silent outage is a hung coordinator: the bridge still says online, and
// only the devices' silence tells. Its end publishes online again, as Z2M
// does when it restarts.
func TestSilentBridgeOutageKeepsBridgeStateOnline(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zigbee2mqtt/#")
	sim, evs, _ := startSim(t, Options{Broker: broker, Devices: []Device{{Name: "lamp", Class: ClassLight}}})
	const bridgeState = "zigbee2mqtt/bridge/state"
	w.live(t, bridgeState)        // online at start
	w.next(t, "zigbee2mqtt/lamp") // initial state

	if err := sim.SetBridgeOnline("", false, false); err != nil {
		t.Fatal(err)
	}
	w.publish(t, "zigbee2mqtt/lamp/set", `ON`)
	if ev := evs.next(t); ev.Reason != ReasonBridgeOffline {
		t.Errorf("set in a silent outage: Reason = %q, want %q", ev.Reason, ReasonBridgeOffline)
	}
	w.publish(t, "zigbee2mqtt/lamp/get", `{"state":""}`)
	// A barrier: once this set is seen, the get before it was handled.
	w.publish(t, "zigbee2mqtt/lamp/set", `ON`)
	if ev := evs.next(t); ev.Reason != ReasonBridgeOffline {
		t.Errorf("second set in a silent outage: Reason = %q, want %q", ev.Reason, ReasonBridgeOffline)
	}
	if err := sim.SetBridgeOnline("", true, false); err != nil {
		t.Fatal(err)
	}
	// The first message on the bridge state since its start is the end of
	// the outage: a silent outage published nothing there.
	if got := string(w.live(t, bridgeState).payload); got != `{"state":"online"}` {
		t.Fatalf("bridge state at the end of the outage = %s, want online", got)
	}
	w.publish(t, "zigbee2mqtt/lamp/set", `{"brightness":7}`)
	wantState(t, w.next(t, "zigbee2mqtt/lamp").json(t), map[string]any{"state": "ON", "brightness": 7})
	if got := string(retained(t, broker, bridgeState).payload); got != `{"state":"online"}` {
		t.Errorf("retained bridge state = %s, want online", got)
	}
}

func TestJamReportsAJammedBoltWhateverWasAsked(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zigbee2mqtt/#")
	sim, evs, _ := startSim(t, Options{
		Broker:  broker,
		Devices: []Device{{Name: "lock", Class: ClassLock}},
		Faults:  Faults{Jam: []string{"lock"}},
	})
	w.next(t, "zigbee2mqtt/lock") // initial state: locked
	w.publish(t, "zigbee2mqtt/lock/set", `{"state":"UNLOCK"}`)
	if ev := evs.next(t); ev.Dropped {
		t.Errorf("set dropped: %q", ev.Reason)
	}
	want := map[string]any{"state": "UNLOCK", "lock_state": "jammed"}
	wantState(t, w.next(t, "zigbee2mqtt/lock").json(t), want)
	wantState(t, sim.State("lock"), want)
}

func TestEchoOnlyEchoesTheSetAndDoesNotMove(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zigbee2mqtt/#")
	sim, evs, _ := startSim(t, Options{
		Broker:  broker,
		Devices: []Device{{Name: "lock", Class: ClassLock}},
		Faults:  Faults{EchoOnly: []string{"lock"}},
	})
	w.next(t, "zigbee2mqtt/lock") // initial state: locked
	w.publish(t, "zigbee2mqtt/lock/set", `{"state":"UNLOCK"}`)
	if ev := evs.next(t); ev.Dropped {
		t.Errorf("set dropped: %q", ev.Reason)
	}
	echo := w.next(t, "zigbee2mqtt/lock").json(t)
	wantState(t, echo, map[string]any{"state": "UNLOCK"})
	if len(echo) != 1 {
		t.Errorf("echo %v: want the set's attributes only", echo)
	}
	wantState(t, sim.State("lock"), map[string]any{"state": "LOCK", "lock_state": "locked"})
	w.publish(t, "zigbee2mqtt/lock/get", `{"state":""}`)
	wantState(t, w.next(t, "zigbee2mqtt/lock").json(t), map[string]any{"state": "LOCK", "lock_state": "locked"})
}

func TestJamAndEchoOnlyNameKnownDevices(t *testing.T) {
	devs := []Device{{Name: "lamp", Class: ClassLight}}
	for _, f := range []Faults{{Jam: []string{"door"}}, {Jam: []string{"lamp"}}, {EchoOnly: []string{"door"}}} {
		if _, err := New(Options{Broker: "tcp://127.0.0.1:1", Devices: devs, Faults: f}); err == nil {
			t.Errorf("New with %+v: no error", f)
		}
	}
}

func TestSilentDeviceIgnoresSetsAndGetsWhileItsAvailabilityStaysOnline(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zigbee2mqtt/#")
	sim, evs, _ := startSim(t, Options{
		Broker:  broker,
		Devices: []Device{{Name: "porch", Class: ClassSwitch}, {Name: "hall", Class: ClassSwitch}},
		Faults:  Faults{Silent: []string{"porch"}},
	})
	if got := string(retained(t, broker, "zigbee2mqtt/porch/availability").payload); got != `{"state":"online"}` {
		t.Errorf("availability = %s, want online", got)
	}
	w.publish(t, "zigbee2mqtt/porch/set", `{"state":"ON"}`)
	if ev := evs.next(t); !ev.Dropped || ev.Reason != ReasonSilent {
		t.Errorf("set to a silent device: Dropped=%v Reason=%q, want %q", ev.Dropped, ev.Reason, ReasonSilent)
	}
	w.publish(t, "zigbee2mqtt/porch/get", `{"state":""}`)
	w.publish(t, "zigbee2mqtt/hall/set", `ON`) // a barrier, as above
	if ev := evs.next(t); ev.Device != "hall" {
		t.Fatalf("event for %s, want hall", ev.Device)
	}
	if got := sim.State("porch")["state"]; got != "OFF" {
		t.Errorf("silent device applied a set: state %v", got)
	}
}

// A dead device answers neither sets nor gets, and its availability stays
// online: Zigbee2MQTT has not noticed yet.
func TestDeadDeviceAnswersNothingAndStaysOnline(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zigbee2mqtt/#")
	_, evs, _ := startSim(t, Options{
		Broker:  broker,
		Devices: []Device{{Name: "bulb", Class: ClassLight}},
		Faults:  Faults{Dead: []string{"bulb"}},
	})
	w.next(t, "zigbee2mqtt/bulb") // initial state
	if m := w.next(t, "zigbee2mqtt/bulb/availability"); string(m.payload) != `{"state":"online"}` {
		t.Errorf("availability %s; want online", m.payload)
	}
	w.publish(t, "zigbee2mqtt/bulb/set", `{"state":"ON"}`)
	if ev := evs.next(t); !ev.Dropped || ev.Reason != ReasonDead {
		t.Errorf("set: dropped %t, reason %q; want dropped, %q", ev.Dropped, ev.Reason, ReasonDead)
	}
	w.publish(t, "zigbee2mqtt/bulb/get", `{"state":""}`)
	w.none(t, "zigbee2mqtt/bulb")
	w.none(t, "zigbee2mqtt/bulb/availability")
}

func TestFailSetsLogsTheFailureOnBridgeLoggingOnceInARow(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zigbee2mqtt/#")
	sim, evs, _ := startSim(t, Options{
		Broker:  broker,
		Devices: []Device{{Name: "kitchen", Class: ClassLight}},
		Faults:  Faults{FailSets: []string{"kitchen"}},
	})
	w.next(t, "zigbee2mqtt/kitchen") // initial state
	w.publish(t, "zigbee2mqtt/kitchen/set", `{"state":"ON"}`)
	if ev := evs.next(t); !ev.Dropped || ev.Reason != ReasonSetFailed {
		t.Errorf("set: Dropped=%v Reason=%q, want %q", ev.Dropped, ev.Reason, ReasonSetFailed)
	}
	want := map[string]any{"level": "error", "namespace": "z2m",
		"message": "Publish 'set' 'state' to 'kitchen' failed: 'Error: Delivery failed for 'kitchen''"}
	wantState(t, w.next(t, "zigbee2mqtt/bridge/logging").json(t), want)
	// The same failure again: Zigbee2MQTT does not repeat a log payload,
	// so the next message is the get's answer.
	w.publish(t, "zigbee2mqtt/kitchen/set", `{"state":"ON"}`)
	evs.next(t)
	w.publish(t, "zigbee2mqtt/kitchen/get", `{"state":""}`)
	if m := w.next(t, "zigbee2mqtt/kitchen"); m.json(t)["state"] != "OFF" {
		t.Errorf("get after failed sets: %s; want state OFF, nothing moved", m.payload)
	}
	// The get's answer left the device's outbox after any log line of the
	// second set: none came.
	select {
	case m := <-w.queue("zigbee2mqtt/bridge/logging"):
		t.Errorf("a second identical log line: %s", m.payload)
	default:
	}
	if got := sim.State("kitchen")["state"]; got != "OFF" {
		t.Errorf("state %v after failed sets; want OFF", got)
	}
}

func TestUnreportedAppliesTheSetAndOnlyAGetShowsIt(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zigbee2mqtt/#")
	sim, evs, _ := startSim(t, Options{
		Broker:  broker,
		Devices: []Device{{Name: "kitchen", Class: ClassLight}},
		Faults:  Faults{Unreported: []string{"kitchen"}},
	})
	w.next(t, "zigbee2mqtt/kitchen") // initial state
	w.publish(t, "zigbee2mqtt/kitchen/set", `{"state":"ON"}`)
	if ev := evs.next(t); ev.Dropped {
		t.Errorf("set dropped: %q; want applied", ev.Reason)
	}
	if got := sim.State("kitchen")["state"]; got != "ON" {
		t.Errorf("state %v; want ON", got)
	}
	w.publish(t, "zigbee2mqtt/kitchen/get", `{"state":""}`)
	if m := w.next(t, "zigbee2mqtt/kitchen"); m.json(t)["state"] != "ON" {
		t.Errorf("first report after the set: %s; want the get's answer, ON (no report of the set)", m.payload)
	}
}
