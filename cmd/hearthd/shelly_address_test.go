package main

import (
	"encoding/json"
	"testing"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/shelly"
)

// config mirrors shelly.ParseAddress (it may not import protocols): an
// address config accepts on a shelly service is one the adapter reaches,
// and one it refuses the adapter refuses too.
func FuzzShellyConfigAddressIsTheAdapters(f *testing.F) {
	for _, s := range []string{"shellyplus1-a", "a/switch:0", "a/switch:0/input:100", "a/light:1", "a/cover:0", "hearth", "a/switch:", "a/relay:0", "a/b/c/d", "a+b", "a/switch:1000", "a/cover:0/input:0"} {
		for _, c := range []string{"switch", "light", "cover", "lock"} {
			f.Add(s, c)
		}
	}
	f.Fuzz(func(t *testing.T, addr, class string) {
		c, err := devices.ParseClass(class)
		if err != nil {
			return
		}
		q, _ := json.Marshal(addr) // a YAML double-quoted scalar
		yaml := "services:\n  w:\n    protocol: shelly\ndevices:\n  d:\n    class: " + class + "\n    address: " + string(q) + "\n"
		cfg, cerr := config.Parse("f.yaml", []byte(yaml))
		if cerr == nil {
			d, _ := cfg.Device("d")
			addr = d.Address // a config default (none yet) would apply here
		}
		_, aerr := shelly.ParseAddress(addr, c)
		if cerr == nil && aerr != nil {
			t.Fatalf("config accepts address %q (%s), the adapter rejects it: %v", addr, class, aerr)
		}
	})
}

// A shelly service's default max_attempts is what the adapter's transport
// declaration says: 3, Wi-Fi having no radio layer that retries.
func TestShellyDefaultAttemptsFollowTheTransport(t *testing.T) {
	cfg, err := config.Parse("t.yaml", []byte("services:\n  s:\n    protocol: shelly\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := cfg.Service("s")
	if got, want := s.Retry.MaxAttempts, shelly.Transport.DefaultAttempts(); got != want || got != 3 || shelly.Transport.RadioRetries {
		t.Errorf("default max_attempts %d, transport's DefaultAttempts %d (radio retries %v); want both 3, none", got, want, shelly.Transport.RadioRetries)
	}
}
