// Package testbroker starts the embedded MQTT broker the protocol
// adapters' tests talk to: mochi-mqtt on 127.0.0.1, port 0, every client
// allowed, closed when the test ends. Tests only: it imports nothing of
// Hearth's, and no package but tests imports it.
package testbroker

import (
	"log/slog"
	"net"
	"testing"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/mochi-mqtt/server/v2/packets"
)

// listener is the one listener's id.
const listener = "t"

// Start serves a broker on a free port of 127.0.0.1 and returns it and
// its address, host:port. It is closed (Close) when t ends.
func Start(t testing.TB) (*mochi.Server, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := mochi.New(&mochi.Options{Logger: slog.New(slog.DiscardHandler)})
	if err := srv.AddHook(new(auth.AllowHook), nil); err != nil {
		t.Fatal(err)
	}
	if err := srv.AddListener(listeners.NewNet(listener, ln)); err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Close(srv) })
	return srv, ln.Addr().String()
}

// Close closes srv. mochi v2.7.9's Server.Close can deadlock with clients
// leaving (mochi-mqtt/server#488): the listener and the clients are closed
// first, each client told the server is shutting down.
func Close(srv *mochi.Server) {
	if l, ok := srv.Listeners.Get(listener); ok {
		l.Close(func(string) {})
	}
	for _, cl := range srv.Clients.GetAll() {
		_ = srv.DisconnectClient(cl, packets.ErrServerShuttingDown)
	}
	_ = srv.Close()
}
