package main

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/netutil"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/api"
	"github.com/hearthd/hearth/config"
)

// How the HTTP server is composed (start): one mux holds /healthz,
// /readyz, /metrics and every API route (api.Register, api.RegisterDevices,
// api.RegisterAudit, api.RegisterDeadLetters, api.RegisterCommands,
// api.RegisterStore, and any route added later under /api/);
// api.JSONErrors wraps it, so that the mux's own 404 and 405 are the
// API's JSON errors, and api.Authenticate wraps that, so every path under
// /api/ needs a principal's bearer token unless http.allow_anonymous,
// whoever registered it, while health, metrics and the status page
// (api.RegisterUI: GET / and /ui/, which hold no data and read everything
// from /api/v1 with the user's token) stay open.

// The HTTP server's limits, which bound what a client costs hearthd
// whether or not it ever sends a token: a slow or silent client is
// closed, and at most httpMaxConns connections are served at once (the
// next waits in the listen backlog until one closes).
const (
	// httpReadHeaderTimeout bounds reading a request's headers.
	httpReadHeaderTimeout = 10 * time.Second
	// httpReadTimeout bounds reading a whole request, body included: a
	// body sent a byte at a time is cut off then. Bodies are at most
	// api's 64 KiB, which a LAN sends in milliseconds.
	httpReadTimeout = 30 * time.Second
	// httpWriteTimeout bounds a response from the end of its request's
	// headers; GET /api/v1/ops/{op_id}?wait= moves its own deadline out by
	// its wait (api.MaxWait at most), as does POST .../commands?wait=, so a
	// long poll still answers; an event stream sets a deadline per write.
	httpWriteTimeout = 30 * time.Second
	// httpIdleTimeout closes a keep-alive connection idle this long.
	httpIdleTimeout = 2 * time.Minute
	// httpMaxHeaderBytes bounds a request's header block; a larger one is
	// answered 431.
	httpMaxHeaderBytes = 16 << 10
	// httpMaxConns is how many connections the server holds at once.
	httpMaxConns = 128
	// httpMaxConnsPerClient is how many of them one client address may
	// hold: one host (a stranger's script holding idle keep-alive
	// connections, a token holder's long polls) cannot take every
	// connection, /healthz's included. A browser opens about 6 per host;
	// a reverse proxy on the same host shares one address with every
	// client behind it.
	httpMaxConnsPerClient = 32
)

// httpLimits are the HTTP server's limits; a zero field takes the
// constant above. Tests shorten them.
type httpLimits struct {
	readHeader, read, write, idle time.Duration
	maxConns, maxConnsPerClient   int
}

func (l httpLimits) or() httpLimits {
	pick := func(v, d time.Duration) time.Duration {
		if v > 0 {
			return v
		}
		return d
	}
	if l.maxConns <= 0 {
		l.maxConns = httpMaxConns
	}
	if l.maxConnsPerClient <= 0 {
		l.maxConnsPerClient = httpMaxConnsPerClient
	}
	return httpLimits{
		readHeader: pick(l.readHeader, httpReadHeaderTimeout),
		read:       pick(l.read, httpReadTimeout),
		write:      pick(l.write, httpWriteTimeout),
		idle:       pick(l.idle, httpIdleTimeout),
		maxConns:   l.maxConns,
		// one client's share of maxConns
		maxConnsPerClient: l.maxConnsPerClient,
	}
}

// newHTTPServer returns hearthd's HTTP server for handler with the limits
// l (zero fields: the defaults), and ln capped at l's connection count.
func newHTTPServer(handler http.Handler, ln net.Listener, l httpLimits) (*http.Server, net.Listener) {
	l = l.or()
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: l.readHeader,
		ReadTimeout:       l.read,
		WriteTimeout:      l.write,
		IdleTimeout:       l.idle,
		MaxHeaderBytes:    httpMaxHeaderBytes,
	}, netutil.LimitListener(&perClientListener{Listener: ln, max: l.maxConnsPerClient, open: map[string]int{}}, l.maxConns)
}

// httpPrincipals is the API's view of the principals' HTTP tokens, which a
// reload replaces whole (setHTTPPrincipals). A nil set means no
// principals are configured: the API is open.
type httpPrincipals struct {
	tokens atomic.Pointer[api.Tokens]
}

// Required reports whether the API needs a bearer token: unless
// http.allow_anonymous.
func (p *httpPrincipals) Required() bool { return p.tokens.Load() != nil }

// ByToken returns the principal whose http_token is token.
func (p *httpPrincipals) ByToken(token string) (string, bool) { return p.tokens.Load().ByToken(token) }

// setHTTPPrincipals makes the HTTP API authenticate cfg's principals from
// the next request on: each by its http_token (the generated principal's
// included), and nobody else; with http.allow_anonymous the API is open. start calls it, and registers it
// with the reload of principals (onReload).
func (d *daemon) setHTTPPrincipals(cfg *config.Config) {
	if cfg.HTTP.AllowAnonymous {
		d.principals.tokens.Store(nil)
		return
	}
	byToken := make(map[string]string, len(cfg.Principals))
	for _, p := range cfg.Principals {
		if p.HTTPToken != "" {
			byToken[p.HTTPToken] = p.Name
		}
	}
	d.principals.tokens.Store(api.NewTokens(byToken))
}

// commandAPI is what the command endpoints use: the dispatcher, the store
// and the waiter its results wake; waits and the API's own rejections
// follow clock.
func (d *daemon) commandAPI(clock clockwork.Clock) api.Commands {
	return api.Commands{
		Commander: d.disp,
		Ops:       d.store,
		Waiter:    &d.results,
		Clock:     clock,
		Logger:    d.log.With("component", "api"),
	}
}

// perClientListener accepts at most max open connections from one client
// address (the remote IP); a connection beyond it is closed at once, so
// it holds none of the server's connections while it waits.
type perClientListener struct {
	net.Listener
	max  int
	mu   sync.Mutex
	open map[string]int
}

func (l *perClientListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		host, _, err := net.SplitHostPort(c.RemoteAddr().String())
		if err != nil {
			host = c.RemoteAddr().String()
		}
		l.mu.Lock()
		if l.open[host] >= l.max {
			l.mu.Unlock()
			c.Close()
			continue
		}
		l.open[host]++
		l.mu.Unlock()
		return &clientConn{Conn: c, release: func() { l.release(host) }}, nil
	}
}

func (l *perClientListener) release(host string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[host]--; l.open[host] <= 0 {
		delete(l.open, host)
	}
}

// clientConn releases its client's count once, at its first Close.
type clientConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *clientConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
