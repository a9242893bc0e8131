package api

import (
	"net/http"
	"strings"
)

// JSONErrors wraps mux so that the answers mux gives itself, for a path
// no route has (404) and for a method the path's routes do not take (405,
// with its Allow header), are apiError JSON like every other error of the
// API: {"error":"not_found","detail":…} and
// {"error":"method_not_allowed","detail":…}. Its other answers (a route's
// own, its redirects to a cleaned path) pass untouched. hearthd wraps its
// whole mux with it, inside Authenticate.
func JSONErrors(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern != "" {
			mux.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(&muxErrorWriter{ResponseWriter: w, r: r}, r)
	})
}

// muxErrorWriter turns the mux's own 404 and 405 (http.Error's text)
// into apiError JSON, and drops the text that follows.
type muxErrorWriter struct {
	http.ResponseWriter
	r       *http.Request
	swallow bool
}

func (m *muxErrorWriter) WriteHeader(code int) {
	switch code {
	case http.StatusNotFound:
		m.swallow = true
		writeError(m.ResponseWriter, code, "not_found", "no route for "+m.r.Method+" "+m.r.URL.Path)
	case http.StatusMethodNotAllowed:
		m.swallow = true
		allow := m.Header().Get("Allow")
		writeError(m.ResponseWriter, code, "method_not_allowed",
			m.r.URL.Path+" does not take "+m.r.Method+"; it takes "+strings.ReplaceAll(allow, ",", " or"))
	default:
		m.ResponseWriter.WriteHeader(code)
	}
}

func (m *muxErrorWriter) Write(b []byte) (int, error) {
	if m.swallow {
		return len(b), nil
	}
	return m.ResponseWriter.Write(b)
}
