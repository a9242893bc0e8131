package config

import (
	"testing"
	"time"
)

// A shelly service takes base topic shelly and Hearth's defaults for a
// transport without radio retries: 3 attempts of 5 s; its devices'
// addresses are Shelly device IDs and components.
func TestShellyService(t *testing.T) {
	c, err := Parse("hearth.yaml", []byte(`
services:
  wifi:
    protocol: shelly
devices:
  plug:
    service: wifi
    class: switch
    address: shellyplus1pm-a8032ab12345/switch:0
  blind:
    service: wifi
    class: cover
    address: shellyplus2pm-b8d61a85a0e4/cover:0
  garage:
    service: wifi
    class: cover
    safety: critical
    address: shellyplus1-a8032abe54dc/switch:0/input:100
`))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := c.Service("wifi")
	if s.BaseTopic != "shelly" || s.Retry.MaxAttempts != 3 || s.Retry.AttemptTimeout != 5*time.Second ||
		s.ReadTimeout != 5*time.Second || !s.Breaker.Enabled || !s.Commands() || !s.UsesMQTT() || s.MQTTUsername != "wifi" {
		t.Errorf("wifi service = %+v, want base_topic shelly, 3 attempts of 5s, read_timeout 5s, a breaker, MQTT account wifi", s)
	}
	if d, _ := c.Device("garage"); d.Address != "shellyplus1-a8032abe54dc/switch:0/input:100" {
		t.Errorf("garage = %+v", d)
	}
}

// An address that cannot exist on a Shelly is an error naming the file,
// line and key.
func TestShellyAddressErrors(t *testing.T) {
	const sh = "services:\n  wifi:\n    protocol: shelly\ndevices:\n"
	tests := []struct{ name, yaml, want string }{
		{"a lock", sh + "  door:\n    class: lock\n    address: shellyplus1-a\n",
			`hearth.yaml:7: devices.door.address: a lock is not a Shelly switch, light or cover (class switch, light or cover)`},
		{"no instance", sh + "  plug:\n    class: switch\n    address: shellyplus1-a/switch\n",
			`hearth.yaml:7: devices.plug.address: "shellyplus1-a/switch": component "switch" is not <component>:<n> (switch:0)`},
		{"a bad instance", sh + "  plug:\n    class: switch\n    address: shellyplus1-a/switch:x\n",
			`hearth.yaml:7: devices.plug.address: "shellyplus1-a/switch:x": component "switch:x": the instance is not a number 0–999`},
		{"an unknown component", sh + "  plug:\n    class: switch\n    address: shellyplus1-a/relay:0\n",
			`hearth.yaml:7: devices.plug.address: "shellyplus1-a/relay:0": component "relay": Hearth commands Shelly switch, light and cover components (and reads input)`},
		{"a switch on a cover", sh + "  plug:\n    class: switch\n    address: shellyplus2pm-a/cover:0\n",
			`hearth.yaml:7: devices.plug.address: "shellyplus2pm-a/cover:0": a switch cannot be a Shelly cover (a switch is switch:<n>; a light light:<n> or switch:<n>; a cover cover:<n>, or switch:<n> for a garage door opener with its contact on input:<n>)`},
		{"an input on a switch", sh + "  plug:\n    class: switch\n    address: shellyplus1-a/switch:0/input:0\n",
			`hearth.yaml:7: devices.plug.address: "shellyplus1-a/switch:0/input:0": only a garage door opener (a cover on switch:<n>) takes a third level, its contact input:<m>`},
		{"four levels", sh + "  plug:\n    class: switch\n    address: a/b/c/d\n",
			`hearth.yaml:7: devices.plug.address: "a/b/c/d" is not a Shelly address: write <device-id> or <device-id>/<component>:<n> (shellyplus1pm-a8032ab12345/switch:0)`},
		{"hearth's own level", sh + "  plug:\n    class: switch\n    address: hearth\n",
			`hearth.yaml:7: devices.plug.address: "hearth": hearth is the topic level of Hearth's own RPC source (<base_topic>/hearth/<service>), not a device`},
		{"one component twice", sh + "  a:\n    class: switch\n    address: shellyplus1-a\n  b:\n    class: switch\n    address: shellyplus1-a/switch:0\n",
			`hearth.yaml:10: devices.b.address: "shellyplus1-a/switch:0" is already the address of devices.a (line 5) on service wifi`},
	}
	for _, tc := range tests {
		_, err := Parse("hearth.yaml", []byte(tc.yaml))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: Parse() error:\ngot  %v\nwant %s", tc.name, err, tc.want)
		}
	}
}

// The shelly example of configs/hearth.yaml parses and means what its
// comments say.
func TestSampleShellyExample(t *testing.T) {
	c, err := Parse("configs/hearth.yaml (shelly example)", sampleBlock(t, "shelly example"))
	if err != nil {
		t.Fatal(err)
	}
	s, ok := c.Service("wifi")
	if !ok || s.Protocol != ProtocolShelly || s.BaseTopic != "shelly" || s.Retry.MaxAttempts != 3 {
		t.Errorf("service wifi = %+v", s)
	}
	if d, _ := c.Device("garage_door"); d.Address != "shellyplus1-a8032abe54dc/switch:0/input:100" || d.Class != "cover" || !d.SafetyCritical() {
		t.Errorf("garage_door = %+v", d)
	}
}
