package simulator

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// value decodes a time-value payload and returns its value.
func (m msg) value(t *testing.T) any {
	t.Helper()
	v, ok := m.json(t)["value"]
	if !ok {
		t.Fatalf("%s: payload %s has no value", m.topic, m.payload)
	}
	return v
}

// getEvents collects GetEvents from Options.OnGet.
type getEvents chan GetEvent

func (g getEvents) next(t *testing.T) GetEvent {
	t.Helper()
	select {
	case ev := <-g:
		return ev
	case <-time.After(deadline):
		t.Fatalf("no GetEvent within %v", deadline)
		return GetEvent{}
	}
}

var zwaveNodes = []Device{
	{Name: "hall/front_door", Class: ClassLock, Protocol: ProtocolZWaveJS, NodeID: 5},
	{Name: "plug", Class: ClassSwitch, Protocol: ProtocolZWaveJS, NodeID: 3},
	{Name: "living/lamp", Class: ClassLight, Protocol: ProtocolZWaveJS, NodeID: 9},
	{Name: "trv", Class: ClassClimate, Protocol: ProtocolZWaveJS, NodeID: 12},
}

// The gateway announces each node's status and the gateway's own, retained,
// publishes the nodes' values, and says false when it stops.
func TestZWaveGatewayStatusValuesAndCleanStop(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zwave/#")
	_, _, stop := startSim(t, Options{Broker: broker, Devices: zwaveNodes})

	gw := retained(t, broker, "zwave/_CLIENTS/ZWAVE_GATEWAY-zwave-js-ui/status").json(t)
	if gw["value"] != true {
		t.Errorf("gateway status = %v, want value true", gw)
	}
	st := retained(t, broker, "zwave/hall/front_door/status").json(t)
	if st["value"] != true || st["status"] != "Alive" || st["nodeId"] != 5.0 {
		t.Errorf("node status = %v, want value true, status Alive, nodeId 5", st)
	}
	for topic, want := range map[string]any{
		"zwave/hall/front_door/98/0/currentMode": 255.0,
		"zwave/hall/front_door/98/0/targetMode":  255.0,
		"zwave/plug/37/0/currentValue":           false,
		"zwave/living/lamp/38/0/currentValue":    0.0,
		"zwave/trv/67/0/setpoint/1":              20.0,
	} {
		if got := w.next(t, topic).value(t); got != want {
			t.Errorf("%s = %v, want %v", topic, got, want)
		}
	}
	stop()
	if got := retained(t, broker, "zwave/_CLIENTS/ZWAVE_GATEWAY-zwave-js-ui/status").json(t); got["value"] != false {
		t.Errorf("gateway status after stop = %v, want value false", got)
	}
}

