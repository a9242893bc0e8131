package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"testing"
	"time"

	"github.com/hearthd/hearth/api"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/store"
)

// storeAudit adapts a real store to api.AuditSource, as hearthd does.
type storeAudit struct{ s *store.Store }

func (a storeAudit) Audit(q api.AuditQuery) ([]devices.AuditEntry, error) {
	return a.s.Audit(store.AuditQuery(q))
}

var t0 = time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)

// auditServer serves GET /api/v1/audit over a store in a temp dir holding
// entries, and returns the server and the store.
func auditServer(t *testing.T, entries ...devices.AuditEntry) (*httptest.Server, *store.Store) {
	t.Helper()
	return storeServer(t,
		func(s *store.Store) error { return s.AppendAudit(entries...) },
		func(mux *http.ServeMux, s *store.Store) { api.RegisterAudit(mux, storeAudit{s}, nil) })
}

// getAudit GETs /api/v1/audit?query and returns the status and body.
func getAudit(t *testing.T, srv *httptest.Server, query string) (int, string) {
	t.Helper()
	return getQuery(t, srv, "/api/v1/audit", query)
}

// lifeOfUnlock is the trail of one unlock and a lock by another principal.
func lifeOfUnlock() []devices.AuditEntry {
	return []devices.AuditEntry{
		{At: t0, Event: devices.AuditAccepted, OpID: "op-1", Device: "front_door", Principal: "alice", Action: "unlock"},
		{At: t0.Add(time.Second), Event: devices.AuditCheck, OpID: "op-1", Device: "front_door", Principal: "alice", Action: "unlock", Attempt: 1, Check: devices.CheckAuthorization, Passed: true},
		{At: t0.Add(2 * time.Second), Event: devices.AuditSent, OpID: "op-1", Device: "front_door", Principal: "alice", Action: "unlock", Attempt: 1},
		{At: t0.Add(3 * time.Second), Event: devices.AuditEnded, OpID: "op-1", Device: "front_door", Principal: "alice", Action: "unlock", Status: devices.Succeeded},
		{At: t0.Add(time.Hour), Event: devices.AuditAccepted, OpID: "op-2", Device: "garage", Principal: "bob", Action: "open"},
	}
}

func TestAuditAnswersEntriesAndTheNextCursor(t *testing.T) {
	srv, _ := auditServer(t, lifeOfUnlock()...)
	code, body := getAudit(t, srv, "op_id=op-1&after=1&limit=2")
	want := `{"entries":[` +
		`{"seq":2,"at":"2026-11-29T19:00:01Z","event":"check","op_id":"op-1","device":"front_door","principal":"alice","action":"unlock","attempt":1,"check":"authorization","passed":true},` +
		`{"seq":3,"at":"2026-11-29T19:00:02Z","event":"sent","op_id":"op-1","device":"front_door","principal":"alice","action":"unlock","attempt":1}` +
		`],"next_after":3}` + "\n"
	if code != http.StatusOK || body != want {
		t.Errorf("status %d, body\n%s\nwant 200,\n%s", code, body, want)
	}
}

