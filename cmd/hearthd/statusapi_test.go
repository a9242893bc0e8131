package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
)

// Every error of the daemon's HTTP server is the API's JSON shape, the
// mux's own 404 and 405 included; health keeps its own body.
func TestHTTPUnknownRouteAndMethodAreJSON(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	status, header, body := h.call("GET", "/api/v1/nowhere", "", "")
	if status != http.StatusNotFound || header.Get("Content-Type") != "application/json" ||
		body != `{"error":"not_found","detail":"no route for GET /api/v1/nowhere"}`+"\n" {
		t.Errorf("unknown route: %d %q %s", status, header.Get("Content-Type"), body)
	}
	status, header, body = h.call("DELETE", "/api/v1/breakers", "", "")
	if status != http.StatusMethodNotAllowed || header.Get("Allow") != "GET, HEAD" ||
		body != `{"error":"method_not_allowed","detail":"/api/v1/breakers does not take DELETE; it takes GET or HEAD"}`+"\n" {
		t.Errorf("wrong method: %d Allow %q %s", status, header.Get("Allow"), body)
	}
	if status, _, body := h.call("GET", "/healthz", "", ""); status != http.StatusOK {
		t.Errorf("/healthz: %d %s", status, body)
	}
}

// GET /api/v1/devices lists every configured device in config order with
// the state Hearth mirrors; GET /api/v1/devices/{device} shows one, and
// an unknown device is 404 unknown_device.
func TestHTTPDevicesShowMirroredState(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.settle("hall_light", "front_door", "blinds", "plug")
	h.publish("hall_light", `{"state":"ON","brightness":200,"op_id":"dev-1"}`)
	if r := h.final("dev-1"); r.Status != devices.Succeeded {
		t.Fatalf("dev-1: %s %s", r.Status, r.Reason)
	}
	status, _, body := h.call("GET", "/api/v1/devices", "", "")
	var list struct {
		Devices []dispatcher.DeviceStatus `json:"devices"`
	}
	if err := json.Unmarshal([]byte(body), &list); status != http.StatusOK || err != nil {
		t.Fatalf("GET /api/v1/devices: %d %s", status, body)
	}
	var ids []string
	for _, d := range list.Devices {
		ids = append(ids, d.ID)
	}
	if want := []string{"hall_light", "front_door", "blinds", "plug"}; !equalStrings(ids, want) {
		t.Fatalf("devices %v; want %v in config order", ids, want)
	}
	light, door := list.Devices[0], list.Devices[1]
	// color_temp is the simulated light's own, reported with the rest.
	if got, want := mustJSON(t, light), `{"id":"hall_light","service":"zigbee","class":"light","safety_critical":false,"sleepy":false,`+
		`"state":{"brightness":200,"color_temp":250,"state":"ON"},"availability":"online","pending":0,"breaker":"closed"}`; got != want {
		t.Errorf("hall_light:\n%s\nwant\n%s", got, want)
	}
	if door.Class != "lock" || !door.SafetyCritical {
		t.Errorf("front_door: %+v", door)
	}

	status, _, body = h.call("GET", "/api/v1/devices/hall_light", "", "")
	var one dispatcher.DeviceStatus
	if err := json.Unmarshal([]byte(body), &one); status != http.StatusOK || err != nil || one.ID != "hall_light" || one.State["state"] != "ON" {
		t.Errorf("GET /api/v1/devices/hall_light: %d %s", status, body)
	}
	status, _, body = h.call("GET", "/api/v1/devices/attic", "", "")
	if status != http.StatusNotFound || body != `{"error":"unknown_device","detail":"no device \"attic\" is configured"}`+"\n" {
		t.Errorf("unknown device: %d %s", status, body)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// opsPage is GET /api/v1/ops's body.
type opsPage struct {
	Ops []struct {
		devices.Result
		AcceptedAt string `json:"accepted_at"`
	} `json:"ops"`
	Next string `json:"next"`
}

func (h *harness) listOps(query, token string) (int, opsPage, string) {
	h.t.Helper()
	status, _, body := h.call("GET", "/api/v1/ops"+query, token, "")
	var p opsPage
	if status == http.StatusOK {
		if err := json.Unmarshal([]byte(body), &p); err != nil {
			h.t.Fatalf("GET /api/v1/ops%s: %s", query, body)
		}
	}
	return status, p, body
}

func opIDs(p opsPage) []string {
	ids := []string{}
	for _, op := range p.Ops {
		ids = append(ids, op.OpID)
	}
	return ids
}

// GET /api/v1/ops lists the stored commands newest first, pages with
// next/before, filters by device and status, and refuses a bad parameter
// with the API's JSON error.
func TestHTTPOpsListNewestFirst(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.settle("hall_light", "plug")
	for _, c := range [][2]string{{"hall_light", `{"state":"ON","op_id":"ops-1"}`}, {"plug", `{"state":"ON","op_id":"ops-2"}`}, {"hall_light", `{"state":"OFF","op_id":"ops-3"}`}} {
		h.publish(c[0], c[1])
		var id struct {
			OpID string `json:"op_id"`
		}
		json.Unmarshal([]byte(c[1]), &id)
		if r := h.final(id.OpID); r.Status != devices.Succeeded {
			t.Fatalf("%s: %s", id.OpID, r.Status)
		}
	}
	status, p, body := h.listOps("", "")
	if status != http.StatusOK || !equalStrings(opIDs(p), []string{"ops-3", "ops-2", "ops-1"}) || p.Next != "" {
		t.Fatalf("all: %d %s", status, body)
	}
	if op := p.Ops[0]; op.Device != "hall_light" || op.Status != devices.Succeeded || op.Attempts != 1 || op.State["state"] != "OFF" || op.AcceptedAt == "" {
		t.Errorf("ops-3: %+v", op)
	}
	_, p, _ = h.listOps("?limit=2", "")
	if !equalStrings(opIDs(p), []string{"ops-3", "ops-2"}) || p.Next == "" {
		t.Fatalf("first page: %v next %q", opIDs(p), p.Next)
	}
	_, p, _ = h.listOps("?limit=2&before="+p.Next, "")
	if !equalStrings(opIDs(p), []string{"ops-1"}) || p.Next != "" {
		t.Errorf("second page: %v next %q", opIDs(p), p.Next)
	}
	if _, p, _ = h.listOps("?device=hall_light", ""); !equalStrings(opIDs(p), []string{"ops-3", "ops-1"}) {
		t.Errorf("device=hall_light: %v", opIDs(p))
	}
	if _, p, body = h.listOps("?status=pending", ""); len(p.Ops) != 0 || !strings.HasPrefix(body, `{"ops":[],"next":""}`) {
		t.Errorf("status=pending: %s", body)
	}
	status, _, body = h.listOps("?limit=0", "")
	if status != http.StatusBadRequest || body != `{"error":"invalid_parameter","detail":"limit: \"0\" is not a number from 1 to 1000"}`+"\n" {
		t.Errorf("limit=0: %d %s", status, body)
	}
}

// With principals, a principal allowed every device lists everyone's
// commands, another only its own.
func TestHTTPOpsListIsThePrincipals(t *testing.T) {
	h := newHarness(t, harnessOptions{simLogin: bridgeLogin, automationLogin: bridgeLogin})
	withPrincipals, err := config.Parse("test.yaml", []byte(principalsConfig))
	if err != nil {
		t.Fatal(err)
	}
	h.d.reload(withPrincipals)
	for _, c := range [][3]string{{"front_door", "tablet-token-0123456789", `{"state":"LOCK","op_id":"tab-1"}`}, {"plug", "phone-token-0123456789ab", `{"state":"ON","op_id":"pho-1"}`}} {
		if status, _, body := h.call("POST", "/api/v1/devices/"+c[0]+"/commands", c[1], c[2]); status != http.StatusAccepted {
			t.Fatalf("POST %s: %d %s", c[2], status, body)
		}
	}
	if status, _, _ := h.listOps("", ""); status != http.StatusUnauthorized {
		t.Errorf("without a token: %d", status)
	}
	if _, p, body := h.listOps("", "tablet-token-0123456789"); !equalStrings(opIDs(p), []string{"tab-1"}) {
		t.Errorf("tablet sees %s; want its own only", body)
	}
	if _, p, body := h.listOps("", "phone-token-0123456789ab"); !equalStrings(opIDs(p), []string{"pho-1", "tab-1"}) {
		t.Errorf("phone (every device) sees %s; want both", body)
	}
}

// POST ?wait= answers with the terminal result in one call: the light is
// sent ON, reports it, and the answer is 200 succeeded.
func TestHTTPPostWaitAnswersSucceeded(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.settle("hall_light")
	status, header, body := h.call("POST", "/api/v1/devices/hall_light/commands?wait=10s", "", `{"state":"ON","op_id":"pw-1"}`)
	r := decodeResult(t, body)
	if status != http.StatusOK || r.Status != devices.Succeeded || r.Attempts != 1 || r.State["state"] != "ON" || header.Get("Location") != "/api/v1/ops/pw-1" {
		t.Fatalf("POST ?wait=10s: %d %s; want 200 succeeded after 1 attempt", status, body)
	}
	if set := h.nextSet(); set.Device != "hall_light" {
		t.Errorf("the set went to %s", set.Device)
	}
}
