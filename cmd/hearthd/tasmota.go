package main

import (
	"context"
	"log/slog"

	"github.com/hearthd/hearth/acl"
	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/tasmota"
	"github.com/hearthd/hearth/simulator"
)

// tasmotaAdapter builds the adapter of a tasmota service s for devs, its
// devices, trusting only s's account where the embedded broker stamps
// publishers. Config has checked the FullTopic and addresses, so an error
// here is a disagreement between config and the adapter.
func (d *daemon) tasmotaAdapter(s config.Service, devs []devices.Device, log *slog.Logger) (*tasmota.Adapter, func(ctx context.Context, sink reports) error, error) {
	publisher, stamp := d.trustedPublisher(s)
	a, err := tasmota.New(d.conn, tasmota.Options{
		Service:       s.Name,
		FullTopic:     s.FullTopic,
		Devices:       devs,
		Logger:        log.With("component", "tasmota", "service", s.Name),
		Publisher:     publisher,
		StampProperty: stamp,
	})
	if err != nil {
		return nil, nil, err
	}
	d.countUntrusted(s.Name, a.Untrusted)
	return a, func(ctx context.Context, sink reports) error { return a.Start(ctx, sink) }, nil
}

// tasmotaACL is the access entry of a tasmota service's account, which
// every Tasmota of the service logs in with: it may publish stat and
// tele under the service's FullTopic, never cmnd.
func tasmotaACL(s config.Service, account acl.Account) acl.Bridge {
	cmds, _ := tasmota.CommandFilters(s.FullTopic) // config checked it
	reps, _ := tasmota.ReportFilters(s.FullTopic)
	return acl.Bridge{Name: s.Name, Account: account, Commands: cmds, Topics: reps}
}

// tasmotaSimDevice makes sd, a device of tasmota service svc, the
// simulated Tasmota at its Topic, with as many relays as the devices at
// that Topic name: it reports whether sd is a new simulated device to
// append to out (false: the Topic's device in out grew, or the address
// does not parse). seen maps service and Topic to an index in out.
func tasmotaSimDevice(out *[]simulator.Device, seen map[string]int, svc config.Service, sd *simulator.Device) bool {
	addr, err := tasmota.ParseAddress(sd.Name)
	if err != nil {
		return false
	}
	sd.Protocol, sd.BaseTopic, sd.Name, sd.Relays = simulator.ProtocolTasmota, svc.FullTopic, addr.Topic, max(addr.Index, 1)
	key := svc.Name + "\x00tasmota\x00" + addr.Topic
	if i, ok := seen[key]; ok {
		(*out)[i].Relays = max((*out)[i].Relays, sd.Relays)
		return false
	}
	seen[key] = len(*out)
	return true
}
