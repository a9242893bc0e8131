package zigbee2mqtt

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/mqtt"
)

// Send publishes the target as JSON to <base>/<friendly_name>/set at QoS 1,
// not retained, whatever the friendly name holds.
func TestAdapterSendPublishesTargetToSetTopic(t *testing.T) {
	addr := startBroker(t)
	seen := observe(t, addr, "zigbee2mqtt/#")
	a, _, _ := startAdapter(t, addr, Options{})

	tests := []struct {
		dev    devices.Device
		target devices.Target
		want   observed
	}{
		{testDevices[0], devices.Target{"state": "ON", "brightness": 128.0, "transition": 0.5},
			observed{topic: "zigbee2mqtt/Living Room/Lamp 1/set", payload: `{"brightness":128,"state":"ON","transition":0.5}`, qos: 1}},
		{testDevices[1], devices.Target{"state": "OFF"},
			observed{topic: "zigbee2mqtt/plug/set", payload: `{"state":"OFF"}`, qos: 1}},
		{testDevices[2], devices.Target{"state": "LOCK"},
			observed{topic: "zigbee2mqtt/front door/set", payload: `{"state":"LOCK"}`, qos: 1}},
		// A device that is not configured on the adapter is still sent to
		// by its address.
		{devices.Device{ID: "other", Address: "a/b c"}, devices.Target{"position": 40.0},
			observed{topic: "zigbee2mqtt/a/b c/set", payload: `{"position":40}`, qos: 1}},
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

// Read publishes a get of the target's state attributes, each with an
// empty value as Zigbee2MQTT documents, to <base>/<friendly_name>/get at
// QoS 1, not retained; parameters such as transition are not read.
func TestAdapterReadPublishesGetOfTargetAttributes(t *testing.T) {
	addr := startBroker(t)
	seen := observe(t, addr, "zigbee2mqtt/#")
	a, _, _ := startAdapter(t, addr, Options{})

	tests := []struct {
		dev    devices.Device
		target devices.Target
		want   observed
	}{
		{testDevices[2], devices.Target{"state": "UNLOCK"},
			observed{topic: "zigbee2mqtt/front door/get", payload: `{"state":""}`, qos: 1}},
		{devices.Device{ID: "garage", Class: devices.Cover}, devices.Target{"position": 40.0},
			observed{topic: "zigbee2mqtt/garage/get", payload: `{"position":""}`, qos: 1}},
		{testDevices[0], devices.Target{"state": "ON", "transition": 0.5},
			observed{topic: "zigbee2mqtt/Living Room/Lamp 1/get", payload: `{"state":""}`, qos: 1}},
	}
	for _, tc := range tests {
		if err := a.Read(context.Background(), tc.dev, tc.target); err != nil {
			t.Fatalf("Read(%s, %v) = %v", tc.dev.ID, tc.target, err)
		}
		if got := nextObserved(t, seen); got != tc.want {
			t.Errorf("Read(%s, %v) published %+v, want %+v", tc.dev.ID, tc.target, got, tc.want)
		}
	}
}

func TestAdapterSendWhileNotConnectedFails(t *testing.T) {
	conn := mqtt.New(mqtt.Options{URL: "tcp://127.0.0.1:1", ClientID: "never-run"})
	a := New(conn, Options{Devices: testDevices})
	err := a.Send(context.Background(), testDevices[0], devices.Target{"state": "ON"})
	if !errors.Is(err, mqtt.ErrNotConnected) {
		t.Errorf("Send before the Conn runs = %v, want mqtt.ErrNotConnected", err)
	}
}

// A target that cannot be encoded is an error, and nothing is published.
func TestAdapterSendUnencodableTargetFails(t *testing.T) {
	conn := mqtt.New(mqtt.Options{URL: "tcp://127.0.0.1:1", ClientID: "never-run"})
	a := New(conn, Options{Devices: testDevices})
	err := a.Send(context.Background(), testDevices[0], devices.Target{"state": make(chan int)})
	if err == nil || errors.Is(err, mqtt.ErrNotConnected) {
		t.Errorf("Send(unencodable) = %v, want an encoding error before any publish", err)
	}
}

// Reports, availability and bridge state reach the Sink with the device ID
// (not the friendly name) and the decoded values.
func TestAdapterPassesBridgeMessagesToSink(t *testing.T) {
	addr := startBroker(t)
	a, s, _ := startAdapter(t, addr, Options{})
	z2m := newBridge(t, addr)

	tests := []struct {
		name, topic, payload string
		want                 call
		bridgeOnline         bool // BridgeOnline() afterwards, for bridge calls
	}{
		{"report with '/' and spaces in the name", "zigbee2mqtt/Living Room/Lamp 1", `{"state":"ON","brightness":128,"color":{"x":0.3,"y":0.3}}`,
			call{kind: "report", name: "lamp", state: map[string]any{"state": "ON", "brightness": 128.0, "color": map[string]any{"x": 0.3, "y": 0.3}}}, false},
		{"report by ID", "zigbee2mqtt/plug", `{"state":"OFF","power":0}`,
			call{kind: "report", name: "plug", state: map[string]any{"state": "OFF", "power": 0.0}}, false},
		{"lock report", "zigbee2mqtt/front door", `{"state":"UNLOCK","lock_state":"not_fully_locked"}`,
			call{kind: "report", name: "door", state: map[string]any{"state": "UNLOCK", "lock_state": "not_fully_locked"}}, false},
		{"empty report object", "zigbee2mqtt/plug", `{}`,
			call{kind: "report", name: "plug", state: map[string]any{}}, false},
		{"availability JSON online", "zigbee2mqtt/Living Room/Lamp 1/availability", `{"state":"online"}`,
			call{kind: "availability", name: "lamp", online: true}, false},
		{"availability JSON offline", "zigbee2mqtt/Living Room/Lamp 1/availability", `{"state":"offline"}`,
			call{kind: "availability", name: "lamp", online: false}, false},
		{"availability legacy offline", "zigbee2mqtt/plug/availability", `offline`,
			call{kind: "availability", name: "plug", online: false}, false},
		{"availability legacy online", "zigbee2mqtt/plug/availability", `online`,
			call{kind: "availability", name: "plug", online: true}, false},
		{"availability upper case with spaces", "zigbee2mqtt/front door/availability", " ONLINE\n",
			call{kind: "availability", name: "door", online: true}, false},
		{"bridge state JSON online", "zigbee2mqtt/bridge/state", `{"state":"online"}`,
			call{kind: "bridge", name: "z2m", online: true}, true},
		{"bridge state legacy offline", "zigbee2mqtt/bridge/state", `offline`,
			call{kind: "bridge", name: "z2m", online: false}, false},
		{"bridge state legacy online", "zigbee2mqtt/bridge/state", `online`,
			call{kind: "bridge", name: "z2m", online: true}, true},
		{"bridge state JSON offline", "zigbee2mqtt/bridge/state", `{"state":"offline"}`,
			call{kind: "bridge", name: "z2m", online: false}, false},
	}
	for _, tc := range tests {
		z2m.publish(t, tc.topic, tc.payload)
		got := s.next(t)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Sink got %+v, want %+v", tc.name, got, tc.want)
		}
		if tc.want.kind == "bridge" {
			if online := a.BridgeOnline(); online != tc.bridgeOnline {
				t.Errorf("%s: BridgeOnline() = %v, want %v", tc.name, online, tc.bridgeOnline)
			}
		}
	}
}

func TestAdapterBridgeOnlineFalseUntilBridgeSaysSo(t *testing.T) {
	a := New(mqtt.New(mqtt.Options{URL: "tcp://127.0.0.1:1", ClientID: "x"}), Options{})
	if a.BridgeOnline() {
		t.Errorf("BridgeOnline() = true before any bridge/state message")
	}
}

// Messages the adapter does not understand, or that are not for it, never
// reach the Sink and do not stop later messages: each bad message is
// followed by a good report, which must be the next Sink call.
func TestAdapterIgnoresWhatItCannotUse(t *testing.T) {
	addr := startBroker(t)
	a, s, _ := startAdapter(t, addr, Options{})
	z2m := newBridge(t, addr)
	good := call{kind: "report", name: "plug", state: map[string]any{"state": "ON"}}

	tests := []struct {
		name, topic, payload string
	}{
		{"set echo", "zigbee2mqtt/plug/set", `{"state":"OFF"}`},
		{"set echo of a name with '/'", "zigbee2mqtt/Living Room/Lamp 1/set", `{"state":"OFF"}`},
		{"get echo", "zigbee2mqtt/plug/get", `{"state":""}`},
		{"unknown device report", "zigbee2mqtt/ghost", `{"state":"ON"}`},
		{"friendly names are case-sensitive", "zigbee2mqtt/Plug", `{"state":"ON"}`},
		{"unknown device availability", "zigbee2mqtt/ghost/availability", `online`},
		{"non-JSON report", "zigbee2mqtt/plug", `ON`},
		{"JSON array report", "zigbee2mqtt/plug", `[{"state":"ON"}]`},
		{"JSON string report", "zigbee2mqtt/plug", `"ON"`},
		{"JSON null report", "zigbee2mqtt/plug", `null`},
		{"truncated JSON report", "zigbee2mqtt/plug", `{"state":"ON"`},
		{"empty report", "zigbee2mqtt/plug", ``},
		{"unreadable availability", "zigbee2mqtt/plug/availability", `maybe`},
		{"availability JSON with unknown state", "zigbee2mqtt/plug/availability", `{"state":"dunno"}`},
		{"availability malformed JSON", "zigbee2mqtt/plug/availability", `{"state":`},
		{"availability JSON without state", "zigbee2mqtt/plug/availability", `{}`},
		{"empty availability", "zigbee2mqtt/plug/availability", ``},
		{"unreadable bridge state", "zigbee2mqtt/bridge/state", `starting`},
		{"bridge state malformed JSON", "zigbee2mqtt/bridge/state", `{"state"`},
		{"other bridge topic", "zigbee2mqtt/bridge/devices", `[{"friendly_name":"plug"}]`},
		{"bridge event", "zigbee2mqtt/bridge/event", `{"type":"device_joined"}`},
		{"base topic itself", "zigbee2mqtt", `{"state":"ON"}`},
		{"deeper level under a device", "zigbee2mqtt/plug/extra", `{"state":"ON"}`},
		{"other base topic", "zigbee2mqtt2/plug", `{"state":"ON"}`},
	}
	for _, tc := range tests {
		z2m.publish(t, tc.topic, tc.payload)
		z2m.publish(t, "zigbee2mqtt/plug", `{"state":"ON"}`)
		if got := s.next(t); !reflect.DeepEqual(got, good) {
			t.Errorf("%s (%s %q): Sink got %+v, want only the good report that followed", tc.name, tc.topic, tc.payload, got)
		}
	}
	if a.BridgeOnline() {
		t.Errorf("BridgeOnline() = true after only unreadable bridge states")
	}
}

func TestAdapterCustomBaseTopic(t *testing.T) {
	addr := startBroker(t)
	seen := observe(t, addr, "#")
	a, s, _ := startAdapter(t, addr, Options{BaseTopic: "home/z2m"})
	z2m := newBridge(t, addr)

	// Default base topic: not the adapter's.
	z2m.publish(t, "zigbee2mqtt/plug", `{"state":"OFF"}`)
	z2m.publish(t, "zigbee2mqtt/bridge/state", `online`)
	// Custom base topic.
	z2m.publish(t, "home/z2m/bridge/state", `online`)
	z2m.publish(t, "home/z2m/Living Room/Lamp 1/availability", `{"state":"online"}`)
	z2m.publish(t, "home/z2m/plug", `{"state":"ON"}`)
	want := []call{
		{kind: "bridge", name: "z2m", online: true},
		{kind: "availability", name: "lamp", online: true},
		{kind: "report", name: "plug", state: map[string]any{"state": "ON"}},
	}
	for i, w := range want {
		if got := s.next(t); !reflect.DeepEqual(got, w) {
			t.Errorf("Sink call %d = %+v, want %+v", i, got, w)
		}
	}

	if err := a.Send(context.Background(), testDevices[0], devices.Target{"state": "OFF"}); err != nil {
		t.Fatal(err)
	}
	// The observer also sees the bridge's five messages; skip them.
	want2 := observed{topic: "home/z2m/Living Room/Lamp 1/set", payload: `{"state":"OFF"}`, qos: 1}
	for {
		got := nextObserved(t, seen)
		if strings.HasSuffix(got.topic, "/set") {
			if got != want2 {
				t.Errorf("Send published %+v, want %+v", got, want2)
			}
			break
		}
	}
}

// Two adapters with their own base topics share one Conn (two Zigbee2MQTT
// instances on one broker) and each hears only its own devices.
func TestAdaptersWithDifferentBaseTopicsShareOneConn(t *testing.T) {
	addr := startBroker(t)
	conn := mqtt.New(mqtt.Options{URL: "tcp://" + addr, ClientID: "hearth-shared"})
	up, down := newSink(), newSink()
	a1 := New(conn, Options{Service: "upstairs", BaseTopic: "z2m-up", Devices: []devices.Device{{ID: "lamp", Address: "lamp"}}})
	a2 := New(conn, Options{Service: "downstairs", BaseTopic: "z2m-down", Devices: []devices.Device{{ID: "lamp2", Address: "lamp"}}})
	if err := a1.Start(context.Background(), up); err != nil {
		t.Fatal(err)
	}
	if err := a2.Start(context.Background(), down); err != nil {
		t.Fatal(err)
	}
	runConn(t, conn)
	z2m := newBridge(t, addr)
	z2m.publish(t, "z2m-down/lamp", `{"state":"ON"}`)
	z2m.publish(t, "z2m-up/lamp", `{"state":"OFF"}`)
	if got, want := down.next(t), (call{kind: "report", name: "lamp2", state: map[string]any{"state": "ON"}}); !reflect.DeepEqual(got, want) {
		t.Errorf("downstairs Sink got %+v, want %+v", got, want)
	}
	if got, want := up.next(t), (call{kind: "report", name: "lamp", state: map[string]any{"state": "OFF"}}); !reflect.DeepEqual(got, want) {
		t.Errorf("upstairs Sink got %+v, want %+v", got, want)
	}
}

// A retained state report (the bridge's last known state, sent by the
// broker on subscribe) reaches the Sink marked retained: it is old news and
// must not confirm a command.
func TestAdapterPassesRetainedReportOnStart(t *testing.T) {
	addr := startBroker(t)
	z2m := newBridge(t, addr)
	waitToken(t, z2m.c.Publish("zigbee2mqtt/plug", 1, true, `{"state":"OFF"}`))
	waitToken(t, z2m.c.Publish("zigbee2mqtt/bridge/state", 1, true, `online`))
	z2m.publish(t, "barrier", "") // both retained messages are stored
	a, s, _ := startAdapter(t, addr, Options{})
	got := []call{s.next(t), s.next(t)}
	want := map[string]call{
		"report": {kind: "report", name: "plug", state: map[string]any{"state": "OFF"}, retained: true},
		"bridge": {kind: "bridge", name: "z2m", online: true},
	}
	for _, g := range got {
		if w, ok := want[g.kind]; !ok || !reflect.DeepEqual(g, w) {
			t.Errorf("Sink got %+v, want one of %+v", g, want)
		}
		delete(want, g.kind)
	}
	if !a.BridgeOnline() {
		t.Errorf("BridgeOnline() = false after a retained online bridge state")
	}
}

// Zigbee2MQTT publishes a device's state with the retain flag when the
// device has `retain: true` in its configuration. Such a report, arriving
// live after the adapter subscribed, is fresh: it must not be passed as
// retained ("replayed from the retained store on subscribe"). Regression
// test: the adapter's subscription must not ask for Retain As Published.
func TestAdapterLiveReportPublishedRetainedIsNotOldNews(t *testing.T) {
	addr := startBroker(t)
	_, s, _ := startAdapter(t, addr, Options{})
	z2m := newBridge(t, addr)
	waitToken(t, z2m.c.Publish("zigbee2mqtt/plug", 1, true, `{"state":"ON"}`))
	want := call{kind: "report", name: "plug", state: map[string]any{"state": "ON"}, retained: false}
	if got := s.next(t); !reflect.DeepEqual(got, want) {
		t.Errorf("Sink got %+v, want %+v", got, want)
	}
}

func TestTransportDefaultAttemptsIsDefaultMaxAttempts(t *testing.T) {
	if got := Transport.DefaultAttempts(); got != DefaultMaxAttempts {
		t.Errorf("Transport.DefaultAttempts() = %d, want DefaultMaxAttempts %d", got, DefaultMaxAttempts)
	}
	if Transport.WakeUpQueue {
		t.Errorf("Transport.WakeUpQueue = true; a Zigbee parent buffers for seconds only")
	}
}
