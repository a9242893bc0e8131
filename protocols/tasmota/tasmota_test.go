package tasmota

import (
	"context"
	"errors"
	"maps"
	"testing"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/internal/testbroker"
)

func target(kv ...any) devices.Target {
	t := devices.Target{}
	for i := 0; i < len(kv); i += 2 {
		t[kv[i].(string)] = kv[i+1]
	}
	return t
}

func deviceOf(t *testing.T, id string) devices.Device {
	t.Helper()
	for _, d := range testDevices {
		if d.ID == id {
			return d
		}
	}
	t.Fatalf("no test device %s", id)
	return devices.Device{}
}

// Each target goes out as Tasmota's plain commands on cmnd/<topic>/<Command>,
// QoS 1 and never retained, in the order Encode gives.
func TestSendPublishesPlainCommandsNeverRetained(t *testing.T) {
	addr := startBroker(t)
	a, _ := startAdapter(t, addr, Options{})
	obs := observe(t, addr, "cmnd/#")
	ctx := context.Background()
	for _, tc := range []struct {
		dev    string
		target devices.Target
		want   [][2]string
	}{
		{"porch", target("state", "ON"), [][2]string{{"cmnd/dual/POWER1", "ON"}}},
		{"garden", target("state", "OFF"), [][2]string{{"cmnd/dual/POWER2", "OFF"}}},
		{"plug", target("state", "ON"), [][2]string{{"cmnd/plug/POWER", "ON"}}},
		{"bulb", target("state", "ON", "brightness", 128.0, "color_temp", 370.0), [][2]string{{"cmnd/bulb/POWER", "ON"}, {"cmnd/bulb/Dimmer", "50"}, {"cmnd/bulb/CT", "370"}}},
		{"bulb", target("brightness", 1.0), [][2]string{{"cmnd/bulb/Dimmer", "1"}}},
		{"bulb", target("brightness", 255.0), [][2]string{{"cmnd/bulb/Dimmer", "100"}}},
		{"blind", target("position", 40.0), [][2]string{{"cmnd/blinds/ShutterPosition1", "40"}}},
		{"blind", target("state", "OPEN"), [][2]string{{"cmnd/blinds/ShutterPosition1", "100"}}},
		{"blind", target("state", "CLOSE"), [][2]string{{"cmnd/blinds/ShutterPosition1", "0"}}},
	} {
		if err := a.Send(ctx, deviceOf(t, tc.dev), tc.target); err != nil {
			t.Fatalf("Send %s %v: %v", tc.dev, tc.target, err)
		}
		for _, w := range tc.want {
			o := nextObserved(t, obs)
			if o.topic != w[0] || o.payload != w[1] || o.qos != 1 || o.retained {
				t.Errorf("%s %v: published %s %q qos %d retained %v; want %s %q qos 1, not retained", tc.dev, tc.target, o.topic, o.payload, o.qos, o.retained, w[0], w[1])
			}
		}
	}
}

// What Tasmota cannot carry fails at once, permanently, with nothing sent.
func TestSendRefusesWhatTasmotaCannotCarryPermanently(t *testing.T) {
	addr := startBroker(t)
	a, _ := startAdapter(t, addr, Options{})
	obs := observe(t, addr, "cmnd/#")
	ctx := context.Background()
	for _, tc := range []struct {
		dev    string
		target devices.Target
	}{
		{"bulb", target("state", "OFF", "brightness", 100.0)},
		{"bulb", target("color_temp", 100.0)},
		{"bulb", target("color", map[string]any{"x": 0.3, "y": 0.3})},
		{"blind", target("state", "STOP")},
		{"blind", target("tilt", 20.0)},
	} {
		err := a.Send(ctx, deviceOf(t, tc.dev), tc.target)
		var p interface{ Permanent() bool }
		if err == nil || !errors.As(err, &p) || !p.Permanent() {
			t.Errorf("Send %s %v = %v; want a permanent error", tc.dev, tc.target, err)
		}
	}
	lock := devices.Device{ID: "door", Class: devices.Lock, Address: "door"}
	if err := a.Send(ctx, lock, target("state", "UNLOCK")); err == nil {
		t.Error("Send to a lock: nil error; want a permanent one")
	}
	// A barrier: the first thing the observer sees is the read, not a
	// refused command.
	if err := a.Read(ctx, deviceOf(t, "plug"), nil); err != nil {
		t.Fatal(err)
	}
	if o := nextObserved(t, obs); o.topic != "cmnd/plug/POWER" || o.payload != "" {
		t.Errorf("first publish %s %q; want the read cmnd/plug/POWER with an empty payload (nothing of the refused targets)", o.topic, o.payload)
	}
}

