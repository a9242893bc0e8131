package esphome

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/hearthd/hearth/devices"
)

// The echo of Hearth's command on the command topic (or anyone's command)
// is no report: the adapter passes nothing on.
func TestTheEchoOfACommandIsNoReport(t *testing.T) {
	_, c, s := newAdapter(t)
	c.deliver("esphome/kitchen/switch/relay/command", "ON", false)
	c.deliver("esphome/garage/cover/door/position/command", "100", false)
	c.deliver("esphome/livingroom/light/ceiling/command", `{"state":"ON"}`, false)
	if got := s.take(); len(got) != 0 {
		t.Fatalf("calls %+v; want none", got)
	}
}

// A state replayed from the retained store is passed on as retained and
// answers no read; a live one after the birth answers it.
func TestRetainedStateIsOldNewsAndAnswersNoRead(t *testing.T) {
	a, c, s := newAdapter(t)
	c.deliver("esphome/kitchen/status", "online", true)
	c.deliver("esphome/kitchen/switch/relay/state", "ON", true)
	got := s.take()
	if last := got[len(got)-1]; last.kind != "report" || !last.retained || last.state["state"] != "ON" {
		t.Fatalf("calls %+v; want the retained ON passed on as retained", got)
	}
	if err := a.Read(context.Background(), device("relay"), nil); !errors.Is(err, ErrNoLiveState) {
		t.Fatalf("Read after a retained replay alone: %v; want ErrNoLiveState", err)
	}
	c.deliver("esphome/kitchen/switch/relay/state", "OFF", false)
	s.take()
	if err := a.Read(context.Background(), device("relay"), nil); err != nil {
		t.Fatal(err)
	}
	if got := s.take(); len(got) != 1 || got[0].retained || !reflect.DeepEqual(got[0].state, map[string]any{"state": "OFF"}) {
		t.Fatalf("Read reported %+v; want the live OFF, not retained", got)
	}
}

// A will ends the live state: the node is offline; after its next birth
// the entity is unread until it publishes again.
func TestTheWillAndTheNextBirthEndTheLiveState(t *testing.T) {
	a, c, s := newAdapter(t)
	c.deliver("esphome/frontdoor/status", "online", false)
	c.deliver("esphome/frontdoor/lock/front_door/state", "LOCKED", false)
	c.deliver("esphome/frontdoor/status", "offline", false)
	got := s.take()
	if last := got[len(got)-1]; last.kind != "availability" || last.name != "front" || last.online {
		t.Fatalf("calls %+v; want front offline last", got)
	}
	if err := a.Read(context.Background(), device("front"), nil); !errors.Is(err, ErrNoLiveState) {
		t.Fatalf("Read of an offline node: %v; want ErrNoLiveState", err)
	}
	c.deliver("esphome/frontdoor/status", "online", false)
	if err := a.Read(context.Background(), device("front"), nil); !errors.Is(err, ErrNoLiveState) {
		t.Fatalf("Read right after a birth: %v; want ErrNoLiveState until the node publishes", err)
	}
	c.deliver("esphome/frontdoor/lock/front_door/state", "UNLOCKED", false)
	s.take()
	if err := a.Read(context.Background(), device("front"), nil); err != nil {
		t.Fatal(err)
	}
	if got := s.take(); len(got) != 1 || got[0].state["lock_state"] != "unlocked" {
		t.Fatalf("Read reported %+v; want lock_state unlocked", got)
	}
}

// The service is online while any node said online, offline once every
// node said offline.
func TestTheServiceIsOfflineOnceEveryNodeSaidSo(t *testing.T) {
	_, c, s := newAdapter(t)
	nodes := []string{"kitchen", "garage", "frontdoor", "livingroom"}
	for _, n := range nodes {
		c.deliver("esphome/"+n+"/status", "online", false)
	}
	s.take()
	for i, n := range nodes {
		c.deliver("esphome/"+n+"/status", "offline", false)
		var bridge []call
		for _, x := range s.take() {
			if x.kind == "bridge" {
				bridge = append(bridge, x)
			}
		}
		want := i < len(nodes)-1
		if len(bridge) != 1 || bridge[0].online != want {
			t.Fatalf("after %s offline: bridge calls %+v; want one, online %v", n, bridge, want)
		}
	}
}

// ESPHome publishes a cover's position/state before its state: "open"
// is reported at the position heard with it.
func TestCoverOpenCarriesItsPosition(t *testing.T) {
	_, c, s := newAdapter(t)
	c.deliver("esphome/garage/cover/door/position/state", "40", false)
	c.deliver("esphome/garage/cover/door/state", "open", false)
	got := s.take()
	want := map[string]any{"state": "OPEN", "moving": "STOP", "position": 40.0}
	if len(got) != 2 || !reflect.DeepEqual(got[1].state, want) {
		t.Fatalf("calls %+v; want the open state at position 40 last", got)
	}
}

