package simulator

import (
	"testing"
)

// The simulated Tasmota plays the command flow of Tasmota's MQTT
// documentation ("Command flow": an empty Power is a query, answered on
// stat/RESULT and stat/POWER), keeps its LWT retained, and keeps a
// PowerRetain stat/POWER retained.
func TestTasmotaPlaysTheDocumentedCommandFlow(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "#")
	sim, evs, stop := startSim(t, Options{Broker: broker, Devices: []Device{
		{Name: "tasmota_switch", Class: ClassSwitch, Protocol: ProtocolTasmota, PowerRetain: true},
		{Name: "dual", Class: ClassSwitch, Protocol: ProtocolTasmota, Relays: 2},
	}})
	if m := retained(t, broker, "tele/tasmota_switch/LWT"); string(m.payload) != "Online" {
		t.Errorf("LWT %q; want Online, retained", m.payload)
	}
	w.publish(t, "cmnd/tasmota_switch/Power", "")
	if m := w.live(t, "stat/tasmota_switch/RESULT"); string(m.payload) != `{"POWER":"OFF"}` {
		t.Errorf("query RESULT %s; want {\"POWER\":\"OFF\"}", m.payload)
	}
	if m := w.next(t, "stat/tasmota_switch/POWER"); string(m.payload) != "OFF" {
		t.Errorf("stat/POWER %s; want OFF", m.payload)
	}
	w.publish(t, "cmnd/tasmota_switch/Power", "ON")
	if ev := evs.next(t); ev.Device != "tasmota_switch" || ev.Dropped {
		t.Errorf("set %+v; want applied", ev)
	}
	if m := w.live(t, "stat/tasmota_switch/RESULT"); string(m.payload) != `{"POWER":"ON"}` {
		t.Errorf("RESULT %s; want {\"POWER\":\"ON\"}", m.payload)
	}
	// The broker stores a retained message before it passes it on: once
	// stat/POWER is heard, it is retained.
	if m := w.next(t, "stat/tasmota_switch/POWER"); string(m.payload) != "ON" {
		t.Errorf("stat/POWER %s; want ON", m.payload)
	}
	if m := retained(t, broker, "stat/tasmota_switch/POWER"); string(m.payload) != "ON" {
		t.Errorf("retained stat/POWER %q; want ON (PowerRetain)", m.payload)
	}
	w.publish(t, "cmnd/dual/POWER2", "ON")
	evs.next(t)
	if m := w.live(t, "stat/dual/RESULT"); string(m.payload) != `{"POWER2":"ON"}` {
		t.Errorf("RESULT %s; want {\"POWER2\":\"ON\"}", m.payload)
	}
	if st := sim.State("dual"); st["POWER1"] != "OFF" || st["POWER2"] != "ON" {
		t.Errorf("dual %v", st)
	}
	w.publish(t, "cmnd/dual/Blink", "")
	if m := w.live(t, "stat/dual/RESULT"); string(m.payload) != `{"Command":"Unknown"}` {
		t.Errorf("unknown command: %s", m.payload)
	}
	if err := sim.SetOnline("dual", false); err != nil {
		t.Fatal(err)
	}
	// The LWT Online of its connect first, then Offline (next fails the
	// test if it never comes).
	for m := w.live(t, "tele/dual/LWT"); string(m.payload) != "Offline"; m = w.live(t, "tele/dual/LWT") {
		if string(m.payload) != "Online" {
			t.Fatalf("LWT %q", m.payload)
		}
	}
	stop()
	if m := retained(t, broker, "tele/tasmota_switch/LWT"); string(m.payload) != "Offline" {
		t.Errorf("LWT %q after stop; want Offline", m.payload)
	}
}

// A shutter answers ShutterPosition with the parameter's echo, then its
// Shutter1 position once there; Status 10 reads it.
func TestTasmotaShutterReportsItsPosition(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "stat/#")
	startSim(t, Options{Broker: broker, Devices: []Device{{Name: "blinds", Class: ClassCover, Protocol: ProtocolTasmota}}})
	w.publish(t, "cmnd/blinds/ShutterPosition1", "40")
	for _, want := range []string{`{"ShutterPosition1":40}`, `{"Shutter1":{"Direction":0,"Position":40,"Target":40}}`} {
		if m := w.live(t, "stat/blinds/RESULT"); string(m.payload) != want {
			t.Errorf("RESULT %s; want %s", m.payload, want)
		}
	}
	if m := w.next(t, "stat/blinds/SHUTTER1"); string(m.payload) != "40" {
		t.Errorf("stat/SHUTTER1 %s; want 40", m.payload)
	}
	w.publish(t, "cmnd/blinds/Status", "10")
	if got := w.next(t, "stat/blinds/STATUS10").json(t); got["StatusSNS"].(map[string]any)["Shutter1"].(map[string]any)["Position"] != 40.0 {
		t.Errorf("STATUS10 %v; want Shutter1 Position 40", got)
	}
}
