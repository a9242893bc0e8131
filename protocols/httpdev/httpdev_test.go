package httpdev

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/httpreq"
	"github.com/hearthd/hearth/retry"
)

// TestMain fails the package if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// sink records what the adapter reports.
type sink struct {
	mu      sync.Mutex
	reports []map[string]any
	online  int
}

func (s *sink) Report(_ string, st map[string]any, retained bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if retained {
		panic("an HTTP answer is never retained")
	}
	s.reports = append(s.reports, st)
}

func (s *sink) Availability(_ string, online bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if online {
		s.online++
	}
}

// device is a REST resource at /api/doors/1: PUT sets it, GET reads it;
// the log lists "METHOD path body".
type device struct {
	mu    sync.Mutex
	state string
	code  int // answer commands with this status instead, if not 0
	echo  bool
	log   []string
}

func (d *device) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.log = append(d.log, r.Method+" "+r.URL.Path+" "+string(b))
	if r.URL.Path != "/api/doors/1" {
		http.NotFound(w, r)
		return
	}
	switch r.Method {
	case http.MethodGet:
		io.WriteString(w, d.state)
	case http.MethodPut:
		if d.code != 0 {
			w.WriteHeader(d.code)
			return
		}
		if !d.echo {
			d.state = string(b)
		}
		w.Write(b)
	default:
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func start(t *testing.T, d *device, addr string) (*Adapter, *sink) {
	t.Helper()
	srv := httptest.NewServer(d)
	t.Cleanup(srv.Close)
	a, err := New(Options{Service: "garage", BaseURL: srv.URL + "/api/", Devices: []devices.Device{{ID: "door", Class: devices.Cover, Address: addr}}})
	if err != nil {
		t.Fatal(err)
	}
	s := &sink{}
	a.Start(context.Background(), s)
	return a, s
}

// A command is one PUT of the target to the device's resource, then a GET
// whose state is reported.
func TestSendPutsTargetThenReportsGet(t *testing.T) {
	d := &device{state: `{"state":"closed"}`}
	a, s := start(t, d, "doors/1")
	if err := a.Send(context.Background(), devices.Device{ID: "door"}, devices.Target{"state": "OPEN"}); err != nil {
		t.Fatal(err)
	}
	want := []string{`PUT /api/doors/1 {"state":"OPEN"}`, `GET /api/doors/1 `}
	if strings.Join(d.log, "|") != strings.Join(want, "|") {
		t.Fatalf("requests %q; want %q", d.log, want)
	}
	if len(s.reports) != 1 || s.reports[0]["state"] != "OPEN" || s.online != 2 {
		t.Fatalf("reports %v, online %d; want one OPEN, online twice", s.reports, s.online)
	}
}

// The response's echo confirms nothing: a device that answers 200 with the
// request's body but stays closed is reported closed.
func TestEchoConfirmsNothing(t *testing.T) {
	d := &device{state: `{"state":"CLOSE"}`, echo: true}
	a, s := start(t, d, "doors/1")
	if err := a.Send(context.Background(), devices.Device{ID: "door"}, devices.Target{"state": "OPEN"}); err != nil {
		t.Fatal(err)
	}
	if len(s.reports) != 1 || s.reports[0]["state"] != "CLOSE" {
		t.Fatalf("reports %v; want the GET's CLOSE only", s.reports)
	}
}

// A refused command is the service's *StatusError, classified by retry,
// and nothing is read or reported.
func TestSendRefusedIsClassified(t *testing.T) {
	for code, permanent := range map[int]bool{400: true, 422: true, 503: false, 429: false} {
		d := &device{state: `{"state":"CLOSE"}`, code: code}
		a, s := start(t, d, "doors/1")
		err := a.Send(context.Background(), devices.Device{ID: "door"}, devices.Target{"state": "OPEN"})
		var se *httpreq.StatusError
		if !errors.As(err, &se) || se.Code != code || retry.Classify(err).Permanent() != permanent {
			t.Fatalf("HTTP %d: %v; want a *StatusError, permanent %v", code, err, permanent)
		}
		if len(d.log) != 1 || len(s.reports) != 0 {
			t.Errorf("HTTP %d: requests %q, reports %v; want the PUT alone, no report", code, d.log, s.reports)
		}
	}
}

// Read reports the GET's state; a body that is no state is an error and
// reports nothing.
func TestReadReportsStatus(t *testing.T) {
	d := &device{state: `{"state":"OPEN","position":100}`}
	a, s := start(t, d, "doors/1")
	if err := a.Read(context.Background(), devices.Device{ID: "door"}, nil); err != nil {
		t.Fatal(err)
	}
	if len(s.reports) != 1 || s.reports[0]["position"] != 100.0 {
		t.Fatalf("reports %v", s.reports)
	}
	d.state = `<html>`
	if err := a.Read(context.Background(), devices.Device{ID: "door"}, nil); err == nil || len(s.reports) != 1 {
		t.Fatalf("err %v, reports %v; want an error and no new report", err, s.reports)
	}
}

// New refuses what cannot be requested, naming the device, never the
// URL's query.
func TestNewRefuses(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Service: "s", BaseURL: "ftp://h"}, "http service s: url: want an http:// or https:// URL, not ftp://"},
		{Options{Service: "s", BaseURL: "https://h/?token=secret"}, "http service s: url: a base URL takes no query or fragment (a device's address is a path under it)"},
		{Options{Service: "s", BaseURL: "https://h", Method: "DELETE"}, `http service s: method "DELETE": want PUT, POST or PATCH`},
		{Options{Service: "s", BaseURL: "https://h", Devices: []devices.Device{{ID: "d", Address: "../x"}}}, `http service s: device d: address "../x": no '.' or '..' segments: the address stays under the service's url`},
	} {
		if _, err := New(tc.o); err == nil || err.Error() != tc.want {
			t.Errorf("New(%+v) = %v; want %s", tc.o, err, tc.want)
		}
	}
}

