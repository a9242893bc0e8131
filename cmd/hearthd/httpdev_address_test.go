package main

import (
	"encoding/json"
	"testing"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/protocols/httpdev"
)

// config mirrors httpdev.ParseAddress (it may not import protocols): an
// address config accepts on an http service is one the adapter reaches.
func FuzzHTTPConfigAddressIsTheAdapters(f *testing.F) {
	for _, s := range []string{"doors/1", "heatpump", "a/../b", "a//b", "/a", "a?b", "a%2e", "a b", "a/./b", "ä/ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, addr string) {
		q, _ := json.Marshal(addr) // a YAML double-quoted scalar
		yaml := "services:\n  h:\n    protocol: http\n    url: https://h/api\ndevices:\n  d:\n    class: switch\n    address: " + string(q) + "\n"
		cfg, err := config.Parse("f.yaml", []byte(yaml))
		if err != nil {
			return
		}
		d, _ := cfg.Device("d")
		if _, err := httpdev.ParseAddress(d.Address); err != nil {
			t.Fatalf("config accepts address %q, the adapter rejects it: %v", d.Address, err)
		}
		s, _ := cfg.Service("h")
		if _, err := httpdev.New(httpdev.Options{Service: "h", BaseURL: s.URL, Method: s.Method, Headers: s.Headers, Timeout: s.Timeout}); err != nil {
			t.Fatalf("config accepts service %+v, the adapter rejects it: %v", s, err)
		}
	})
}

// An http service's default max_attempts is what the adapter's
// transport asks for: no radio layer retries for Hearth.
func TestHTTPServiceAttemptsFitTheTransport(t *testing.T) {
	cfg, err := config.Parse("f.yaml", []byte("services:\n  h:\n    protocol: http\n    url: https://h/\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := cfg.Service("h"); s.Retry.MaxAttempts != httpdev.Transport.DefaultAttempts() {
		t.Fatalf("max_attempts %d; want %d", s.Retry.MaxAttempts, httpdev.Transport.DefaultAttempts())
	}
}
