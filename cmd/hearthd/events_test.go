package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/api"
	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
)

// sseEvent is one server-sent event as a client reads it.
type sseEvent struct{ name, data string }

// stream opens GET path (an event stream) on the daemon, with a bearer
// token unless token is "", and returns its events, read until the
// stream ends (the channel then closes). It is subscribed when stream
// returns: the daemon answers the headers after it subscribes.
func (h *harness) stream(path, token string) (<-chan sseEvent, *http.Response) {
	h.t.Helper()
	return h.streamFrom(http.DefaultClient, path, token)
}

// clientFrom returns an HTTP client whose connections come from the local
// address ip (any of 127.0.0.0/8 on Linux's loopback): another host, as
// hearthd's per-client connection share sees it.
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
}

// streamFrom is stream through client.
func (h *harness) streamFrom(client *http.Client, path, token string) (<-chan sseEvent, *http.Response) {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h.t.Cleanup(cancel)
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+h.d.httpAddr()+path, nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	out := make(chan sseEvent, 4096)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		var ev sseEvent
		for sc.Scan() {
			switch line := sc.Text(); {
			case line == "":
				out <- ev
				ev = sseEvent{}
			case strings.HasPrefix(line, "event: "):
				ev.name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[len("data: "):]
			}
		}
	}()
	return out, resp
}

// nextEvent waits for the stream's next event other than a keepalive.
func (h *harness) nextEvent(events <-chan sseEvent) sseEvent {
	h.t.Helper()
	deadline := time.After(eventWait)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				h.t.Fatal("the event stream ended")
			}
			if ev.name != "" {
				return ev
			}
		case <-deadline:
			h.t.Fatal("timed out waiting for an event")
		}
	}
}

