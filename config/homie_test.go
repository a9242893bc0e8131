package config

import (
	"testing"
	"time"
)

// A homie service takes base topic homie (Homie 4) and Hearth's defaults
// for a transport without radio retries: 3 attempts of 5 s; its devices'
// addresses are Homie device, node and property IDs. A Homie 5 root is
// <domain>/5 (two services cannot share homie: one's topics would be under
// the other's).
func TestHomieService(t *testing.T) {
	c, err := Parse("hearth.yaml", []byte(`
services:
  homie:
    protocol: homie
  homie5:
    protocol: homie
    base_topic: house/5
devices:
  plug:
    service: homie
    class: switch
    address: plug-1/relay/on
  kitchen:
    service: homie5
    class: light
    address: kitchen-light/light/power,brightness
`))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := c.Service("homie")
	if s.BaseTopic != "homie" || s.Retry.MaxAttempts != 3 || s.Retry.AttemptTimeout != 5*time.Second || !s.Breaker.Enabled || !s.Commands() || !s.UsesMQTT() {
		t.Errorf("homie service = %+v, want base_topic homie, 3 attempts of 5s, a breaker", s)
	}
	if s, _ := c.Service("homie5"); s.BaseTopic != "house/5" {
		t.Errorf("homie5 base topic %q", s.BaseTopic)
	}
}

// An address or base topic that cannot exist in Homie is an error naming
// the file, line and key.
func TestHomieAddressErrors(t *testing.T) {
	const hm = "services:\n  h:\n    protocol: homie\ndevices:\n"
	tests := []struct{ name, yaml, want string }{
		{"a lock", hm + "  door:\n    class: lock\n    address: door/lock/locked\n",
			`hearth.yaml:7: devices.door.address: a lock cannot be a Homie device here: Hearth commands Homie switches and lights (Homie has no fresh read for locks, garage doors and valves, and no standard cover)`},
		{"two levels", hm + "  plug:\n    class: switch\n    address: plug-1/relay\n",
			`hearth.yaml:7: devices.plug.address: "plug-1/relay" is not a Homie address: write <device-id>/<node-id>/<property-id> (kitchen-light/light/power)`},
		{"upper case", hm + "  plug:\n    class: switch\n    address: Plug/relay/on\n",
			`hearth.yaml:7: devices.plug.address: "Plug/relay/on": the device ID "Plug": a Homie ID has only a-z, 0-9 and '-' ('P' at byte 0)`},
		{"a leading hyphen", hm + "  plug:\n    class: switch\n    address: plug/-relay/on\n",
			`hearth.yaml:7: devices.plug.address: "plug/-relay/on": the node ID "-relay": a Homie ID does not start or end with '-'`},
		{"an attribute", hm + "  plug:\n    class: switch\n    address: plug/relay/$state\n",
			`hearth.yaml:7: devices.plug.address: "plug/relay/$state": the property ID "$state": a Homie ID has only a-z, 0-9 and '-' ('$' at byte 0)`},
		{"two properties on a switch", hm + "  plug:\n    class: switch\n    address: plug/relay/on,dim\n",
			`hearth.yaml:7: devices.plug.address: "plug/relay/on,dim": a switch names one property, its boolean on/off (power)`},
		{"one property twice", hm + "  a:\n    class: switch\n    address: plug/relay/on\n  b:\n    class: light\n    address: plug/relay/on,dim\n",
			`hearth.yaml:10: devices.b.address: "plug/relay/on,dim" is already the address of devices.a (line 5) on service h`},
		{"a base of three levels", "services:\n  h:\n    protocol: homie\n    base_topic: homie/5/x\n",
			`hearth.yaml:4: services.h.base_topic: "homie/5/x" is neither a Homie 4 root (one level: homie) nor a Homie 5 root (<domain>/5: homie/5)`},
		{"a base of another version", "services:\n  h:\n    protocol: homie\n    base_topic: homie/4\n",
			`hearth.yaml:4: services.h.base_topic: "homie/4" is neither a Homie 4 root (one level: homie) nor a Homie 5 root (<domain>/5: homie/5)`},
		{"a base with capitals", "services:\n  h:\n    protocol: homie\n    base_topic: Homie\n",
			`hearth.yaml:4: services.h.base_topic: "Homie" is no Homie root topic: ID "Homie": a Homie ID has only a-z, 0-9 and '-' ('H' at byte 0)`},
	}
	for _, tc := range tests {
		_, err := Parse("hearth.yaml", []byte(tc.yaml))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: Parse() error:\ngot  %v\nwant %s", tc.name, err, tc.want)
		}
	}
}
