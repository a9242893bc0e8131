package main

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
)

// call sends one HTTP request to the daemon's listener, with a bearer
// token unless token is "".
func (h *harness) call(method, path, token, body string) (int, http.Header, string) {
	h.t.Helper()
	req, err := http.NewRequest(method, "http://"+h.d.httpAddr()+path, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Timeout: eventWait}
	resp, err := client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	client.CloseIdleConnections()
	return resp.StatusCode, resp.Header, string(b)
}

func decodeResult(t *testing.T, body string) devices.Result {
	t.Helper()
	var r devices.Result
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("not a result: %s", body)
	}
	return r
}

// A command over HTTP runs like one over MQTT: POST answers 202 with the
// op_id and its Location, the lock is read, sent the UNLOCK and reports
// it, and GET of the op with ?wait= answers once it succeeded. The result
// topic says the same.
func TestHTTPCommandSucceeds(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	status, header, body := h.call("POST", "/api/v1/devices/front_door/commands", "", `{"state":"UNLOCK","op_id":"http-1"}`)
	if status != http.StatusAccepted {
		t.Fatalf("POST: %d %s", status, body)
	}
	if r := decodeResult(t, body); r.OpID != "http-1" || r.Status != devices.Accepted || r.Device != "front_door" {
		t.Errorf("POST answered %s", body)
	}
	loc := header.Get("Location")
	if loc != "/api/v1/ops/http-1" {
		t.Fatalf("Location %q", loc)
	}
	status, _, body = h.call("GET", loc+"?wait=30s", "", "")
	r := decodeResult(t, body)
	if status != http.StatusOK || r.Status != devices.Succeeded || r.Attempts != 1 || r.State["state"] != "UNLOCK" {
		t.Fatalf("GET ?wait=: %d %s; want 200 succeeded after 1 attempt, state UNLOCK", status, body)
	}
	if set := h.nextSet(); set.Device != "Front Door" {
		t.Errorf("the set went to %s", set.Device)
	}
	if r := h.final("http-1"); r.Status != devices.Succeeded {
		t.Errorf("result topic: %s", r.Status)
	}

	// The same op_id again: answered from the store, nothing sent.
	status, _, body = h.call("POST", "/api/v1/devices/front_door/commands", "", `{"state":"UNLOCK","op_id":"http-1"}`)
	if status != http.StatusOK || decodeResult(t, body).Status != devices.Succeeded {
		t.Errorf("repeat: %d %s; want 200 succeeded", status, body)
	}
	h.noSetsYet()
}

// principalsConfig is testConfig with two principals, as a reload would
// read it, and the simulated bridge as a broker user: principals turn on
// authentication at the embedded broker.
var principalsConfig = withBridgeAccount(testConfig) + `
principals:
  tablet:
    http_token: tablet-token-0123456789
    allow: {front_door: [lock, unlock]}
  phone:
    http_token: phone-token-0123456789ab
    allow: {"*": ["*"]}
`

// Once principals are configured (here by a SIGHUP's reload), every API
// request needs a principal's token, a command without one never reaches
// the dispatcher, a command with one is the principal's (refused 403
// beyond its allow), health stays open; with the principals gone again
// the API is open.
func TestHTTPPrincipals(t *testing.T) {
	h := newHarness(t, harnessOptions{simLogin: bridgeLogin, automationLogin: bridgeLogin})
	withPrincipals, err := config.Parse("test.yaml", []byte(principalsConfig))
	if err != nil {
		t.Fatal(err)
	}
	h.d.reload(withPrincipals)

	for _, path := range []string{"/healthz", "/metrics"} {
		if status, _, body := h.call("GET", path, "", ""); status != http.StatusOK {
			t.Errorf("%s: %d %s", path, status, body)
		}
	}
	status, header, body := h.call("GET", "/api/v1/breakers", "", "")
	if status != http.StatusUnauthorized || header.Get("WWW-Authenticate") != `Bearer realm="hearth"` || !strings.Contains(body, `"error":"unauthorized"`) {
		t.Errorf("breakers without a token: %d %q %s", status, header.Get("WWW-Authenticate"), body)
	}
	status, _, body = h.call("POST", "/api/v1/devices/front_door/commands", "", `{"state":"UNLOCK","op_id":"anon-1"}`)
	if status != http.StatusUnauthorized {
		t.Errorf("POST without a token: %d %s", status, body)
	}
	status, header, body = h.call("POST", "/api/v1/devices/front_door/commands", "phone-token-0123456789aX", `{"state":"UNLOCK","op_id":"anon-2"}`)
	if status != http.StatusUnauthorized || !strings.Contains(header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("POST with a wrong token: %d %q %s", status, header.Get("WWW-Authenticate"), body)
	}

	status, _, body = h.call("POST", "/api/v1/devices/front_door/commands", "tablet-token-0123456789", "LOCK")
	if status != http.StatusAccepted {
		t.Fatalf("POST with tablet's token: %d %s", status, body)
	}
	opID := decodeResult(t, body).OpID
	if status, _, _ := h.call("GET", "/api/v1/ops/"+opID, "", ""); status != http.StatusUnauthorized {
		t.Errorf("GET the op without a token: %d", status)
	}
	if status, _, body := h.call("GET", "/api/v1/ops/"+opID, "phone-token-0123456789ab", ""); status != http.StatusForbidden {
		t.Errorf("GET the tablet's op with phone's token: %d %s; want 403", status, body)
	}
	status, _, body = h.call("GET", "/api/v1/ops/"+opID+"?wait=30s", "tablet-token-0123456789", "")
	if status != http.StatusOK || decodeResult(t, body).Status != devices.Succeeded {
		t.Errorf("GET the op with tablet's token: %d %s", status, body)
	}
	for _, id := range []string{"anon-1", "anon-2"} {
		if _, found, _ := h.d.store.Lookup(id); found {
			t.Errorf("%s, sent without a valid token, was stored", id)
		}
	}
	stored, _, _ := h.d.store.Lookup(opID)
	if stored.Status != devices.Succeeded {
		t.Errorf("tablet's command: %s", stored.Status)
	}

	status, _, body = h.call("POST", "/api/v1/devices/hall_light/commands", "tablet-token-0123456789", `{"state":"ON","op_id":"tablet-light"}`)
	if r := decodeResult(t, body); status != http.StatusForbidden || r.Reason != devices.ReasonUnauthorized {
		t.Errorf("tablet commands the hall light: %d %s; want 403 unauthorized", status, body)
	}

	h.d.reload(h.cfg) // no principals: open again
	if status, _, body := h.call("GET", "/api/v1/breakers", "", ""); status != http.StatusOK {
		t.Errorf("breakers after the principals went: %d %s", status, body)
	}
}
