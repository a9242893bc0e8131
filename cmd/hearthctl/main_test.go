package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hearthd/hearth/api"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/store"
)

var t0 = time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC)

// storeAudit adapts a real store to api.AuditSource, as hearthd does.
type storeAudit struct{ s *store.Store }

func (a storeAudit) Audit(q api.AuditQuery) ([]devices.AuditEntry, error) {
	return a.s.Audit(store.AuditQuery(q))
}

// storeDeadLetters adapts a real store to api.DeadLetterSource, as
// hearthd does.
type storeDeadLetters struct{ s *store.Store }

func (a storeDeadLetters) DeadLetters(q api.DeadLetterQuery) ([]devices.DeadLetter, error) {
	return a.s.DeadLetters(store.DeadLetterQuery(q))
}

// breakerList is a fixed list of breakers; hearthd's tests read a real
// dispatcher's.
type breakerList []dispatcher.BreakerStatus

func (b breakerList) Breakers() []dispatcher.BreakerStatus { return b }

// trail is the audit trail the tests serve: an unlock of the front door
// whose fresh read failed, and an unauthorized garage door opening.
func trail() []devices.AuditEntry {
	unlock := func(sec int, ev devices.AuditEvent) devices.AuditEntry {
		return devices.AuditEntry{At: t0.Add(time.Duration(sec) * time.Second), Event: ev, OpID: "op-1", Device: "front_door", Principal: "alice", Action: "unlock"}
	}
	e := []devices.AuditEntry{
		unlock(0, devices.AuditAccepted),
		unlock(1, devices.AuditCheck),
		unlock(1, devices.AuditCheck),
		unlock(2, devices.AuditCheck),
		unlock(7, devices.AuditEnded),
		{At: t0.Add(time.Hour), Event: devices.AuditRejected, OpID: "op-2", Device: "garage", Principal: "bob", Action: "open",
			Status: devices.Rejected, Reason: "unauthorized", Detail: "bob may not open garage"},
	}
	e[1].Attempt, e[1].Check, e[1].Passed = 1, devices.CheckAuthorization, true
	e[2].Attempt, e[2].Check, e[2].Passed = 1, devices.CheckFreshness, true
	e[3].Attempt, e[3].Check, e[3].Detail = 1, devices.CheckState, "no report within 5s"
	e[4].Status, e[4].Reason, e[4].Detail = devices.Failed, "state_unknown", "the state of front_door could not be read"
	return e
}

// server is hearthd's API over a real store in a temp dir holding
// entries (and whatever a test adds to store). If token is not empty, it answers 401 to requests without
// "Authorization: Bearer <token>", as hearthd's bearer-token auth does.
type server struct {
	*httptest.Server
	store *store.Store
	mu    sync.Mutex
	auth  []string // the Authorization header of every request
}

func newServer(t *testing.T, token string, entries ...devices.AuditEntry) *server {
	t.Helper()
	s, err := store.Open(t.TempDir(), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.AppendAudit(entries...); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux, breakerList{
		{Service: "zigbee", State: "closed", Bridge: "online"},
		{Service: "cloud", State: "open", Since: t0, Until: t0.Add(30 * time.Second), Offline: true, Bridge: "offline", Trips: 2, Watched: true},
	})
	api.RegisterAudit(mux, storeAudit{s}, nil)
	api.RegisterDeadLetters(mux, storeDeadLetters{s}, nil)
	srv := &server{store: s}
	srv.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.mu.Lock()
		srv.auth = append(srv.auth, r.Header.Get("Authorization"))
		srv.mu.Unlock()
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			w.Write([]byte(`{"error":"missing or wrong bearer token"}` + "\n"))
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func (s *server) authHeaders() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auth...)
}

