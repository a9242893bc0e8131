package main

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/tasmota"
)

// config mirrors tasmota.ParseAddress and ParseFullTopic (it may not
// import protocols): what config accepts on a tasmota service the adapter
// takes too. A mismatch would let a device through config that hearthd
// then refuses to start with.
func FuzzTasmotaConfigIsTheAdapters(f *testing.F) {
	for _, s := range []string{"dual/2", "kitchen", "dual/0", "a/b", "tasmota_3D5E26", "x/08", "é/1"} {
		f.Add(s, "%prefix%/%topic%/")
		f.Add(s, "tasmota/%topic%/%prefix%")
		f.Add(s, "%prefix%/%hostname%/%topic%/")
	}
	f.Fuzz(func(t *testing.T, addr, full string) {
		qa, _ := json.Marshal(addr)
		qf, _ := json.Marshal(full)
		yaml := "services:\n  wifi:\n    protocol: tasmota\n    full_topic: " + string(qf) + "\ndevices:\n  d:\n    class: switch\n    address: " + string(qa) + "\n"
		cfg, cerr := config.Parse("f.yaml", []byte(yaml))
		if cerr != nil {
			return
		}
		s, _ := cfg.Service("wifi")
		d, _ := cfg.Device("d")
		if _, err := tasmota.New(nil, tasmota.Options{FullTopic: s.FullTopic, Devices: []devices.Device{d.Device}}); err != nil {
			t.Fatalf("config accepts address %q, full_topic %q; the adapter refuses them: %v", addr, full, err)
		}
	})
}

// Config's reserved topics of a tasmota service are the adapter's command
// and report filters, and its highest index is the adapter's.
func TestTasmotaConfigAgreesWithTheAdapter(t *testing.T) {
	if config.MaxTasmotaIndex != tasmota.MaxIndex {
		t.Errorf("config.MaxTasmotaIndex %d, tasmota.MaxIndex %d; want them equal", config.MaxTasmotaIndex, tasmota.MaxIndex)
	}
	if config.DefaultTasmotaFullTopic != tasmota.DefaultFullTopic {
		t.Errorf("default full topics %q and %q", config.DefaultTasmotaFullTopic, tasmota.DefaultFullTopic)
	}
	for _, full := range []string{"", "tasmota/%topic%/%prefix%/", "%prefix%/home/%topic%"} {
		cmds, _ := tasmota.CommandFilters(full)
		reps, _ := tasmota.ReportFilters(full)
		want := append(cmds, reps...)
		yaml := "services:\n  wifi:\n    protocol: tasmota\n"
		if full != "" {
			yaml += "    full_topic: " + full + "\n"
		}
		for _, f := range want {
			_, err := config.Parse("t.yaml", []byte(yaml+"mqtt:\n  users:\n    u:\n      publish: ["+f+"]\n"))
			if err == nil {
				t.Errorf("full_topic %q: a user may publish %s, which the adapter's filters %v reserve", full, f, want)
			}
		}
		if slices.Contains(want, "") {
			t.Errorf("empty filter in %v", want)
		}
	}
}

// A tasmota service's default max_attempts is its transport's: 3, as
// Wi-Fi does not retry at the radio layer.
func TestTasmotaDefaultAttemptsFollowTheTransport(t *testing.T) {
	cfg, err := config.Parse("t.yaml", []byte("services:\n  s:\n    protocol: "+config.ProtocolTasmota+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := cfg.Service("s")
	if got, want := s.Retry.MaxAttempts, tasmota.Transport.DefaultAttempts(); got != want || got != 3 {
		t.Errorf("default max_attempts %d, transport's DefaultAttempts %d; want both 3", got, want)
	}
}
