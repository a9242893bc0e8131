package config

import (
	"testing"
	"time"
)

// A zwavejs service takes Z-Wave JS UI's defaults (prefix zwave, gateway
// name zwave-js-ui) and Hearth's for a transport that retries at the radio
// layer: 2 attempts of 5 s; its devices' addresses are their node topics.
func TestZWaveJSService(t *testing.T) {
	c, err := Parse("hearth.yaml", []byte(`
services:
  zwave:
    protocol: zwavejs
  upstairs:
    protocol: zwavejs
    base_topic: zwave-up
    gateway_name: attic
devices:
  front_door:
    service: zwave
    class: lock
    address: hall/front_door
  trv:
    service: upstairs
    class: climate
    address: "12"
`))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := c.Service("zwave")
	if s.BaseTopic != "zwave" || s.GatewayName != "zwave-js-ui" || s.Retry.MaxAttempts != 2 ||
		s.Retry.AttemptTimeout != 5*time.Second || s.ReadTimeout != 5*time.Second || !s.Breaker.Enabled || !s.Commands() {
		t.Errorf("zwave service = %+v, want base_topic zwave, gateway_name zwave-js-ui, 2 attempts of 5s, read_timeout 5s, a breaker", s)
	}
	up, _ := c.Service("upstairs")
	if up.BaseTopic != "zwave-up" || up.GatewayName != "attic" {
		t.Errorf("upstairs = %q %q, want zwave-up attic", up.BaseTopic, up.GatewayName)
	}
	if d, _ := c.Device("front_door"); d.Address != "hall/front_door" || d.Service != "zwave" {
		t.Errorf("front_door = %+v", d)
	}
	if d, _ := c.Device("trv"); d.Address != "12" {
		t.Errorf("trv address = %q, want 12", d.Address)
	}
}

func TestZWaveJSErrors(t *testing.T) {
	const zw = "services:\n  zwave:\n    protocol: zwavejs\n"
	tests := []struct{ name, yaml, want string }{
		{"gateway name on zigbee2mqtt", "services:\n  zigbee:\n    protocol: zigbee2mqtt\n    gateway_name: hub\n",
			`hearth.yaml:4: services.zigbee.gateway_name: only for protocol zwavejs, not zigbee2mqtt`},
		{"gateway name of two levels", zw + "    gateway_name: a/b\n",
			`hearth.yaml:4: services.zwave.gateway_name: "a/b" contains '/'; it must be one topic level`},
		{"gateway name with a wildcard", zw + "    gateway_name: hub+\n",
			`hearth.yaml:4: services.zwave.gateway_name: "hub+" contains '+', an MQTT wildcard`},
		{"address of three levels", zw + "devices:\n  door:\n    class: lock\n    address: a/b/c\n",
			`hearth.yaml:7: devices.door.address: "a/b/c" is not a Z-Wave JS UI node: write <node> or <location>/<node>, as the gateway names the node in its topics`},
		{"address on the gateway's own topics", zw + "devices:\n  door:\n    class: lock\n    address: _CLIENTS/x\n",
			`hearth.yaml:7: devices.door.address: "_CLIENTS/x" is not a Z-Wave JS UI node: write <node> or <location>/<node>, as the gateway names the node in its topics`},
		{"two services on one prefix", zw + "  other:\n    protocol: zwavejs\n",
			`hearth.yaml:4: services.other.base_topic: default base topic "zwave" overlaps services.zwave.base_topic "zwave"; Hearth and each bridge need topics of their own`},
	}
	for _, tc := range tests {
		_, err := Parse("hearth.yaml", []byte(tc.yaml))
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: Parse() error:\ngot  %v\nwant %s", tc.name, err, tc.want)
		}
	}
}

// The zwavejs example of configs/hearth.yaml parses and means what its
// comments say.
func TestSampleZWaveJSExample(t *testing.T) {
	c, err := Parse("configs/hearth.yaml (zwavejs example)", sampleBlock(t, "zwavejs example"))
	if err != nil {
		t.Fatal(err)
	}
	s, ok := c.Service("zwave")
	if !ok || s.Protocol != ProtocolZWaveJS || s.BaseTopic != "zwave" || s.GatewayName != "zwave-js-ui" || s.Retry.MaxAttempts != 2 {
		t.Errorf("service zwave = %+v", s)
	}
	if d, _ := c.Device("back_door"); d.Address != "hall/back_door" || d.Class != "lock" {
		t.Errorf("back_door = %+v", d)
	}
	if d, _ := c.Device("radiator"); d.Address != "14" || d.Class != "climate" {
		t.Errorf("radiator = %+v", d)
	}
}
