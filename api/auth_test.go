package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// tokens is the daemon's view of the principals in tests: a fixed set, or
// nil for none configured.
type tokens struct{ t *Tokens }

func (p tokens) Required() bool                      { return p.t != nil }
func (p tokens) ByToken(token string) (string, bool) { return p.t.ByToken(token) }

const tabletToken = "tablet-token-0123456789abcdef"

var twoPrincipals = tokens{NewTokens(map[string]string{
	tabletToken:                     "tablet",
	"home-assistant-token-fedcba98": "home_assistant",
})}

// serve sends a GET for path through Authenticate and reports what the
// wrapped handler saw: whether it ran, and the principal.
func serve(t *testing.T, p Principals, path, authorization string) (rec *httptest.ResponseRecorder, reached bool, principal string) {
	t.Helper()
	h := Authenticate(p, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached = true
		principal, _ = principalOf(r)
	}))
	req := httptest.NewRequest("GET", path, nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec, reached, principal
}

const (
	missingBody   = `{"error":"unauthorized","detail":"this API needs a principal's token: send Authorization: Bearer \u003chttp_token\u003e"}` + "\n"
	invalidBody   = `{"error":"unauthorized","detail":"the bearer token is no principal's http_token"}` + "\n"
	missingHeader = `Bearer realm="hearth"`
	invalidHeader = `Bearer realm="hearth", error="invalid_token", error_description="unknown token"`
)

// Every path under /api/ needs a known bearer token once principals are
// configured: without one it is 401 and the handler never runs.
func TestAuthenticateRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, path, authorization string
		wantBody, wantChallenge   string
	}{
		{"no header", "/api/v1/breakers", "", missingBody, missingHeader},
		{"no header, command", "/api/v1/devices/front_door/commands", "", missingBody, missingHeader},
		{"another scheme", "/api/v1/ops/x", "Basic dGFibGV0OnNlY3JldA==", missingBody, missingHeader},
		{"a token without scheme", "/api/v1/breakers", tabletToken, missingBody, missingHeader},
		{"empty token", "/api/v1/breakers", "Bearer ", invalidBody, invalidHeader},
		{"unknown token", "/api/v1/breakers", "Bearer nobody-has-this-token-0000", invalidBody, invalidHeader},
		{"a route added later", "/api/v1/audit", "Bearer nobody-has-this-token-0000", invalidBody, invalidHeader},
		{"/api itself", "/api", "", missingBody, missingHeader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec, reached, _ := serve(t, twoPrincipals, tc.path, tc.authorization)
			if reached {
				t.Error("the handler ran")
			}
			if rec.Code != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", rec.Code)
			}
			if got := rec.Header().Get("WWW-Authenticate"); got != tc.wantChallenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tc.wantChallenge)
			}
			if got := rec.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type %q", got)
			}
			if got := rec.Body.String(); got != tc.wantBody {
				t.Errorf("body %s, want %s", got, tc.wantBody)
			}
		})
	}
}

// A wrong token gets the same answer however close it is to a real one:
// nothing in the response says how much of a guess was right.
func TestAuthenticateWrongTokensLookAlike(t *testing.T) {
	guesses := []string{
		"x",
		tabletToken[:len(tabletToken)-1],       // a prefix
		tabletToken[:len(tabletToken)-1] + "g", // the last byte differs
		"u" + tabletToken[1:],                  // the first byte differs
		tabletToken + "0",                      // longer
		" " + tabletToken + "x",
	}
	for _, g := range guesses {
		rec, reached, _ := serve(t, twoPrincipals, "/api/v1/breakers", "Bearer "+g)
		if reached || rec.Code != http.StatusUnauthorized || rec.Body.String() != invalidBody ||
			rec.Header().Get("WWW-Authenticate") != invalidHeader || len(rec.Header()) != 2 {
			t.Errorf("guess %q: reached %v, status %d, headers %v, body %s", g, reached, rec.Code, rec.Header(), rec.Body)
		}
	}
}

// A known token passes with its principal's name; the scheme's name is
// case-insensitive.
func TestAuthenticatePasses(t *testing.T) {
	for _, authorization := range []string{"Bearer " + tabletToken, "bearer " + tabletToken, "BEARER  " + tabletToken} {
		rec, reached, principal := serve(t, twoPrincipals, "/api/v1/breakers", authorization)
		if !reached || principal != "tablet" || rec.Code != http.StatusOK {
			t.Errorf("%q: reached %v, principal %q, status %d", authorization, reached, principal, rec.Code)
		}
	}
	_, _, principal := serve(t, twoPrincipals, "/api/v1/breakers", "Bearer home-assistant-token-fedcba98")
	if principal != "home_assistant" {
		t.Errorf("principal %q, want home_assistant", principal)
	}
}

// Health, readiness and metrics stay open; with no principals configured
// the API is open too, and its requests have no principal.
func TestAuthenticateOpen(t *testing.T) {
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if rec, reached, _ := serve(t, twoPrincipals, path, ""); !reached || rec.Code != http.StatusOK {
			t.Errorf("%s: reached %v, status %d", path, reached, rec.Code)
		}
	}
	for _, p := range []Principals{nil, tokens{}} {
		rec, reached, principal := serve(t, p, "/api/v1/breakers", "Bearer "+tabletToken)
		if !reached || principal != "" || rec.Code != http.StatusOK {
			t.Errorf("%v: reached %v, principal %q, status %d", p, reached, principal, rec.Code)
		}
	}
}

// Tokens finds only exact tokens; a nil set and the empty token find
// nothing.
func TestTokens(t *testing.T) {
	set := NewTokens(map[string]string{tabletToken: "tablet", "": "nobody"})
	if name, ok := set.ByToken(tabletToken); !ok || name != "tablet" {
		t.Errorf("ByToken(tablet's) = %q, %v", name, ok)
	}
	for _, tok := range []string{"", tabletToken + " ", tabletToken[1:]} {
		if name, ok := set.ByToken(tok); ok {
			t.Errorf("ByToken(%q) = %q", tok, name)
		}
	}
	if _, ok := (*Tokens)(nil).ByToken(tabletToken); ok {
		t.Error("a nil set knows a token")
	}
	if len(set.byDigest) != 1 {
		t.Errorf("%d digests, want 1 (the empty token left out)", len(set.byDigest))
	}
}
