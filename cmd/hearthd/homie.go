package main

import (
	"context"
	"log/slog"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/homie"
)

// homieAdapter builds the adapter of homie service s for devs, counting
// the messages its trust check drops, and the function that starts it.
func (d *daemon) homieAdapter(s config.Service, devs []devices.Device, log *slog.Logger) (*homie.Adapter, func(ctx context.Context, sink reports) error) {
	publisher, stamp := d.trustedPublisher(s)
	a := homie.New(d.conn, homie.Options{
		Service:       s.Name,
		BaseTopic:     s.BaseTopic,
		Devices:       devs,
		Logger:        log.With("component", "homie", "service", s.Name),
		Publisher:     publisher,
		StampProperty: stamp,
	})
	d.countUntrusted(s.Name, a.Untrusted)
	return a, func(ctx context.Context, sink reports) error { return a.Start(ctx, sink) }
}