// Read is Tasmota's query form: the command with an empty payload (POWER<n>
// of a relay, State of a light) or Status 10 for a shutter's position.
func TestReadPublishesTheQuery(t *testing.T) {
	addr := startBroker(t)
	a, _ := startAdapter(t, addr, Options{})
	obs := observe(t, addr, "cmnd/#")
	for _, tc := range []struct{ dev, topic, payload string }{
		{"garden", "cmnd/dual/POWER2", ""},
		{"bulb", "cmnd/bulb/State", ""},
		{"blind", "cmnd/blinds/Status", "10"},
	} {
		if err := a.Read(context.Background(), deviceOf(t, tc.dev), nil); err != nil {
			t.Fatal(err)
		}
		if o := nextObserved(t, obs); o.topic != tc.topic || o.payload != tc.payload || o.retained || o.qos != 1 {
			t.Errorf("Read %s: %s %q qos %d retained %v; want %s %q qos 1", tc.dev, o.topic, o.payload, o.qos, o.retained, tc.topic, tc.payload)
		}
	}
}

// stat and tele reports reach the sink as Hearth state, for each Hearth
// device at the Topic; a retained stat/POWER (PowerRetain) is passed as
// retained; the echo of a command on cmnd is never heard.
func TestReportsReachTheSinkAndEchoesDoNot(t *testing.T) {
	addr := startBroker(t)
	_, s := startAdapter(t, addr, Options{})
	d := newDevice(t, addr)
	d.publish(t, "cmnd/dual/POWER1", "ON", false) // an echo, or anyone's command
	d.publish(t, "stat/dual/RESULT", `{"POWER2":"ON"}`, false)
	for _, want := range []call{
		{kind: "report", name: "porch", state: map[string]any{}},
		{kind: "report", name: "garden", state: map[string]any{"state": "ON"}},
	} {
		if got := s.next(t); got.kind != want.kind || got.name != want.name || !maps.Equal(got.state, want.state) || got.retained {
			t.Errorf("got %+v; want %+v (the cmnd echo reaches no sink)", got, want)
		}
	}
	d.publish(t, "tele/bulb/STATE", `{"Time":"2024-01-01T00:00:00","POWER":"ON","Dimmer":50,"CT":370,"Wifi":{"RSSI":80}}`, false)
	if got := s.next(t); got.name != "bulb" || !maps.Equal(got.state, map[string]any{"state": "ON", "brightness": 127.0, "color_temp": 370.0}) {
		t.Errorf("tele/STATE: %+v; want bulb ON, brightness 127 (Dimmer 50), color_temp 370", got)
	}
	d.publish(t, "stat/blinds/RESULT", `{"ShutterPosition1":40}`, false)
	d.publish(t, "stat/blinds/RESULT", `{"Shutter1":{"Position":40,"Direction":0,"Target":40}}`, false)
	if got := s.next(t); got.name != "blind" || len(got.state) != 0 {
		t.Errorf("the echo {\"ShutterPosition1\":40}: %+v; want an empty report (the device spoke, its position unknown)", got)
	}
	if got := s.next(t); got.name != "blind" || !maps.Equal(got.state, map[string]any{"position": 40.0, "state": "OPEN"}) {
		t.Errorf("Shutter1 Position 40: %+v; want position 40, OPEN", got)
	}
	d.publish(t, "stat/other/POWER", "ON", false)
	d.publish(t, "stat/plug/POWER", "ON", false)
	if got := s.next(t); got.name != "plug" || got.state["state"] != "ON" {
		t.Errorf("got %+v; want plug ON (nothing of the unknown Topic other)", got)
	}
}

// A brightness Hearth sent confirms as itself: Dimmer 50 reads back as the
// 128 that was sent, not as BrightnessOf(50) = 127.
func TestDimmerReadsBackAsTheBrightnessSent(t *testing.T) {
	addr := startBroker(t)
	a, s := startAdapter(t, addr, Options{})
	if err := a.Send(context.Background(), deviceOf(t, "bulb"), target("brightness", 128.0)); err != nil {
		t.Fatal(err)
	}
	d := newDevice(t, addr)
	d.publish(t, "stat/bulb/RESULT", `{"POWER":"ON","Dimmer":50}`, false)
	if got := s.next(t); got.state["brightness"] != 128.0 {
		t.Errorf("brightness %v; want 128, the brightness sent as Dimmer 50", got.state["brightness"])
	}
	d.publish(t, "stat/bulb/RESULT", `{"POWER":"ON","Dimmer":20}`, false)
	if got := s.next(t); got.state["brightness"] != 51.0 {
		t.Errorf("brightness %v; want 51 = round(20·254/100) for a level Hearth did not send", got.state["brightness"])
	}
}

