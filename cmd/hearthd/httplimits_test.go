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

// With the connection cap reached, a further connection is not served
// until one of those served closes: then it is answered.
func TestHTTPServesAtMostTheConnectionCap(t *testing.T) {
	h := newHarness(t, harnessOptions{httpLimits: httpLimits{maxConns: 1}})
	first, err := net.Dial("tcp", h.d.httpAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	io.WriteString(first, "GET /healthz HTTP/1.1\r\nHost: hearth\r\n\r\n")
	firstReader := bufio.NewReader(first)
	if resp, err := http.ReadResponse(firstReader, nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("first connection: %v, %v; want 200", resp, err)
	}
	second, err := net.Dial("tcp", h.d.httpAddr()) // the kernel's backlog accepts it
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	io.WriteString(second, "GET /healthz HTTP/1.1\r\nHost: hearth\r\n\r\n")
	secondReader := bufio.NewReader(second)
	second.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if resp, err := http.ReadResponse(secondReader, nil); err == nil {
		t.Fatalf("second connection answered %d while the first is open; want it held at the cap of 1", resp.StatusCode)
	}
	first.Close()
	second.SetReadDeadline(time.Now().Add(eventWait))
	if resp, err := http.ReadResponse(secondReader, nil); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("second connection after the first closed: %v, %v; want 200", resp, err)
	}
}

// One client address holds at most its share of the server's connections:
// a stranger's script holding idle keep-alive connections (no token
// needed for /healthz) has each one past its share closed at once, and
// another host is still served. Before, one host could hold all of them
// and lock everyone out, /healthz included.
func TestHTTPOneClientCannotTakeEveryConnection(t *testing.T) {
	h := newHarness(t, harnessOptions{httpLimits: httpLimits{maxConns: 4, maxConnsPerClient: 2}})
	get := func(local string) (net.Conn, *http.Response, error) {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}, Timeout: eventWait}
		c, err := d.Dial("tcp", h.d.httpAddr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(eventWait))
		io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: hearth\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			resp.Body.Close()
		}
		return c, resp, err
	}
	for i := range 2 { // the stranger's share, kept open
		if _, resp, err := get("127.0.0.1"); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("connection %d of 127.0.0.1: %v, %v; want 200", i+1, resp, err)
		}
	}
	for i := range 2 {
		if _, resp, err := get("127.0.0.1"); err == nil {
			t.Fatalf("connection %d of 127.0.0.1 past its share of 2 answered %d; want it closed", i+3, resp.StatusCode)
		}
	}
	if _, resp, err := get("127.0.0.2"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("another host, 127.0.0.2, while 127.0.0.1 holds its share: %v, %v; want 200", resp, err)
	}
}
