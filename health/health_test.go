package health

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

func TestReadyzReportsEveryCheck(t *testing.T) {
	c := NewChecker()
	mqttErr := error(nil)
	c.Add("mqtt", func() error { return mqttErr })
	c.Add("store", func() error { return nil })
	mux := http.NewServeMux()
	c.Register(mux)

	get := func(path string) (int, Report) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		var r Report
		if path == "/readyz" {
			if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
				t.Fatalf("%s body %q: %v", path, rec.Body, err)
			}
		}
		return rec.Code, r
	}

	if code, r := get("/readyz"); code != 200 || r.Status != "ready" || r.Checks["mqtt"] != "ok" || r.Checks["store"] != "ok" {
		t.Errorf("all ok: %d %+v; want 200 ready with both checks ok", code, r)
	}
	mqttErr = errors.New("not connected to tcp://broker:1883")
	if code, r := get("/readyz"); code != 503 || r.Status != "not_ready" || r.Checks["mqtt"] != "not connected to tcp://broker:1883" || r.Checks["store"] != "ok" {
		t.Errorf("mqtt down: %d %+v; want 503 not_ready naming the mqtt error", code, r)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("/healthz while not ready: %d; want 200 (the process serves)", code)
	}
}

func TestReadyzShowsInfoWithoutChangingReadiness(t *testing.T) {
	c := NewChecker()
	var storeErr error
	c.Add("store", func() error { return storeErr })
	services := map[string]map[string]string{
		"z2m":   {"state": "open", "since": "2026-11-29T23:00:00Z"},
		"cloud": {"state": "closed", "since": "2026-11-29T22:00:00Z"},
	}
	c.AddInfo("services", func() any { return services })
	mux := http.NewServeMux()
	c.Register(mux)

	get := func() (int, map[string]any) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
			t.Fatalf("/readyz body %q: %v", rec.Body, err)
		}
		return rec.Code, body
	}
	wantInfo := map[string]any{"services": map[string]any{
		"z2m":   map[string]any{"state": "open", "since": "2026-11-29T23:00:00Z"},
		"cloud": map[string]any{"state": "closed", "since": "2026-11-29T22:00:00Z"},
	}}

	code, body := get()
	if code != 200 || body["status"] != "ready" {
		t.Errorf("open breaker, store ok: %d %v; want 200 ready (a down service is not unreadiness)", code, body["status"])
	}
	if !reflect.DeepEqual(body["info"], wantInfo) {
		t.Errorf("info = %v; want %v", body["info"], wantInfo)
	}
	if !reflect.DeepEqual(body["checks"], map[string]any{"store": "ok"}) {
		t.Errorf("checks = %v; want only store ok (info entries are not checks)", body["checks"])
	}

	storeErr = errors.New("bbolt: database not open")
	services["z2m"]["state"] = "half_open"
	code, body = get()
	if code != 503 || body["status"] != "not_ready" {
		t.Errorf("store down: %d %v; want 503 not_ready", code, body["status"])
	}
	if got := body["info"].(map[string]any)["services"].(map[string]any)["z2m"].(map[string]any)["state"]; got != "half_open" {
		t.Errorf("info read at each request: z2m state %v; want half_open", got)
	}
}

func TestReadyzOmitsInfoWhenNoneRegistered(t *testing.T) {
	c := NewChecker()
	mux := http.NewServeMux()
	c.Register(mux)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if got, want := strings.TrimSpace(rec.Body.String()), `{"status":"ready","checks":{}}`; got != want {
		t.Errorf("/readyz body %s; want %s (unchanged shape without info)", got, want)
	}
}

// A failing degraded check keeps Hearth ready: /readyz answers 200 with
// status "degraded", the check's text and its name in Degraded; a failing
// required check still makes it 503 not_ready, the degraded one listed
// beside it; once the degraded check passes the status is "ready" again.
func TestReadyzDegradedCheckAnswers200UntilItPasses(t *testing.T) {
	c := NewChecker()
	var mqttErr error
	quarantined := errors.New("the store was quarantined at 2026-12-02T03:15:00Z; hearthctl store ack")
	c.Add("mqtt", func() error { return mqttErr })
	c.AddDegraded("store_quarantine", func() error { return quarantined })
	mux := http.NewServeMux()
	c.Register(mux)
	get := func() (int, Report) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		var r Report
		if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
			t.Fatalf("/readyz body %q: %v", rec.Body, err)
		}
		return rec.Code, r
	}

	code, r := get()
	if code != http.StatusOK || r.Status != "degraded" || r.Checks["store_quarantine"] != quarantined.Error() ||
		!reflect.DeepEqual(r.Degraded, []string{"store_quarantine"}) || r.Checks["mqtt"] != "ok" {
		t.Errorf("degraded: %d %+v; want 200 degraded, the check's text, Degraded [store_quarantine]", code, r)
	}
	mqttErr = errors.New("not connected")
	if code, r := get(); code != http.StatusServiceUnavailable || r.Status != "not_ready" || !reflect.DeepEqual(r.Degraded, []string{"store_quarantine"}) {
		t.Errorf("degraded and mqtt down: %d %+v; want 503 not_ready, Degraded [store_quarantine]", code, r)
	}
	mqttErr, quarantined = nil, nil
	c.AddDegraded("store_quarantine", func() error { return nil })
	if code, r := get(); code != http.StatusOK || r.Status != "ready" || r.Degraded != nil || r.Checks["store_quarantine"] != "ok" {
		t.Errorf("after the degraded check passes: %d %+v; want 200 ready, no Degraded", code, r)
	}
	// Add replaces a degraded check with a required one of the same name.
	c.Add("store_quarantine", func() error { return errors.New("broken") })
	if code, r := get(); code != http.StatusServiceUnavailable || r.Degraded != nil {
		t.Errorf("replaced by a required check: %d %+v; want 503, no Degraded", code, r)
	}
}