// Send publishes ESPHome's commands, QoS 1, never retained.
func TestSendPublishesESPHomesCommands(t *testing.T) {
	for _, tc := range []struct {
		dev    string
		target devices.Target
		want   []published
	}{
		{"relay", devices.Target{"state": "ON"}, []published{{"esphome/kitchen/switch/relay/command", false, "ON"}}},
		{"relay", devices.Target{"state": "off"}, []published{{"esphome/kitchen/switch/relay/command", false, "OFF"}}},
		{"ceiling", devices.Target{"state": "ON", "brightness": 254.0, "transition": 2.0}, []published{{"esphome/livingroom/light/ceiling/command", false, `{"brightness":255,"state":"ON","transition":2}`}}},
		{"ceiling", devices.Target{"brightness": 0.0}, []published{{"esphome/livingroom/light/ceiling/command", false, `{"state":"OFF"}`}}},
		{"garage", devices.Target{"state": "CLOSE"}, []published{{"esphome/garage/cover/door/command", false, "CLOSE"}}},
		{"garage", devices.Target{"position": 40.0}, []published{{"esphome/garage/cover/door/position/command", false, "40"}}},
		{"front", devices.Target{"state": "UNLOCK"}, []published{{"esphome/frontdoor/lock/front_door/command", false, "UNLOCK"}}},
	} {
		a, c, _ := newAdapter(t)
		if err := a.Send(context.Background(), device(tc.dev), tc.target); err != nil {
			t.Fatalf("%s %v: %v", tc.dev, tc.target, err)
		}
		if !reflect.DeepEqual(c.published, tc.want) {
			t.Errorf("%s %v: published %+v; want %+v", tc.dev, tc.target, c.published, tc.want)
		}
	}
}

// A target ESPHome cannot carry (a toggle, a lock's OPEN, an attribute the
// class lacks) is a permanent error, with nothing sent.
func TestSendRefusesWhatESPHomeCannotCarry(t *testing.T) {
	for _, tc := range []struct {
		dev    string
		target devices.Target
	}{
		{"relay", devices.Target{"state": "TOGGLE"}},
		{"front", devices.Target{"state": "OPEN"}},
		{"garage", devices.Target{"state": "TOGGLE"}},
		{"relay", devices.Target{"state": "ON", "brightness": 3.0}},
		{"ceiling", devices.Target{"color_temp": 300.0}},
	} {
		a, c, _ := newAdapter(t)
		err := a.Send(context.Background(), device(tc.dev), tc.target)
		var p interface{ Permanent() bool }
		if !errors.As(err, &p) || !p.Permanent() || len(c.published) != 0 {
			t.Errorf("%s %v: error %v, published %v; want a permanent error, nothing sent", tc.dev, tc.target, err, c.published)
		}
	}
}

// A brightness Hearth sent comes back as sent, though ESPHome reports it
// truncated in 0–255 (uint8(b·255)).
func TestLightBrightnessComesBackAsSent(t *testing.T) {
	a, c, s := newAdapter(t)
	if err := a.Send(context.Background(), device("ceiling"), devices.Target{"brightness": 100.0}); err != nil {
		t.Fatal(err)
	}
	if c.published[0].payload != `{"brightness":100,"state":"ON"}` {
		t.Fatalf("published %s", c.published[0].payload)
	}
	c.deliver("esphome/livingroom/light/ceiling/state", `{"color_mode":"brightness","state":"ON","brightness":99,"color":{}}`, false)
	if got := s.take(); len(got) != 1 || got[0].state["brightness"] != 100.0 {
		t.Fatalf("reported %+v; want brightness 100", got)
	}
}

// Hearth's own MQTT connection lost: what it heard live before may have
// changed unseen, so it answers no read until the node publishes again.
func TestALostLinkEndsTheLiveState(t *testing.T) {
	a, c, s := newAdapter(t)
	c.deliver("esphome/frontdoor/status", "online", false)
	c.deliver("esphome/frontdoor/lock/front_door/state", "LOCKED", false)
	s.take()
	if err := a.Read(context.Background(), device("front"), nil); err != nil {
		t.Fatalf("Read of a live LOCKED: %v", err)
	}
	a.LinkLost()
	c.deliver("esphome/frontdoor/status", "online", true) // the replay at the resubscribe
	c.deliver("esphome/frontdoor/lock/front_door/state", "LOCKED", true)
	if err := a.Read(context.Background(), device("front"), nil); !errors.Is(err, ErrNoLiveState) {
		t.Fatalf("Read after the link was lost: %v; want ErrNoLiveState until the node publishes live", err)
	}
	c.deliver("esphome/frontdoor/lock/front_door/state", "UNLOCKED", false)
	if err := a.Read(context.Background(), device("front"), nil); err != nil {
		t.Fatalf("Read after a live report: %v", err)
	}
}
