package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
)

// deviceList is a fixed list of devices; the daemon's tests read a real
// dispatcher's.
type deviceList []dispatcher.DeviceStatus

func (l deviceList) Devices() []dispatcher.DeviceStatus { return l }

func (l deviceList) Device(id string) (dispatcher.DeviceStatus, bool) {
	for _, d := range l {
		if d.ID == id {
			return d, true
		}
	}
	return dispatcher.DeviceStatus{}, false
}

var twoServices = deviceList{{ID: "lamp", Service: "zigbee"}, {ID: "door", Service: "zwave"}}

// sse is one server-sent event as a client reads it: name "" and the
// comment for a comment line.
type sse struct{ name, data string }

// openStream starts GET path on srv and returns its events, read by a
// goroutine until the stream ends (then the channel closes), and the
// response's status. The stream is open (subscribed) when it returns.
func openStream(t *testing.T, srv *httptest.Server, path string) (<-chan sse, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan sse, 100000)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		var ev sse
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				out <- ev
				ev = sse{}
			case strings.HasPrefix(line, ":"):
				ev.data = strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "event: "):
				ev.name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[len("data: "):]
			}
		}
	}()
	return out, resp
}

func next(t *testing.T, events <-chan sse) sse {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("the stream ended")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("timed out waiting for an event")
	}
	panic("unreachable")
}

func eventServer(t *testing.T, e *Events) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	RegisterEvents(mux, e, twoServices)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(e.Close) // before srv.Close, which waits for the streams
	return srv
}

// Each kind of event has its name and JSON; a ?device= stream takes only
// that device's events and its service's breaker.
func TestEventStreamShapesAndDeviceFilter(t *testing.T) {
	e := NewEvents(clockwork.NewFakeClock())
	srv := eventServer(t, e)
	all, resp := openStream(t, srv, "/api/v1/events")
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	doors, _ := openStream(t, srv, "/api/v1/events?device=door")
	at := time.Date(2026, 12, 3, 14, 0, 0, 0, time.UTC)
	e.Result(devices.Result{OpID: "a", Device: "lamp", Status: devices.Accepted, Target: devices.Target{"state": "ON"}, At: at})
	e.State("lamp", map[string]any{"state": "ON"})
	e.Availability("door", false)
	e.Breaker(dispatcher.BreakerChange{Service: "zigbee", From: breaker.Closed, To: breaker.Open, At: at})
	e.Breaker(dispatcher.BreakerChange{Service: "zwave", From: breaker.Closed, To: breaker.Open, At: at})
	e.Result(devices.Result{OpID: "b", Device: "door", Status: devices.Succeeded, Attempts: 1, At: at})
	want := []sse{
		{"result", `{"op_id":"a","device":"lamp","status":"accepted","attempts":0,"target":{"state":"ON"},"at":"2026-12-03T14:00:00Z"}`},
		{"state", `{"device":"lamp","state":{"state":"ON"}}`},
		{"availability", `{"device":"door","online":false}`},
		{"breaker", `{"service":"zigbee","from":"closed","to":"open","at":"2026-12-03T14:00:00Z"}`},
		{"breaker", `{"service":"zwave","from":"closed","to":"open","at":"2026-12-03T14:00:00Z"}`},
		{"result", `{"op_id":"b","device":"door","status":"succeeded","attempts":1,"at":"2026-12-03T14:00:00Z"}`},
	}
	for i, w := range want {
		if got := next(t, all); got != w {
			t.Errorf("event %d: %+v; want %+v", i, got, w)
		}
	}
	for _, w := range []sse{want[2], want[4], want[5]} {
		if got := next(t, doors); got != w {
			t.Errorf("door's stream: %+v; want %+v", got, w)
		}
	}
}

// A bad filter is a JSON error before any stream opens.
func TestEventStreamBadFilter(t *testing.T) {
	srv := eventServer(t, NewEvents(nil))
	for path, want := range map[string]string{
		"/api/v1/events?device=attic": `{"error":"unknown_device","detail":"no device \"attic\" is configured"}` + "\n",
		"/api/v1/events?devices=door": `{"error":"invalid_parameter","detail":"devices: unknown parameter (known: device)"}` + "\n",
		"/api/v1/events?device=a%2Fb": `{"error":"invalid_parameter","detail":"device: device id \"a/b\" contains '/', which cannot stand in one MQTT topic level"}` + "\n",
	} {
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		bufio.NewReader(resp.Body).WriteTo(&b)
		resp.Body.Close()
		if resp.StatusCode == 200 || b.String() != want {
			t.Errorf("%s: %d %s; want %s", path, resp.StatusCode, b.String(), want)
		}
	}
}