// ParseState takes Hearth's attributes and refuses the rest clearly.
func TestParseState(t *testing.T) {
	got, err := ParseState([]byte(`{"state":"closed","position":0,"moving":null,"online":true}`))
	if err != nil || len(got) != 3 || got["state"] != "CLOSE" || got["position"] != 0.0 || got["online"] != true {
		t.Fatalf("ParseState = %v, %v", got, err)
	}
	for body, want := range map[string]string{
		`[1]`:           "not a JSON object: json: cannot unmarshal array into Go value of type map[string]json.RawMessage",
		`null`:          "null, not a JSON object",
		`{}`:            "no attributes",
		`{"a":null}`:    "no attributes",
		`{"a":{"b":1}}`: `attribute "a": {"b":1} is not a string, number or boolean`,
		`{"":1}`:        "an attribute with an empty name",
	} {
		if _, err := ParseState([]byte(body)); err == nil || err.Error() != want {
			t.Errorf("ParseState(%s) = %v; want %s", body, err, want)
		}
	}
}

// A request the service does not answer within the timeout is a
// *TimeoutError: a transient timeout for retry, without
// context.DeadlineExceeded in its chain (the dispatcher keeps that from
// the breaker as its own abandoned send); a cancelled caller's is not.
func TestRequestTimeoutIsTheServices(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	a, err := New(Options{Service: "s", BaseURL: srv.URL, Timeout: 50 * time.Millisecond, Devices: []devices.Device{{ID: "d"}}})
	if err != nil {
		t.Fatal(err)
	}
	a.Start(context.Background(), &sink{})
	err = a.Send(context.Background(), devices.Device{ID: "d"}, devices.Target{"state": "ON"})
	var te *TimeoutError
	if !errors.As(err, &te) || retry.Classify(err) != retry.Timeout || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v (%T) classified %s; want a *TimeoutError, timeout, no DeadlineExceeded", err, err, retry.Classify(err))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Read(ctx, devices.Device{ID: "d"}, nil); errors.As(err, &te) {
		t.Fatalf("a cancelled read: %v; want the caller's cancellation, not a *TimeoutError", err)
	}
}

// The adapter tells the dispatcher how long one of its calls may take: a
// Send's two requests (the command, then the status read), each bounded by
// the service's timeout or DefaultTimeout, so that the dispatcher's own
// bound never cuts a call short of them.
func TestCallTimeoutCoversTheCommandAndItsStatusRead(t *testing.T) {
	for _, tc := range []struct {
		timeout, want time.Duration
	}{{0, 2 * DefaultTimeout}, {30 * time.Second, time.Minute}} {
		a, err := New(Options{Service: "s", BaseURL: "http://192.0.2.1/", Timeout: tc.timeout, Devices: []devices.Device{{ID: "d"}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := a.CallTimeout(); got != tc.want {
			t.Errorf("timeout %s: CallTimeout() = %s, want %s", tc.timeout, got, tc.want)
		}
	}
}
