package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/httpdev"
)

// httpDevAdapter builds the adapter of http service s for devs, and the
// function that starts it.
func (d *daemon) httpDevAdapter(s config.Service, devs []devices.Device, log *slog.Logger) (*httpdev.Adapter, func(ctx context.Context, sink reports) error, error) {
	a, err := httpdev.New(httpdev.Options{
		Service: s.Name,
		BaseURL: s.URL,
		Method:  s.Method,
		Headers: s.Headers,
		Timeout: s.Timeout,
		Devices: devs,
		Logger:  log.With("component", "httpdev", "service", s.Name),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("service %s: %w", s.Name, err)
	}
	return a, func(ctx context.Context, sink reports) error { return a.Start(ctx, sink) }, nil
}