// An idle stream gets ": keepalive" each Keepalive on the hub's clock.
func TestEventStreamKeepalive(t *testing.T) {
	clock := clockwork.NewFakeClock()
	e := NewEvents(clock)
	events, _ := openStream(t, eventServer(t, e), "/api/v1/events")
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := clock.BlockUntilContext(ctx, 1); err != nil {
			t.Fatal("the stream never set its keepalive ticker")
		}
		cancel()
		clock.Advance(Keepalive)
		if got := next(t, events); got != (sse{"", "keepalive"}) {
			t.Fatalf("got %+v; want the keepalive comment", got)
		}
	}
}

// A client that takes nothing while its buffer overflows gets the events
// it had, in order, then "event: dropped", and its stream ends; the hub
// never waited for it.
func TestEventStreamSlowClientDropped(t *testing.T) {
	e := NewEvents(clockwork.NewFakeClock())
	srv := eventServer(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/v1/events", nil)
	resp, err := srv.Client().Do(req) // headers read; the body is not, yet
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	big := strings.Repeat("x", 64<<10)
	published := 0
	// The socket's buffers fill first, then the stream's 256 events.
	for e.streams() > 0 {
		if published == 100000 {
			t.Fatal("the stream was never dropped")
		}
		e.State("lamp", map[string]any{"n": published, "pad": big})
		published++
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	var names []string
	n := 0
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			names = append(names, line[len("event: "):])
		case strings.HasPrefix(line, `data: {"device":"lamp","state":{"n":`):
			if want := fmt.Sprintf(`data: {"device":"lamp","state":{"n":%d,`, n); !strings.HasPrefix(line, want) {
				t.Fatalf("state %d out of order: %.60s", n, line)
			}
			n++
		}
	}
	if len(names) == 0 || names[len(names)-1] != "dropped" || n != len(names)-1 {
		t.Fatalf("%d events, last %v; want the states received then dropped", len(names), names[max(0, len(names)-1):])
	}
	// Lost: the buffer's, and the one that overflowed it.
	if published-n != EventBuffer+1 {
		t.Errorf("received %d of %d published; want all but %d", n, published, EventBuffer+1)
	}
}

// Close ends every open stream and refuses new ones.
func TestEventStreamEndsAtClose(t *testing.T) {
	e := NewEvents(nil)
	srv := eventServer(t, e)
	events, _ := openStream(t, srv, "/api/v1/events")
	e.Close()
	select {
	case ev, ok := <-events:
		if ok {
			t.Fatalf("event %+v after Close", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream is still open after Close")
	}
	resp, err := srv.Client().Get(srv.URL + "/api/v1/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a stream after Close: %d; want 503", resp.StatusCode)
	}
}

// With no stream open, the hub encodes nothing: every result and state of
// every command passes through it, on the dispatcher's goroutines.
func TestEventsWithoutStreamsCostNoEncoding(t *testing.T) {
	e := NewEvents(nil)
	r := devices.Result{OpID: "a", Device: "plug", Status: devices.Succeeded, State: map[string]any{"state": "ON"}}
	state := map[string]any{"state": "ON", "power": 12.5}
	if allocs := testing.AllocsPerRun(100, func() {
		e.Result(r)
		e.State("plug", state)
		e.Availability("plug", true)
	}); allocs != 0 {
		t.Errorf("%v allocations per result, state and availability with no stream open; want 0", allocs)
	}
}

// At most MaxEventStreams streams are open at once: one more is refused
// 503 too_many_streams with Retry-After, and once one closes a new one
// opens. A client opening streams cannot take every connection of the
// server.
func TestEventStreamsBeyondTheCapAreRefused(t *testing.T) {
	e := NewEvents(clockwork.NewFakeClock())
	srv := eventServer(t, e)
	ctxs := make([]context.CancelFunc, 0, MaxEventStreams)
	for i := 0; i < MaxEventStreams; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/v1/events", nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("stream %d: %d; want 200", i+1, resp.StatusCode)
		}
		ctxs = append(ctxs, cancel)
	}
	refused := func() *http.Response {
		resp, err := srv.Client().Get(srv.URL + "/api/v1/events?device=lamp")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		return resp
	}
	resp := refused()
	var body apiError
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("stream %d: %d, body %v", MaxEventStreams+1, resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || body.Error != "too_many_streams" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("stream %d: %d %+v, Retry-After %q; want 503 too_many_streams with Retry-After", MaxEventStreams+1, resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}
	ctxs[0]() // one client leaves
	deadline := time.Now().Add(10 * time.Second)
	for e.streams() == MaxEventStreams {
		if time.Now().After(deadline) {
			t.Fatal("a stream whose client left is still counted")
		}
		time.Sleep(time.Millisecond)
	}
	if resp := refused(); resp.StatusCode != http.StatusOK {
		t.Errorf("a stream after one closed: %d; want 200", resp.StatusCode)
	}
}
