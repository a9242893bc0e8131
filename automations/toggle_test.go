package automations

import (
	"strings"
	"testing"
)

// A confirmed state whose value cannot be a map key (a bridge that
// reports "state" as an object or a list) is a value with no opposite:
// the toggle sends nothing, says so, and the engine goes on running.
func TestToggleOfAnObjectStateSendsNothingAndTheEngineRunsOn(t *testing.T) {
	state := map[string]any{"state": map[string]any{"l1": "ON"}}
	o := Options{Confirmed: func(string) map[string]any { return state }}
	h := startWith(t, friday, o, Rule{
		Name:     "button",
		Triggers: []Trigger{{MQTT: &MQTTTrigger{Topic: "zigbee2mqtt/button", Fields: map[string]any{"action": "toggle"}}}},
		Actions:  []Action{{Command: &CommandAction{Device: "lamp", Toggle: "state"}}, notify("after")},
	})
	h.e.DeviceState("lamp", state, false) // reported live
	h.event("zigbee2mqtt/button", []byte(`{"action":"toggle"}`))
	h.sync()
	if got := h.rec.Commands(); len(got) != 0 {
		t.Fatalf("commands %v for a state with no opposite; want none", got)
	}
	if got := len(h.rec.Notes()); got != 1 {
		t.Errorf("%d notifications after the unresolved toggle; want 1 (the rule's next action)", got)
	}
	if !strings.Contains(h.logs.String(), "has no opposite") {
		t.Errorf("no log line for the unresolved toggle:\n%s", h.logs)
	}
}
