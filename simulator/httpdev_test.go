package simulator

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

func httpServer(t *testing.T, o HTTPOptions) *HTTPServer {
	t.Helper()
	s, err := NewHTTPServer(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func do(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(bytes.TrimSpace(b))
}

// A door controller applies an absolute command (204) and reports its
// state by GET; a toggle is 422, a body that is no object 400, another
// path 404, no token 401.
func TestHTTPDeviceContract(t *testing.T) {
	s := httpServer(t, HTTPOptions{Token: "tk", Devices: []HTTPDevice{{Path: "/api/doors/1", Class: "cover"}}})
	u := s.URL + "/api/doors/1"
	for _, tc := range []struct {
		method, url, token, body string
		code                     int
	}{
		{"GET", u, "tk", "", 200},
		{"PUT", u, "tk", `{"state":"OPEN"}`, 204},
		{"PUT", u, "tk", `{"state":"TOGGLE"}`, 422},
		{"POST", u, "tk", `[1]`, 400},
		{"GET", s.URL + "/api/doors/2", "tk", "", 404},
		{"DELETE", u, "tk", "", 405},
		{"GET", u, "", "", 401},
	} {
		if code, body := do(t, tc.method, tc.url, tc.token, tc.body); code != tc.code {
			t.Errorf("%s %s %s: %d %s; want %d", tc.method, tc.url, tc.body, code, body, tc.code)
		}
	}
	code, body := do(t, "GET", u, "tk", "")
	var st map[string]any
	json.Unmarshal([]byte(body), &st)
	if code != 200 || st["state"] != "OPEN" || st["position"] != 100.0 {
		t.Fatalf("GET: %d %s; want OPEN at 100", code, body)
	}
	if n := s.Commands("/api/doors/1"); n != 3 {
		t.Errorf("commands %d; want 3 (PUT, PUT, POST; the DELETE is none)", n)
	}
}

// The faults: the first command dropped (no answer), the next failed 429
// with Retry-After, then applied; an echo-only device answers 200 and
// stays as it was.
func TestHTTPDeviceFaults(t *testing.T) {
	var mu sync.Mutex
	var events []HTTPEvent
	s := httpServer(t, HTTPOptions{
		Devices:   []HTTPDevice{{Path: "/p", Class: "switch"}, {Path: "/e", Class: "switch"}},
		Faults:    HTTPFaults{DropFirst: 1, FailFirst: 1, FailStatus: 429, RetryAfter: "7", EchoOnly: []string{"/e"}},
		OnCommand: func(e HTTPEvent) { mu.Lock(); events = append(events, e); mu.Unlock() },
	})
	if code, _ := do(t, "PUT", s.URL+"/p", "", `{"state":"ON"}`); code != 0 {
		t.Fatalf("dropped command answered %d", code)
	}
	req, _ := http.NewRequest("PUT", s.URL+"/p", strings.NewReader(`{"state":"ON"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" {
		t.Fatalf("second command: %v %v; want 429 with Retry-After 7", resp, err)
	}
	resp.Body.Close()
	if s.State("/p")["state"] != "OFF" {
		t.Fatal("a failed command was applied")
	}
	if code, _ := do(t, "PUT", s.URL+"/p", "", `{"state":"ON"}`); code != 204 || s.State("/p")["state"] != "ON" {
		t.Fatalf("third command: %d, state %v", code, s.State("/p"))
	}
	if code, body := do(t, "PUT", s.URL+"/e", "", `{"state":"ON"}`); code != 200 || body != `{"state":"ON"}` || s.State("/e")["state"] != "OFF" {
		t.Fatalf("echo: %d %s, state %v; want 200 with the echo, still OFF", code, body, s.State("/e"))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(events) != 4 || !events[0].Dropped || events[1].Status != 429 || events[2].Status != 204 {
		t.Fatalf("events %+v", events)
	}
}

// FuzzHTTPCommand: any command body is applied as absolute attributes or
// refused with a clear error, never a panic, never a relative value kept.
func FuzzHTTPCommand(f *testing.F) {
	f.Add("cover", []byte(`{"state":"OPEN","position":40}`))
	f.Add("light", []byte(`{"state":"TOGGLE"}`))
	f.Add("climate", []byte(`{"system_mode":"heat","occupied_heating_setpoint":21.5}`))
	f.Fuzz(func(t *testing.T, class string, body []byte) {
		var attrs map[string]any
		if json.Unmarshal(body, &attrs) != nil || attrs == nil {
			return
		}
		next, err := applyHTTP(class, map[string]any{"state": "OFF"}, attrs)
		if err != nil {
			if err.Error() == "" || next != nil {
				t.Fatalf("error %q with state %v", err, next)
			}
			return
		}
		if s, ok := next["state"].(string); ok && s == "TOGGLE" {
			t.Fatalf("TOGGLE kept: %v", next)
		}
	})
}
