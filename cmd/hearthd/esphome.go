package main

import (
	"context"
	"log/slog"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/esphome"
)

// esphomeAdapter builds the adapter of esphome service s for devs, counting
// the messages its trust check drops, and the function that starts it.
func (d *daemon) esphomeAdapter(s config.Service, devs []devices.Device, log *slog.Logger) (*esphome.Adapter, func(ctx context.Context, sink reports) error) {
	publisher, stamp := d.trustedPublisher(s)
	a := esphome.New(d.conn, esphome.Options{
		Service:       s.Name,
		BaseTopic:     s.BaseTopic,
		Devices:       devs,
		Logger:        log.With("component", "esphome", "service", s.Name),
		Publisher:     publisher,
		StampProperty: stamp,
	})
	d.countUntrusted(s.Name, a.Untrusted)
	d.onLinkLost = append(d.onLinkLost, a.LinkLost)
	return a, func(ctx context.Context, sink reports) error { return a.Start(ctx, sink) }
}
