package main

// Review of issue 5 (safety-critical actions): a failing test of a
// guarantee of docs/SAFETY.md.

import (
	"github.com/hearthd/hearth/devices"
	"testing"
)

// garagePrincipalsConfig is safetyConfig (a garage door on a cover,
// safety: critical) with the bridge as a broker user and a principal that
// may close and stop the garage door, never open it.
var garagePrincipalsConfig = withBridgeAccount(safetyConfig) + `principals:
  tablet:
    http_token: tablet-token-0123456789
    allow: {garage: [close, stop]}
`

// Guarantee 5 (authorization): a principal allowed only to close (and stop)
// the garage door must not be able to open it. devices.Action names a
// cover's action by its state first (CLOSE → "close", STOP → "stop") while
// devices.Risky (and the device) also honour a position: a target
// {"state":"CLOSE","position":100} is authorized as "close", yet it is a
// risky opening, and the simulated Zigbee2MQTT cover (like a real one that
// applies both keys) ends fully open.
func TestReviewClosePrincipalCannotOpenTheGarageWithAPosition(t *testing.T) {
	h := newHarness(t, harnessOptions{simLogin: bridgeLogin, automationLogin: bridgeLogin, config: garagePrincipalsConfig})
	h.settle("garage")
	var accepted []string
	for _, c := range []struct{ opID, payload string }{
		{"close-100", `{"state":"CLOSE","position":100,"op_id":"close-100"}`},
		{"stop-100", `{"state":"STOP","position":100,"op_id":"stop-100"}`},
	} {
		h.submitAs("tablet", "garage", c.payload)
		r := h.result(c.opID)
		if r.Status != devices.Rejected || r.Reason != devices.ReasonUnauthorized {
			t.Errorf("%s from a principal allowed [close, stop] on the garage: %s/%s (%s); want rejected/unauthorized: it opens the door",
				c.payload, r.Status, r.Reason, r.Detail)
			accepted = append(accepted, c.opID)
		}
	}
	if len(accepted) > 0 {
		e := h.nextSet() // what reached the door
		h.eventually("the garage to act on the set", func() bool { return h.sim.State("garage")["position"] != 0 })
		t.Errorf("the garage door received %s from a principal that may not open it and is now at position %v (state %v)",
			e.Payload, h.sim.State("garage")["position"], h.sim.State("garage")["state"])
	}
}
