package main

import (
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/simulator"
)

// httpDevConfig is a house with a garage door controller and a heat pump
// behind a REST endpoint (the simulator's HTTP server at %URL%), beside a
// Zigbee2MQTT lamp. %RETRY% and %BREAKER% take a test's own settings; %TIMEOUT% is 2s,
// or 100ms for a test of held requests.
const httpDevConfig = `
mqtt:
  listen: 127.0.0.1:0
  reconnect: {base: 10ms, cap: 100ms}
http:
  listen: 127.0.0.1:0
defaults:
  ttl: 60s
services:
  zigbee:
    protocol: zigbee2mqtt
  garage-ctl:
    protocol: http
    url: %URL%/api
    timeout: %TIMEOUT%
    headers:
      Authorization: Bearer tk_garage_secret
    retry: {%RETRY%}
    breaker: {%BREAKER%}
devices:
  lamp:
    service: zigbee
    class: light
  garage:
    service: garage-ctl
    class: cover
    safety: critical
    address: doors/1
    attempt_timeout: 10s
  plug:
    service: garage-ctl
    class: switch
    address: relays/0
`

const (
	garagePath = "/api/doors/1"
	plugPath   = "/api/relays/0"
)

// httpDevHarness starts the simulated HTTP devices with faults, then
// hearthd configured to reach them; commands is every command the
// devices received, in order.
type httpDevHarness struct {
	*harness
	srv      *simulator.HTTPServer
	commands chan simulator.HTTPEvent
}

func newHTTPDevHarness(t *testing.T, faults simulator.HTTPFaults, retry, brk string) *httpDevHarness {
	t.Helper()
	return newHTTPDevHarnessWith(t, faults, retry, brk, "tk_garage_secret", nil)
}

// newHTTPDevHarnessWith is newHTTPDevHarness with the token the devices
// take and hearthd's log (nil: the test's).
func newHTTPDevHarnessWith(t *testing.T, faults simulator.HTTPFaults, retry, brk, token string, log *slog.Logger) *httpDevHarness {
	t.Helper()
	commands := make(chan simulator.HTTPEvent, 64)
	srv, err := simulator.NewHTTPServer(simulator.HTTPOptions{
		Token:     token,
		Devices:   []simulator.HTTPDevice{{Path: garagePath, Class: "cover"}, {Path: plugPath, Class: "switch"}},
		Faults:    faults,
		OnCommand: func(e simulator.HTTPEvent) { commands <- e },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close) // after the harness's own cleanup: hearthd stops first
	timeout := "2s"
	if len(faults.Hang) > 0 {
		timeout = "100ms" // real time: the client gives up on a held request
	}
	cfg := strings.NewReplacer("%URL%", srv.URL, "%RETRY%", retry, "%BREAKER%", brk, "%TIMEOUT%", timeout).Replace(httpDevConfig)
	return &httpDevHarness{harness: newHarness(t, harnessOptions{config: cfg, logger: log}), srv: srv, commands: commands}
}

// nextCommand waits for the next command a simulated HTTP device got.
func (h *httpDevHarness) nextCommand() simulator.HTTPEvent {
	h.t.Helper()
	select {
	case e := <-h.commands:
		return e
	case <-time.After(eventWait):
		h.t.Fatal("timed out waiting for a command to reach an HTTP device")
		panic("unreachable")
	}
}

// A command is one PUT of the target to the device's resource, confirmed
// on attempt 1 by the GET after it.
func TestPlainHTTPCommandConfirmedOnFirstAttempt(t *testing.T) {
	h := newHTTPDevHarness(t, simulator.HTTPFaults{}, "", "")
	h.publish("plug", `{"state":"ON","op_id":"hd1"}`)
	c := h.nextCommand()
	if c.Method != http.MethodPut || c.Path != plugPath || string(c.Body) != `{"state":"ON"}` || c.Status != http.StatusNoContent {
		t.Fatalf("command %+v; want PUT %s {\"state\":\"ON\"} answered 204", c, plugPath)
	}
	r := h.final("hd1")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["state"] != "ON" {
		t.Fatalf("result %s after %d attempts, state %v (%s); want succeeded after 1, ON", r.Status, r.Attempts, r.State, r.Detail)
	}
	if n := h.srv.Commands(plugPath); n != 1 {
		t.Errorf("the plug got %d commands; want 1", n)
	}
}

// The 200 that echoes the command confirms nothing: the device stayed
// OFF, the GET says so, and the attempt times out unconfirmed.
func TestPlainHTTPEchoConfirmsNothing(t *testing.T) {
	h := newHTTPDevHarness(t, simulator.HTTPFaults{EchoOnly: []string{plugPath}}, "max_attempts: 1", "")
	h.publish("plug", `{"state":"ON","op_id":"hd0"}`)
	if c := h.nextCommand(); c.Status != http.StatusOK {
		t.Fatalf("command %+v; want the echo's 200", c)
	}
	h.advance(5 * time.Second) // the attempt timeout
	r := h.final("hd0")
	if r.Status != devices.Failed || r.Reason != devices.ReasonTimeout || r.Attempts != 1 {
		t.Fatalf("result %s/%s after %d attempts (%s); want failed/timeout after 1", r.Status, r.Reason, r.Attempts, r.Detail)
	}
}

// A request dropped on its way (the connection closed without an
// answer) or answered 503 is sent again after the backoff, and attempt 2
// succeeds.
func TestPlainHTTPFailedRequestSucceedsOnSecondAttempt(t *testing.T) {
	for name, faults := range map[string]simulator.HTTPFaults{
		"dropped": {DropFirst: 1},
		"503":     {FailFirst: 1},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHTTPDevHarness(t, faults, "", "")
			h.publish("plug", `{"state":"ON","op_id":"hd2"}`)
			if first := h.nextCommand(); !first.Dropped && first.Status != http.StatusServiceUnavailable {
				t.Fatalf("first command %+v; want the fault", first)
			}
			h.advance(time.Second) // backoff before retry 1: ceiling = base
			if second := h.nextCommand(); second.Status != http.StatusNoContent {
				t.Fatalf("second command %+v; want it applied", second)
			}
			r := h.final("hd2")
			if r.Status != devices.Succeeded || r.Attempts != 2 || r.State["state"] != "ON" {
				t.Fatalf("result %s after %d attempts (%s); want succeeded after 2", r.Status, r.Attempts, r.Detail)
			}
		})
	}
}

