package zwavejs

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"testing"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/mqtt"
)

// Send writes each class's target to the value topic plus /set at QoS 1,
// not retained, with {"value": …}, by command class number.
func TestAdapterSendWritesValueTopics(t *testing.T) {
	addr := startBroker(t)
	seen := observe(t, addr, "zwave/#")
	a, _, _ := startAdapter(t, addr, Options{})

	lamp, plug, door, trv, blind := testDevices[0], testDevices[1], testDevices[2], testDevices[3], testDevices[4]
	tests := []struct {
		dev    devices.Device
		target devices.Target
		want   observed
	}{
		{door, devices.Target{"state": "LOCK"}, observed{"zwave/hall/front_door/98/0/targetMode/set", `{"value":255}`, 1, false}},
		{door, devices.Target{"state": "UNLOCK"}, observed{"zwave/hall/front_door/98/0/targetMode/set", `{"value":0}`, 1, false}},
		{plug, devices.Target{"state": "ON"}, observed{"zwave/plug/37/0/targetValue/set", `{"value":true}`, 1, false}},
		{plug, devices.Target{"state": "OFF"}, observed{"zwave/plug/37/0/targetValue/set", `{"value":false}`, 1, false}},
		{lamp, devices.Target{"state": "ON", "brightness": 254.0}, observed{"zwave/living/lamp/38/0/targetValue/set", `{"value":99}`, 1, false}},
		{lamp, devices.Target{"state": "ON", "brightness": 128.0}, observed{"zwave/living/lamp/38/0/targetValue/set", `{"value":50}`, 1, false}},
		{lamp, devices.Target{"brightness": 1.0}, observed{"zwave/living/lamp/38/0/targetValue/set", `{"value":1}`, 1, false}},
		{lamp, devices.Target{"brightness": 0.0}, observed{"zwave/living/lamp/38/0/targetValue/set", `{"value":0}`, 1, false}},
		{lamp, devices.Target{"state": "OFF"}, observed{"zwave/living/lamp/38/0/targetValue/set", `{"value":0}`, 1, false}},
		{lamp, devices.Target{"state": "ON"}, observed{"zwave/living/lamp/38/0/targetValue/set", `{"value":255}`, 1, false}},
		{lamp, devices.Target{"state": "ON", "brightness": 200.0, "transition": 1.5},
			observed{"zwave/living/lamp/38/0/targetValue/set", `{"options":{"transitionDuration":"1.5s"},"value":78}`, 1, false}},
		{trv, devices.Target{"current_heating_setpoint": 21.5}, observed{"zwave/12/67/0/setpoint/1/set", `{"value":21.5}`, 1, false}},
		{trv, devices.Target{"occupied_heating_setpoint": 18.0}, observed{"zwave/12/67/0/setpoint/1/set", `{"value":18}`, 1, false}},
		{blind, devices.Target{"position": 100.0}, observed{"zwave/bed/7/38/0/targetValue/set", `{"value":99}`, 1, false}},
		{blind, devices.Target{"position": 40.0}, observed{"zwave/bed/7/38/0/targetValue/set", `{"value":40}`, 1, false}},
		{blind, devices.Target{"state": "OPEN"}, observed{"zwave/bed/7/38/0/targetValue/set", `{"value":99}`, 1, false}},
		{blind, devices.Target{"state": "CLOSE"}, observed{"zwave/bed/7/38/0/targetValue/set", `{"value":0}`, 1, false}},
	}
	for _, tc := range tests {
		if err := a.Send(context.Background(), tc.dev, tc.target); err != nil {
			t.Fatalf("Send(%s, %v) = %v", tc.dev.ID, tc.target, err)
		}
		if got := nextObserved(t, seen); got != tc.want {
			t.Errorf("Send(%s, %v) published %+v, want %+v", tc.dev.ID, tc.target, got, tc.want)
		}
	}
}

