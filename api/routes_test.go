package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// The mux's own 404 and 405 are the API's JSON errors, the 405 with its
// Allow header; a route's own answers, its 404s included, pass as they
// are.
func TestMuxErrorsAreJSON(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/things", func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "things")
	})
	mux.HandleFunc("GET /api/v1/things/{id}", func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusNotFound, "unknown_thing", "")
	})
	h := JSONErrors(mux)
	for _, c := range []struct {
		method, path string
		status       int
		allow, body  string
	}{
		{"GET", "/nowhere", 404, "", `{"error":"not_found","detail":"no route for GET /nowhere"}` + "\n"},
		{"GET", "/", 404, "", `{"error":"not_found","detail":"no route for GET /"}` + "\n"},
		{"DELETE", "/api/v1/things", 405, "GET, HEAD", `{"error":"method_not_allowed","detail":"/api/v1/things does not take DELETE; it takes GET or HEAD"}` + "\n"},
		{"GET", "/api/v1/things", 200, "", "things"},
		{"GET", "/api/v1/things/x", 404, "", `{"error":"unknown_thing"}` + "\n"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(c.method, c.path, nil))
		if rec.Code != c.status || rec.Body.String() != c.body || rec.Header().Get("Allow") != c.allow {
			t.Errorf("%s %s: %d Allow %q %q; want %d Allow %q %q", c.method, c.path, rec.Code, rec.Header().Get("Allow"), rec.Body, c.status, c.allow, c.body)
		}
		if c.status != 200 && rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: Content-Type %q", c.method, c.path, rec.Header().Get("Content-Type"))
		}
	}
}
