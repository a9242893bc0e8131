package homie

import (
	"errors"
	"testing"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
)

// ready describes the lamp (Homie 4) as the convention's kitchen light:
// a settable boolean power and a settable integer brightness 0:100, and
// waits until the adapter has heard it (the value after the attributes).
func ready(t *testing.T, d *device, s *sink) {
	t.Helper()
	d.describe4(t, "homie/kitchen-light/light/power", Boolean, "", true)
	d.describe4(t, "homie/kitchen-light/light/brightness", Integer, "0:100", true)
	d.publishRetained(t, "homie/kitchen-light/$state", "ready")
	d.publishRetained(t, "homie/kitchen-light/light/power", "false")
	s.waitFor(t, "the lamp's power", func(c call) bool { return c.kind == "report" && c.name == "lamp" })
}

// A light's target goes out as Homie payloads on the set topics, QoS 1
// and not retained: power true, then brightness 128 of 254 as 50 of 0:100;
// the values the device publishes come back as ON and 128.
func TestLightTargetIsSetOnItsPropertiesAndConfirmedByTheirValues(t *testing.T) {
	addr := startBroker(t)
	dev := newDevice(t, addr, "homie/kitchen-light/+/+/set")
	a, s := startAdapter(t, addr, Options{})
	ready(t, dev, s)
	if err := send(t, a, "lamp", devices.Target{"state": "ON", "brightness": 128.0}); err != nil {
		t.Fatal(err)
	}
	for _, want := range [][2]string{{"homie/kitchen-light/light/power/set", "true"}, {"homie/kitchen-light/light/brightness/set", "50"}} {
		m := dev.set(t)
		if m.Topic() != want[0] || string(m.Payload()) != want[1] || m.Retained() || m.Qos() != 1 {
			t.Fatalf("set %s %q (retained %v, QoS %d); want %s %q, QoS 1, not retained", m.Topic(), m.Payload(), m.Retained(), m.Qos(), want[0], want[1])
		}
	}
	// Nothing was kept retained on a set topic: a late subscriber gets none.
	late := newDevice(t, addr, "homie/kitchen-light/+/+/set")
	dev.publish(t, "homie/kitchen-light/light/power", "true")
	dev.publish(t, "homie/kitchen-light/light/brightness", "50")
	if c := s.next(t); c.kind != "report" || c.state["state"] != "ON" || c.retained {
		t.Fatalf("%+v; want live report state ON", c)
	}
	if c := s.next(t); c.kind != "report" || c.state["brightness"] != 128.0 {
		t.Fatalf("%+v; want brightness 128 (the value written for 50)", c)
	}
	select {
	case m := <-late.sets:
		t.Fatalf("a retained set %s %q was left on the broker", m.Topic(), m.Payload())
	default:
	}
}

// The set topic is a command, not a report: Hearth's own echo, or anyone's
// set, reaches the sink as nothing; a Homie 5 $target (in progress)
// neither.
func TestSetEchoAndTargetAreNotReports(t *testing.T) {
	addr := startBroker(t)
	dev := newDevice(t, addr, "")
	_, s := startAdapter(t, addr, Options{BaseTopic: "homie/5", Devices: testDevices[:2]})
	dev.publish(t, "homie/5/kitchen-light/light/power/set", "true")
	dev.publish(t, "homie/5/kitchen-light/light/brightness/$target", "100")
	dev.publish(t, "homie/5/kitchen-light/light/brightness", "20")
	if c := s.next(t); c.kind != "report" || c.state["brightness"] != 51.0 || len(c.state) != 1 {
		t.Fatalf("%+v; want only the marker brightness 20 → 51 (set and $target reached the sink as nothing)", c)
	}
	s.empty(t)
}

// A retained value the broker replays is passed on as retained: the
// dispatcher lets it confirm nothing.
func TestRetainedValueIsReportedRetained(t *testing.T) {
	addr := startBroker(t)
	dev := newDevice(t, addr, "")
	dev.publishRetained(t, "homie/plug-1/relay/on", "true")
	_, s := startAdapter(t, addr, Options{})
	c := s.waitFor(t, "the replayed value", func(c call) bool { return c.kind == "report" })
	if c.name != "plug" || c.state["state"] != "ON" || !c.retained {
		t.Fatalf("%+v; want plug ON, retained", c)
	}
}

