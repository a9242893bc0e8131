package main

import (
	"encoding/json"
	"net/http"
	"testing"

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
