package zwavejs

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/hearthd/hearth/devices"
)

// The gateway's health is its MQTT client AND its driver: the client's
// status true alone is online; driver/status false (the client still
// connected) is offline; driver/status true again is online. The topic is
// <prefix>/driver/status, the plain JSON boolean (Gateway.ts,
// _onDriverStatus), not under _CLIENTS.
func TestDriverStatusGatesTheGatewaysHealth(t *testing.T) {
	addr := startBroker(t)
	a, s, _ := startAdapter(t, addr, Options{})
	gw := newBridge(t, addr)

	gw.publish(t, "zwave/_CLIENTS/ZWAVE_GATEWAY-zwave-js-ui/status", `{"value":true,"time":1}`)
	if c := s.next(t); c.kind != "bridge" || !c.online || c.name != "zw" {
		t.Fatalf("after the client status true: %+v; want bridge zw online", c)
	}
	for _, step := range []struct {
		payload string
		online  bool
	}{{"false", false}, {"true", true}, {`{"value":false}`, false}, {"true", true}} {
		gw.publish(t, "zwave/driver/status", step.payload)
		if c := s.next(t); c.kind != "bridge" || c.online != step.online {
			t.Fatalf("after driver/status %s: %+v; want bridge online %v", step.payload, c, step.online)
		}
		if a.BridgeOnline() != step.online {
			t.Errorf("after driver/status %s: BridgeOnline() = %v, want %v", step.payload, a.BridgeOnline(), step.online)
		}
	}
	gw.publish(t, "zwave/driver/status", "false")
	if c := s.next(t); c.online {
		t.Fatalf("driver gone: %+v; want offline", c)
	}
	// The client's status true does not bring a gone driver back.
	gw.publish(t, "zwave/_CLIENTS/ZWAVE_GATEWAY-zwave-js-ui/status", `{"value":true,"time":2}`)
	if c := s.next(t); c.kind != "bridge" || c.online {
		t.Fatalf("client true with the driver gone: %+v; want bridge offline", c)
	}
}

// A driver that says it is ready before the client says anything tells
// nothing of the client: no BridgeState; a driver that is gone does.
func TestDriverStatusBeforeTheClientsSaysOnlyNo(t *testing.T) {
	addr := startBroker(t)
	_, s, _ := startAdapter(t, addr, Options{})
	gw := newBridge(t, addr)
	gw.publish(t, "zwave/driver/status", "true")
	gw.publish(t, "zwave/plug/37/0/currentValue", "true") // a marker after it
	if c := s.next(t); c.kind != "report" || c.name != "plug" {
		t.Fatalf("after driver/status true alone: %+v; want no bridge state, then plug's report", c)
	}
	gw.publish(t, "zwave/driver/status", "false")
	if c := s.next(t); c.kind != "bridge" || c.online {
		t.Fatalf("driver gone before any client status: %+v; want bridge offline", c)
	}
}

// endpointDevices are the two relays of a double switch, the root of a
// node by ID, a node's endpoint by ID, and a lamp named with spaces.
var endpointDevices = []devices.Device{
	{ID: "left", Service: "zw", Class: devices.Switch, Address: "kitchen_double/1"},
	{ID: "right", Service: "zw", Class: devices.Switch, Address: "kitchen_double/2"},
	{ID: "relay", Service: "zw", Class: devices.Switch, Address: "12/2"},
	{ID: "ceiling", Service: "zw", Class: devices.Light, Address: "Living Room/Ceiling Lamp"},
}