// A property the device does not say is settable, or not described at
// all, is never written: permanent and transient errors, nothing sent.
func TestUnsettableOrUndescribedPropertyIsNotWritten(t *testing.T) {
	addr := startBroker(t)
	dev := newDevice(t, addr, "homie/plug-1/+/+/set")
	a, s := startAdapter(t, addr, Options{})
	err := send(t, a, "plug", devices.Target{"state": "ON"})
	if !errors.Is(err, ErrNotDescribed) || retry.Classify(err).Permanent() {
		t.Fatalf("undescribed: %v; want ErrNotDescribed, transient", err)
	}
	dev.publishRetained(t, "homie/plug-1/relay/on/$datatype", Boolean) // $settable absent: read-only
	dev.publish(t, "homie/plug-1/relay/on", "false")
	s.waitFor(t, "the marker", func(c call) bool { return c.kind == "report" })
	err = send(t, a, "plug", devices.Target{"state": "ON"})
	if err == nil || !retry.Classify(err).Permanent() {
		t.Fatalf("read-only: %v; want a permanent error", err)
	}
	dev.publishRetained(t, "homie/plug-1/relay/on/$datatype", "")
	select {
	case m := <-dev.sets:
		t.Fatalf("set %s sent", m.Topic())
	default:
	}
}

// $state: ready is online, lost (the will) offline, and once every Homie
// device of the service is lost or disconnected the service is offline.
// A sleepy device's ready and sleeping are its node status, awake and
// asleep; sleeping is not offline.
func TestStateMapsToAvailabilitySleepAndTheService(t *testing.T) {
	addr := startBroker(t)
	dev := newDevice(t, addr, "")
	_, s := startAdapter(t, addr, Options{})
	expect := func(want ...call) {
		t.Helper()
		for _, w := range want {
			c := s.next(t)
			if c.kind != w.kind || c.name != w.name || c.online != w.online || c.status != w.status {
				t.Fatalf("%+v; want %+v", c, w)
			}
		}
	}
	dev.publish(t, "homie/plug-1/$state", "ready")
	expect(call{kind: "bridge", name: "wifi", online: true}, call{kind: "availability", name: "plug", online: true})
	dev.publish(t, "homie/garden/$state", "sleeping")
	expect(call{kind: "bridge", name: "wifi", online: true}, call{kind: "node", name: "valve", status: devices.NodeAsleep}, call{kind: "availability", name: "valve", online: true})
	dev.publish(t, "homie/garden/$state", "ready")
	expect(call{kind: "bridge", name: "wifi", online: true}, call{kind: "node", name: "valve", status: devices.NodeAwake})
	dev.publish(t, "homie/plug-1/$state", "lost")
	expect(call{kind: "bridge", name: "wifi", online: true}, call{kind: "availability", name: "plug", online: false})
	dev.publish(t, "homie/kitchen-light/$state", "disconnected")
	expect(call{kind: "bridge", name: "wifi", online: true}, call{kind: "availability", name: "lamp", online: false})
	dev.publish(t, "homie/garden/$state", "lost")
	expect(call{kind: "bridge", name: "wifi", online: false}, call{kind: "node", name: "valve", status: devices.NodeDead})
	dev.publish(t, "homie/plug-1/$state", "Ready") // case sensitive: not a state
	dev.publish(t, "homie/plug-1/$state", "init")
	expect(call{kind: "bridge", name: "wifi", online: true}, call{kind: "availability", name: "plug", online: false})
}

// A non-sleepy device that says sleeping is offline until ready: nothing
// is sent into its sleep.
func TestSleepingDeviceNotConfiguredSleepyIsOffline(t *testing.T) {
	addr := startBroker(t)
	dev := newDevice(t, addr, "")
	_, s := startAdapter(t, addr, Options{})
	dev.publish(t, "homie/plug-1/$state", "sleeping")
	c := s.waitFor(t, "plug's availability", func(c call) bool { return c.kind != "bridge" })
	if c.kind != "availability" || c.name != "plug" || c.online {
		t.Fatalf("%+v; want plug offline", c)
	}
}