// A 400 ends the command at once, failed/permanent_error, with no retry.
func TestPlainHTTPBadRequestFailsPermanentlyWithoutRetry(t *testing.T) {
	h := newHTTPDevHarness(t, simulator.HTTPFaults{Refuse: []string{plugPath}}, "", "")
	h.publish("plug", `{"state":"ON","op_id":"hd3"}`)
	if c := h.nextCommand(); c.Status != http.StatusBadRequest {
		t.Fatalf("command %+v; want 400", c)
	}
	r := h.final("hd3")
	if r.Status != devices.Failed || r.Reason != devices.ReasonPermanentError || r.Attempts != 1 || !strings.Contains(r.Detail, "HTTP 400") {
		t.Fatalf("result %s/%s after %d attempts (%s); want failed/permanent_error after 1, HTTP 400", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	if strings.Contains(r.Detail, "tk_garage_secret") {
		t.Errorf("the result's detail shows the token: %s", r.Detail)
	}
	if n := h.srv.Commands(plugPath); n != 1 {
		t.Errorf("the plug got %d commands; want 1, no retry", n)
	}
}

// A 429 with Retry-After is retried after the wait it asks for, not the
// computed backoff (1s): as delay-seconds and as an HTTP-date.
func TestPlainHTTPRetryAfterHonoured(t *testing.T) {
	for name, tc := range map[string]struct {
		value string
		wait  time.Duration
	}{
		"seconds":   {"7", 7 * time.Second},
		"HTTP-date": {t0.Add(9 * time.Second).Format(http.TimeFormat), 9 * time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHTTPDevHarness(t, simulator.HTTPFaults{FailFirst: 1, FailStatus: http.StatusTooManyRequests, RetryAfter: tc.value}, "", "")
			start := h.clock.Now()
			h.publish("plug", `{"state":"ON","op_id":"hd4"}`)
			if c := h.nextCommand(); c.Status != http.StatusTooManyRequests {
				t.Fatalf("command %+v; want 429", c)
			}
			want := tc.wait - h.clock.Now().Sub(start) // an HTTP-date counts from the clock's now
			h.eventually("the Retry-After wait", func() bool { return h.clock.dueIn(want) })
			h.advance(want)
			if c := h.nextCommand(); c.Status != http.StatusNoContent {
				t.Fatalf("second command %+v; want it applied", c)
			}
			r := h.final("hd4")
			if r.Status != devices.Succeeded || r.Attempts != 2 {
				t.Fatalf("result %s after %d attempts (%s); want succeeded after 2", r.Status, r.Attempts, r.Detail)
			}
		})
	}
}

// A garage door the GET says is closed gets CLOSE: succeeded with
// nothing sent. OPEN is sent once and confirmed by the GET after it.
func TestPlainHTTPGarageDoorReadFirst(t *testing.T) {
	h := newHTTPDevHarness(t, simulator.HTTPFaults{}, "", "")
	h.publish("garage", `{"state":"CLOSE","op_id":"hd5"}`)
	r := h.final("hd5")
	if r.Status != devices.Succeeded || r.Attempts != 0 || r.State["state"] != "CLOSE" {
		t.Fatalf("CLOSE: %s after %d attempts, state %v (%s); want succeeded after 0, CLOSE", r.Status, r.Attempts, r.State, r.Detail)
	}
	if n := h.srv.Commands(garagePath); n != 0 {
		t.Fatalf("a closed door got %d commands for CLOSE; want none", n)
	}
	h.publish("garage", `{"state":"OPEN","op_id":"hd6"}`)
	if c := h.nextCommand(); c.Path != garagePath || string(c.Body) != `{"state":"OPEN"}` {
		t.Fatalf("command %+v; want PUT %s {\"state\":\"OPEN\"}", c, garagePath)
	}
	r = h.final("hd6")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["state"] != "OPEN" || r.State["position"] != 100.0 {
		t.Fatalf("OPEN: %s after %d attempts, state %v (%s); want succeeded after 1, OPEN at 100", r.Status, r.Attempts, r.State, r.Detail)
	}
	if n := h.srv.Commands(garagePath); n != 1 {
		t.Errorf("the door got %d commands; want 1", n)
	}
}

// A service that keeps failing opens its breaker: after two failed
// commands (threshold 2), the third fails fast, breaker_open, with
// nothing sent; the Zigbee bridge's breaker stays closed.
func TestPlainHTTPBreakerOpensWhenTheServiceKeepsFailing(t *testing.T) {
	h := newHTTPDevHarness(t, simulator.HTTPFaults{FailFirst: 100}, "max_attempts: 1", "failure_threshold: 2")
	for _, id := range []string{"hd7", "hd8"} {
		h.publish("plug", `{"state":"ON","op_id":"`+id+`"}`)
		if c := h.nextCommand(); c.Status != http.StatusServiceUnavailable {
			t.Fatalf("command %+v; want 503", c)
		}
		if r := h.final(id); r.Status != devices.Failed || r.Reason != devices.ReasonSendFailed {
			t.Fatalf("%s: %s/%s (%s); want failed/send_failed", id, r.Status, r.Reason, r.Detail)
		}
	}
	h.publish("plug", `{"state":"ON","op_id":"hd9"}`)
	if r := h.final("hd9"); r.Status != devices.Failed || r.Reason != devices.ReasonBreakerOpen || r.Attempts != 0 {
		t.Fatalf("hd9: %s/%s after %d attempts (%s); want failed/breaker_open after 0", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	if n := h.srv.Commands(plugPath); n != 2 {
		t.Errorf("the plug got %d commands; want 2, none while the breaker is open", n)
	}
	states := map[string]string{}
	for _, b := range h.d.disp.Breakers() {
		states[b.Service] = b.State
	}
	if states["garage-ctl"] != "open" || states["zigbee"] != "closed" {
		t.Errorf("breakers %v; want garage-ctl open, zigbee closed", states)
	}
}

// A 401 is permanent: Hearth has no token source to refresh the token
// from, so the command fails at once, permanent_error, with one request;
// the token is in neither the result nor hearthd's log (debug level).
func TestPlainHTTPUnauthorizedFailsWithoutRetryOrLeakingTheToken(t *testing.T) {
	var log syncBuffer
	h := newHTTPDevHarnessWith(t, simulator.HTTPFaults{}, "", "", "the_devices_own_token",
		slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})))
	h.publish("plug", `{"state":"ON","op_id":"hd10"}`)
	r := h.final("hd10")
	if r.Status != devices.Failed || r.Reason != devices.ReasonPermanentError || r.Attempts != 1 || !strings.Contains(r.Detail, "HTTP 401") {
		t.Fatalf("result %s/%s after %d attempts (%s); want failed/permanent_error after 1, HTTP 401", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	if n := h.srv.Commands(plugPath); n != 0 {
		t.Errorf("the plug applied or counted %d commands; want none (refused before)", n)
	}
	h.stop() // every log line written
	if strings.Contains(log.String(), "tk_garage_secret") || strings.Contains(r.Detail, "tk_garage_secret") {
		t.Errorf("the token appears in the log or the result")
	}
	if !strings.Contains(log.String(), "HTTP 401") {
		t.Errorf("the log does not tell of the 401; the check above proves nothing")
	}
}

// A device that never answers fails the request at the service's timeout
// (100ms here): a transient timeout, retried, and after the attempts the
// command ends failed/send_failed; each timeout counts against the
// service's breaker, which opens at its threshold (2).
func TestPlainHTTPRequestTimesOut(t *testing.T) {
	h := newHTTPDevHarness(t, simulator.HTTPFaults{Hang: []string{plugPath}}, "max_attempts: 2", "failure_threshold: 2")
	h.publish("plug", `{"state":"ON","op_id":"hd11"}`)
	if c := h.nextCommand(); c.Status != 0 || c.Dropped {
		t.Fatalf("command %+v; want one held, never answered", c)
	}
	h.advance(time.Second) // the backoff: a timeout is transient
	h.nextCommand()
	r := h.final("hd11")
	if r.Status != devices.Failed || r.Reason != devices.ReasonSendFailed || r.Attempts != 2 || !strings.Contains(r.Detail, "deadline exceeded") {
		t.Fatalf("result %s/%s after %d attempts (%s); want failed/send_failed after 2, deadline exceeded", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	for _, b := range h.d.disp.Breakers() {
		if b.Service == "garage-ctl" && b.State != "open" {
			t.Errorf("garage-ctl's breaker is %s after two timeouts; want open", b.State)
		}
	}
}