// A write is echoed on the target value at once, then the node reports
// its current value: a lock, a switch, a light (255 restores the last
// level), a thermostat setpoint without a target echo.
func TestZWaveWritesEchoTargetThenReportCurrent(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zwave/#")
	sim, evs, _ := startSim(t, Options{Broker: broker, Devices: zwaveNodes})
	w.next(t, "zwave/hall/front_door/98/0/targetMode")
	w.next(t, "zwave/hall/front_door/98/0/currentMode")

	w.publish(t, "zwave/hall/front_door/98/0/targetMode/set", `{"value":0}`)
	if ev := evs.next(t); ev.Dropped || ev.Queued || ev.Attrs["value"] != 0.0 {
		t.Errorf("SetEvent = %+v, want applied value 0", ev)
	}
	if got := w.next(t, "zwave/hall/front_door/98/0/targetMode").value(t); got != 0.0 {
		t.Errorf("targetMode echo = %v, want 0", got)
	}
	if got := w.next(t, "zwave/hall/front_door/98/0/currentMode").value(t); got != 0.0 {
		t.Errorf("currentMode = %v, want 0", got)
	}

	w.next(t, "zwave/plug/37/0/currentValue")
	w.publish(t, "zwave/plug/37/0/targetValue/set", `true`) // the plain form
	evs.next(t)
	if got := w.next(t, "zwave/plug/37/0/currentValue").value(t); got != true {
		t.Errorf("switch currentValue = %v, want true", got)
	}

	w.next(t, "zwave/living/lamp/38/0/currentValue")
	for _, tc := range []struct {
		write string
		want  float64
	}{{`{"value":50}`, 50}, {`{"value":0}`, 0}, {`{"value":255}`, 50}} {
		w.publish(t, "zwave/living/lamp/38/0/targetValue/set", tc.write)
		evs.next(t)
		if got := w.next(t, "zwave/living/lamp/38/0/currentValue").value(t); got != tc.want {
			t.Errorf("after %s: light currentValue = %v, want %v", tc.write, got, tc.want)
		}
	}

	w.next(t, "zwave/trv/67/0/setpoint/1")
	w.publish(t, "zwave/trv/67/0/setpoint/1/set", `{"value":21.5}`)
	evs.next(t)
	if got := w.next(t, "zwave/trv/67/0/setpoint/1").value(t); got != 21.5 {
		t.Errorf("setpoint = %v, want 21.5", got)
	}
	if got := sim.State("trv")["67/0/setpoint/1"]; got != 21.5 {
		t.Errorf("State setpoint = %v, want 21.5", got)
	}

	// Invalid writes are refused without a report.
	w.publish(t, "zwave/hall/front_door/98/0/targetMode/set", `{"value":7}`)
	if ev := evs.next(t); !ev.Dropped || ev.Reason != ReasonNoValidAttribute {
		t.Errorf("mode 7: SetEvent = %+v, want dropped %s", ev, ReasonNoValidAttribute)
	}
	w.publish(t, "zwave/plug/37/0/targetValue/set", `{"nope":1}`)
	if ev := evs.next(t); !ev.Dropped || ev.Reason != ReasonMalformed {
		t.Errorf("no value: SetEvent = %+v, want dropped %s", ev, ReasonMalformed)
	}
	w.none(t, "zwave/hall/front_door/98/0/currentMode")
	if got := sim.Sets("hall/front_door"); got != 2 {
		t.Errorf("Sets = %d, want 2", got)
	}
}

// pollValue publishes the value asked for, refreshValues all the node's
// current values; a lock set to mode 0xFE answers with 254.
func TestZWavePollAndRefresh(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zwave/#")
	gets := make(getEvents, 16)
	sim, _, _ := startSim(t, Options{Broker: broker, Devices: zwaveNodes, OnGet: func(e GetEvent) { gets <- e }})
	const mode = "zwave/hall/front_door/98/0/currentMode"
	w.next(t, mode)

	if err := sim.SetLockMode("hall/front_door", LockModeUnknown); err != nil {
		t.Fatal(err)
	}
	if got := w.next(t, mode).value(t); got != 254.0 {
		t.Errorf("currentMode = %v, want 254", got)
	}
	w.publish(t, "zwave/_CLIENTS/ZWAVE_GATEWAY-zwave-js-ui/api/pollValue/set",
		`{"args":[{"nodeId":5,"commandClass":98,"endpoint":0,"property":"currentMode"}]}`)
	if ev := gets.next(t); ev.Device != "hall/front_door" || ev.Ignored {
		t.Errorf("GetEvent = %+v, want answered for hall/front_door", ev)
	}
	if got := w.next(t, mode).value(t); got != 254.0 {
		t.Errorf("polled currentMode = %v, want 254", got)
	}
	if got := w.next(t, "zwave/_CLIENTS/ZWAVE_GATEWAY-zwave-js-ui/api/pollValue").json(t); got["success"] != true {
		t.Errorf("API answer = %v, want success", got)
	}

	w.next(t, "zwave/trv/67/0/setpoint/1")
	w.publish(t, "zwave/_CLIENTS/ZWAVE_GATEWAY-zwave-js-ui/api/refreshValues/set", `{"args":[12]}`)
	gets.next(t)
	if got := w.next(t, "zwave/trv/67/0/setpoint/1").value(t); got != 20.0 {
		t.Errorf("refreshed setpoint = %v, want 20", got)
	}

	if err := sim.SetLockMode("plug", 0); !errors.Is(err, ErrNotALock) {
		t.Errorf("SetLockMode(plug) = %v, want ErrNotALock", err)
	}
}