// Homie 5: the $description document says which properties are
// settable; values live under homie/5.
func TestHomie5DescriptionMakesAPropertySettable(t *testing.T) {
	addr := startBroker(t)
	dev := newDevice(t, addr, "homie/5/plug-1/+/+/set")
	a, s := startAdapter(t, addr, Options{BaseTopic: "homie/5"})
	dev.publishRetained(t, "homie/5/plug-1/$description", `{"homie":"5.0","version":1,"nodes":{"relay":{"properties":{"on":{"datatype":"boolean","settable":true}}}}}`)
	dev.publish(t, "homie/5/plug-1/relay/on", "false")
	s.waitFor(t, "the marker", func(c call) bool { return c.kind == "report" })
	if err := send(t, a, "plug", devices.Target{"state": "ON"}); err != nil {
		t.Fatal(err)
	}
	if m := dev.set(t); m.Topic() != "homie/5/plug-1/relay/on/set" || string(m.Payload()) != "true" {
		t.Fatalf("set %s %q; want homie/5/plug-1/relay/on/set true", m.Topic(), m.Payload())
	}
	dev.publishRetained(t, "homie/5/plug-1/$description", "")
}

// Targets the class cannot write fail before anything is sent.
func TestUnsupportedTargetsArePermanent(t *testing.T) {
	a := New(nil, Options{Service: "s", Devices: testDevices})
	for _, tc := range []struct {
		dev    string
		target devices.Target
	}{
		{"plug", devices.Target{"state": "TOGGLE"}},
		{"plug", devices.Target{"brightness": 10.0}},
		{"lamp", devices.Target{"color_temp": 300.0}},
		{"lamp", devices.Target{}},
	} {
		_, _, err := a.encode(a.byDev[tc.dev], tc.target)
		if err == nil || !retry.Classify(err).Permanent() {
			t.Errorf("%s %v: %v; want a permanent error", tc.dev, tc.target, err)
		}
	}
	if err := a.Read(t.Context(), testDevices[0], nil); !errors.Is(err, ErrNoRead) {
		t.Errorf("Read: %v; want ErrNoRead", err)
	}
}

func TestParseAddress(t *testing.T) {
	good := map[string]Address{
		"plug-1/relay/on":                      {Device: "plug-1", Node: "relay", Power: "on"},
		"kitchen-light/light/power,brightness": {Device: "kitchen-light", Node: "light", Power: "power", Brightness: "brightness"},
	}
	for s, want := range good {
		c := devices.Switch
		if want.Brightness != "" {
			c = devices.Light
		}
		if got, err := ParseAddress(s, c); err != nil || got != want || got.String() != s {
			t.Errorf("ParseAddress(%q) = %+v, %v; want %+v", s, got, err, want)
		}
	}
	for _, s := range []string{"plug", "plug/relay", "Plug/relay/on", "-plug/relay/on", "plug-/relay/on", "plug/re lay/on", "plug/relay/$state", "plug/relay/on/set", "plug/relay/on,dim", "a/b/c,c", "a/b/"} {
		c := devices.Switch
		if s == "a/b/c,c" {
			c = devices.Light
		}
		if _, err := ParseAddress(s, c); !errors.Is(err, ErrBadAddress) {
			t.Errorf("ParseAddress(%q) = %v; want ErrBadAddress", s, err)
		}
	}
	if _, err := ParseAddress("door/lock/locked", devices.Lock); err == nil {
		t.Error("a lock was accepted")
	}
}