func TestAuditQueryParametersSelect(t *testing.T) {
	srv, _ := auditServer(t, lifeOfUnlock()...)
	tests := []struct {
		query     string
		seqs      []uint64
		nextAfter uint64
	}{
		{"", []uint64{1, 2, 3, 4, 5}, 5},
		{"device=garage", []uint64{5}, 5},
		{"principal=alice&limit=1", []uint64{1}, 1},
		{"op_id=op-1&after=3", []uint64{4}, 4},
		{"since=" + url.QueryEscape("2026-11-29T20:00:00+01:00"), []uint64{1, 2, 3, 4, 5}, 5}, // = 19:00:00Z: inclusive
		{"since=" + url.QueryEscape("2026-11-29T20:00:00.5+01:00"), []uint64{2, 3, 4, 5}, 5},
		{"since=2026-11-29T19:00:02.5Z", []uint64{4, 5}, 5},
		{"newest=true&limit=2", []uint64{4, 5}, 5},
		{"newest=1&device=front_door&limit=3", []uint64{2, 3, 4}, 4},
		{"newest=false&limit=2", []uint64{1, 2}, 2},
		{"after=5", []uint64{}, 5},
		{"device=nope&after=2", []uint64{}, 2},
	}
	for _, tt := range tests {
		code, body := getAudit(t, srv, tt.query)
		if code != http.StatusOK {
			t.Errorf("?%s: status %d, body %s", tt.query, code, body)
			continue
		}
		var page api.AuditPage
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			t.Fatalf("?%s: %v in %s", tt.query, err, body)
		}
		seqs := []uint64{}
		for _, e := range page.Entries {
			seqs = append(seqs, e.Seq)
		}
		if !reflect.DeepEqual(seqs, tt.seqs) || page.NextAfter != tt.nextAfter {
			t.Errorf("?%s: seqs %v next_after %d, want %v and %d", tt.query, seqs, page.NextAfter, tt.seqs, tt.nextAfter)
		}
	}
}

func TestAuditNoEntriesIsAnEmptyList(t *testing.T) {
	srv, _ := auditServer(t)
	if code, body := getAudit(t, srv, ""); code != http.StatusOK || body != `{"entries":[],"next_after":0}`+"\n" {
		t.Errorf("status %d, body %q; want 200, {\"entries\":[],\"next_after\":0}", code, body)
	}
}

func TestAuditPagesForwardThroughNextAfter(t *testing.T) {
	var entries []devices.AuditEntry
	for i := range 7 {
		entries = append(entries, devices.AuditEntry{At: t0, Event: devices.AuditAccepted, OpID: fmt.Sprintf("op-%d", i), Device: "front_door"})
	}
	srv, _ := auditServer(t, entries...)
	get := func(query string) (int, string) { return getAudit(t, srv, query) }
	pages := pagesOfThree(t, get, func(body string) ([]string, uint64, error) {
		var page api.AuditPage
		err := json.Unmarshal([]byte(body), &page)
		var ids []string
		for _, e := range page.Entries {
			ids = append(ids, e.OpID)
		}
		return ids, page.NextAfter, err
	})
	want := [][]string{{"op-0", "op-1", "op-2"}, {"op-3", "op-4", "op-5"}, {"op-6"}}
	if !reflect.DeepEqual(pages, want) {
		t.Errorf("pages %v, want %v", pages, want)
	}
}

func TestAuditBadParameterIs400NamingIt(t *testing.T) {
	srv, _ := auditServer(t, lifeOfUnlock()...)
	checkBadParameters(t, func(query string) (int, string) { return getAudit(t, srv, query) }, []badParameter{
		{"after=-1", `after: "-1" is not a seq (a whole number, 0 or more)`},
		{"after=x", `after: "x" is not a seq (a whole number, 0 or more)`},
		{"since=yesterday", `since: "yesterday" is not an RFC 3339 time such as 2026-11-29T19:00:00Z`},
		{"since=2026-11-29", `since: "2026-11-29" is not an RFC 3339 time such as 2026-11-29T19:00:00Z`},
		{"limit=0", `limit: "0" is not a number from 1 to 1000`},
		{"limit=1001", `limit: "1001" is not a number from 1 to 1000`},
		{"limit=ten", `limit: "ten" is not a number from 1 to 1000`},
		{"newest=maybe", `newest: "maybe" is not true or false`},
		{"device=a&device=b", `device: given 2 times; give it once`},
		{"device_id=front_door&zzz=1", `device_id: unknown parameter (known: device, op_id, principal, after, since, limit, newest)`},
	})
}

func TestAuditStoreErrorIs500(t *testing.T) {
	srv, s := auditServer(t)
	s.Close()
	code, body := getAudit(t, srv, "")
	if want := `{"error":"store_error","detail":"read audit trail: store is closed"}` + "\n"; code != http.StatusInternalServerError || body != want {
		t.Errorf("status %d, body %s; want 500, %s", code, body, want)
	}
}
