package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// awaitServerClose reads conn until the server closes it, and fails the
// test if it is still open after eventWait: a connection the server's
// limits do not end stays open for ever.
func awaitServerClose(t *testing.T, conn net.Conn, what string) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(eventWait))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("%s: the server kept the connection open for %s", what, eventWait)
	}
}

// A client that sends its headers and then drips its body (or stops
// sending it) is closed once the read timeout has passed, instead of
// holding a connection for ever.
func TestHTTPClosesABodyDripAfterTheReadTimeout(t *testing.T) {
	h := newHarness(t, harnessOptions{httpLimits: httpLimits{read: 200 * time.Millisecond}})
	conn, err := net.Dial("tcp", h.d.httpAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "POST /api/v1/devices/hall_light/commands HTTP/1.1\r\nHost: hearth\r\nContent-Length: 100\r\n\r\n{")
	awaitServerClose(t, conn, "body drip")
}

// A keep-alive connection that sends nothing after its first request is
// closed after the idle timeout.
func TestHTTPClosesAnIdleKeepAliveConnection(t *testing.T) {
	h := newHarness(t, harnessOptions{httpLimits: httpLimits{idle: 200 * time.Millisecond}})
	conn, err := net.Dial("tcp", h.d.httpAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: hearth\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("GET /healthz: %d, close %v; want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
	}
	awaitServerClose(t, conn, "idle keep-alive connection")
}

// A header block larger than the limit is answered 431, not read.
func TestHTTPRefusesOversizedHeaders(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	req, _ := http.NewRequest("GET", "http://"+h.d.httpAddr()+"/healthz", nil)
	req.Header.Set("X-Padding", strings.Repeat("a", 2*httpMaxHeaderBytes))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("status %d; want 431", resp.StatusCode)
	}
}

// With a write timeout that has always passed by the time a handler
// answers, an ordinary GET gets no answer, but a long poll
// (GET /api/v1/ops/{op_id}?wait=) moves its own deadline by its wait and
// answers.
func TestHTTPLongPollOutlivesTheWriteTimeout(t *testing.T) {
	h := newHarness(t, harnessOptions{httpLimits: httpLimits{write: time.Nanosecond}})
	h.publish("hall_light", `{"state":"ON","op_id":"poll-1"}`)
	if r := h.final("poll-1"); r.Status != devices.Succeeded {
		t.Fatalf("command ended %s/%s", r.Status, r.Reason)
	}
	url := "http://" + h.d.httpAddr() + "/api/v1/ops/poll-1"
	client := &http.Client{Timeout: eventWait}
	if resp, err := client.Get(url); err == nil {
		resp.Body.Close()
		t.Fatalf("GET without wait answered %d past the write timeout; want no answer (is WriteTimeout set?)", resp.StatusCode)
	}
	resp, err := client.Get(url + "?wait=5s")
	if err != nil {
		t.Fatalf("GET ?wait=5s: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"succeeded"`) {
		t.Errorf("GET ?wait=5s: %d %s; want 200 and the succeeded result", resp.StatusCode, body)
	}
}
