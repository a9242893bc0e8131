package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// storeHealth is a quarantine in memory; the daemon's end-to-end tests
// use the real store.
type storeHealth struct {
	mu          sync.Mutex
	q           *StoreQuarantine // nil: never quarantined
	acks        int
	quarantined bool
}

func (s *storeHealth) StoreState() (StoreState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stateLocked(), nil
}

func (s *storeHealth) stateLocked() StoreState {
	switch {
	case s.q == nil:
		return StoreState{State: StoreOK}
	case s.q.AckedAt.IsZero():
		q := *s.q
		return StoreState{State: StoreQuarantined, StoreQuarantine: &q}
	}
	q := *s.q
	return StoreState{State: StoreOK, LastQuarantine: &q}
}

func (s *storeHealth) AckQuarantine(principal string) (StoreState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.q == nil {
		return StoreState{}, fmt.Errorf("ack: %w", ErrNoQuarantine)
	}
	if s.q.AckedAt.IsZero() {
		s.acks++
		s.q.AckedAt, s.q.AckedBy = time.Date(2026, 12, 2, 4, 0, 0, 0, time.UTC), principal
	}
	return s.stateLocked(), nil
}

// storeServer serves RegisterStore behind Authenticate with one token per
// principal ("tk-<name>").
func storeServer(t *testing.T, h StoreHealth, mayAck func(string) error, names ...string) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	RegisterStore(mux, Store{Health: h, MayAck: mayAck})
	tokens := map[string]string{}
	for _, n := range names {
		tokens["tk-"+n] = n
	}
	srv := httptest.NewServer(Authenticate(fixedPrincipals{NewTokens(tokens)}, mux))
	t.Cleanup(srv.Close)
	return srv
}

type fixedPrincipals struct{ *Tokens }

func (fixedPrincipals) Required() bool { return true }

func do(t *testing.T, srv *httptest.Server, method, path, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// The shapes of GET /api/v1/store and POST /api/v1/store/ack: the
// quarantine inline while unacknowledged, under last_quarantine with who
// and when once acknowledged; a second ack keeps the first.
func TestStoreStateShowsTheQuarantineUntilAnOperatorAcksIt(t *testing.T) {
	at := time.Date(2026, 12, 2, 3, 15, 0, 0, time.UTC)
	h := &storeHealth{q: &StoreQuarantine{At: at, File: "/var/lib/hearth/hearth.db.corrupt-20261202T031500Z",
		Cause: "zero length", Salvaged: StoreCounts{Ops: 3}, Ended: 1}}
	srv := storeServer(t, h, func(p string) error {
		if p != "admin" {
			return errors.New("principal " + p + " may not command every device")
		}
		return nil
	}, "admin", "kitchen")

	code, body := do(t, srv, "GET", "/api/v1/store", "tk-kitchen")
	want := `{"state":"quarantined","at":"2026-12-02T03:15:00Z","file":"/var/lib/hearth/hearth.db.corrupt-20261202T031500Z","cause":"zero length",` +
		`"salvaged":{"ops":3,"audit":0,"dead_letters":0,"states":0},"skipped":{"ops":0,"audit":0,"dead_letters":0,"states":0},"ended":1}` + "\n"
	if code != http.StatusOK || body != want {
		t.Errorf("GET while quarantined: %d %s; want 200 %s", code, body, want)
	}
	if code, body := do(t, srv, "POST", "/api/v1/store/ack", "tk-kitchen"); code != http.StatusForbidden || !strings.Contains(body, `"forbidden"`) || h.acks != 0 {
		t.Errorf("ack by a principal not allowed every device: %d %s, %d acks; want 403 forbidden, none", code, body, h.acks)
	}
	if code, body := do(t, srv, "POST", "/api/v1/store/ack", ""); code != http.StatusUnauthorized || h.acks != 0 {
		t.Errorf("ack without a token: %d %s; want 401, no ack", code, body)
	}
	code, body = do(t, srv, "POST", "/api/v1/store/ack", "tk-admin")
	want = `{"state":"ok","last_quarantine":{"at":"2026-12-02T03:15:00Z","file":"/var/lib/hearth/hearth.db.corrupt-20261202T031500Z","cause":"zero length",` +
		`"salvaged":{"ops":3,"audit":0,"dead_letters":0,"states":0},"skipped":{"ops":0,"audit":0,"dead_letters":0,"states":0},"ended":1,` +
		`"acked_at":"2026-12-02T04:00:00Z","acked_by":"admin"}}` + "\n"
	if code != http.StatusOK || body != want {
		t.Errorf("ack: %d %s; want 200 %s", code, body, want)
	}
	if code, again := do(t, srv, "POST", "/api/v1/store/ack", "tk-admin"); code != http.StatusOK || again != want || h.acks != 1 {
		t.Errorf("ack again: %d %s, %d acks; want 200, the first ack kept", code, again, h.acks)
	}
	if code, got := do(t, srv, "GET", "/api/v1/store", "tk-kitchen"); code != http.StatusOK || got != want {
		t.Errorf("GET after the ack: %d %s; want %s", code, got, want)
	}
}

func TestStoreAckWithoutAQuarantineIsConflict(t *testing.T) {
	srv := storeServer(t, &storeHealth{}, func(string) error { return nil }, "admin")
	if code, body := do(t, srv, "GET", "/api/v1/store", "tk-admin"); code != http.StatusOK || body != `{"state":"ok"}`+"\n" {
		t.Errorf("GET never quarantined: %d %s; want 200 {\"state\":\"ok\"}", code, body)
	}
	if code, body := do(t, srv, "POST", "/api/v1/store/ack", "tk-admin"); code != http.StatusConflict || !strings.Contains(body, `"no_quarantine"`) {
		t.Errorf("ack never quarantined: %d %s; want 409 no_quarantine", code, body)
	}
}

// Closed by default: without MayAck nobody may acknowledge, and without
// Authenticate nothing is served.
func TestStoreAckIsClosedByDefault(t *testing.T) {
	h := &storeHealth{q: &StoreQuarantine{At: time.Now(), Cause: "x"}}
	srv := storeServer(t, h, nil, "admin")
	if code, _ := do(t, srv, "POST", "/api/v1/store/ack", "tk-admin"); code != http.StatusForbidden || h.acks != 0 {
		t.Errorf("ack with no MayAck: %d; want 403, no ack", code)
	}
	mux := http.NewServeMux()
	RegisterStore(mux, Store{Health: h, MayAck: func(string) error { return nil }})
	bare := httptest.NewServer(mux)
	defer bare.Close()
	if code, _ := do(t, bare, "POST", "/api/v1/store/ack", ""); code != http.StatusInternalServerError || h.acks != 0 {
		t.Errorf("ack served without Authenticate: %d; want 500, no ack", code)
	}
}