// A target the adapter cannot write fails with a permanent error before
// anything is sent (the Conn never ran: a publish would say not connected).
func TestAdapterSendUnsupportedIsPermanent(t *testing.T) {
	a := New(mqtt.New(mqtt.Options{URL: "tcp://127.0.0.1:1", ClientID: "never-run"}), Options{Devices: testDevices})
	tests := []struct {
		dev    devices.Device
		target devices.Target
	}{
		{testDevices[0], devices.Target{"state": "ON", "color_temp": 300.0}},
		{testDevices[4], devices.Target{"state": "STOP"}},
		{testDevices[4], devices.Target{"tilt": 20.0}},
		{devices.Device{ID: "v", Class: devices.Valve}, devices.Target{"state": "OPEN"}},
	}
	for _, tc := range tests {
		err := a.Send(context.Background(), tc.dev, tc.target)
		var p interface{ Permanent() bool }
		if !errors.As(err, &p) || !p.Permanent() || errors.Is(err, mqtt.ErrNotConnected) {
			t.Errorf("Send(%s, %v) = %v, want a permanent error before any publish", tc.dev.ID, tc.target, err)
		}
	}
}

// Value reports reach the Sink in Hearth's attributes, from the time-value
// form, the ValueId object form and the plain form alike; targetMode and
// targetValue never reach it.
func TestAdapterDecodesValues(t *testing.T) {
	addr := startBroker(t)
	_, s, _ := startAdapter(t, addr, Options{})
	gw := newBridge(t, addr)
	locked := map[string]any{"state": "LOCK", "lock_state": "locked"}
	unlocked := map[string]any{"state": "UNLOCK", "lock_state": "unlocked"}
	unknown := map[string]any{"lock_state": "unknown"}

	tests := []struct {
		name, topic, payload string
		want                 call
	}{
		{"lock secured, time-value", "zwave/hall/front_door/98/0/currentMode", `{"time":1548683523859,"value":255}`, call{kind: "report", name: "door", state: locked}},
		{"lock unsecured, plain", "zwave/hall/front_door/98/0/currentMode", `0`, call{kind: "report", name: "door", state: unlocked}},
		{"lock unsecured with timeout", "zwave/hall/front_door/98/0/currentMode", `{"time":1,"value":1}`, call{kind: "report", name: "door", state: unlocked}},
		{"lock inside unsecured", "zwave/hall/front_door/98/0/currentMode", `{"time":1,"value":16}`, call{kind: "report", name: "door", state: unlocked}},
		{"lock inside unsecured with timeout", "zwave/hall/front_door/98/0/currentMode", `17`, call{kind: "report", name: "door", state: unlocked}},
		{"lock outside unsecured", "zwave/hall/front_door/98/0/currentMode", `32`, call{kind: "report", name: "door", state: unlocked}},
		{"lock outside unsecured with timeout", "zwave/hall/front_door/98/0/currentMode", `33`, call{kind: "report", name: "door", state: unlocked}},
		{"lock mode 0xFE unknown", "zwave/hall/front_door/98/0/currentMode", `{"time":1,"value":254}`, call{kind: "report", name: "door", state: unknown}},
		{"lock mode unmapped 2", "zwave/hall/front_door/98/0/currentMode", `2`, call{kind: "report", name: "door", state: unknown}},
		{"lock mode unmapped 0.5", "zwave/hall/front_door/98/0/currentMode", `0.5`, call{kind: "report", name: "door", state: unknown}},
		{"lock mode null", "zwave/hall/front_door/98/0/currentMode", `{"time":1,"value":null}`, call{kind: "report", name: "door", state: unknown}},
		{"lock mode a word", "zwave/hall/front_door/98/0/currentMode", `"Unsecured"`, call{kind: "report", name: "door", state: unknown}},
		{"lock, ValueId object form", "zwave/hall/front_door/98/0/currentMode", `{"id":"98-0-currentMode","nodeId":5,"commandClass":98,"value":255}`, call{kind: "report", name: "door", state: locked}},
		{"lock, named topics", "zwave/hall/front_door/door_lock/endpoint_0/currentMode", `{"time":1,"value":0}`, call{kind: "report", name: "door", state: unlocked}},
		{"lock jammed notification", "zwave/hall/front_door/113/0/Access_Control/Lock_state", `{"time":1,"value":11}`, call{kind: "report", name: "door", state: map[string]any{"lock_state": "jammed"}}},
		{"lock jammed notification with spaces", "zwave/hall/front_door/113/0/Access Control/Lock state", `11`, call{kind: "report", name: "door", state: map[string]any{"lock_state": "jammed"}}},
		{"switch on", "zwave/plug/37/0/currentValue", `{"time":1,"value":true}`, call{kind: "report", name: "plug", state: map[string]any{"state": "ON"}}},
		{"switch off plain", "zwave/plug/37/0/currentValue", `false`, call{kind: "report", name: "plug", state: map[string]any{"state": "OFF"}}},
		{"switch, named", "zwave/plug/switch_binary/endpoint_0/currentValue", `true`, call{kind: "report", name: "plug", state: map[string]any{"state": "ON"}}},
		{"light off", "zwave/living/lamp/38/0/currentValue", `{"time":1,"value":0}`, call{kind: "report", name: "lamp", state: map[string]any{"state": "OFF", "brightness": 0.0}}},
		{"light full", "zwave/living/lamp/38/0/currentValue", `99`, call{kind: "report", name: "lamp", state: map[string]any{"state": "ON", "brightness": 254.0}}},
		{"light level 50, not written by Hearth", "zwave/living/lamp/38/0/currentValue", `50`, call{kind: "report", name: "lamp", state: map[string]any{"state": "ON", "brightness": 128.0}}},
		{"light level 1", "zwave/living/lamp/38/0/currentValue", `1`, call{kind: "report", name: "lamp", state: map[string]any{"state": "ON", "brightness": 3.0}}},
		{"setpoint", "zwave/12/67/0/setpoint/1", `{"time":1,"value":21.5}`, call{kind: "report", name: "trv", state: map[string]any{"current_heating_setpoint": 21.5, "occupied_heating_setpoint": 21.5}}},
		{"cover 99", "zwave/bed/7/38/0/currentValue", `99`, call{kind: "report", name: "blind", state: map[string]any{"state": "OPEN", "position": 100.0}}},
		{"cover 0", "zwave/bed/7/38/0/currentValue", `0`, call{kind: "report", name: "blind", state: map[string]any{"state": "CLOSE", "position": 0.0}}},
		{"cover 98", "zwave/bed/7/38/0/currentValue", `98`, call{kind: "report", name: "blind", state: map[string]any{"state": "OPEN", "position": 99.0}}},
		{"another value of a node: news, no state", "zwave/hall/front_door/128/0/level", `{"time":1,"value":80}`, call{kind: "report", name: "door", state: map[string]any{}}},
		{"lastActive: news, no state", "zwave/plug/lastActive", `{"time":1,"value":1610009585743}`, call{kind: "report", name: "plug", state: map[string]any{}}},
	}
	for _, tc := range tests {
		gw.publish(t, tc.topic, tc.payload)
		if got := s.next(t); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Sink got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// targetMode and targetValue, which the gateway publishes as soon as it
// accepts a write, never reach the Sink; nor do writes, API calls, other
// prefixes and unknown nodes. Each is followed by a good report, which must
// be the next Sink call.
func TestAdapterIgnoresTargetsAndWhatItCannotUse(t *testing.T) {
	addr := startBroker(t)
	_, s, _ := startAdapter(t, addr, Options{})
	gw := newBridge(t, addr)
	good := call{kind: "report", name: "plug", state: map[string]any{"state": "ON"}}
	tests := []struct{ name, topic, payload string }{
		{"lock targetMode", "zwave/hall/front_door/98/0/targetMode", `{"time":1,"value":0}`},
		{"lock targetMode named", "zwave/hall/front_door/door_lock/endpoint_0/targetMode", `0`},
		{"switch targetValue", "zwave/plug/37/0/targetValue", `{"time":1,"value":true}`},
		{"light targetValue", "zwave/living/lamp/38/0/targetValue", `99`},
		{"a write", "zwave/plug/37/0/targetValue/set", `{"value":true}`},
		{"a write of a current value", "zwave/plug/37/0/currentValue/set", `{"value":true}`},
		{"an API call", "zwave/_CLIENTS/ZWAVE_GATEWAY-zwave-js-ui/api/pollValue/set", `{"args":[{"nodeId":5}]}`},
		{"an API answer", "zwave/_CLIENTS/ZWAVE_GATEWAY-zwave-js-ui/api/pollValue", `{"success":true}`},
		{"another gateway's status", "zwave/_CLIENTS/ZWAVE_GATEWAY-other/status", `{"value":true}`},
		{"an unknown node", "zwave/ghost/37/0/currentValue", `true`},
		{"an unknown node in a known location", "zwave/hall/ghost/37/0/currentValue", `true`},
		{"another prefix", "zwave2/plug/37/0/currentValue", `true`},
		{"an unknown named class", "zwave/plug/basic_thing/endpoint_0/currentValue", `true`},
		{"a bad endpoint", "zwave/plug/37/x/currentValue", `true`},
		{"too deep", "zwave/plug/37/0/a/b/c", `true`},
		{"nodeinfo", "zwave/plug/nodeinfo", `{"id":3}`},
		{"empty value", "zwave/plug/37/0/currentValue", ``},
		{"truncated JSON value", "zwave/plug/37/0/currentValue", `{"value":`},
		{"time-value without value", "zwave/plug/37/0/currentValue", `{"time":1}`},
		{"unreadable node status", "zwave/plug/status", `{"time":1,"value":"maybe"}`},
		{"unreadable gateway status", "zwave/_CLIENTS/ZWAVE_GATEWAY-zwave-js-ui/status", `{"time":1}`},
		{"driver status", "zwave/driver/status", `true`},
	}
	for _, tc := range tests {
		gw.publish(t, tc.topic, tc.payload)
		gw.publish(t, "zwave/plug/37/0/currentValue", `true`)
		if got := s.next(t); !reflect.DeepEqual(got, good) {
			t.Errorf("%s (%s %q): Sink got %+v, want only the good report that followed", tc.name, tc.topic, tc.payload, got)
		}
	}
}

// A light's brightness and a cover's position that Hearth wrote are
// reported back exactly when the node reaches the level they were written
// as, so that the dispatcher's Satisfied confirms them: every brightness
// 1–254 and every position 0–100 round-trips.
func TestAdapterLevelsRoundTripToWhatHearthAsked(t *testing.T) {
	addr := startBroker(t)
	a, s, _ := startAdapter(t, addr, Options{})
	gw := newBridge(t, addr)
	seen := observe(t, addr, "zwave/+/+/38/0/targetValue/set")
	lamp, blind := testDevices[0], testDevices[4]
	echoLevel := func(dev devices.Device, target devices.Target) map[string]any {
		t.Helper()
		if err := a.Send(context.Background(), dev, target); err != nil {
			t.Fatal(err)
		}
		w := nextObserved(t, seen)
		v, _ := parseValue([]byte(w.payload))
		gw.publish(t, "zwave/"+dev.Address+"/38/0/currentValue", `{"time":1,"value":`+jsonNumber(v)+`}`)
		return s.next(t).state
	}
	for b := 1; b <= 254; b++ {
		target := devices.Target{"state": "ON", "brightness": float64(b)}
		got := echoLevel(lamp, target)
		if !devices.Satisfied(devices.Light, target, got) || got["brightness"] != float64(b) {
			t.Errorf("brightness %d: report %v does not satisfy %v", b, got, target)
		}
	}
	for p := 0; p <= 100; p++ {
		target := devices.Target{"position": float64(p)}
		got := echoLevel(blind, target)
		if !devices.Satisfied(devices.Cover, target, got) || got["position"] != float64(p) {
			t.Errorf("position %d: report %v does not satisfy %v", p, got, target)
		}
	}
	for _, target := range []devices.Target{{"state": "OPEN"}, {"state": "CLOSE"}} {
		if got := echoLevel(blind, target); !devices.Satisfied(devices.Cover, target, got) {
			t.Errorf("%v: report %v does not satisfy it", target, got)
		}
	}
}

func jsonNumber(v any) string {
	f, _ := number(v)
	return strconv.FormatFloat(f, 'f', -1, 64)
}

// An unknown lock mode reads invalid before a risky attempt and satisfies
// neither LOCK nor UNLOCK; it is not a fault (jam).
func TestUnknownLockModeIsNeverUnlocked(t *testing.T) {
	a := New(mqtt.New(mqtt.Options{URL: "tcp://127.0.0.1:1", ClientID: "x"}), Options{Devices: testDevices})
	for _, mode := range []any{254.0, 2.0, 3.0, 15.0, 253.0, nil, "0", true} {
		st := a.decode(testDevices[2], ccDoorLock, "currentMode", "", mode)
		for _, target := range []devices.Target{{"state": "UNLOCK"}, {"state": "LOCK"}} {
			if r := devices.Assess(devices.Lock, target, st); r != devices.ReadingInvalid {
				t.Errorf("mode %v: Assess(%v, %v) = %v, want invalid", mode, target, st, r)
			}
			if devices.Satisfied(devices.Lock, target, st) {
				t.Errorf("mode %v: %v satisfies %v", mode, st, target)
			}
		}
		if _, fault := devices.Fault(devices.Lock, st); fault {
			t.Errorf("mode %v: %v reads as a fault", mode, st)
		}
	}
}

// Node statuses map to devices.NodeStatus, from the JSON form and the plain
// true/false; gateway status reaches BridgeState with its retain flag, and
// value reports carry theirs.
func TestAdapterStatusesAndRetainedFlags(t *testing.T) {
	addr := startBroker(t)
	gw := newBridge(t, addr)
	waitToken(t, gw.c.Publish("zwave/_CLIENTS/ZWAVE_GATEWAY-zwave-js-ui/status", 1, true, `{"time":1,"value":true}`))
	waitToken(t, gw.c.Publish("zwave/hall/front_door/98/0/currentMode", 1, true, `{"time":1,"value":255}`))
	gw.publish(t, "barrier", "")
	a, s, _ := startAdapter(t, addr, Options{})
	got := map[string]call{}
	for range 2 {
		c := s.next(t)
		got[c.kind] = c
	}
	want := map[string]call{
		"bridge": {kind: "bridge", name: "zw", online: true, retained: true},
		"report": {kind: "report", name: "door", state: map[string]any{"state": "LOCK", "lock_state": "locked"}, retained: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("retained replay: Sink got %+v, want %+v", got, want)
	}
	if !a.BridgeOnline() {
		t.Error("BridgeOnline() = false after a retained online status")
	}

	tests := []struct {
		topic, payload string
		want           call
	}{
		{"zwave/hall/front_door/status", `{"time":1,"value":true,"status":"Alive","nodeId":5}`, call{kind: "node", name: "door", status: devices.NodeAlive}},
		{"zwave/hall/front_door/status", `{"time":1,"value":true,"status":"Awake","nodeId":5}`, call{kind: "node", name: "door", status: devices.NodeAwake}},
		{"zwave/hall/front_door/status", `{"time":1,"value":false,"status":"Asleep","nodeId":5}`, call{kind: "node", name: "door", status: devices.NodeAsleep}},
		{"zwave/hall/front_door/status", `{"time":1,"value":false,"status":"Dead","nodeId":5}`, call{kind: "node", name: "door", status: devices.NodeDead}},
		{"zwave/plug/status", `true`, call{kind: "node", name: "plug", status: devices.NodeAlive}},
		{"zwave/plug/status", `false`, call{kind: "node", name: "plug", status: devices.NodeDead}},
		{"zwave/plug/status", `{"time":1,"value":true}`, call{kind: "node", name: "plug", status: devices.NodeAlive}},
		{"zwave/_CLIENTS/ZWAVE_GATEWAY-zwave-js-ui/status", `{"time":2,"value":false}`, call{kind: "bridge", name: "zw", online: false}},
		{"zwave/_CLIENTS/ZWAVE_GATEWAY-zwave-js-ui/status", `true`, call{kind: "bridge", name: "zw", online: true}},
		{"zwave/plug/37/0/currentValue", `true`, call{kind: "report", name: "plug", state: map[string]any{"state": "ON"}}},
	}
	for _, tc := range tests {
		gw.publish(t, tc.topic, tc.payload)
		if got := s.next(t); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s %s: Sink got %+v, want %+v", tc.topic, tc.payload, got, tc.want)
		}
	}
}

// Read polls the class's confirming value through the gateway's pollValue
// API, with the node ID from a numeric address or learnt from the node's
// status; before either is known it fails and publishes nothing.
func TestAdapterReadPollsTheConfirmingValue(t *testing.T) {
	addr := startBroker(t)
	seen := observe(t, addr, "zwave/_CLIENTS/#")
	a, s, _ := startAdapter(t, addr, Options{GatewayName: "hub"})
	gw := newBridge(t, addr)
	api := "zwave/_CLIENTS/ZWAVE_GATEWAY-hub/api/pollValue/set"

	if err := a.Read(context.Background(), testDevices[2], devices.Target{"state": "UNLOCK"}); !errors.Is(err, ErrNodeIDUnknown) {
		t.Fatalf("Read before the node's ID is known = %v, want ErrNodeIDUnknown", err)
	}
	gw.publish(t, "zwave/hall/front_door/status", `{"time":1,"value":true,"status":"Alive","nodeId":5}`)
	s.next(t)
	gw.publish(t, "zwave/living/lamp/status", `{"time":1,"value":true,"status":"Alive","nodeId":9}`)
	s.next(t)
	gw.publish(t, "zwave/plug/status", `{"time":1,"value":true,"status":"Alive","nodeId":3}`)
	s.next(t)

	tests := []struct {
		dev  devices.Device
		want string
	}{
		{testDevices[2], `{"args":[{"commandClass":98,"endpoint":0,"nodeId":5,"property":"currentMode"}]}`},
		{testDevices[1], `{"args":[{"commandClass":37,"endpoint":0,"nodeId":3,"property":"currentValue"}]}`},
		{testDevices[0], `{"args":[{"commandClass":38,"endpoint":0,"nodeId":9,"property":"currentValue"}]}`},
		{testDevices[3], `{"args":[{"commandClass":67,"endpoint":0,"nodeId":12,"property":"setpoint","propertyKey":1}]}`},
		{testDevices[4], `{"args":[{"commandClass":38,"endpoint":0,"nodeId":7,"property":"currentValue"}]}`},
	}
	for _, tc := range tests {
		if err := a.Read(context.Background(), tc.dev, nil); err != nil {
			t.Fatalf("Read(%s) = %v", tc.dev.ID, err)
		}
		want := observed{topic: api, payload: tc.want, qos: 1}
		if got := nextObserved(t, seen); got != want {
			t.Errorf("Read(%s) published %+v, want %+v", tc.dev.ID, got, want)
		}
	}
}

func TestTransportDefaultsToTwoAttempts(t *testing.T) {
	if got := Transport.DefaultAttempts(); got != 2 {
		t.Errorf("Transport.DefaultAttempts() = %d, want 2", got)
	}
	if !Transport.WakeUpQueue || !Transport.RadioRetries || !Transport.ReportsState {
		t.Errorf("Transport = %+v, want radio retries, a wake-up queue and state reports", Transport)
	}
}