// Each LWT reaches the availability of every device at its Topic; the
// service goes offline only once every Topic said Offline, and online
// again at the first Online.
func TestLWTFeedsAvailabilityAndTheService(t *testing.T) {
	addr := startBroker(t)
	devs := []devices.Device{
		{ID: "porch", Class: devices.Switch, Address: "dual/1"},
		{ID: "garden", Class: devices.Switch, Address: "dual/2"},
		{ID: "plug", Class: devices.Switch},
	}
	_, s := startAdapter(t, addr, Options{Devices: devs})
	d := newDevice(t, addr)
	expect := func(want ...call) {
		t.Helper()
		for _, w := range want {
			if got := s.next(t); got.kind != w.kind || got.name != w.name || got.online != w.online {
				t.Errorf("got %s %s online=%v; want %s %s online=%v", got.kind, got.name, got.online, w.kind, w.name, w.online)
			}
		}
	}
	d.publish(t, "tele/dual/LWT", "Offline", false)
	expect(call{kind: "availability", name: "porch"}, call{kind: "availability", name: "garden"})
	d.publish(t, "tele/plug/LWT", "Online", false)
	expect(call{kind: "availability", name: "plug", online: true}, call{kind: "bridge", name: "wifi", online: true})
	d.publish(t, "tele/plug/LWT", "Offline", false)
	expect(call{kind: "availability", name: "plug"}, call{kind: "bridge", name: "wifi"})
	d.publish(t, "tele/dual/LWT", "Online", false)
	expect(call{kind: "availability", name: "porch", online: true}, call{kind: "availability", name: "garden", online: true}, call{kind: "bridge", name: "wifi", online: true})
	d.publish(t, "tele/plug/LWT", "gone", false)
	d.publish(t, "stat/plug/POWER", "ON", false)
	if got := s.next(t); got.kind != "report" {
		t.Errorf("after an unreadable LWT: %+v; want the next report (the LWT changes nothing)", got)
	}
}

// A custom FullTopic puts the prefix where it says.
func TestCustomFullTopic(t *testing.T) {
	addr := startBroker(t)
	a, s := startAdapter(t, addr, Options{FullTopic: "home/%topic%/%prefix%/"})
	obs := observe(t, addr, "home/+/cmnd/#")
	if err := a.Send(context.Background(), deviceOf(t, "plug"), target("state", "OFF")); err != nil {
		t.Fatal(err)
	}
	if o := nextObserved(t, obs); o.topic != "home/plug/cmnd/POWER" || o.payload != "OFF" {
		t.Errorf("published %s %q; want home/plug/cmnd/POWER OFF", o.topic, o.payload)
	}
	d := newDevice(t, addr)
	d.publish(t, "stat/plug/POWER", "ON", false) // the default layout: not this service's
	d.publish(t, "home/plug/stat/POWER", "OFF", false)
	if got := s.next(t); got.name != "plug" || got.state["state"] != "OFF" {
		t.Errorf("got %+v; want plug OFF from home/plug/stat/POWER", got)
	}
}

// With Publisher, only that account's messages count.
func TestOnlyThePublishersReportsCount(t *testing.T) {
	addr := startBroker(t)
	a, s := startAdapter(t, addr, Options{Publisher: "wifi", StampProperty: "hearth-username"})
	p := testbroker.NewStampedPublisher(t, addr)
	p.Publish(t, "stat/plug/POWER", "ON", "mallory")
	p.Publish(t, "tele/plug/LWT", "Offline", "")
	p.Publish(t, "stat/plug/POWER", "OFF", "wifi")
	if got := s.next(t); got.kind != "report" || got.state["state"] != "OFF" {
		t.Errorf("got %+v; want only the account's own report, OFF", got)
	}
	if n := a.Untrusted(); n != 2 {
		t.Errorf("Untrusted() = %d; want 2", n)
	}
}

func TestTransportDefaultsToThreeAttempts(t *testing.T) {
	if got := Transport.DefaultAttempts(); got != 3 {
		t.Errorf("Transport.DefaultAttempts() = %d; want 3: Wi-Fi has no radio retries", got)
	}
}

func TestNewRefusesAddressesThatCannotExist(t *testing.T) {
	for _, addr := range []string{"dual/0", "dual/9", "dual/01", "a/b/c", "+", "kitchen light"} {
		_, err := New(nil, Options{Devices: []devices.Device{{ID: "x", Class: devices.Switch, Address: addr}}})
		if !errors.Is(err, ErrAddress) {
			t.Errorf("New with address %q: %v; want ErrAddress", addr, err)
		}
	}
	if _, err := New(nil, Options{FullTopic: "%topic%/"}); err == nil {
		t.Error("New with a FullTopic without the prefix token: nil error")
	}
}

// A stat/POWER the broker kept (PowerRetain 1) and replays on subscribe is
// passed as retained: old news, which confirms nothing.
func TestRetainedPowerIsPassedAsRetained(t *testing.T) {
	addr := startBroker(t)
	d := newDevice(t, addr)
	d.publish(t, "stat/plug/POWER", "ON", true)
	_, s := startAdapter(t, addr, Options{})
	if got := s.next(t); got.name != "plug" || got.state["state"] != "ON" || !got.retained {
		t.Errorf("got %+v; want plug ON, retained", got)
	}
	d.publish(t, "stat/plug/POWER", "OFF", false)
	got := s.next(t)
	if got.state["state"] == "ON" && !got.retained {
		// The broker (mochi-mqtt v2.7.9) retains a message, acknowledges
		// it and only then hands it to its subscribers: a subscription
		// made in between gets the retained copy and the live one. The
		// live ON is the device's publish, live indeed.
		got = s.next(t)
	}
	if got.state["state"] != "OFF" || got.retained {
		t.Errorf("got %+v; want plug OFF, live", got)
	}
}