// A jammed lock's bolt does not move: the write is echoed on targetMode
// and the node reports Notification CC Access Control "Lock jammed" (11);
// an EchoOnly node echoes its target and never reports a current value.
func TestZWaveJamAndEchoOnly(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zwave/#")
	sim, evs, _ := startSim(t, Options{Broker: broker, Devices: zwaveNodes,
		Faults: Faults{Jam: []string{"hall/front_door"}, EchoOnly: []string{"plug"}}})
	w.next(t, "zwave/hall/front_door/98/0/currentMode")
	w.next(t, "zwave/plug/37/0/currentValue")

	w.publish(t, "zwave/hall/front_door/98/0/targetMode/set", `{"value":0}`)
	evs.next(t)
	w.next(t, "zwave/hall/front_door/98/0/targetMode")
	if got := w.next(t, "zwave/hall/front_door/113/0/Access_Control/Lock_state").value(t); got != 11.0 {
		t.Errorf("lock state notification = %v, want 11 (jammed)", got)
	}
	if got := sim.State("hall/front_door")["98/0/currentMode"]; got != 255 {
		t.Errorf("currentMode = %v, want 255 (unmoved)", got)
	}

	w.next(t, "zwave/plug/37/0/targetValue") // the initial value
	w.publish(t, "zwave/plug/37/0/targetValue/set", `{"value":true}`)
	evs.next(t)
	if got := w.next(t, "zwave/plug/37/0/targetValue").value(t); got != true {
		t.Errorf("echo = %v, want true", got)
	}
	w.publish(t, "zwave/_CLIENTS/ZWAVE_GATEWAY-zwave-js-ui/api/pollValue/set",
		`{"args":[{"nodeId":3,"commandClass":37,"endpoint":0,"property":"currentValue"}]}`)
	if got := w.next(t, "zwave/plug/37/0/currentValue").value(t); got != false {
		t.Errorf("polled currentValue = %v, want false: an echo-only node does not move", got)
	}
}

// A sleepy node is Asleep from the start; the gateway echoes a write's
// target at once but holds it in the wake-up queue, and at the wake
// (WakeInterval on the clock) the node reports Awake, applies the queued
// writes in order, answers a held poll, and after AwakeWindow is Asleep
// again. Wake wakes it on demand.
func TestZWaveSleepyNodeWakeUpQueue(t *testing.T) {
	clock := clockwork.NewFakeClock()
	_, broker := startBroker(t)
	w := watch(t, broker, "zwave/#")
	sim, evs, _ := startSim(t, Options{Broker: broker, Clock: clock, Devices: []Device{
		{Name: "trv", Class: ClassClimate, Protocol: ProtocolZWaveJS, NodeID: 12, WakeInterval: time.Hour, AwakeWindow: 10 * time.Second},
	}})
	const status, sp = "zwave/trv/status", "zwave/trv/67/0/setpoint/1"
	if st := w.next(t, status).json(t); st["status"] != "Asleep" || st["value"] != false {
		t.Errorf("status = %v, want Asleep, value false", st)
	}
	w.next(t, sp)

	w.publish(t, sp+"/set", `{"value":21}`)
	w.publish(t, sp+"/set", `{"value":18}`)
	for range 2 {
		if ev := evs.next(t); !ev.Queued || ev.Dropped {
			t.Errorf("SetEvent = %+v, want queued", ev)
		}
	}
	w.publish(t, "zwave/_CLIENTS/ZWAVE_GATEWAY-zwave-js-ui/api/pollValue/set",
		`{"args":[{"nodeId":12,"commandClass":67,"endpoint":0,"property":"setpoint","propertyKey":1}]}`)
	w.next(t, "zwave/_CLIENTS/ZWAVE_GATEWAY-zwave-js-ui/api/pollValue")
	w.none(t, sp)
	if !sim.Asleep("trv") {
		t.Error("Asleep = false before the first wake")
	}

	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	if st := w.next(t, status).json(t); st["status"] != "Awake" || st["value"] != true {
		t.Errorf("status at wake = %v, want Awake", st)
	}
	for _, want := range []float64{21, 18, 18} { // the writes in order, then the poll
		if got := w.next(t, sp).value(t); got != want {
			t.Errorf("setpoint at wake = %v, want %v", got, want)
		}
	}
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(10 * time.Second)
	if st := w.next(t, status).json(t); st["status"] != "Asleep" {
		t.Errorf("status after the window = %v, want Asleep", st)
	}

	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := sim.Wake("trv"); err != nil {
		t.Fatal(err)
	}
	if st := w.next(t, status).json(t); st["status"] != "Awake" {
		t.Errorf("status after Wake = %v, want Awake", st)
	}
	w.publish(t, sp+"/set", `{"value":19}`)
	if ev := evs.next(t); ev.Queued {
		t.Errorf("a write while awake was queued: %+v", ev)
	}
	if got := w.next(t, sp).value(t); got != 19.0 {
		t.Errorf("setpoint while awake = %v, want 19", got)
	}
}