// hearthctl runs run(args) and returns its exit status, stdout and
// stderr.
func hearthctl(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// hearthctlAt runs hearthctl with now as the time and no environment,
// and returns its exit status, stdout and stderr.
func hearthctlAt(now time.Time, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	c := &cli{stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" },
		now: func() time.Time { return now }, client: http.DefaultClient}
	code := c.run(args)
	return code, stdout.String(), stderr.String()
}

// seqs returns the SEQ column of a printed audit table.
func seqs(table string) []string {
	lines := strings.Split(strings.TrimSuffix(table, "\n"), "\n")
	out := []string{}
	for _, l := range lines[1:] {
		out = append(out, strings.Fields(l)[0])
	}
	return out
}

func TestAuditPrintsTheNewestEntriesAsATable(t *testing.T) {
	srv := newServer(t, "", trail()...)
	code, stdout, stderr := hearthctl("-addr", srv.URL, "audit")
	want := "" +
		"SEQ  TIME                  EVENT     DEVICE      OP_ID  PRINCIPAL  ACTION  ATTEMPT  RESULT                 DETAIL\n" +
		"1    2026-11-29T19:00:00Z  accepted  front_door  op-1   alice      unlock  -        -                      -\n" +
		"2    2026-11-29T19:00:01Z  check     front_door  op-1   alice      unlock  1        authorization passed   -\n" +
		"3    2026-11-29T19:00:01Z  check     front_door  op-1   alice      unlock  1        freshness passed       -\n" +
		"4    2026-11-29T19:00:02Z  check     front_door  op-1   alice      unlock  1        state FAILED           no report within 5s\n" +
		"5    2026-11-29T19:00:07Z  ended     front_door  op-1   alice      unlock  -        failed/state_unknown   the state of front_door could not be read\n" +
		"6    2026-11-29T20:00:00Z  rejected  garage      op-2   bob        open    -        rejected/unauthorized  bob may not open garage\n"
	if code != 0 || stdout != want || stderr != "" {
		t.Errorf("exit %d, stderr %q, stdout\n%s\nwant exit 0, stdout\n%s", code, stderr, stdout, want)
	}
}

func TestAuditLimitShowsTheNewestInOrder(t *testing.T) {
	srv := newServer(t, "", trail()...)
	code, stdout, stderr := hearthctl("-addr", srv.URL, "audit", "-limit", "2")
	if got := seqs(stdout); code != 0 || strings.Join(got, ",") != "5,6" || stderr != "" {
		t.Errorf("exit %d, seqs %v, stderr %q; want 0, [5 6], no stderr", code, got, stderr)
	}
}

func TestAuditFilters(t *testing.T) {
	srv := newServer(t, "", trail()...)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-device", "garage"}, "6"},
		{[]string{"-op", "op-1", "-limit", "3"}, "3,4,5"},
		{[]string{"-principal", "alice", "-since", "2026-11-29T19:00:02Z"}, "4,5"},
		{[]string{"-since", "2026-11-29T20:00:00+01:00", "-device", "front_door"}, "1,2,3,4,5"},
	}
	for _, tt := range tests {
		code, stdout, stderr := hearthctl(append([]string{"-addr", srv.URL, "audit"}, tt.args...)...)
		if got := strings.Join(seqs(stdout), ","); code != 0 || got != tt.want {
			t.Errorf("audit %v: exit %d, seqs %s, stderr %q; want 0, %s", tt.args, code, got, stderr, tt.want)
		}
	}
	code, stdout, _ := hearthctl("-addr", srv.URL, "audit", "-device", "nope")
	if code != 0 || stdout != "no audit entries\n" {
		t.Errorf("no match: exit %d, stdout %q; want 0, \"no audit entries\\n\"", code, stdout)
	}
}

func TestAuditSinceADurationCountsBackFromNow(t *testing.T) {
	srv := newServer(t, "", trail()...)
	for _, tt := range []struct{ since, want string }{
		{"1h", "6"},            // since t0+30m
		{"89m", "6"},           // since t0+1m
		{"90m", "1,2,3,4,5,6"}, // since t0: inclusive
		{"1d", "1,2,3,4,5,6"},
	} {
		code, stdout, stderr := hearthctlAt(t0.Add(90*time.Minute), "-addr", srv.URL, "audit", "-since", tt.since)
		if got := strings.Join(seqs(stdout), ","); code != 0 || got != tt.want {
			t.Errorf("-since %s: exit %d, seqs %s, stderr %q; want 0, %s", tt.since, code, got, stderr, tt.want)
		}
	}
}

