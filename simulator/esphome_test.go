package simulator

import (
	"testing"
)

func esphomeSim(t *testing.T, broker string, faults Faults) (*Sim, events) {
	t.Helper()
	sim, evs, _ := startSim(t, Options{Broker: broker, Faults: faults, Devices: []Device{
		{Name: "kitchen/switch/relay", Class: ClassSwitch, Protocol: ProtocolESPHome},
		{Name: "kitchen/light/ceiling", Class: ClassLight, Protocol: ProtocolESPHome},
		{Name: "garage/cover/door", Class: ClassCover, Protocol: ProtocolESPHome},
		{Name: "front/lock/front_door", Class: ClassLock, Protocol: ProtocolESPHome},
	}})
	return sim, evs
}

// On connect a node publishes its birth, then every state, retained, in
// ESPHome's payloads (a cover's position before its state).
func TestESPHomeNodeAnnouncesItsBirthAndEveryState(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "esphome/#")
	esphomeSim(t, broker, Faults{})
	for _, tc := range []struct{ topic, payload string }{
		{"esphome/kitchen/status", "online"},
		{"esphome/kitchen/switch/relay/state", "OFF"},
		{"esphome/kitchen/light/ceiling/state", `{"brightness":255,"color":{},"color_mode":"brightness","state":"OFF"}`},
		{"esphome/garage/status", "online"},
		{"esphome/garage/cover/door/position/state", "0"},
		{"esphome/garage/cover/door/state", "closed"},
		{"esphome/front/lock/front_door/state", "LOCKED"},
	} {
		if m := w.next(t, tc.topic); string(m.payload) != tc.payload {
			t.Errorf("%s = %s; want %s", tc.topic, m.payload, tc.payload)
		}
	}
}

// A switch asked for the state it is in publishes nothing (ESPHome's
// publish_dedup_): the next state after OFF, ON is ON.
func TestESPHomeSwitchPublishesNoUnchangedState(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "esphome/kitchen/switch/relay/state")
	sim, evs := esphomeSim(t, broker, Faults{})
	w.next(t, "esphome/kitchen/switch/relay/state") // the initial OFF
	w.publish(t, "esphome/kitchen/switch/relay/command", "OFF")
	if ev := evs.next(t); ev.Dropped || string(ev.Payload) != "OFF" {
		t.Fatalf("SetEvent %+v; want OFF applied", ev)
	}
	w.publish(t, "esphome/kitchen/switch/relay/command", "ON")
	evs.next(t)
	if m := w.next(t, "esphome/kitchen/switch/relay/state"); string(m.payload) != "ON" {
		t.Fatalf("state after OFF, ON: %s; want ON (no OFF repeated)", m.payload)
	}
	if st := sim.State("kitchen/switch/relay"); st["state"] != "ON" {
		t.Fatalf("State = %v", st)
	}
}

// A cover's position/command moves it: position/state, then state.
func TestESPHomeCoverPositionCommand(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "esphome/garage/cover/door/#")
	esphomeSim(t, broker, Faults{})
	w.next(t, "esphome/garage/cover/door/position/state")
	w.next(t, "esphome/garage/cover/door/state")
	w.publish(t, "esphome/garage/cover/door/position/command", "40")
	if m := w.next(t, "esphome/garage/cover/door/position/state"); string(m.payload) != "40" {
		t.Fatalf("position/state %s; want 40", m.payload)
	}
	if m := w.next(t, "esphome/garage/cover/door/state"); string(m.payload) != "open" {
		t.Fatalf("state %s; want open", m.payload)
	}
}

// A light takes the JSON schema and publishes its state after every
// command.
func TestESPHomeLightTakesTheJSONSchema(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "esphome/kitchen/light/ceiling/state")
	esphomeSim(t, broker, Faults{})
	w.next(t, "esphome/kitchen/light/ceiling/state")
	w.publish(t, "esphome/kitchen/light/ceiling/command", `{"state":"ON","brightness":129,"transition":1}`)
	m := w.next(t, "esphome/kitchen/light/ceiling/state").json(t)
	if m["state"] != "ON" || (m["brightness"] != 129.0 && m["brightness"] != 128.0) {
		t.Fatalf("state %v; want ON at 129 (or 128, ESPHome's uint8 truncation)", m)
	}
}

// A jammed lock reports JAMMED whatever it is asked; a node taken
// offline publishes offline, its will's payload, and ignores commands.
func TestESPHomeJammedLockAndOfflineNode(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "esphome/front/#")
	sim, evs := esphomeSim(t, broker, Faults{Jam: []string{"front/lock/front_door"}})
	w.next(t, "esphome/front/lock/front_door/state")
	w.publish(t, "esphome/front/lock/front_door/command", "UNLOCK")
	evs.next(t)
	if m := w.next(t, "esphome/front/lock/front_door/state"); string(m.payload) != "JAMMED" {
		t.Fatalf("state %s; want JAMMED", m.payload)
	}
	w.next(t, "esphome/front/status") // the birth
	if err := sim.SetOnline("front/lock/front_door", false); err != nil {
		t.Fatal(err)
	}
	if m := w.next(t, "esphome/front/status"); string(m.payload) != "offline" {
		t.Fatalf("status %s; want offline", m.payload)
	}
	w.publish(t, "esphome/front/lock/front_door/command", "LOCK")
	if ev := evs.next(t); !ev.Dropped || ev.Reason != ReasonOffline {
		t.Fatalf("SetEvent %+v; want dropped offline", ev)
	}
}

// A configuration the simulator cannot play is refused.
func TestESPHomeBadDevicesAreRefused(t *testing.T) {
	for _, d := range []Device{
		{Name: "kitchen/relay", Class: ClassSwitch, Protocol: ProtocolESPHome},
		{Name: "kitchen/light/relay", Class: ClassSwitch, Protocol: ProtocolESPHome},
		{Name: "kitchen/climate/x", Class: ClassClimate, Protocol: ProtocolESPHome},
	} {
		if _, err := New(Options{Broker: "tcp://127.0.0.1:1", Devices: []Device{d}}); err == nil {
			t.Errorf("New accepted %+v", d)
		}
	}
	if _, err := New(Options{Broker: "tcp://127.0.0.1:1", Devices: []Device{{Name: "a/lock/b", Class: ClassLock, Protocol: ProtocolESPHome}}, Faults: Faults{IgnoreGets: []string{"a/lock/b"}}}); err == nil {
		t.Error("New accepted IgnoreGets for an ESPHome lock, which has no get")
	}
}
