// Package broker runs Hearth's embedded MQTT broker (mochi-mqtt), so that a
// hub needs no separate Mosquitto: it owns the listener and the broker's
// limits. It never interprets topics or payloads; Hearth itself connects to
// it as an ordinary MQTT client, exactly as it would to an external broker.
//
// For now every client may connect and use every topic; authentication,
// ACLs and the accept-rate guard come with later work.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"

	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// DefaultMaxPacketSize is the largest MQTT packet the embedded broker
// accepts, 1 MiB: well above Hearth's 64 KiB command limit, so that an
// oversized command still reaches Hearth and is rejected with a result
// instead of costing the sender its connection.
const DefaultMaxPacketSize = 1 << 20

// Options configures the embedded broker. Zero values take the documented
// defaults.
type Options struct {
	// Listen is the TCP address to listen on, host:port; port 0 picks a
	// free port (see Broker.Addr). Required.
	Listen string
	// MaxPacketSize bounds one MQTT packet in bytes; 0 means
	// DefaultMaxPacketSize.
	MaxPacketSize uint32
	// Logger receives the broker's own warnings and errors; its
	// informational lines (every connect and disconnect) are left out. nil
	// discards them.
	Logger *slog.Logger
}

// Broker is a running embedded broker.
type Broker struct {
	srv  *mqtt.Server
	addr string
}

// Start listens on opts.Listen and serves MQTT 3.1, 3.1.1 and 5 clients
// until Close. It fails if the address cannot be listened on, with an error
// naming it.
func Start(opts Options) (*Broker, error) {
	if opts.Listen == "" {
		return nil, errors.New("broker: no listen address")
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("embedded broker: listen on %s: %w", opts.Listen, err)
	}
	caps := mqtt.NewDefaultServerCapabilities()
	caps.MaximumPacketSize = opts.MaxPacketSize
	if caps.MaximumPacketSize == 0 {
		caps.MaximumPacketSize = DefaultMaxPacketSize
	}
	logger := slog.New(slog.DiscardHandler)
	if opts.Logger != nil {
		logger = slog.New(warnAndAbove{opts.Logger.Handler()})
	}
	srv := mqtt.New(&mqtt.Options{
		Capabilities: caps,
		Logger:       logger,
	})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		ln.Close()
		return nil, fmt.Errorf("embedded broker: %w", err)
	}
	if err := srv.AddListener(listeners.NewNet(listenerID, ln)); err != nil {
		ln.Close()
		return nil, fmt.Errorf("embedded broker: %w", err)
	}
	if err := srv.Serve(); err != nil {
		srv.Close()
		return nil, fmt.Errorf("embedded broker: %w", err)
	}
	return &Broker{srv: srv, addr: ln.Addr().String()}, nil
}

// Addr returns the address the broker listens on, host:port, with the port
// chosen when Options.Listen asked for port 0.
func (b *Broker) Addr() string { return b.addr }

// URL returns the broker's address as an MQTT client URL, tcp://host:port.
func (b *Broker) URL() string { return "tcp://" + b.addr }

// Close stops listening, disconnects every client (sending their wills) and
// stops the broker.
//
// It closes the listener and the clients itself before the server: mochi
// v2.7.9's own Close takes its clients' read lock twice and can deadlock
// when a client disconnects at that moment (mochi-mqtt/server#488).
func (b *Broker) Close() error {
	if l, ok := b.srv.Listeners.Get(listenerID); ok {
		l.Close(func(string) {})
	}
	for _, cl := range b.srv.Clients.GetAll() {
		b.srv.DisconnectClient(cl, packets.ErrServerShuttingDown)
	}
	return b.srv.Close()
}

// listenerID names the broker's one TCP listener.
const listenerID = "tcp"

// warnAndAbove passes on only warnings and errors, less the read errors of
// connections that the broker itself closed while stopping.
type warnAndAbove struct{ slog.Handler }

func (h warnAndAbove) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}

func (h warnAndAbove) Handle(ctx context.Context, r slog.Record) error {
	closed := false
	r.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok && errors.Is(err, net.ErrClosed) {
			closed = true
			return false
		}
		return true
	})
	if closed {
		return nil
	}
	return h.Handler.Handle(ctx, r)
}

func (h warnAndAbove) WithAttrs(attrs []slog.Attr) slog.Handler {
	return warnAndAbove{h.Handler.WithAttrs(attrs)}
}

func (h warnAndAbove) WithGroup(name string) slog.Handler {
	return warnAndAbove{h.Handler.WithGroup(name)}
}
