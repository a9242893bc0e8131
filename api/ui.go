package api

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// ui holds the status page: index.html, app.js and style.css, served as
// they are (no build step, no external assets: the page works on a hub
// with no internet).
//
//go:embed ui
var ui embed.FS

// uiFiles is ui without its top folder: "index.html", "app.js", ….
var uiFiles, _ = fs.Sub(ui, "ui")

// UIContentSecurityPolicy is the Content-Security-Policy of the status
// page and its assets (W3C CSP Level 3): everything from hearthd itself,
// no inline script or style, no plugins, no framing, forms and <base>
// only to hearthd. The page's script fills the DOM with textContent
// only, so data from devices cannot become markup; the policy is the
// second wall should that ever slip.
const UIContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// RegisterUI adds the operator status page to mux: GET / (exactly "/",
// the page, index.html) and GET /ui/<file> (its script and style sheet).
// They hold no data, so Authenticate lets them through without a token
// (it guards /api/ only); the page reads everything it shows from
// /api/v1 with the bearer token its user gives it. Every answer carries
// UIContentSecurityPolicy, X-Content-Type-Options: nosniff,
// Referrer-Policy: no-referrer and Cache-Control: no-cache (a browser
// asks again after an upgrade of hearthd). A file that is not the page's
// (or a folder, /ui/ itself) is 404 with {"error":"not_found"}.
func RegisterUI(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		serveUIFile(w, r, "index.html")
	})
	mux.HandleFunc("GET /ui/", func(w http.ResponseWriter, r *http.Request) {
		serveUIFile(w, r, strings.TrimPrefix(r.URL.Path, "/ui/"))
	})
}

// serveUIFile answers with the page's file name, or 404.
func serveUIFile(w http.ResponseWriter, r *http.Request, name string) {
	h := w.Header()
	h.Set("Content-Security-Policy", UIContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
	if name == "" || path.Clean(name) != name || !fs.ValidPath(name) {
		writeError(w, http.StatusNotFound, "not_found", "no such file of the status page: "+r.URL.Path)
		return
	}
	b, err := fs.ReadFile(uiFiles, name) // a folder is an error too
	if err != nil {
		writeError(w, http.StatusNotFound, "not_found", "no such file of the status page: "+r.URL.Path)
		return
	}
	// ServeContent sets Content-Type from the name's extension
	// (text/html, text/javascript, text/css) and answers HEAD.
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(b))
}
