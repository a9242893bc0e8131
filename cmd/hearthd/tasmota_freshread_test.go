package main

import (
	"encoding/json"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// tasmotaLateConfig is a Tasmota service of a plug, a gate on a
// two-shutter Tasmota's second shutter and a garage door, both
// safety-critical. The test plays the garage itself, connecting late.
const tasmotaLateConfig = `
mqtt:
  listen: 127.0.0.1:0
  reconnect: {base: 10ms, cap: 100ms}
http:
  listen: 127.0.0.1:0
defaults:
  ttl: 60s
services:
  wifi:
    protocol: tasmota
devices:
  plug:
    service: wifi
    class: switch
  gate:
    service: wifi
    class: cover
    safety: critical
    address: gates/2
  garage:
    service: wifi
    class: cover
    safety: critical
`

// Every Tasmota is its own MQTT client: the service is up at the first
// one's LWT Online, while a garage Tasmota still booting hears nothing.
// hearthd reads each safety-critical Tasmota after its start once that
// device's own LWT said Online: the gate (up with the plug) at once, the
// garage when it connects and says Online, and its answer is the
// garage's state. (hearthd read every one at the service's first Online,
// so the garage's read was lost and its state stayed a replay: that made
// 3 to 5 of 28 runs of TestTasmota* time out in settle under load.)
func TestATasmotaIsReadFreshOnceItSaidOnlineItself(t *testing.T) {
	h := newHarness(t, harnessOptions{config: tasmotaLateConfig, notSimulated: []string{"garage"}})
	h.settle("plug", "gate")
	if n := h.fresh.received("gates"); n != 1 {
		t.Fatalf("the gate's Tasmota received %d fresh reads; want 1", n)
	}
	if n := h.fresh.sentTo("garage"); n != 0 {
		t.Fatalf("hearthd sent %d fresh reads to the garage before it said Online; want none", n)
	}

	mirror := h.watch("hearth/garage")
	reads := make(chan paho.Message, 8)
	garage := paho.NewClient(paho.NewClientOptions().AddBroker(h.d.brokerURL).SetClientID("tasmota-garage").
		SetWill("tele/garage/LWT", "Offline", 1, true))
	mustToken(t, garage.Connect())
	defer garage.Disconnect(0)
	mustToken(t, garage.Subscribe("cmnd/garage/#", 1, func(_ paho.Client, m paho.Message) { reads <- m }))
	mustToken(t, garage.Publish("tele/garage/LWT", 1, true, "Online"))
	select {
	case m := <-reads:
		if m.Topic() != "cmnd/garage/Status" || string(m.Payload()) != "10" || m.Retained() {
			t.Fatalf("the garage received %s %q retained=%v; want cmnd/garage/Status 10, not retained", m.Topic(), m.Payload(), m.Retained())
		}
	case <-time.After(eventWait):
		t.Fatal("the garage never received its fresh read after it said Online")
	}
	if n := h.fresh.sentTo("garage"); n != 1 {
		t.Errorf("hearthd sent %d fresh reads to the garage; want 1", n)
	}
	mustToken(t, garage.Publish("stat/garage/STATUS10", 1, false,
		`{"StatusSNS":{"Time":"2026-11-29T19:00:00","Shutter1":{"Position":0,"Direction":0,"Target":0,"Tilt":0}}}`))
	deadline := time.After(eventWait)
	for {
		select {
		case m := <-mirror:
			var s map[string]any
			if err := json.Unmarshal(m.Payload(), &s); err != nil {
				t.Fatalf("hearth/garage: not JSON: %s", m.Payload())
			}
			if s["position"] != 0.0 || s["state"] != "CLOSE" {
				t.Fatalf("hearth/garage %v; want position 0, CLOSE (the answer)", s)
			}
			return
		case <-deadline:
			t.Fatal("hearthd never mirrored the garage's answer")
		}
	}
}
