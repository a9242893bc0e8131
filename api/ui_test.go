package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// uiServer is a mux with the status page and the breakers endpoint behind
// Authenticate with twoPrincipals, as hearthd composes them.
func uiServer(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	Register(mux, breakers(nil))
	RegisterUI(mux)
	srv := httptest.NewServer(Authenticate(twoPrincipals, mux))
	t.Cleanup(srv.Close)
	return srv
}

func uiGet(t *testing.T, srv *httptest.Server, method, path string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	client := *srv.Client()
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// The page and its assets are served without a token, each with its
// type, the strict CSP and nosniff, and the page names only its own
// assets; the API next to it still needs the token.
func TestStatusPageServedWithoutTokenAPIStillClosed(t *testing.T) {
	srv := uiServer(t)
	for _, tc := range []struct{ path, contentType, contains string }{
		{"/", "text/html; charset=utf-8", `<script src="/ui/app.js" defer></script>`},
		{"/ui/app.js", "text/javascript; charset=utf-8", "class SSEParser"},
		{"/ui/style.css", "text/css; charset=utf-8", "@media (max-width: 640px)"},
		{"/ui/index.html", "text/html; charset=utf-8", `<link rel="stylesheet" href="/ui/style.css">`},
	} {
		resp, body := uiGet(t, srv, "GET", tc.path)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %d %s; want 200", tc.path, resp.StatusCode, body)
			continue
		}
		if got := resp.Header.Get("Content-Type"); got != tc.contentType {
			t.Errorf("GET %s: Content-Type %q; want %q", tc.path, got, tc.contentType)
		}
		if got := resp.Header.Get("Content-Security-Policy"); got != UIContentSecurityPolicy {
			t.Errorf("GET %s: Content-Security-Policy %q; want %q", tc.path, got, UIContentSecurityPolicy)
		}
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("GET %s: X-Content-Type-Options %q; want nosniff", tc.path, got)
		}
		if !strings.Contains(body, tc.contains) {
			t.Errorf("GET %s: the body has no %q", tc.path, tc.contains)
		}
	}
	if !strings.HasPrefix(UIContentSecurityPolicy, "default-src 'self'; ") || strings.Contains(UIContentSecurityPolicy, "unsafe") {
		t.Errorf("the policy %q is not strict", UIContentSecurityPolicy)
	}
	// No asset from elsewhere: every src and href of the page is /ui/.
	_, page := uiGet(t, srv, "GET", "/")
	for _, attr := range []string{`src="`, `href="`} {
		for rest := page; ; {
			i := strings.Index(rest, attr)
			if i < 0 {
				break
			}
			rest = rest[i+len(attr):]
			if !strings.HasPrefix(rest, "/ui/") {
				t.Errorf("the page loads %s%.40s, not from /ui/", attr, rest)
			}
		}
	}
	if resp, body := uiGet(t, srv, "GET", "/api/v1/breakers"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/breakers without a token: %d %s; want 401", resp.StatusCode, body)
	}
	if resp, body := uiGet(t, srv, "HEAD", "/"); resp.StatusCode != http.StatusOK || body != "" {
		t.Errorf("HEAD /: %d %q; want 200 and no body", resp.StatusCode, body)
	}
}

// Only the page's own files are served: another path under /ui/, or /ui/
// itself (no listing), is 404 in the API's error shape with the page's
// headers still on; a path that is not clean is redirected to its clean
// form by the mux before any file is read.
func TestStatusPageServesOnlyItsFiles(t *testing.T) {
	srv := uiServer(t)
	for _, path := range []string{"/ui/", "/ui/nothing.js", "/ui/app.js/", "/ui/ui.go", "/ui/%2e%2e/ui.go", "/ui/.%2fapp.js"} {
		resp, body := uiGet(t, srv, "GET", path)
		if resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(body, `{"error":"not_found",`) {
			t.Errorf("GET %s: %d %s; want 404 not_found", path, resp.StatusCode, body)
		}
		if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no nosniff on the 404", path)
		}
	}
	for path, clean := range map[string]string{"/ui/../ui.go": "/ui.go", "/ui//app.js": "/ui/app.js", "/ui/./app.js": "/ui/app.js"} {
		resp, body := uiGet(t, srv, "GET", path)
		if resp.StatusCode != http.StatusTemporaryRedirect || resp.Header.Get("Location") != clean {
			t.Errorf("GET %s: %d (Location %q) %.60s; want 307 to %s", path, resp.StatusCode, resp.Header.Get("Location"), body, clean)
		}
	}
}

// Any file name under /ui/ is served only if it is one of the page's
// files, and answered 404 not_found otherwise; nothing panics.
func FuzzStatusPagePath(f *testing.F) {
	for _, seed := range []string{"app.js", "style.css", "index.html", "", ".", "..", "../ui.go", "ui/app.js", "/app.js", "app.js/", "./app.js", "a\x00b", "%2e%2e"} {
		f.Add(seed)
	}
	files := map[string]bool{"index.html": true, "app.js": true, "style.css": true}
	f.Fuzz(func(t *testing.T, name string) {
		r := httptest.NewRequest("GET", "/ui/x", nil)
		r.URL.Path = "/ui/" + name
		rec := httptest.NewRecorder()
		serveUIFile(rec, r, name)
		switch {
		case files[name]:
			if rec.Code != http.StatusOK {
				t.Errorf("%q: %d; want 200", name, rec.Code)
			}
		case rec.Code != http.StatusNotFound || !strings.HasPrefix(rec.Body.String(), `{"error":"not_found",`):
			t.Errorf("%q: %d %.80s; want 404 not_found", name, rec.Code, rec.Body.String())
		}
		if rec.Header().Get("Content-Security-Policy") != UIContentSecurityPolicy {
			t.Errorf("%q: no Content-Security-Policy", name)
		}
	})
}
