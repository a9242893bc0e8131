package main

import (
	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/tasmota"
	"github.com/hearthd/hearth/simulator"
)

// tasmotaDevice adds dev, a device of tasmota service svc, to devs: the
// simulated Tasmota at its Topic, grown to as many relays as the
// addresses at that Topic name. names gets the device's Topic (for
// -offline). An address that does not parse adds nothing (config checked
// it).
func tasmotaDevice(devs []simulator.Device, svc config.Service, dev devices.Device, names map[string]string) []simulator.Device {
	s := dev.Address
	if s == "" {
		s = dev.ID
	}
	addr, err := tasmota.ParseAddress(s)
	if err != nil {
		return devs
	}
	names[dev.ID] = addr.Topic
	for i := range devs {
		if devs[i].Protocol == simulator.ProtocolTasmota && devs[i].Name == addr.Topic && devs[i].BaseTopic == svc.FullTopic {
			devs[i].Relays = max(devs[i].Relays, addr.Index)
			return devs
		}
	}
	return append(devs, simulator.Device{Name: addr.Topic, Class: string(dev.Class), Protocol: simulator.ProtocolTasmota,
		BaseTopic: svc.FullTopic, Relays: max(addr.Index, 1)})
}
