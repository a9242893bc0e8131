package health

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
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
