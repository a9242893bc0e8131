package main

import (
	"sync/atomic"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/api"
	"github.com/hearthd/hearth/config"
)

// How the HTTP server is composed (start): one mux holds /healthz,
// /readyz, /metrics and every API route (api.Register, api.RegisterAudit,
// api.RegisterDeadLetters, api.RegisterCommands, and any route added later
// under /api/), and
// api.Authenticate wraps the whole mux, so every path under /api/ needs a
// principal's bearer token unless http.allow_anonymous, whoever
// registered it, while health and metrics stay open.

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