// A sleepy Zigbee2MQTT device drops sets while asleep (its parent buffers
// for seconds only), checks in with its full state at each wake and
// applies sets while awake.
func TestZigbeeSleepyDeviceDropsSetsWhileAsleep(t *testing.T) {
	clock := clockwork.NewFakeClock()
	_, broker := startBroker(t)
	w := watch(t, broker, "zigbee2mqtt/#")
	sim, evs, _ := startSim(t, Options{Broker: broker, Clock: clock, Devices: []Device{
		{Name: "sensor_plug", Class: ClassSwitch, WakeInterval: 5 * time.Minute, AwakeWindow: 5 * time.Second},
	}})
	const topic = "zigbee2mqtt/sensor_plug"
	w.next(t, topic)
	w.publish(t, topic+"/set", `{"state":"ON"}`)
	if ev := evs.next(t); !ev.Dropped || ev.Reason != ReasonAsleep {
		t.Errorf("SetEvent while asleep = %+v, want dropped %s", ev, ReasonAsleep)
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(5 * time.Minute)
	wantState(t, w.next(t, topic).json(t), map[string]any{"state": "OFF"}) // the check-in
	w.publish(t, topic+"/set", `{"state":"ON"}`)
	if ev := evs.next(t); ev.Dropped {
		t.Errorf("SetEvent while awake = %+v, want applied", ev)
	}
	wantState(t, w.next(t, topic).json(t), map[string]any{"state": "ON"})
	if err := sim.Wake("sensor_plug"); err != nil {
		t.Fatal(err)
	}
	if err := sim.Wake("ghost"); !errors.Is(err, ErrUnknownDevice) {
		t.Errorf("Wake(ghost) = %v, want ErrUnknownDevice", err)
	}
}

// A dead node ignores writes; its status says Dead, then Alive again.
func TestZWaveDeadNode(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zwave/plug/#")
	sim, evs, _ := startSim(t, Options{Broker: broker, Devices: zwaveNodes, Faults: Faults{Offline: []string{"plug"}}})
	if st := w.next(t, "zwave/plug/status").json(t); st["status"] != "Dead" || st["value"] != false {
		t.Errorf("status = %v, want Dead", st)
	}
	w.publish(t, "zwave/plug/37/0/targetValue/set", `{"value":true}`)
	if ev := evs.next(t); ev.Reason != ReasonOffline {
		t.Errorf("SetEvent = %+v, want %s", ev, ReasonOffline)
	}
	if err := sim.SetOnline("plug", true); err != nil {
		t.Fatal(err)
	}
	if st := w.next(t, "zwave/plug/status").json(t); st["status"] != "Alive" {
		t.Errorf("status = %v, want Alive", st)
	}
}

func TestZWaveNewRejectsBadNodes(t *testing.T) {
	for _, d := range []Device{
		{Name: "a", Class: ClassLock, Protocol: ProtocolZWaveJS},
		{Name: "a", Class: "fan", Protocol: ProtocolZWaveJS, NodeID: 2},
		{Name: "a/b/c", Class: ClassLock, Protocol: ProtocolZWaveJS, NodeID: 2},
		{Name: "a", Class: ClassLock, Protocol: "matter"},
		{Name: "a", Class: ClassSwitch, WakeInterval: time.Minute},
		{Name: "a", Class: ClassSwitch, WakeInterval: time.Minute, AwakeWindow: time.Minute},
	} {
		if _, err := New(Options{Broker: "tcp://127.0.0.1:1", Devices: []Device{d}}); err == nil {
			t.Errorf("New(%+v) = nil error", d)
		}
	}
	if _, err := New(Options{Broker: "tcp://127.0.0.1:1", Devices: []Device{
		{Name: "a", Class: ClassLock, Protocol: ProtocolZWaveJS, NodeID: 2},
		{Name: "b", Class: ClassLock, Protocol: ProtocolZWaveJS, NodeID: 2},
	}}); err == nil {
		t.Error("New with a node ID used twice = nil error")
	}
}

// The gateway publishes its driver's status, the plain true, retained, at
// start; SetDriverReady(false) publishes false while the gateway's client
// status stays true, and every write is then dropped as bridge_offline;
// ready again, true, and writes apply.
func TestZWaveDriverGoneAndBack(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zwave/#")
	sim, evs, _ := startSim(t, Options{Broker: broker, Devices: zwaveNodes})
	if m := retained(t, broker, "zwave/driver/status"); string(m.payload) != "true" {
		t.Fatalf("driver status at start = %s, want true", m.payload)
	}
	if err := sim.SetDriverReady("", false); err != nil {
		t.Fatal(err)
	}
	for m := w.live(t, "zwave/driver/status"); string(m.payload) != "false"; m = w.live(t, "zwave/driver/status") {
		if string(m.payload) != "true" {
			t.Fatalf("driver status = %s, want true (at start) then false", m.payload)
		}
	}
	if m := retained(t, broker, "zwave/driver/status"); string(m.payload) != "false" {
		t.Errorf("retained driver status = %s, want false", m.payload)
	}
	if gw := retained(t, broker, "zwave/_CLIENTS/ZWAVE_GATEWAY-zwave-js-ui/status").json(t); gw["value"] != true {
		t.Errorf("gateway client status with the driver gone = %v, want value true", gw)
	}
	w.publish(t, "zwave/plug/37/0/targetValue/set", `{"value":true}`)
	if ev := evs.next(t); !ev.Dropped || ev.Reason != ReasonBridgeOffline {
		t.Errorf("write with the driver gone: %+v; want dropped, bridge_offline", ev)
	}
	if err := sim.SetDriverReady("", true); err != nil {
		t.Fatal(err)
	}
	if m := w.live(t, "zwave/driver/status"); string(m.payload) != "true" {
		t.Fatalf("driver status after ready = %s, want true", m.payload)
	}
	w.publish(t, "zwave/plug/37/0/targetValue/set", `{"value":true}`)
	if ev := evs.next(t); ev.Dropped {
		t.Errorf("write with the driver back: %+v; want applied", ev)
	}
	if err := sim.SetDriverReady("nowhere", true); !errors.Is(err, ErrUnknownBridge) {
		t.Errorf("SetDriverReady(nowhere) = %v, want ErrUnknownBridge", err)
	}
}

// A multi-channel node named with spaces: its topics use the sanitised
// name, and a write to endpoint 2 moves endpoint 2 alone.
func TestZWaveEndpointsAndSanitisedName(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "zwave/#")
	sim, evs, _ := startSim(t, Options{Broker: broker, Devices: []Device{
		{Name: "Kitchen Double (2)", Class: ClassSwitch, Protocol: ProtocolZWaveJS, NodeID: 4, Endpoints: 2},
	}})
	if st := retained(t, broker, "zwave/Kitchen_Double_2/status").json(t); st["nodeId"] != 4.0 {
		t.Fatalf("status on the sanitised name: %v", st)
	}
	w.publish(t, "zwave/Kitchen_Double_2/37/2/targetValue/set", `{"value":true}`)
	if ev := evs.next(t); ev.Dropped || ev.Device != "Kitchen Double (2)" {
		t.Fatalf("write to endpoint 2: %+v; want applied to Kitchen Double (2)", ev)
	}
	for m := w.live(t, "zwave/Kitchen_Double_2/37/2/currentValue"); m.value(t) != true; m = w.live(t, "zwave/Kitchen_Double_2/37/2/currentValue") {
		// its value at start, false, comes first
	}
	st := sim.State("Kitchen Double (2)")
	if st["37/2/currentValue"] != true || st["37/1/currentValue"] != false || st["37/0/currentValue"] != false {
		t.Errorf("values %v; want endpoint 2 on, 0 and 1 off", st)
	}
	w.publish(t, "zwave/Kitchen_Double_2/37/3/targetValue/set", `{"value":true}`)
	if ev := evs.next(t); !ev.Dropped {
		t.Errorf("write to endpoint 3 of a 2-endpoint node: %+v; want dropped", ev)
	}
}
