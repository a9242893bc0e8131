package main

import (
	"encoding/json"
	"testing"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/homie"
)

// config mirrors homie.ParseAddress and homie.ParseBase (it may not
// import protocols): an address or base topic config accepts on a homie
// service is one the adapter reaches.
func FuzzHomieConfigAddressIsTheAdapters(f *testing.F) {
	for _, s := range []string{"plug-1/relay/on", "kitchen-light/light/power,brightness", "a/b/c,c", "a/b", "A/b/c", "-a/b/c", "a-/b/c", "a/b/$c", "a/b/c,d,e"} {
		for _, c := range []string{"switch", "light", "lock"} {
			f.Add(s, c, "homie")
		}
	}
	f.Add("a/b/c", "switch", "homie/5")
	f.Add("a/b/c", "switch", "x-y/5")
	f.Fuzz(func(t *testing.T, addr, class, base string) {
		c, err := devices.ParseClass(class)
		if err != nil {
			return
		}
		q, _ := json.Marshal(addr) // a YAML double-quoted scalar
		b, _ := json.Marshal(base)
		yaml := "services:\n  w:\n    protocol: homie\n    base_topic: " + string(b) + "\ndevices:\n  d:\n    class: " + class + "\n    address: " + string(q) + "\n"
		cfg, cerr := config.Parse("f.yaml", []byte(yaml))
		if cerr != nil {
			return
		}
		d, _ := cfg.Device("d")
		s, _ := cfg.Service("w")
		if _, err := homie.ParseAddress(d.Address, c); err != nil {
			t.Fatalf("config accepts address %q (%s), the adapter rejects it: %v", d.Address, class, err)
		}
		if _, err := homie.ParseBase(s.BaseTopic); err != nil {
			t.Fatalf("config accepts base topic %q, the adapter rejects it: %v", s.BaseTopic, err)
		}
	})
}

// A homie service's default max_attempts is what the adapter's transport
// declaration says: 3, Wi-Fi having no radio layer that retries.
func TestHomieDefaultAttemptsFollowTheTransport(t *testing.T) {
	cfg, err := config.Parse("t.yaml", []byte("services:\n  s:\n    protocol: homie\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := cfg.Service("s")
	if got, want := s.Retry.MaxAttempts, homie.Transport.DefaultAttempts(); got != want || got != 3 || homie.Transport.RadioRetries {
		t.Errorf("default max_attempts %d, transport's DefaultAttempts %d (radio retries %v); want both 3, none", got, want, homie.Transport.RadioRetries)
	}
}
