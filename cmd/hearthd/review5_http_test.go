package main

import (
	"net/http"
	"strings"
	"testing"
)

// Issue 5 item 2 / SAFETY.md "Principals over HTTP": the intake refuses a
// known op_id from another principal because "its result is not theirs to
// read" (dispatcher.validate), yet GET /api/v1/ops/{op_id} serves any
// principal's command to every other principal: the phone reads the
// tablet's UNLOCK (target, state, principal, detail) by its op_id.
func TestReviewAnOpIsNotReadableByAnotherPrincipal(t *testing.T) {
	h := newHarness(t, harnessOptions{simLogin: bridgeLogin, automationLogin: bridgeLogin, config: principalsConfig})
	h.settle("front_door")
	status, _, body := h.call("POST", "/api/v1/devices/front_door/commands", "tablet-token-0123456789", `{"state":"LOCK","op_id":"tablets-op"}`)
	if status != http.StatusAccepted {
		t.Fatalf("tablet's LOCK: %d %s", status, body)
	}
	// The intake's rule: the phone may not reuse the tablet's op_id to learn its result.
	status, _, body = h.call("POST", "/api/v1/devices/front_door/commands", "phone-token-0123456789ab", `{"state":"LOCK","op_id":"tablets-op"}`)
	if status != http.StatusForbidden {
		t.Errorf("phone reusing the tablet's op_id: %d %s; want 403", status, body)
	}
	status, _, body = h.call("GET", "/api/v1/ops/tablets-op", "phone-token-0123456789ab", "")
	if status == http.StatusOK && strings.Contains(body, `"op_id":"tablets-op"`) {
		t.Errorf("phone read the tablet's op: %d %s; want 403 or 404, as the intake refuses it", status, body)
	}
}
