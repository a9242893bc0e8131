package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/api"
	"github.com/hearthd/hearth/store"
)

// storeQuarantine adapts a real store's quarantine record to
// api.StoreHealth, as hearthd does (without its announcements).
type storeQuarantine struct{ s *store.Store }

func (a storeQuarantine) StoreState() (api.StoreState, error) {
	q, found, err := a.s.Quarantine()
	if err != nil || !found {
		return api.StoreState{State: api.StoreOK}, err
	}
	aq := api.StoreQuarantine{At: q.At, File: q.File, Cause: q.Cause, Ended: q.Ended, AckedAt: q.AckedAt, AckedBy: q.AckedBy,
		Salvaged: api.StoreCounts(q.Salvaged), Skipped: api.StoreCounts(q.Skipped)}
	if !q.Acked() {
		return api.StoreState{State: api.StoreQuarantined, StoreQuarantine: &aq}, nil
	}
	return api.StoreState{State: api.StoreOK, LastQuarantine: &aq}, nil
}

func (a storeQuarantine) AckQuarantine(principal string) (api.StoreState, error) {
	if _, err := a.s.AckQuarantine(principal, t0); errors.Is(err, store.ErrNoQuarantine) {
		return api.StoreState{}, api.ErrNoQuarantine
	} else if err != nil {
		return api.StoreState{}, err
	}
	return a.StoreState()
}

// quarantinedStore is a real store quarantined the real way: a first
// open, then hearth.db truncated to zero beside its marker, then an open
// with Quarantine at t0.
func quarantinedStore(t *testing.T) *store.Store {
	t.Helper()
	dir := t.TempDir()
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, store.FileName), 0); err != nil {
		t.Fatal(err)
	}
	s, err = store.Open(dir, store.Options{Quarantine: true, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// storeAPI serves the store endpoints behind Authenticate with one
// principal, admin (token tk-admin), the only one MayAck allows.
func storeAPI(t *testing.T, s *store.Store) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	api.RegisterStore(mux, api.Store{Health: storeQuarantine{s}, MayAck: func(p string) error {
		if p != "admin" {
			return errors.New("principal " + p + " may not command every device")
		}
		return nil
	}})
	srv := httptest.NewServer(api.Authenticate(tokens{api.NewTokens(map[string]string{"tk-admin": "admin", "tk-kitchen": "kitchen"})}, mux))
	t.Cleanup(srv.Close)
	return srv
}

type tokens struct{ *api.Tokens }

func (tokens) Required() bool { return true }

// hearthctl store says a quarantine in words (file, cause, counts, what
// to do); store ack acknowledges it with an allowed principal's token and
// says who and when; a principal not allowed gets exit 1 and the
// server's refusal, and nothing changes.
func TestStoreShowsTheQuarantineAndAckAcknowledgesIt(t *testing.T) {
	s := quarantinedStore(t)
	srv := storeAPI(t, s)
	q, _, _ := s.Quarantine()

	code, out, errOut := hearthctl("-addr", srv.URL, "-token", "tk-kitchen", "store")
	for _, want := range []string{"store: QUARANTINED, not acknowledged", "file:     " + q.File, "is empty", "hearthctl store ack", "2026-11-29T19:00:00Z"} {
		if code != exitOK || !strings.Contains(out, want) {
			t.Errorf("store: exit %d, stdout %q, stderr %q; want 0 and %q", code, out, errOut, want)
		}
	}
	code, _, errOut = hearthctl("-addr", srv.URL, "-token", "tk-kitchen", "store", "ack")
	if code != exitError || !strings.Contains(errOut, "403") || !strings.Contains(errOut, "forbidden") {
		t.Errorf("store ack by kitchen: exit %d, stderr %q; want 1 and the 403", code, errOut)
	}
	if q, _, _ := s.Quarantine(); q.Acked() {
		t.Fatal("a refused ack acknowledged the quarantine")
	}
	code, out, errOut = hearthctl("-addr", srv.URL, "store", "ack", "-token", "tk-admin")
	if code != exitOK || !strings.Contains(out, "store: ok") || !strings.Contains(out, "acked:    2026-11-29T19:00:00Z by admin") {
		t.Errorf("store ack by admin: exit %d, stdout %q, stderr %q; want 0, ok, acked by admin", code, out, errOut)
	}
	code, out, _ = hearthctl("-addr", srv.URL, "-token", "tk-admin", "store", "-json")
	if code != exitOK || !strings.HasPrefix(out, `{"state":"ok","last_quarantine":{`) || !strings.Contains(out, `"acked_by":"admin"`) {
		t.Errorf("store -json: exit %d, stdout %q; want the API's JSON on one line", code, out)
	}
}

func TestStoreNeverQuarantinedSaysOkAndAckFails(t *testing.T) {
	s, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	srv := storeAPI(t, s)
	if code, out, _ := hearthctl("-addr", srv.URL, "-token", "tk-admin", "store"); code != exitOK || out != "store: ok, never quarantined\n" {
		t.Errorf("store: exit %d, stdout %q; want 0, never quarantined", code, out)
	}
	if code, _, errOut := hearthctl("-addr", srv.URL, "-token", "tk-admin", "store", "ack"); code != exitError || !strings.Contains(errOut, "no_quarantine") {
		t.Errorf("store ack: exit %d, stderr %q; want 1 and no_quarantine", code, errOut)
	}
	if code, _, _ := hearthctl("-addr", srv.URL, "store", "ack", "extra"); code != exitUsage {
		t.Errorf("store ack extra: exit %d; want %d", code, exitUsage)
	}
}
