package main

import (
	"testing"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/simulator"
)

// hearth-sim plays one Tasmota per Topic of a tasmota service, with as
// many relays as the config's addresses name.
func TestTasmotaDevicesFromTheConfig(t *testing.T) {
	cfg, err := config.Parse("t.yaml", []byte("services:\n  wifi:\n    protocol: tasmota\ndevices:\n  a:\n    class: switch\n    address: dual/2\n  b:\n    class: switch\n    address: dual/1\n  c:\n    class: light\n    address: bulb\n"))
	if err != nil {
		t.Fatal(err)
	}
	svc, _ := cfg.Service("wifi")
	names := map[string]string{}
	var devs []simulator.Device
	for _, d := range cfg.Devices {
		devs = tasmotaDevice(devs, svc, d.Device, names)
	}
	if len(devs) != 2 || devs[0].Name != "dual" || devs[0].Relays != 2 || devs[1].Name != "bulb" || devs[1].Relays != 1 ||
		devs[0].Protocol != simulator.ProtocolTasmota || devs[0].BaseTopic != "%prefix%/%topic%/" || names["a"] != "dual" {
		t.Errorf("devices %+v, names %v; want dual with 2 relays and bulb, Tasmotas under the default FullTopic", devs, names)
	}
}
