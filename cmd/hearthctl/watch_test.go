package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for a command writing it while a test
// reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor polls until s holds want, for at most 10 s.
func (s *syncBuffer) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(s.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q within 10s in:\n%s", want, s.String())
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, with a deadline
	}
}

// watching is a hearthctl watch running in the background.
type watching struct {
	stdout, stderr *syncBuffer
	interrupt      context.CancelFunc // as SIGINT
	code           chan int
}

// startWatch runs hearthctl args (a watch) with now as the time of
// events that carry none; interrupt stands in for SIGINT.
func startWatch(now time.Time, args ...string) *watching {
	w := &watching{stdout: &syncBuffer{}, stderr: &syncBuffer{}, code: make(chan int, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	w.interrupt = cancel
	c := &cli{stdout: w.stdout, stderr: w.stderr, getenv: func(string) string { return "" },
		now: func() time.Time { return now }, client: &http.Client{Timeout: 30 * time.Second},
		signals: func() (context.Context, context.CancelFunc) { return ctx, cancel }}
	go func() { w.code <- c.run(args) }()
	return w
}

// exit waits for the watch to end and returns its exit status.
func (w *watching) exit(t *testing.T) int {
	t.Helper()
	select {
	case code := <-w.code:
		return code
	case <-time.After(10 * time.Second):
		t.Fatalf("watch did not end within 10s; stdout\n%s\nstderr\n%s", w.stdout, w.stderr)
		return -1
	}
}

// sseServer answers GET /api/v1/events with the i-th of answers at the
// i-th request (the last one again after), each a func writing the
// answer; it records each request's query.
type sseServer struct {
	*httptest.Server
	mu      sync.Mutex
	queries []string
}

func newSSEServer(t *testing.T, answers ...func(w http.ResponseWriter, r *http.Request)) *sseServer {
	s := &sseServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/events" {
			http.NotFound(w, r)
			return
		}
		s.mu.Lock()
		i := min(len(s.queries), len(answers)-1)
		s.queries = append(s.queries, r.URL.RawQuery)
		s.mu.Unlock()
		answers[i](w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// stream answers 200 text/event-stream with events, then ends the
// stream, or with hold, keeps it open until the client leaves.
func stream(hold bool, events ...string) func(http.ResponseWriter, *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, e := range events {
			fmt.Fprint(w, e)
		}
		w.(http.Flusher).Flush()
		if hold {
			<-r.Context().Done()
		}
	}
}

func unavailable(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprintln(w, `{"error":"unavailable","detail":"Hearth is shutting down"}`)
}

var reconnecting = regexp.MustCompile(`reconnecting in [0-9.]+m?s\n`)

// The events of issue 18's contract, one decoded line each; the stream
// fails (503) and ends, and watch reconnects each time, with backoff.
func TestWatchPrintsEachEventAndReconnects(t *testing.T) {
	now := time.Date(2026, 12, 3, 14, 0, 0, 0, time.UTC)
	srv := newSSEServer(t,
		unavailable,
		stream(false,
			": keepalive\n\n",
			"event: result\ndata: {\"op_id\":\"op-1\",\"device\":\"hall_light\",\"status\":\"succeeded\",\"attempts\":2,\"target\":{\"state\":\"ON\"},\"state\":{\"brightness\":9,\"state\":\"ON\"},\"at\":\"2026-12-03T13:59:58Z\"}\n\n",
			"event: state\ndata: {\"device\":\"hall_light\",\"state\":{\"state\":\"ON\",\"brightness\":9}}\n\n"),
		stream(true,
			"event: availability\ndata: {\"device\":\"front_door\",\"online\":false}\n\n",
			"event: breaker\ndata: {\"service\":\"zigbee\",\"from\":\"closed\",\"to\":\"open\",\"at\":\"2026-12-03T13:59:59Z\"}\n\n",
			"event: result\ndata: {\"op_id\":\"op-2\",\"device\":\"front_door\",\"status\":\"failed\",\"reason\":\"breaker_open\",\"detail\":\"the circuit breaker of service zigbee is open\",\"attempts\":0,\"at\":\"2026-12-03T14:00:00Z\"}\n\n"),
	)
	w := startWatch(now, "-addr", srv.URL, "watch", "-n", "5", "-device", "hall_light", "-device", "front_door")
	code := w.exit(t)
	want := "" +
		`2026-12-03T13:59:58Z  result        hall_light     op_id=op-1 status=succeeded attempts=2 target={"state":"ON"} state={"brightness":9,"state":"ON"}` + "\n" +
		`2026-12-03T14:00:00Z  state         hall_light     {"brightness":9,"state":"ON"}` + "\n" +
		`2026-12-03T14:00:00Z  availability  front_door     offline` + "\n" +
		`2026-12-03T13:59:59Z  breaker       zigbee         closed -> open` + "\n" +
		`2026-12-03T14:00:00Z  result        front_door     op_id=op-2 status=failed reason=breaker_open attempts=0 detail="the circuit breaker of service zigbee is open"` + "\n"
	wantStderr := "" +
		"hearthctl watch: hearthd answered 503 Service Unavailable: unavailable: Hearth is shutting down; reconnecting in D\n" +
		"hearthctl watch: reconnected; events while away are not replayed\n" +
		"hearthctl watch: the stream ended; reconnecting in D\n" +
		"hearthctl watch: reconnected; events while away are not replayed\n"
	if got := reconnecting.ReplaceAllString(w.stderr.String(), "reconnecting in D\n"); code != 0 || w.stdout.String() != want || got != wantStderr {
		t.Errorf("exit %d, stdout\n%s\nstderr\n%s\nwant exit 0, stdout\n%s\nstderr\n%s", code, w.stdout, got, want, wantStderr)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for _, q := range srv.queries {
		if q != "device=hall_light&device=front_door" {
			t.Errorf("query %q, want device=hall_light&device=front_door", q)
		}
	}
}

// SIGINT ends a watch: exit 0.
func TestWatchEndsAtInterrupt(t *testing.T) {
	srv := newSSEServer(t, stream(true, ": keepalive\n\n"))
	w := startWatch(time.Now(), "-addr", srv.URL, "watch")
	w.stderr.waitFor(t, "hearthctl watch: following "+srv.URL+"/api/v1/events\n")
	w.interrupt()
	if code := w.exit(t); code != 0 || w.stdout.String() != "" {
		t.Errorf("exit %d, stdout %q; want 0, nothing", code, w.stdout)
	}
}

// A stream hearthd drops (the client fell 256 events behind) is said and
// followed again; -json prints each event as it came.
func TestWatchJSONAndADroppedStream(t *testing.T) {
	srv := newSSEServer(t,
		stream(false, "event: state\ndata: {\"device\":\"x\",\n", "data: \"state\":{\"on\":true}}\n\n", "event: dropped\ndata: {\"dropped\":256}\n\n"),
		stream(true, "event: availability\ndata: {\"device\":\"x\",\"online\":true}\n\n"),
	)
	w := startWatch(time.Now(), "-addr", srv.URL, "watch", "-json", "-n", "2")
	code := w.exit(t)
	want := `{"event":"state","data":{"device":"x","state":{"on":true}}}` + "\n" + `{"event":"availability","data":{"device":"x","online":true}}` + "\n"
	wantStderr := "hearthctl watch: following " + srv.URL + "/api/v1/events\n" +
		"hearthctl watch: hearthd dropped this stream, too far behind ({\"dropped\":256})\n" +
		"hearthctl watch: the stream ended; reconnecting in D\n" +
		"hearthctl watch: reconnected; events while away are not replayed\n"
	if got := reconnecting.ReplaceAllString(w.stderr.String(), "reconnecting in D\n"); code != 0 || w.stdout.String() != want || got != wantStderr {
		t.Errorf("exit %d, stdout\n%s\nstderr\n%s\nwant exit 0, stdout\n%s\nstderr\n%s", code, w.stdout, got, want, wantStderr)
	}
}

// A 4xx will not change by reconnecting: watch says it and exits 1.
func TestWatchWithoutTheTokenExits1(t *testing.T) {
	srv := newServer(t, "s3cret")
	w := startWatch(time.Now(), "-addr", srv.URL, "watch")
	want := "hearthctl: hearthd answered 401 Unauthorized: missing or wrong bearer token (give a token with -token or HEARTH_TOKEN)\n"
	if code := w.exit(t); code != 1 || w.stderr.String() != want {
		t.Errorf("exit %d, stderr %q; want 1, %q", code, w.stderr, want)
	}
}

// A stream that goes silent (no event, no keepalive: a hub cut off
// without closing the connection) is taken for dead after the stream's
// idle time, and watch reconnects instead of waiting forever.
func TestWatchReconnectsWhenTheStreamGoesSilent(t *testing.T) {
	now := time.Date(2026, 12, 3, 14, 0, 0, 0, time.UTC)
	srv := newSSEServer(t,
		stream(true), // headers, then nothing
		stream(true, "event: availability\ndata: {\"device\":\"front_door\",\"online\":true}\n\n"),
	)
	w := &watching{stdout: &syncBuffer{}, stderr: &syncBuffer{}, code: make(chan int, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &cli{stdout: w.stdout, stderr: w.stderr, getenv: func(string) string { return "" },
		now: func() time.Time { return now }, client: &http.Client{Timeout: 30 * time.Second},
		signals:    func() (context.Context, context.CancelFunc) { return ctx, cancel },
		streamIdle: 300 * time.Millisecond}
	go func() { w.code <- c.run([]string{"-addr", srv.URL, "watch", "-n", "1"}) }()
	code := w.exit(t)
	if want := "2026-12-03T14:00:00Z  availability  front_door     online\n"; code != 0 || w.stdout.String() != want ||
		!strings.Contains(w.stderr.String(), "hearthctl watch: no event nor keepalive for 300ms; reconnecting in ") {
		t.Errorf("exit %d, stdout\n%s\nstderr\n%s\nwant exit 0, the event of the second stream, and the silent one dropped", code, w.stdout, w.stderr)
	}
}