// Homie 5: a child device whose $description names a root is lost while
// its root is lost (the root's will does not update its children), and
// back with its own state when the root is.
func TestHomie5ChildFollowsItsRootsLost(t *testing.T) {
	addr := startBroker(t)
	dev := newDevice(t, addr, "")
	_, s := startAdapter(t, addr, Options{BaseTopic: "homie/5", Devices: testDevices[:1]})
	dev.publish(t, "homie/5/plug-1/$description", `{"homie":"5.0","version":1,"root":"bridge","nodes":{"relay":{"properties":{"on":{"datatype":"boolean","settable":true}}}}}`)
	dev.publish(t, "homie/5/plug-1/$state", "ready")
	if c := s.waitFor(t, "plug online", func(c call) bool { return c.kind == "availability" }); !c.online {
		t.Fatalf("%+v; want plug online", c)
	}
	dev.publish(t, "homie/5/bridge/$state", "lost")
	if c := s.waitFor(t, "plug offline", func(c call) bool { return c.kind == "availability" }); c.name != "plug" || c.online {
		t.Fatalf("%+v; want plug offline with its root lost", c)
	}
	dev.publish(t, "homie/5/bridge/$state", "ready")
	if c := s.waitFor(t, "plug online again", func(c call) bool { return c.kind == "availability" }); c.name != "plug" || !c.online {
		t.Fatalf("%+v; want plug online, its own state ready", c)
	}
}

// A retained set left on the broker by another controller (replayed to
// Hearth on subscribe) is counted and reported nowhere as state.
func TestRetainedSetOnTheBrokerIsCounted(t *testing.T) {
	addr := startBroker(t)
	dev := newDevice(t, addr, "")
	dev.publishRetained(t, "homie/plug-1/relay/on/set", "true")
	a, s := startAdapter(t, addr, Options{})
	dev.publish(t, "homie/plug-1/relay/on", "false") // a marker after the replay
	if c := s.next(t); c.kind != "report" || c.state["state"] != "OFF" {
		t.Fatalf("%+v; want only the marker report", c)
	}
	if n := a.RetainedSets(); n != 1 {
		t.Errorf("RetainedSets = %d; want 1", n)
	}
	dev.publishRetained(t, "homie/plug-1/relay/on/set", "")
}

// A light whose one property is numeric (a dimmer without on/off, its
// $datatype integer 0:255) is set to the scaled brightness, ON alone to
// its maximum and OFF to its minimum; its values report state and
// brightness.
func TestDimmerWithoutOnOffProperty(t *testing.T) {
	addr := startBroker(t)
	dev := newDevice(t, addr, "homie/hall-dimmer/+/+/set")
	dimmer := devices.Device{ID: "hall", Service: "wifi", Class: devices.Light, Address: "hall-dimmer/light/dim"}
	a, s := startAdapter(t, addr, Options{Devices: []devices.Device{dimmer}})
	dev.describe4(t, "homie/hall-dimmer/light/dim", Integer, "0:255", true)
	dev.publish(t, "homie/hall-dimmer/light/dim", "0")
	if c := s.waitFor(t, "the dimmer's value", func(c call) bool { return c.kind == "report" }); c.state["state"] != "OFF" || c.state["brightness"] != 0.0 {
		t.Fatalf("%+v; want OFF at 0", c)
	}
	for _, tc := range []struct {
		target devices.Target
		want   string
	}{
		{devices.Target{"brightness": 127.0}, "128"}, // 127·255/254 = 127.5 → 128
		{devices.Target{"state": "ON"}, "255"},
		{devices.Target{"state": "OFF"}, "0"},
	} {
		if err := a.Send(t.Context(), dimmer, tc.target); err != nil {
			t.Fatal(err)
		}
		if m := dev.set(t); m.Topic() != "homie/hall-dimmer/light/dim/set" || string(m.Payload()) != tc.want {
			t.Fatalf("%v: set %s %q; want %q", tc.target, m.Topic(), m.Payload(), tc.want)
		}
	}
	dev.publish(t, "homie/hall-dimmer/light/dim", "128")
	if c := s.waitFor(t, "the dimmer's value", func(c call) bool { return c.kind == "report" }); c.state["state"] != "ON" || c.state["brightness"] != 127.0 {
		t.Fatalf("%+v; want ON at 127 (round(128·254/255); the last value written was 0)", c)
	}
}
