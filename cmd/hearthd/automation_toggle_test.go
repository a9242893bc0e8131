package main

import (
	"fmt"
	"testing"

	"github.com/hearthd/hearth/automations"
	"github.com/hearthd/hearth/devices"
)

// toggleConfig is testConfig with a rule that toggles the plug at a
// button's toggle action, as Zigbee2MQTT publishes it.
const toggleConfig = testConfig + `automations:
  button_toggles_plug:
    triggers:
      - mqtt: {topic: zigbee2mqtt/hall_button, fields: {action: toggle}}
    actions:
      - command: {device: plug, toggle: state}
`

// A button's toggle reaches the plug as the absolute opposite of its
// confirmed state, resolved once: the set says OFF, then ON, never
// TOGGLE.
func TestButtonToggleSendsTheOppositeOfTheConfirmedState(t *testing.T) {
	h := newHarness(t, harnessOptions{config: toggleConfig})
	h.settle("plug")
	h.publish("plug", `{"state":"ON","op_id":"on1"}`)
	h.nextSet()
	if r := h.final("on1"); r.State["state"] != "ON" {
		t.Fatalf("on1 ended with state %v; want ON", r.State)
	}
	for i, want := range []string{"OFF", "ON"} {
		mustToken(t, h.client.Publish("zigbee2mqtt/hall_button", 1, false, fmt.Sprintf(`{"action":"toggle","linkquality":%d}`, 90+i)))
		set := h.nextSet()
		if set.Device != "plug" || set.Attrs["state"] != want {
			t.Fatalf("press %d: set %s to %s; want the plug's state %s", i+1, set.Payload, set.Device, want)
		}
		r := h.await(func(r devices.Result) bool {
			return r.Device == "plug" && r.Status.Terminal() && r.Target["state"] == want
		}, "the toggle's end")
		if r.State["state"] != want {
			t.Fatalf("press %d ended %s with state %v; want %s", i+1, r.Status, r.State, want)
		}
		h.clock.Advance(automations.DefaultRepeatWindow) // the next press is a new event (no timer waits on it)
	}
}
