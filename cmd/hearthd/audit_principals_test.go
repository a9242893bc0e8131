package main

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/hearthd/hearth/api"
	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
)

// With principals, a principal that may not read every principal's
// commands (GET /api/v1/ops/{op_id} answers it 403 for another's) reads
// only its own commands' audit trail: the tablet sees its LOCK, not the
// phone's UNLOCK before it, even when it asks for the phone's by name;
// the phone, allowed every device, reads both.
func TestAuditTrailIsThePrincipalsOwn(t *testing.T) {
	h := newHarness(t, harnessOptions{simLogin: bridgeLogin, automationLogin: bridgeLogin})
	withPrincipals, err := config.Parse("test.yaml", []byte(principalsConfig))
	if err != nil {
		t.Fatal(err)
	}
	h.d.reload(withPrincipals)
	const tablet, phone = "tablet-token-0123456789", "phone-token-0123456789ab"
	for _, c := range []struct{ token, body string }{
		{phone, `{"state":"UNLOCK","op_id":"phone-unlock"}`},
		{tablet, `{"state":"LOCK","op_id":"tablet-lock"}`},
	} {
		status, _, body := h.call("POST", "/api/v1/devices/front_door/commands?wait=30s", c.token, c.body)
		if status != http.StatusOK || decodeResult(t, body).Status != devices.Succeeded {
			t.Fatalf("%s: %d %s", c.body, status, body)
		}
	}
	ops := func(token, query string) map[string]string {
		t.Helper()
		status, _, body := h.call("GET", "/api/v1/audit"+query, token, "")
		if status != http.StatusOK {
			t.Fatalf("GET /api/v1/audit%s: %d %s", query, status, body)
		}
		var page api.AuditPage
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			t.Fatal(err)
		}
		seen := map[string]string{}
		for _, e := range page.Entries {
			seen[e.OpID] = e.Principal
		}
		return seen
	}
	if got := ops(tablet, ""); len(got) != 1 || got["tablet-lock"] != "tablet" {
		t.Errorf("the tablet's audit trail: ops %v; want tablet-lock (tablet) only", got)
	}
	if got := ops(tablet, "?principal=phone"); len(got) != 0 {
		t.Errorf("the tablet asking for the phone's: ops %v; want none", got)
	}
	if got := ops(phone, ""); len(got) != 2 || got["phone-unlock"] != "phone" || got["tablet-lock"] != "tablet" {
		t.Errorf("the phone's audit trail: ops %v; want phone-unlock (phone) and tablet-lock (tablet)", got)
	}
}