func TestAuditJSONPrintsOneEntryPerLine(t *testing.T) {
	srv := newServer(t, "", trail()...)
	code, stdout, stderr := hearthctl("-addr", srv.URL, "audit", "-json", "-limit", "2")
	want := `{"seq":5,"at":"2026-11-29T19:00:07Z","event":"ended","op_id":"op-1","device":"front_door","principal":"alice","action":"unlock","status":"failed","reason":"state_unknown","detail":"the state of front_door could not be read"}` + "\n" +
		`{"seq":6,"at":"2026-11-29T20:00:00Z","event":"rejected","op_id":"op-2","device":"garage","principal":"bob","action":"open","status":"rejected","reason":"unauthorized","detail":"bob may not open garage"}` + "\n"
	if code != 0 || stdout != want || stderr != "" {
		t.Errorf("exit %d, stderr %q, stdout\n%s\nwant 0,\n%s", code, stderr, stdout, want)
	}
}

func TestAuditAfterPagesForward(t *testing.T) {
	srv := newServer(t, "", trail()...)
	code, stdout, stderr := hearthctl("-addr", srv.URL, "audit", "-after", "2", "-limit", "3")
	if got := strings.Join(seqs(stdout), ","); code != 0 || got != "3,4,5" || stderr != "more may follow: hearthctl audit -after 5\n" {
		t.Errorf("first page: exit %d, seqs %s, stderr %q; want 0, 3,4,5, a hint to go on after 5", code, got, stderr)
	}
	code, stdout, stderr = hearthctl("-addr", srv.URL, "audit", "-after", "5", "-limit", "3")
	if got := strings.Join(seqs(stdout), ","); code != 0 || got != "6" || stderr != "" {
		t.Errorf("last page: exit %d, seqs %s, stderr %q; want 0, 6, no stderr", code, got, stderr)
	}
	code, stdout, _ = hearthctl("-addr", srv.URL, "audit", "-after", "0", "-limit", "2")
	if got := strings.Join(seqs(stdout), ","); code != 0 || got != "1,2" {
		t.Errorf("-after 0: exit %d, seqs %s; want the oldest, 1,2", code, got)
	}
}

func TestTokenIsSentAsBearer(t *testing.T) {
	srv := newServer(t, "s3cret", trail()...)

	code, stdout, stderr := hearthctl("-addr", srv.URL, "audit")
	want := "hearthctl: hearthd answered 401 Unauthorized: missing or wrong bearer token (give a token with -token or HEARTH_TOKEN)\n"
	if code != 1 || stdout != "" || stderr != want {
		t.Errorf("without a token: exit %d, stdout %q, stderr %q; want 1, nothing, %q", code, stdout, stderr, want)
	}
	if code, _, stderr := hearthctl("-addr", srv.URL, "-token", "s3cret", "audit"); code != 0 {
		t.Errorf("-token: exit %d, stderr %q; want 0", code, stderr)
	}
	t.Setenv("HEARTH_TOKEN", "s3cret")
	if code, _, stderr := hearthctl("-addr", srv.URL, "breakers"); code != 0 {
		t.Errorf("HEARTH_TOKEN: exit %d, stderr %q; want 0", code, stderr)
	}
	if code, _, _ := hearthctl("-addr", srv.URL, "-token", "wrong", "audit"); code != 1 {
		t.Errorf("-token wrong with HEARTH_TOKEN right: exit %d; want 1 (the flag wins)", code)
	}
	got := srv.authHeaders()
	wantHeaders := []string{"", "Bearer s3cret", "Bearer s3cret", "Bearer wrong"}
	if strings.Join(got, "|") != strings.Join(wantHeaders, "|") {
		t.Errorf("Authorization headers %q, want %q", got, wantHeaders)
	}
}

func TestServerErrorIsPrintedWithItsStatus(t *testing.T) {
	srv := newServer(t, "", trail()...)
	code, stdout, stderr := hearthctl("-addr", srv.URL, "audit", "-limit", "5000")
	want := `hearthctl: hearthd answered 400 Bad Request: invalid_parameter: limit: "5000" is not a number from 1 to 1000` + "\n"
	if code != 1 || stdout != "" || stderr != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1, nothing, %q", code, stdout, stderr, want)
	}
}

// closedAddr is the address of a server that is no longer listening.
func closedAddr(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	return srv.URL
}

func TestUnreachableHearthdIsSaidPlainly(t *testing.T) {
	addr := closedAddr(t)
	host := strings.TrimPrefix(addr, "http://")
	for _, flagAddr := range []string{addr, host, addr + "/"} {
		code, stdout, stderr := hearthctl("-addr", flagAddr, "audit")
		prefix := "hearthctl: cannot reach hearthd at " + addr + ": dial tcp " + host + ": connect: connection refused"
		if code != 1 || stdout != "" || !strings.HasPrefix(stderr, prefix) || !strings.HasSuffix(stderr, " (is it running? -addr)\n") {
			t.Errorf("-addr %s: exit %d, stdout %q, stderr %q; want 1 and %s … (is it running? -addr)", flagAddr, code, stdout, stderr, prefix)
		}
	}
}

