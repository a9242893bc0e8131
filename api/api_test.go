package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hearthd/hearth/dispatcher"
)

// breakers is a fixed list; the daemon's end-to-end tests read the
// endpoint of a real dispatcher.
type breakers []dispatcher.BreakerStatus

func (b breakers) Breakers() []dispatcher.BreakerStatus { return b }

func get(t *testing.T, b Breakers) *httptest.ResponseRecorder {
	t.Helper()
	mux := http.NewServeMux()
	Register(mux, b)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/breakers", nil))
	return rec
}

// The shape of GET /api/v1/breakers: zero times left out.
func TestBreakers(t *testing.T) {
	at := time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)
	rec := get(t, breakers{
		{Service: "zigbee", State: "closed", Bridge: "online"},
		{Service: "cloud", State: "open", Since: at, Until: at.Add(30 * time.Second), Trips: 1, Bridge: "unknown", Watched: true},
	})
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, content type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	want := `{"breakers":[` +
		`{"service":"zigbee","state":"closed","offline":false,"bridge":"online","trips":0,"watched":false},` +
		`{"service":"cloud","state":"open","since":"2026-11-29T19:00:00Z","until":"2026-11-29T19:00:30Z","offline":false,"bridge":"unknown","trips":1,"watched":true}]}` + "\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("body\n%s\nwant\n%s", got, want)
	}
}

// No breakers is an empty list, not null.
func TestNoBreakers(t *testing.T) {
	if got := get(t, breakers(nil)).Body.String(); got != "{\"breakers\":[]}\n" {
		t.Errorf("body %q, want {\"breakers\":[]}", got)
	}
}