// Endpoints 1 and 2 of one node are two devices: each takes its writes on
// its endpoint, each value reaches its endpoint's device alone, the node's
// status reaches both, and a read polls the device's endpoint. A raw name
// reaches its sanitised topics.
func TestEndpointsAreDevicesOfTheirOwn(t *testing.T) {
	addr := startBroker(t)
	seen := observe(t, addr, "zwave/#")
	a, s, _ := startAdapter(t, addr, Options{Devices: endpointDevices, NodeNames: true})
	gw := newBridge(t, addr)

	gw.publish(t, "zwave/kitchen_double/37/2/currentValue", `{"time":1,"value":true}`)
	if c := s.next(t); c.kind != "report" || c.name != "right" || c.state["state"] != "ON" {
		t.Fatalf("endpoint 2's currentValue: %+v; want right ON", c)
	}
	gw.publish(t, "zwave/kitchen_double/37/1/currentValue", `{"time":1,"value":false}`)
	if c := s.next(t); c.kind != "report" || c.name != "left" || c.state["state"] != "OFF" {
		t.Fatalf("endpoint 1's currentValue: %+v; want left OFF", c)
	}
	gw.publish(t, "zwave/kitchen_double/37/0/currentValue", `{"time":1,"value":true}`)
	gw.publish(t, "zwave/kitchen_double/status", `{"time":1,"value":true,"status":"Alive","nodeId":9}`)
	for _, want := range []string{"left", "right"} {
		if c := s.next(t); c.kind != "node" || c.name != want || c.status != devices.NodeAlive {
			t.Fatalf("node status: %+v; want %s alive (endpoint 0's value reaches no device)", c, want)
		}
	}
	gw.publish(t, "zwave/Living_Room/Ceiling_Lamp/38/0/currentValue", `{"time":1,"value":99}`)
	if c := s.next(t); c.name != "ceiling" || c.state["brightness"] != 254.0 {
		t.Fatalf("Living_Room/Ceiling_Lamp's level 99: %+v; want ceiling at 254", c)
	}
	for range 5 {
		nextObserved(t, seen) // the gateway's publishes above
	}

	ctx := context.Background()
	for _, tc := range []struct {
		dev  devices.Device
		send bool
		want string
	}{
		{endpointDevices[1], true, "zwave/kitchen_double/37/2/targetValue/set {\"value\":true}"},
		{endpointDevices[1], false, `zwave/_CLIENTS/ZWAVE_GATEWAY-zwave-js-ui/api/pollValue/set {"args":[{"commandClass":37,"endpoint":2,"nodeId":9,"property":"currentValue"}]}`},
		{endpointDevices[2], true, "zwave/12/37/2/targetValue/set {\"value\":true}"},
		{endpointDevices[2], false, `zwave/_CLIENTS/ZWAVE_GATEWAY-zwave-js-ui/api/pollValue/set {"args":[{"commandClass":37,"endpoint":2,"nodeId":12,"property":"currentValue"}]}`},
		{endpointDevices[3], true, "zwave/Living_Room/Ceiling_Lamp/38/0/targetValue/set {\"value\":255}"},
	} {
		var err error
		if tc.send {
			err = a.Send(ctx, tc.dev, devices.Target{"state": "ON"})
		} else {
			err = a.Read(ctx, tc.dev, nil)
		}
		if err != nil {
			t.Fatalf("%s: %v", tc.dev.ID, err)
		}
		if o := nextObserved(t, seen); o.topic+" "+o.payload != tc.want {
			t.Errorf("%s: published %s %s; want %s", tc.dev.ID, o.topic, o.payload, tc.want)
		}
	}
}

// A °F setpoint (the ValueId object's unit "°F") reads in °C to 0.1; the
// device's scale then decides the write: 21 °C goes out as 70 °F (whole
// degrees, nearest), and 70 °F back confirms exactly 21. A °F air
// temperature reads in °C too.
func TestFahrenheitSetpointIsConvertedBothWays(t *testing.T) {
	addr := startBroker(t)
	seen := observe(t, addr, "zwave/12/67/+/setpoint/1/set")
	a, s, _ := startAdapter(t, addr, Options{})
	gw := newBridge(t, addr)
	valueID := func(v string) string {
		return `{"id":"12-67-0-setpoint-1","commandClass":67,"property":"setpoint","propertyKey":1,"unit":"°F","value":` + v + `}`
	}
	gw.publish(t, "zwave/12/67/0/setpoint/1", valueID("68"))
	if c := s.next(t); c.name != "trv" || c.state["current_heating_setpoint"] != 20.0 {
		t.Fatalf("68 °F: %+v; want 20 °C", c)
	}
	gw.publish(t, "zwave/12/67/0/setpoint/1", valueID("71"))
	if c := s.next(t); c.state["current_heating_setpoint"] != 21.7 {
		t.Fatalf("71 °F: %+v; want 21.7 °C (21.67 to 0.1)", c)
	}
	trv := testDevices[3]
	for _, tc := range []struct {
		celsius float64
		write   string
	}{{21, `{"value":70}`}, {22.5, `{"value":73}`}, {5, `{"value":41}`}} {
		if err := a.Send(context.Background(), trv, devices.Target{"current_heating_setpoint": tc.celsius}); err != nil {
			t.Fatal(err)
		}
		if o := nextObserved(t, seen); o.payload != tc.write {
			t.Errorf("%v °C written as %s; want %s", tc.celsius, o.payload, tc.write)
		}
	}
	gw.publish(t, "zwave/12/67/0/setpoint/1", valueID("41"))
	if c := s.next(t); c.state["current_heating_setpoint"] != 5.0 {
		t.Errorf("41 °F after Hearth wrote it for 5 °C: %+v; want 5", c)
	}
	// A time-value payload (no unit) keeps the scale learnt.
	gw.publish(t, "zwave/12/67/0/setpoint/1", `{"time":1,"value":50}`)
	if c := s.next(t); c.state["current_heating_setpoint"] != 10.0 {
		t.Errorf("50 with no unit after °F: %+v; want 10 °C", c)
	}
	gw.publish(t, "zwave/12/49/0/Air_temperature", `{"commandClass":49,"property":"Air temperature","unit":"°F","value":72.5}`)
	if c := s.next(t); c.state["local_temperature"] != 22.5 {
		t.Errorf("air temperature 72.5 °F: %+v; want local_temperature 22.5", c)
	}
}

