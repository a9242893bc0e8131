package api

import (
	"context"
	"crypto/sha256"
	"net/http"
	"strings"
)

// Principals authenticates the bearer tokens of API requests (RFC 6750,
// "Authorization: Bearer <token>"). It must be safe for concurrent use;
// the daemon replaces its tokens at a reload.
type Principals interface {
	// Required reports whether the API needs a token (hearthd: unless
	// http.allow_anonymous): then every request under /api/ needs a
	// known token. When false the API is open, as it is with no
	// Principals at all.
	Required() bool
	// ByToken returns the name of the principal whose HTTP token is
	// token, and false for an unknown token.
	ByToken(token string) (principal string, ok bool)
}

// Realm is the realm Hearth names in WWW-Authenticate challenges.
const Realm = "hearth"

// Authenticate wraps next, the daemon's whole mux, and guards every path
// under /api/ (the API's routes, whoever registered them, such as
// Register, RegisterCommands and routes added later): when p is not nil
// and p.Required(), a request without an Authorization: Bearer header is
// answered 401 with WWW-Authenticate: Bearer realm="hearth", one with an
// unknown token 401 with error="invalid_token" in that header (RFC 6750
// §3.1); both bodies are {"error":"unauthorized","detail":…}, the detail
// saying which, and neither reaches next. Other paths
// (/healthz, /readyz, /metrics, and the status page's / and /ui/, see
// RegisterUI) pass untouched.
//
// Requests that pass carry their principal's name (or "" when the API is
// open) for the handlers of this package; the command endpoints refuse to
// serve a request that did not come through Authenticate, so that a mux
// wired without it fails closed.
func Authenticate(p Principals, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !guarded(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		var principal string
		var valid func() bool
		if p != nil && p.Required() {
			token, given := bearer(r.Header.Get("Authorization"))
			if !given {
				w.Header().Set("WWW-Authenticate", `Bearer realm="`+Realm+`"`)
				writeError(w, http.StatusUnauthorized, "unauthorized",
					"this API needs a principal's token: send Authorization: Bearer <http_token>")
				return
			}
			name, ok := p.ByToken(token)
			if !ok {
				w.Header().Set("WWW-Authenticate", `Bearer realm="`+Realm+`", error="invalid_token", error_description="unknown token"`)
				writeError(w, http.StatusUnauthorized, "unauthorized", "the bearer token is no principal's http_token")
				return
			}
			principal = name
			// A reload may take the token away: a request that lasts
			// (an event stream) asks again.
			valid = func() bool {
				if !p.Required() {
					return true
				}
				n, ok := p.ByToken(token)
				return ok && n == name
			}
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), authKey{}, authenticated{principal, valid})))
	})
}

// guarded reports whether path is the API's.
func guarded(path string) bool {
	return path == "/api" || strings.HasPrefix(path, "/api/")
}

// bearer returns the token of an Authorization header value of the Bearer
// scheme (the scheme's name is case-insensitive, RFC 9110 §11.1), and
// false when the header is missing or of another scheme.
func bearer(header string) (string, bool) {
	scheme, token, _ := strings.Cut(header, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(token), true
}

type authKey struct{}

// authenticated is what Authenticate leaves in a request's context.
type authenticated struct {
	principal string
	valid     func() bool // nil: nothing to ask again
}

// stillAuthenticated reports whether the token r was authenticated with
// still names its principal (the principals' tokens may have been
// reloaded since), true when the API needed none; false when r did not
// pass Authenticate.
func stillAuthenticated(r *http.Request) bool {
	a, ok := r.Context().Value(authKey{}).(authenticated)
	return ok && (a.valid == nil || a.valid())
}

// principalOf returns the principal Authenticate found for r ("" when the
// API is open), and false when r did not pass Authenticate.
func principalOf(r *http.Request) (string, bool) {
	a, ok := r.Context().Value(authKey{}).(authenticated)
	return a.principal, ok
}

// Tokens is a fixed set of principals' bearer tokens. It keeps only each
// token's SHA-256 digest and finds a token by looking its digest up in a
// map: the time a lookup takes depends on the digest, which an attacker
// cannot steer toward a secret token's bytes, so it tells nothing about
// how much of a guess was right, unlike comparing tokens byte by byte
// (crypto/subtle over every token would also do, but costs a comparison
// per principal and still needs care with lengths). A nil *Tokens knows no
// token.
type Tokens struct {
	byDigest map[[sha256.Size]byte]string
}

// NewTokens returns the set of tokens given as token → principal name;
// empty tokens are left out.
func NewTokens(principals map[string]string) *Tokens {
	t := &Tokens{byDigest: make(map[[sha256.Size]byte]string, len(principals))}
	for token, name := range principals {
		if token != "" {
			t.byDigest[sha256.Sum256([]byte(token))] = name
		}
	}
	return t
}

// ByToken returns the principal whose token is token.
func (t *Tokens) ByToken(token string) (string, bool) {
	if t == nil || token == "" {
		return "", false
	}
	name, ok := t.byDigest[sha256.Sum256([]byte(token))]
	return name, ok
}

// authenticatedAtAll reports whether r passed Authenticate.
func authenticatedAtAll(r *http.Request) bool {
	_, ok := r.Context().Value(authKey{}).(authenticated)
	return ok
}