// A command published through the broker is followed on GET
// /api/v1/events: its accepted result, the light's new state, then its
// succeeded result, in the order of the MQTT topics; a stream with
// ?device=plug sees none of it, only the plug's own command.
func TestHTTPEventsFollowACommand(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.settle("hall_light", "plug")
	all, resp := h.stream("/api/v1/events", "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET /api/v1/events: %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	plugs, _ := h.stream("/api/v1/events?device=plug", "")

	h.publish("hall_light", `{"state":"ON","brightness":77,"op_id":"ev-1"}`)
	if r := h.final("ev-1"); r.Status != devices.Succeeded {
		t.Fatalf("ev-1: %s %s", r.Status, r.Reason)
	}
	var statuses []devices.Status
	sawState := false
	for len(statuses) < 2 || !sawState {
		ev := h.nextEvent(all)
		switch ev.name {
		case "result":
			r := decodeResult(t, ev.data)
			if r.OpID != "ev-1" || r.Device != "hall_light" {
				t.Fatalf("a result of another command: %s", ev.data)
			}
			statuses = append(statuses, r.Status)
		case "state":
			var s struct {
				Device string         `json:"device"`
				State  map[string]any `json:"state"`
			}
			if err := json.Unmarshal([]byte(ev.data), &s); err != nil {
				t.Fatalf("state event %s: %v", ev.data, err)
			}
			if s.Device != "hall_light" {
				// Another device's state on the stream of every device
				// (a lock's fresh read after the start, mirrored late
				// on a loaded machine): not this command's.
				continue
			}
			if s.State["state"] == "ON" && s.State["brightness"] == 77.0 {
				sawState = true
				if len(statuses) != 1 {
					t.Errorf("the light's new state came after results %v; want it between accepted and succeeded", statuses)
				}
			}
		default:
			t.Fatalf("unexpected event %+v", ev)
		}
	}
	if statuses[0] != devices.Accepted || statuses[1] != devices.Succeeded {
		t.Errorf("results %v; want accepted, then succeeded", statuses)
	}

	h.publish("plug", `{"state":"ON","op_id":"ev-2"}`)
	h.final("ev-2")
	ev := h.nextEvent(plugs)
	if r := decodeResult(t, ev.data); ev.name != "result" || r.OpID != "ev-2" || r.Status != devices.Accepted {
		t.Fatalf("the plug's stream began with %+v; want ev-2 accepted (nothing of the light)", ev)
	}
	for {
		ev := h.nextEvent(plugs)
		if !strings.Contains(ev.data, `"device":"plug"`) {
			t.Fatalf("the plug's stream carried %+v", ev)
		}
		if ev.name == "result" && decodeResult(t, ev.data).Status == devices.Succeeded {
			break
		}
	}
}

// With principals, a stream needs a token like the rest of the API.
func TestHTTPEventsNeedAToken(t *testing.T) {
	h := newHarness(t, harnessOptions{simLogin: bridgeLogin, automationLogin: bridgeLogin})
	withPrincipals, err := config.Parse("test.yaml", []byte(principalsConfig))
	if err != nil {
		t.Fatal(err)
	}
	h.d.reload(withPrincipals)
	status, header, body := h.call("GET", "/api/v1/events", "", "")
	if status != http.StatusUnauthorized || header.Get("WWW-Authenticate") != `Bearer realm="hearth"` || !strings.HasPrefix(body, `{"error":"unauthorized"`) {
		t.Errorf("without a token: %d %q %s", status, header.Get("WWW-Authenticate"), body)
	}
	if _, resp := h.stream("/api/v1/events", "phone-token-0123456789ab"); resp.StatusCode != http.StatusOK {
		t.Errorf("with phone's token: %d", resp.StatusCode)
	}
}

// The daemon's stop ends an open stream rather than wait for it.
func TestHTTPEventsEndAtStop(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	events, _ := h.stream("/api/v1/events", "")
	h.stopAutomation() // before the broker goes: no client left reconnecting
	stopped := make(chan struct{})
	go func() { defer close(stopped); h.stopHearth() }()
	select {
	case <-stopped:
	case <-time.After(eventWait):
		t.Fatal("stop hangs on an open event stream")
	}
	for {
		select {
		case _, ok := <-events:
			if !ok {
				return
			}
		case <-time.After(eventWait):
			t.Fatal("the stream is still open after stop")
		}
	}
}

// Clients that together open as many event streams as the HTTP server
// holds connections (four hosts, each its full share) get
// api.MaxEventStreams of them and 503 for the rest: /healthz and the API
// still answer everyone else.
func TestHTTPEventStreamsLeaveConnectionsForEveryoneElse(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	open := 0
	for _, host := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.4"} {
		client := clientFrom(host)
		for range httpMaxConns / 4 {
			_, resp := h.streamFrom(client, "/api/v1/events", "")
			switch resp.StatusCode {
			case http.StatusOK:
				open++
			case http.StatusServiceUnavailable:
			default:
				t.Fatalf("a stream from %s: %d; want 200 or 503", host, resp.StatusCode)
			}
		}
	}
	if open != api.MaxEventStreams {
		t.Errorf("%d streams open; want %d", open, api.MaxEventStreams)
	}
	done := make(chan int, 1)
	go func() {
		client := clientFrom("127.0.0.5")
		client.Timeout = eventWait
		resp, err := client.Get("http://" + h.d.httpAddr() + "/healthz")
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	if status := <-done; status != http.StatusOK {
		t.Fatalf("GET /healthz with %d event streams open: %d; want 200", open, status)
	}
}

// With principals, a principal that may not list every principal's
// commands (GET /api/v1/ops, GET /api/v1/ops/{op_id}: 403) does not read
// them on its event stream either: the tablet's stream carries the
// result of its own command, not the phone's unlock before it.
func TestHTTPEventsCarryOnlyThePrincipalsOwnResults(t *testing.T) {
	h := newHarness(t, harnessOptions{simLogin: bridgeLogin, automationLogin: bridgeLogin})
	withPrincipals, err := config.Parse("test.yaml", []byte(principalsConfig))
	if err != nil {
		t.Fatal(err)
	}
	h.d.reload(withPrincipals)
	const tablet, phone = "tablet-token-0123456789", "phone-token-0123456789ab"
	tabletEvents, _ := h.stream("/api/v1/events?device=front_door", tablet)
	phoneEvents, _ := h.stream("/api/v1/events?device=front_door", phone)

	status, _, body := h.call("POST", "/api/v1/devices/front_door/commands?wait=30s", phone, `{"state":"UNLOCK","op_id":"phone-unlock"}`)
	if status != http.StatusOK || decodeResult(t, body).Status != devices.Succeeded {
		t.Fatalf("phone's unlock: %d %s", status, body)
	}
	if status, _, body := h.call("GET", "/api/v1/ops/phone-unlock", tablet, ""); status != http.StatusForbidden {
		t.Fatalf("GET phone's op with tablet's token: %d %s; want 403", status, body)
	}
	status, _, body = h.call("POST", "/api/v1/devices/front_door/commands?wait=30s", tablet, `{"state":"LOCK","op_id":"tablet-lock"}`)
	if status != http.StatusOK || decodeResult(t, body).Status != devices.Succeeded {
		t.Fatalf("tablet's lock: %d %s", status, body)
	}
	// The tablet's stream, up to its own command's end.
	var got []string
	for {
		ev := h.nextEvent(tabletEvents)
		if ev.name != "result" {
			continue
		}
		var r devices.Result
		if err := json.Unmarshal([]byte(ev.data), &r); err != nil {
			t.Fatal(err)
		}
		got = append(got, r.OpID+" "+string(r.Status))
		if r.OpID == "tablet-lock" && r.Status == devices.Succeeded {
			break
		}
	}
	if want := []string{"tablet-lock accepted", "tablet-lock succeeded"}; strings.Join(got, ", ") != strings.Join(want, ", ") {
		t.Errorf("tablet's stream carried the results %q; want %q", got, want)
	}
	// The phone may read everyone's: both commands.
	var phoneGot []string
	for len(phoneGot) < 4 {
		if ev := h.nextEvent(phoneEvents); ev.name == "result" {
			var r devices.Result
			json.Unmarshal([]byte(ev.data), &r)
			phoneGot = append(phoneGot, r.OpID+" "+string(r.Status))
		}
	}
	if want := "phone-unlock accepted, phone-unlock succeeded, tablet-lock accepted, tablet-lock succeeded"; strings.Join(phoneGot, ", ") != want {
		t.Errorf("phone's stream carried %q; want %s", phoneGot, want)
	}
}

// A reload that takes a principal's token away (a stolen tablet's token
// rotated) ends that token's open event stream at its next event: it
// reads nothing more, as a new request with the token is refused 401.
func TestHTTPEventsEndWhenAReloadRevokesTheToken(t *testing.T) {
	h := newHarness(t, harnessOptions{simLogin: bridgeLogin, automationLogin: bridgeLogin})
	withPrincipals, err := config.Parse("test.yaml", []byte(principalsConfig))
	if err != nil {
		t.Fatal(err)
	}
	h.d.reload(withPrincipals)
	const tablet, phone = "tablet-token-0123456789", "phone-token-0123456789ab"
	tabletEvents, resp := h.stream("/api/v1/events?device=front_door", tablet)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("tablet's stream: %d", resp.StatusCode)
	}
	rotated, err := config.Parse("test.yaml", []byte(strings.Replace(principalsConfig, tablet, "tablet-token-rotated-9876543210", 1)))
	if err != nil {
		t.Fatal(err)
	}
	h.d.reload(rotated)
	if status, _, _ := h.call("GET", "/api/v1/devices", tablet, ""); status != http.StatusUnauthorized {
		t.Fatalf("a request with the revoked token: %d; want 401", status)
	}
	status, _, body := h.call("POST", "/api/v1/devices/front_door/commands?wait=30s", phone, `{"state":"UNLOCK","op_id":"after-rotation"}`)
	if status != http.StatusOK {
		t.Fatalf("phone's unlock: %d %s", status, body)
	}
	for {
		select {
		case ev, ok := <-tabletEvents:
			if !ok {
				return // ended
			}
			t.Errorf("the revoked token's stream carried %s %s", ev.name, ev.data)
		case <-time.After(eventWait):
			t.Fatal("the revoked token's stream is still open")
		}
	}
}
