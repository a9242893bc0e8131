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
			`hearth.yaml:7: devices.door.address: "a/b/c": the third level "c" is not an endpoint (0–127); write <location>/<node>/<endpoint>`},
		{"address of four levels", zw + "devices:\n  door:\n    class: lock\n    address: a/b/c/1\n",
			`hearth.yaml:7: devices.door.address: "a/b/c/1" is not a Z-Wave JS UI address: write <node>, <location>/<node> or either with /<endpoint>, as the gateway names the node in its topics`},
		{"endpoint above 127", zw + "devices:\n  sw:\n    class: switch\n    address: 12/128\n",
			`hearth.yaml:7: devices.sw.address: "12/128": endpoint 128 is above 127`},
		{"a name the gateway would empty", zw + "devices:\n  sw:\n    class: switch\n    address: \"hall/(!)\"\n",
			`hearth.yaml:7: devices.sw.address: "hall/(!)": level "(!)" keeps no character once sanitised as Z-Wave JS UI does for topics (letters, digits, '-', '_', Latin-1 letters)`},
		{"a node named driver", zw + "devices:\n  sw:\n    class: switch\n    address: driver\n",
			`hearth.yaml:7: devices.sw.address: "driver": a node named driver would publish its status on the gateway's driver/status topic`},
		{"a raw name and its sanitised form", zw + "devices:\n  a:\n    class: switch\n    address: Hall Light\n  b:\n    class: switch\n    address: Hall_Light\n",
			`hearth.yaml:10: devices.b.address: "Hall_Light" is already the address of devices.a (line 5) on service zwave`},
		{"endpoint 0 written and not", zw + "devices:\n  a:\n    class: switch\n    address: \"12\"\n  b:\n    class: switch\n    address: 12/0\n",
			`hearth.yaml:10: devices.b.address: "12/0" is already the address of devices.a (line 5) on service zwave`},
		{"node_names on zigbee2mqtt", "services:\n  zigbee:\n    protocol: zigbee2mqtt\n    node_names: true\n",
			`hearth.yaml:4: services.zigbee.node_names: only for protocol zwavejs, not zigbee2mqtt`},
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
	if d, _ := c.Device("kitchen_right"); d.Address != "kitchen_double/2" || !s.NodeNames {
		t.Errorf("kitchen_right = %+v, node_names %v; want endpoint 2 of kitchen_double with node_names", d, s.NodeNames)
	}
}

// Endpoints and raw names: with node_names, kitchen_double/1 and /2 are
// two devices of one node; a raw name with spaces is taken as written
// (the adapter sanitises it); endpoint forms without node_names are
// 12/2 and <location>/<node>/<endpoint>.
func TestZWaveJSEndpointAddresses(t *testing.T) {
	c, err := Parse("hearth.yaml", []byte(`
services:
  zwave:
    protocol: zwavejs
    node_names: true
  ids:
    protocol: zwavejs
    base_topic: zwave-ids
    gateway_name: ids
devices:
  left:  {service: zwave, class: switch, address: kitchen_double/1}
  right: {service: zwave, class: switch, address: kitchen_double/2}
  hall:  {service: zwave, class: light, address: Living Room/Ceiling Lamp}
  relay: {service: ids, class: switch, address: 12/2}
  blind: {service: ids, class: cover, address: bed/7}
  far:   {service: ids, class: switch, address: bed/7/1}
`))
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := c.Service("zwave"); !s.NodeNames {
		t.Errorf("zwave node_names = false, want true")
	}
	if s, _ := c.Service("ids"); s.NodeNames {
		t.Errorf("ids node_names = true, want the default false")
	}
	for id, want := range map[string]string{"left": "kitchen_double/1", "right": "kitchen_double/2", "hall": "Living Room/Ceiling Lamp", "relay": "12/2", "far": "bed/7/1"} {
		if d, _ := c.Device(id); d.Address != want {
			t.Errorf("%s address = %q, want %q", id, d.Address, want)
		}
	}
}
