package main

import (
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/simulator"
)

// hearth-sim plays a configured http service on its loopback host and
// port, at <url path>/<address>, checking its bearer token and with the
// fault flags; an https:// service is left to its real devices.
func TestPlaysConfiguredHTTPDevices(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // the simulator listens there next
	cfg, err := config.Parse("t.yaml", []byte(`
services:
  garage-ctl:
    protocol: http
    url: http://`+addr+`/api
    headers: {Authorization: Bearer tk}
  cloud:
    protocol: http
    url: https://cloud.example/v1
devices:
  garage: {service: garage-ctl, class: cover, address: doors/1}
  pump: {service: cloud, class: climate}
`))
	if err != nil {
		t.Fatal(err)
	}
	stop, err := playHTTPDevices(cfg, simulator.HTTPFaults{FailFirst: 1, FailStatus: 429, RetryAfter: "3"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	req := func(method, token, body string) (int, string, string) {
		r, _ := http.NewRequest(method, "http://"+addr+"/api/doors/1", strings.NewReader(body))
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), strings.TrimSpace(string(b))
	}
	if code, _, _ := req("GET", "", ""); code != 401 {
		t.Errorf("GET without the token: %d; want 401", code)
	}
	if code, ra, _ := req("PUT", "tk", `{"state":"OPEN"}`); code != 429 || ra != "3" {
		t.Errorf("first PUT: %d, Retry-After %q; want 429, 3", code, ra)
	}
	if code, _, _ := req("PUT", "tk", `{"state":"OPEN"}`); code != 204 {
		t.Errorf("second PUT: %d; want 204", code)
	}
	if code, _, body := req("GET", "tk", ""); code != 200 || body != `{"position":100,"state":"OPEN"}` {
		t.Errorf("GET: %d %s; want the door open", code, body)
	}
}

// The HTTP fault flags parse into the simulator's faults.
func TestHTTPFaultFlags(t *testing.T) {
	fs := newFlagSet()
	var f simulator.HTTPFaults
	httpFlags(fs, &f)
	if err := fs.Parse([]string{"-http-fail-first", "2", "-http-fail-status", "429", "-http-retry-after", "Wed, 21 Oct 2026 07:28:00 GMT"}); err != nil {
		t.Fatal(err)
	}
	if f.FailFirst != 2 || f.FailStatus != 429 || f.RetryAfter != "Wed, 21 Oct 2026 07:28:00 GMT" {
		t.Fatalf("faults %+v", f)
	}
}

func newFlagSet() *flag.FlagSet { return flag.NewFlagSet("t", flag.ContinueOnError) }
