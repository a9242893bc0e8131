package shelly

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
)

// The documented example payloads (testdata/README.md names their pages)
// decode as Shelly says they mean.
func TestGoldenDocumentedPayloads(t *testing.T) {
	read := func(name string) []byte {
		t.Helper()
		p, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	n, err := ParseNotification(read("notify_status_switch.json"))
	if err != nil || n.Method != "NotifyStatus" || n.Src != "shellypro4pm-f008d1d8b8b8" || n.TS != 1631186545.04 {
		t.Fatalf("notification = %+v, %v", n, err)
	}
	a := New(nil, Options{Service: "s", Devices: []devices.Device{{ID: "plug", Class: devices.Switch, Address: "shellypro4pm-f008d1d8b8b8/switch:0"}}})
	if got := a.decode(a.byDev["plug"], n.Components["switch:0"]); !reflect.DeepEqual(got, map[string]any{"state": "ON"}) {
		t.Errorf("switch:0 decodes to %v, want {state:ON}", got)
	}
	for name, code := range map[string]int{"error_invalid_argument.json": -103, "error_not_found.json": -105} {
		r, err := ParseResponse(read(name))
		if err != nil || r.ID != 1 || r.Src != "shellypro4pm-f008d1d8b8b8" || r.Error == nil || r.Error.Code != code {
			t.Fatalf("%s = %+v, %v; want id 1, error %d", name, r, err, code)
		}
		if !retry.Classify(r.Error).Permanent() {
			t.Errorf("%s: %v is not permanent", name, r.Error)
		}
	}
	// Hearth's request has the documented frame's shape.
	var doc, ours map[string]any
	if err := json.Unmarshal(read("request_switch_set.json"), &doc); err != nil {
		t.Fatal(err)
	}
	p, _ := json.Marshal(Request{ID: 2, Src: "user_1", Method: "Switch.Set", Params: map[string]any{"id": 1, "on": true}})
	if err := json.Unmarshal(p, &ours); err != nil || !reflect.DeepEqual(ours, doc) {
		t.Errorf("our request %s differs from the documented %v", p, doc)
	}
}
