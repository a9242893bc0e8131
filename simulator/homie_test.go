package simulator

import (
	"testing"
)

func homieSim(t *testing.T, broker, root string, faults Faults) (*Sim, events) {
	t.Helper()
	sim, evs, _ := startSim(t, Options{Broker: broker, Faults: faults, Devices: []Device{
		{Name: "plug-1/relay/on", Class: ClassSwitch, Protocol: ProtocolHomie, BaseTopic: root},
		{Name: "kitchen-light/light/power,brightness", Class: ClassLight, Protocol: ProtocolHomie, BaseTopic: root},
	}})
	return sim, evs
}

// A Homie 4 device announces itself as the convention says (init, its
// attributes, ready) and reflects an accepted set on its property topic,
// retained.
func TestHomie4DeviceAnnouncesAndReflectsASet(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "homie/#")
	sim, evs := homieSim(t, broker, "", Faults{})
	if m := w.next(t, "homie/plug-1/$state"); string(m.payload) != "init" {
		t.Fatalf("first $state %q; want init", m.payload)
	}
	for topic, want := range map[string]string{
		"homie/plug-1/$homie": "4.0.0", "homie/plug-1/$nodes": "relay", "homie/plug-1/relay/$properties": "on",
		"homie/plug-1/relay/on/$datatype": "boolean", "homie/plug-1/relay/on/$settable": "true", "homie/plug-1/relay/on": "false",
		"homie/kitchen-light/light/$properties": "power,brightness", "homie/kitchen-light/light/brightness/$format": "0:100",
		"homie/plug-1/$state": "ready",
	} {
		if m := w.next(t, topic); string(m.payload) != want {
			t.Errorf("%s = %q; want %q", topic, m.payload, want)
		}
	}
	w.publish(t, "homie/plug-1/relay/on/set", "true")
	w.next(t, "homie/plug-1/relay/on/set") // the watcher's own
	if m := w.live(t, "homie/plug-1/relay/on"); string(m.payload) != "true" {
		t.Fatalf("value %q; want true", m.payload)
	}
	if m := retained(t, broker, "homie/plug-1/relay/on"); string(m.payload) != "true" {
		t.Fatalf("retained value %q; want true", m.payload)
	}
	if ev := evs.next(t); ev.Device != "plug-1/relay/on" || ev.Dropped || ev.Attrs["value"] != "true" {
		t.Fatalf("SetEvent %+v", ev)
	}
	if st := sim.State("plug-1/relay/on"); st["state"] != "ON" {
		t.Fatalf("State %v; want ON", st)
	}
	w.publish(t, "homie/plug-1/relay/on/set", "ON") // not a Homie boolean
	if ev := evs.next(t); !ev.Dropped || ev.Reason != ReasonNoValidAttribute {
		t.Fatalf("SetEvent %+v; want dropped, no valid attribute", ev)
	}
}

// A Homie 5 device publishes its $description and a set's $target
// (byte-equal) before the value; in EchoOnly only the $target.
func TestHomie5TargetBeforeValue(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "homie/5/#")
	homieSim(t, broker, "homie/5", Faults{EchoOnly: []string{"plug-1/relay/on"}})
	if d := w.next(t, "homie/5/kitchen-light/$description").json(t); d["homie"] != "5.0" {
		t.Fatalf("$description %v", d)
	}
	w.next(t, "homie/5/kitchen-light/$state")
	if m := w.next(t, "homie/5/kitchen-light/$state"); string(m.payload) != "ready" {
		t.Fatalf("$state %q; want ready", m.payload)
	}
	w.publish(t, "homie/5/kitchen-light/light/brightness/set", "40")
	if m := w.live(t, "homie/5/kitchen-light/light/brightness/$target"); string(m.payload) != "40" {
		t.Fatalf("$target %q", m.payload)
	}
	w.next(t, "homie/5/kitchen-light/light/brightness") // the initial value, 100
	if m := w.next(t, "homie/5/kitchen-light/light/brightness"); string(m.payload) != "40" {
		t.Fatalf("value %q", m.payload)
	}
	w.publish(t, "homie/5/plug-1/relay/on/set", "true")
	if m := w.live(t, "homie/5/plug-1/relay/on/$target"); string(m.payload) != "true" {
		t.Fatalf("$target %q", m.payload)
	}
	w.next(t, "homie/5/plug-1/relay/on") // the initial value
	w.none(t, "homie/5/plug-1/relay/on")
}

// SetOnline false says lost, as the will would; a device offline hears
// no set.
func TestHomieOfflineSaysLost(t *testing.T) {
	_, broker := startBroker(t)
	w := watch(t, broker, "homie/plug-1/$state")
	sim, evs := homieSim(t, broker, "", Faults{})
	if err := sim.SetOnline("plug-1/relay/on", false); err != nil {
		t.Fatal(err)
	}
	for {
		if m := w.next(t, "homie/plug-1/$state"); string(m.payload) == "lost" {
			break
		}
	}
	w.publish(t, "homie/plug-1/relay/on/set", "true")
	if ev := evs.next(t); !ev.Dropped || ev.Reason != ReasonOffline {
		t.Fatalf("SetEvent %+v; want dropped offline", ev)
	}
}
