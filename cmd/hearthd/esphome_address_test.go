package main

import (
	"encoding/json"
	"testing"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/esphome"
)

// config mirrors esphome.ParseAddress (it may not import protocols): an
// address config accepts on an esphome service is one the adapter
// reaches, and one it refuses the adapter refuses too.
func FuzzESPHomeConfigAddressIsTheAdapters(f *testing.F) {
	for _, s := range []string{"kitchen/switch/relay", "a/light/b", "a/cover/door", "a/lock/front_door", "a/switch/B", "a//x", "/switch/x", "a/switch", "a/b/c/d", "a+/switch/x", "a/relay/x", "a/switch/x-1"} {
		for _, c := range []string{"switch", "light", "cover", "lock", "valve"} {
			f.Add(s, c)
		}
	}
	f.Fuzz(func(t *testing.T, addr, class string) {
		c, err := devices.ParseClass(class)
		if err != nil {
			return
		}
		q, _ := json.Marshal(addr) // a YAML double-quoted scalar
		yaml := "services:\n  w:\n    protocol: esphome\ndevices:\n  d:\n    class: " + class + "\n    address: " + string(q) + "\n"
		cfg, cerr := config.Parse("f.yaml", []byte(yaml))
		if cerr == nil {
			d, _ := cfg.Device("d")
			addr = d.Address
		}
		_, aerr := esphome.ParseAddress(addr, c)
		if cerr == nil && aerr != nil {
			t.Fatalf("config accepts address %q (%s), the adapter rejects it: %v", addr, class, aerr)
		}
	})
}

// An esphome service's default max_attempts is what the adapter's
// transport declaration says: 3; and read_back is on by default.
func TestESPHomeDefaultsFollowTheTransport(t *testing.T) {
	cfg, err := config.Parse("t.yaml", []byte("services:\n  s:\n    protocol: esphome\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := cfg.Service("s")
	if got, want := s.Retry.MaxAttempts, esphome.Transport.DefaultAttempts(); got != want || got != 3 || esphome.Transport.RadioRetries {
		t.Errorf("default max_attempts %d, transport's DefaultAttempts %d (radio retries %v); want both 3, none", got, want, esphome.Transport.RadioRetries)
	}
	if !s.Retry.ReadBack || s.BaseTopic != "esphome" {
		t.Errorf("read_back %v, base_topic %q; want true, esphome", s.Retry.ReadBack, s.BaseTopic)
	}
	off, err := config.Parse("t.yaml", []byte("services:\n  s:\n    protocol: esphome\n    retry:\n      read_back: false\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := off.Service("s"); s.Retry.ReadBack {
		t.Error("retry.read_back: false is not honoured")
	}
}
