package main

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/hearthd/hearth/api"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/store"
)

// The store is the dispatcher's audit log, and the adapter the API's
// source.
var (
	_ dispatcher.AuditLog = (*store.Store)(nil)
	_ api.AuditSource     = auditSource{}
)

// getPage GETs path from h's hearthd and decodes its 200 answer into
// page.
func getPage(t *testing.T, h *harness, path string, page any) {
	t.Helper()
	code, body := get(t, "http://"+h.d.httpAddr()+path)
	if err := json.Unmarshal([]byte(body), page); err != nil || code != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", path, code, err)
	}
}

// auditOpIDs GETs /api/v1/audit from h's hearthd and returns the op_ids
// of the entries.
func auditOpIDs(t *testing.T, h *harness) []string {
	t.Helper()
	var page api.AuditPage
	getPage(t, h, "/api/v1/audit", &page)
	ids := []string{}
	for _, e := range page.Entries {
		ids = append(ids, e.OpID)
	}
	return ids
}

// hearthd serves its store's audit trail and deletes entries older than
// auditRetention at its next start (and hourly).
func TestAuditTrailIsServedAndPrunedAfterRetention(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, harnessOptions{dataDir: dir})
	err := h.d.store.AppendAudit(
		devices.AuditEntry{At: t0, Event: devices.AuditAccepted, OpID: "old", Device: "front_door"},
		devices.AuditEntry{At: t0.Add(time.Hour), Event: devices.AuditAccepted, OpID: "newer", Device: "front_door"},
	)
	if err != nil {
		t.Fatal(err)
	}
	if got := auditOpIDs(t, h); len(got) != 2 || got[0] != "old" || got[1] != "newer" {
		t.Fatalf("audit trail %v, want [old newer]", got)
	}
	clock := h.clock
	h.stop()

	clock.Advance(auditRetention + 30*time.Minute) // "old" is past retention, "newer" is not
	h2 := newHarness(t, harnessOptions{dataDir: dir, clock: clock})
	if got := auditOpIDs(t, h2); len(got) != 1 || got[0] != "newer" {
		t.Errorf("audit trail after retention %v, want [newer]", got)
	}
}
