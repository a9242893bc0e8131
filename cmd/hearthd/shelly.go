package main

import (
	"context"
	"log/slog"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/shelly"
)

// shellyAdapter builds the adapter of shelly service s for devs, counting
// the messages its trust check drops, and the function that starts it.
func (d *daemon) shellyAdapter(s config.Service, devs []devices.Device, log *slog.Logger) (*shelly.Adapter, func(ctx context.Context, sink reports) error) {
	publisher, stamp := d.trustedPublisher(s)
	a := shelly.New(d.conn, shelly.Options{
		Service:       s.Name,
		BaseTopic:     s.BaseTopic,
		Devices:       devs,
		Logger:        log.With("component", "shelly", "service", s.Name),
		Publisher:     publisher,
		StampProperty: stamp,
		ReadTimeout:   s.ReadTimeout,
	})
	d.countUntrusted(s.Name, a.Untrusted)
	return a, func(ctx context.Context, sink reports) error { return a.Start(ctx, sink) }
}
