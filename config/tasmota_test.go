package config

import (
	"strings"
	"testing"
)

const tasmotaService = "services:\n  wifi:\n    protocol: tasmota\n"

// A tasmota service takes Tasmota's default FullTopic and 3 attempts: Wi-Fi
// has no radio layer that retries.
func TestTasmotaDefaults(t *testing.T) {
	c, err := Parse("hearth.yaml", []byte(tasmotaService+"devices:\n  porch:\n    class: switch\n    address: dual/2\n"))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := c.Service("wifi")
	if s.FullTopic != DefaultTasmotaFullTopic || s.Retry.MaxAttempts != 3 || s.MQTTUsername != "wifi" || !s.Commands() || !s.UsesMQTT() {
		t.Errorf("full_topic %q, max_attempts %d, username %q, commands %v, mqtt %v; want %q, 3, wifi, true, true", s.FullTopic, s.Retry.MaxAttempts, s.MQTTUsername, s.Commands(), s.UsesMQTT(), DefaultTasmotaFullTopic)
	}
	if d, _ := c.Device("porch"); d.Service != "wifi" || d.Address != "dual/2" {
		t.Errorf("porch: service %q address %q", d.Service, d.Address)
	}
	c, err = Parse("hearth.yaml", []byte(tasmotaService+"    full_topic: tasmota/%topic%/%prefix%/\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := c.Service("wifi"); s.FullTopic != "tasmota/%topic%/%prefix%/" {
		t.Errorf("full_topic %q", s.FullTopic)
	}
}

// An address or FullTopic that cannot exist on Tasmota is an error naming
// the file, line and key.
func TestTasmotaConfigErrors(t *testing.T) {
	dev := func(class, addr string) string {
		return tasmotaService + "devices:\n  x:\n    class: " + class + "\n    address: " + addr + "\n"
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"relay 0", dev("switch", "dual/0"), `hearth.yaml:7: devices.x.address: "dual/0": the relay or shutter "0" is not a number from 1 to 8; write <topic> or <topic>/<relay>`},
		{"relay 9", dev("switch", "dual/9"), `hearth.yaml:7: devices.x.address: "dual/9": the relay or shutter "9" is not a number from 1 to 8`},
		{"three levels", dev("switch", "a/b/c"), `hearth.yaml:7: devices.x.address: "a/b/c": the relay or shutter "b/c" is not a number from 1 to 8`},
		{"light with a relay", dev("light", "bulb/2"), `hearth.yaml:7: devices.x.address: "bulb/2": a Tasmota light is addressed by its Topic alone`},
		{"lock", dev("lock", "door"), `hearth.yaml:7: devices.x.address: a lock cannot be reached over Tasmota`},
		{"long topic", dev("switch", strings.Repeat("t", 33)), `hearth.yaml:7: devices.x.address: Topic "ttttttttttttttttttttttttttttttttt" is longer than Tasmota's 32 characters`},
		{"same relay twice", tasmotaService + "devices:\n  a:\n    class: switch\n    address: dual\n  b:\n    class: switch\n    address: dual/1\n", `hearth.yaml:10: devices.b.address: "dual/1" is already the address of devices.a (line 5) on service wifi`},
		{"full topic without topic", tasmotaService + "    full_topic: '%prefix%/home/'\n", `hearth.yaml:4: services.wifi.full_topic: "%prefix%/home/" must hold %prefix% and %topic% once each, as whole levels`},
		{"full topic with hostname", tasmotaService + "    full_topic: '%prefix%/%hostname%/%topic%/'\n", `hearth.yaml:4: services.wifi.full_topic: "%prefix%/%hostname%/%topic%/": level "%hostname%": Hearth takes only %prefix% and %topic%`},
		{"full topic elsewhere", "services:\n  z:\n    protocol: zigbee2mqtt\n    full_topic: '%prefix%/%topic%/'\n", `hearth.yaml:4: services.z.full_topic: only for protocol tasmota, not zigbee2mqtt`},
		{"base topic on tasmota", tasmotaService + "    base_topic: tasmota\n", `hearth.yaml:4: services.wifi.base_topic: a tasmota service takes no base_topic`},
	} {
		_, err := Parse("hearth.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant it to contain: %s", tc.name, err, tc.want)
		}
	}
}

// A tasmota service's command and report topics are reserved: no broker
// user may publish on them.
func TestTasmotaTopicsAreReserved(t *testing.T) {
	_, err := Parse("hearth.yaml", []byte(tasmotaService+"mqtt:\n  users:\n    nodered:\n      publish: [cmnd/kitchen/POWER]\n"))
	if err == nil || !strings.Contains(err.Error(), "services.wifi.full_topic") {
		t.Errorf("a user publishing cmnd/kitchen/POWER: %v; want an error naming services.wifi.full_topic", err)
	}
}

// full_topic never panics the parser and is refused with a line and key.
func FuzzTasmotaFullTopic(f *testing.F) {
	for _, s := range []string{"%prefix%/%topic%/", "a/%topic%/%prefix%", "%prefix%", "%%", "+/#", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if err := tasmotaFullTopic(s); err != nil && err.Error() == "" {
			t.Fatal("empty error")
		}
	})
}

// An address never panics the parser; one taken has a relay from 1 to 8.
func FuzzTasmotaAddress(f *testing.F) {
	for _, s := range []string{"dual/2", "dual", "dual/0", "/", "a/b/c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		key, err := tasmotaAddress(s, "switch")
		if err != nil {
			return
		}
		_, n, _ := strings.Cut(key, "#")
		if n < "1" || n > "8" || len(n) != 1 {
			t.Fatalf("%q: key %q", s, key)
		}
	})
}