// ParseAddress reads the levels as the brief and Z-Wave JS UI's topics
// say, with and without node names.
func TestParseAddress(t *testing.T) {
	for _, tc := range []struct {
		addr  string
		names bool
		want  Address
	}{
		{"kitchen_double/2", true, Address{"kitchen_double", 2}},
		{"kitchen_double/2", false, Address{"kitchen_double/2", 0}},
		{"bed/7", false, Address{"bed/7", 0}},
		{"12/2", false, Address{"12", 2}},
		{"12/2", true, Address{"12", 2}},
		{"hall/12/3", false, Address{"hall/12", 3}},
		{"hall/back_door", true, Address{"hall/back_door", 0}},
		{"Living Room/Ceiling Lamp", false, Address{"Living_Room/Ceiling_Lamp", 0}},
		{"Lamp (2)", false, Address{"Lamp_2", 0}},
		{"Küche/Licht", false, Address{"Küche/Licht", 0}},
		{"plug", false, Address{"plug", 0}},
		{"plug/0", true, Address{"plug", 0}},
	} {
		got, err := ParseAddress(tc.addr, tc.names)
		if err != nil || got != tc.want {
			t.Errorf("ParseAddress(%q, %v) = %+v, %v; want %+v", tc.addr, tc.names, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "a/b/c", "a/b/c/1", "_CLIENTS/x", "driver", "12/128", "hall/(!)", "a//b"} {
		if got, err := ParseAddress(bad, true); !errors.Is(err, ErrBadAddress) {
			t.Errorf("ParseAddress(%q) = %+v, %v; want an ErrBadAddress", bad, got, err)
		}
	}
}

// SanitizeTopic gives what sanitizeTopic of api/lib/utils.ts gives:
// whitespace to '_', then only [A-Za-z0-9-_À-ÖØ-öø-ÿ/] kept.
func TestSanitizeTopicMirrorsZWaveJSUI(t *testing.T) {
	for in, want := range map[string]string{
		"Living Room":    "Living_Room",
		"a\tb\u00a0c":    "a_b_c",
		"Lamp #1 (hall)": "Lamp_1_hall",
		"Küche×Bad÷":     "KücheBad",
		"ÿÀ":             "ÿÀ",
		"a.b+c":          "abc",
		"née/ℹ":          "née/",
		"\ufeffx\u3000y": "_x_y",
	} {
		if got := SanitizeTopic(in); got != want {
			t.Errorf("SanitizeTopic(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzParseAddress: any address either parses to levels the gateway could
// publish (sanitised, none empty, endpoint 0–127, reparsed the same) or
// fails with ErrBadAddress; never a panic.
func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{"kitchen_double/2", "bed/7", "12/2", "Living Room/Lamp", "a/b/c", "_x", "driver", "ÿ/\u00a0/9"} {
		f.Add(s, true)
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, addr string, names bool) {
		a, err := ParseAddress(addr, names)
		if err != nil {
			if !errors.Is(err, ErrBadAddress) || err.Error() == "" {
				t.Fatalf("ParseAddress(%q) error %v does not wrap ErrBadAddress", addr, err)
			}
			return
		}
		if a.Endpoint < 0 || a.Endpoint > MaxEndpoint || SanitizeTopic(a.Node) != a.Node || a.Node == "" {
			t.Fatalf("ParseAddress(%q) = %+v: not a node the gateway publishes", addr, a)
		}
		for _, l := range strings.Split(a.Node, "/") {
			if l == "" {
				t.Fatalf("ParseAddress(%q) = %+v: an empty level", addr, a)
			}
		}
		if b, err := ParseAddress(a.String(), names); err != nil || b != a {
			t.Fatalf("ParseAddress(%q) = %+v, but its String %q reads %+v, %v", addr, a, a.String(), b, err)
		}
	})
}

// FuzzSanitizeTopic: the result is idempotent, valid UTF-8 and holds only
// the characters the gateway keeps.
func FuzzSanitizeTopic(f *testing.F) {
	f.Add("Living Room")
	f.Add("\xff\u2028ÿ×")
	f.Fuzz(func(t *testing.T, s string) {
		got := SanitizeTopic(s)
		if SanitizeTopic(got) != got || !utf8.ValidString(got) {
			t.Fatalf("SanitizeTopic(%q) = %q: not idempotent or not UTF-8", s, got)
		}
		for _, r := range got {
			if jsSpace(r) || r == '+' || r == '#' || r == 0 {
				t.Fatalf("SanitizeTopic(%q) = %q keeps %q", s, got, r)
			}
		}
	})
}

// FuzzParseValueUnit: any payload reads as a value and a unit or as
// unreadable; never a panic, and no unit without a value.
func FuzzParseValueUnit(f *testing.F) {
	f.Add([]byte(`{"value":70,"unit":"°F"}`))
	f.Add([]byte(`{"unit":5}`))
	f.Add([]byte(`true`))
	f.Add([]byte(`{"value":`))
	f.Fuzz(func(t *testing.T, p []byte) {
		v, unit, ok := parseValueUnit(p)
		if !ok && (v != nil || unit != "") {
			t.Fatalf("parseValueUnit(%q) = %v, %q, false", p, v, unit)
		}
		temperatureScale(unit)
	})
}