func TestUsageMistakesExit2WithoutAsking(t *testing.T) {
	addr := closedAddr(t) // a request would exit 1
	tests := []struct {
		args       []string
		code       int
		wantStderr string
	}{
		{nil, 2, "usage: hearthctl"},
		{[]string{"frobnicate"}, 2, `hearthctl: unknown command "frobnicate"`},
		{[]string{"-bogus", "audit"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"audit", "-bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"audit", "-limit", "ten"}, 2, `invalid value "ten" for flag -limit`},
		{[]string{"audit", "-since", "yesterday"}, 2, `hearthctl audit: -since "yesterday": want an RFC 3339 time such as 2026-11-29T19:00:00Z, or a duration back from now such as 90m, 24h or 7d`},
		{[]string{"audit", "-since", "-1h"}, 2, `-since "-1h": want`},
		{[]string{"audit", "front_door"}, 2, `hearthctl audit: unexpected argument "front_door"`},
		{[]string{"breakers", "now"}, 2, `hearthctl breakers: unexpected argument "now"`},
		{[]string{"-h"}, 0, "usage: hearthctl"},
		{[]string{"audit", "-h"}, 0, "usage: hearthctl audit"},
	}
	for _, tt := range tests {
		code, stdout, stderr := hearthctl(append([]string{"-addr", addr}, tt.args...)...)
		if code != tt.code || stdout != "" || !strings.Contains(stderr, tt.wantStderr) {
			t.Errorf("hearthctl %v: exit %d, stdout %q, stderr %q; want exit %d and %q in stderr", tt.args, code, stdout, stderr, tt.code, tt.wantStderr)
		}
	}
}

func TestBreakersPrintsATable(t *testing.T) {
	srv := newServer(t, "")
	code, stdout, stderr := hearthctl("-addr", srv.URL, "breakers")
	want := "" +
		"SERVICE  STATE   SINCE                 UNTIL                 TRIPS  BRIDGE   NOTE\n" +
		"zigbee   closed  -                     -                     0      online   -\n" +
		"cloud    open    2026-11-29T19:00:00Z  2026-11-29T19:00:30Z  2      offline  service says offline, watched only\n"
	if code != 0 || stdout != want || stderr != "" {
		t.Errorf("exit %d, stderr %q, stdout\n%s\nwant 0,\n%s", code, stderr, stdout, want)
	}
	code, stdout, _ = hearthctl("-addr", srv.URL, "breakers", "-json")
	wantJSON := `{"service":"zigbee","state":"closed","offline":false,"bridge":"online","trips":0,"watched":false}` + "\n" +
		`{"service":"cloud","state":"open","since":"2026-11-29T19:00:00Z","until":"2026-11-29T19:00:30Z","offline":true,"bridge":"offline","trips":2,"watched":true}` + "\n"
	if code != 0 || stdout != wantJSON {
		t.Errorf("-json: exit %d, stdout\n%s\nwant\n%s", code, stdout, wantJSON)
	}
}

// -addr and -token work after the command too, as people type them, and
// HEARTH_ADDR stands in for -addr.
func TestAddrAndTokenAfterTheCommand(t *testing.T) {
	srv := newServer(t, "s3cret", trail()...)
	if code, _, stderr := hearthctl("audit", "-addr", srv.URL, "-token", "s3cret"); code != 0 {
		t.Errorf("audit -addr URL -token T: exit %d, stderr %q; want 0", code, stderr)
	}
	t.Setenv("HEARTH_ADDR", srv.URL)
	if code, _, stderr := hearthctl("-token", "s3cret", "breakers"); code != 0 {
		t.Errorf("HEARTH_ADDR: exit %d, stderr %q; want 0", code, stderr)
	}
	if code, _, _ := hearthctl("-addr", "127.0.0.1:1", "-token", "s3cret", "breakers"); code != 1 {
		t.Errorf("-addr wins over HEARTH_ADDR: exit %d; want 1 (nothing listens on port 1)", code)
	}
}
