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

// storeDeadLetters adapts a real store to api.DeadLetterSource, as hearthd
// does.
type storeDeadLetters struct{ s *store.Store }

func (a storeDeadLetters) DeadLetters(q api.DeadLetterQuery) ([]devices.DeadLetter, error) {
	return a.s.DeadLetters(store.DeadLetterQuery(q))
}

// deadLetterServer serves GET /api/v1/deadletters over a store in a temp
// dir holding ops as dead letters, and returns the server and the store.
func deadLetterServer(t *testing.T, ops ...devices.Op) (*httptest.Server, *store.Store) {
	t.Helper()
	return storeServer(t,
		func(s *store.Store) error { return s.AddDeadLetters(ops...) },
		func(mux *http.ServeMux, s *store.Store) { api.RegisterDeadLetters(mux, storeDeadLetters{s}, nil) })
}

// getDeadLetters GETs /api/v1/deadletters?query and returns the status
// and body.
func getDeadLetters(t *testing.T, srv *httptest.Server, query string) (int, string) {
	t.Helper()
	return getQuery(t, srv, "/api/v1/deadletters", query)
}

// ended returns op id to device, accepted at t0 as op Seq opSeq and ended
// with status and reason minutes later.
func ended(id, device string, opSeq uint64, status devices.Status, reason devices.Reason, minutes int) devices.Op {
	return devices.Op{
		OpID:       id,
		Device:     device,
		Target:     devices.Target{"occupied_heating_setpoint": float64(21)},
		Seq:        opSeq,
		AcceptedAt: t0,
		Deadline:   t0.Add(time.Hour),
		Status:     status,
		Reason:     reason,
		UpdatedAt:  t0.Add(time.Duration(minutes) * time.Minute),
	}
}

// sleepyDay is what a sleeping thermostat and a flaky light leave in the
// dead-letter store.
func sleepyDay() []devices.Op {
	light := ended("op-3", "hall_light", 3, devices.Failed, devices.ReasonTimeout, 30)
	light.Target = devices.Target{"state": "ON"}
	light.Attempts = 3
	light.LastSentAt = t0.Add(29 * time.Minute)
	light.Detail = "no report within 5s"
	return []devices.Op{
		ended("op-1", "thermostat", 1, devices.Superseded, devices.ReasonNewerCommand, 10), // 1
		ended("op-2", "thermostat", 2, devices.Expired, devices.ReasonTTLElapsed, 60),      // 2
		light, // 3
		ended("op-4", "thermostat", 4, devices.Failed, devices.ReasonTimeout, 90), // 4
	}
}

func TestDeadLettersAnswersThemAndTheNextCursor(t *testing.T) {
	srv, _ := deadLetterServer(t, sleepyDay()...)
	code, body := getDeadLetters(t, srv, "after=1&limit=2")
	want := `{"dead_letters":[` +
		`{"seq":2,"op_id":"op-2","device":"thermostat","target":{"occupied_heating_setpoint":21},"accepted_at":"2026-11-29T19:00:00Z","deadline":"2026-11-29T20:00:00Z","status":"expired","reason":"ttl_elapsed","attempts":0,"updated_at":"2026-11-29T20:00:00Z","op_seq":2},` +
		`{"seq":3,"op_id":"op-3","device":"hall_light","target":{"state":"ON"},"accepted_at":"2026-11-29T19:00:00Z","deadline":"2026-11-29T20:00:00Z","status":"failed","reason":"timeout","detail":"no report within 5s","attempts":3,"last_sent_at":"2026-11-29T19:29:00Z","updated_at":"2026-11-29T19:30:00Z","op_seq":3}` +
		`],"next_after":3}` + "\n"
	if code != http.StatusOK || body != want {
		t.Errorf("status %d, body\n%s\nwant 200,\n%s", code, body, want)
	}
}

func TestDeadLetterQueryParametersSelect(t *testing.T) {
	srv, _ := deadLetterServer(t, sleepyDay()...)
	tests := []struct {
		query     string
		seqs      []uint64
		nextAfter uint64
	}{
		{"", []uint64{1, 2, 3, 4}, 4},
		{"device=hall_light", []uint64{3}, 3},
		{"status=failed", []uint64{3, 4}, 4},
		{"status=superseded", []uint64{1}, 1},
		{"reason=timeout&device=thermostat", []uint64{4}, 4},
		{"reason=ttl_elapsed", []uint64{2}, 2},
		{"device=thermostat&limit=1", []uint64{1}, 1},
		{"device=thermostat&after=1", []uint64{2, 4}, 4},
		{"since=" + url.QueryEscape("2026-11-29T20:00:00+01:00"), []uint64{1, 2, 3, 4}, 4}, // = t0
		{"since=2026-11-29T20:00:00Z", []uint64{2, 4}, 4},                                  // inclusive
		{"since=2026-11-29T20:00:00.5Z", []uint64{4}, 4},
		{"newest=true&limit=2", []uint64{3, 4}, 4},
		{"newest=1&device=thermostat&limit=2", []uint64{2, 4}, 4},
		{"newest=false&limit=2", []uint64{1, 2}, 2},
		{"after=4", []uint64{}, 4},
		{"status=expired&after=2", []uint64{}, 2},
	}
	for _, tt := range tests {
		code, body := getDeadLetters(t, srv, tt.query)
		if code != http.StatusOK {
			t.Errorf("?%s: status %d, body %s", tt.query, code, body)
			continue
		}
		var page api.DeadLetterPage
		if err := json.Unmarshal([]byte(body), &page); err != nil {
			t.Fatalf("?%s: %v in %s", tt.query, err, body)
		}
		seqs := []uint64{}
		for _, d := range page.DeadLetters {
			seqs = append(seqs, d.Seq)
			if d.Op.Seq != uint64(d.OpID[len(d.OpID)-1]-'0') {
				t.Errorf("?%s: %s has op seq %d, want the op's own", tt.query, d.OpID, d.Op.Seq)
			}
		}
		if !reflect.DeepEqual(seqs, tt.seqs) || page.NextAfter != tt.nextAfter {
			t.Errorf("?%s: seqs %v next_after %d, want %v and %d", tt.query, seqs, page.NextAfter, tt.seqs, tt.nextAfter)
		}
	}
}

func TestNoDeadLettersIsAnEmptyList(t *testing.T) {
	srv, _ := deadLetterServer(t)
	if code, body := getDeadLetters(t, srv, ""); code != http.StatusOK || body != `{"dead_letters":[],"next_after":0}`+"\n" {
		t.Errorf("status %d, body %q; want 200, {\"dead_letters\":[],\"next_after\":0}", code, body)
	}
}

func TestDeadLettersPageForwardThroughNextAfter(t *testing.T) {
	var ops []devices.Op
	for i := range 7 {
		ops = append(ops, ended(fmt.Sprintf("op-%d", i), "thermostat", uint64(i+1), devices.Expired, devices.ReasonTTLElapsed, i))
	}
	srv, _ := deadLetterServer(t, ops...)
	get := func(query string) (int, string) { return getDeadLetters(t, srv, query) }
	pages := pagesOfThree(t, get, func(body string) ([]string, uint64, error) {
		var page api.DeadLetterPage
		err := json.Unmarshal([]byte(body), &page)
		var ids []string
		for _, d := range page.DeadLetters {
			ids = append(ids, d.OpID)
		}
		return ids, page.NextAfter, err
	})
	want := [][]string{{"op-0", "op-1", "op-2"}, {"op-3", "op-4", "op-5"}, {"op-6"}}
	if !reflect.DeepEqual(pages, want) {
		t.Errorf("pages %v, want %v", pages, want)
	}
}

func TestDeadLetterBadParameterIs400NamingIt(t *testing.T) {
	srv, _ := deadLetterServer(t, sleepyDay()...)
	checkBadParameters(t, func(query string) (int, string) { return getDeadLetters(t, srv, query) }, []badParameter{
		{"status=succeeded", `status: "succeeded" is not a dead letter's status (failed, expired or superseded)`},
		{"status=rejected", `status: "rejected" is not a dead letter's status (failed, expired or superseded)`},
		{"status=queued", `status: "queued" is not a dead letter's status (failed, expired or superseded)`},
		{"status=FAILED", `status: "FAILED" is not a dead letter's status (failed, expired or superseded)`},
		{"after=-1", `after: "-1" is not a seq (a whole number, 0 or more)`},
		{"since=yesterday", `since: "yesterday" is not an RFC 3339 time such as 2026-11-29T19:00:00Z`},
		{"limit=0", `limit: "0" is not a number from 1 to 1000`},
		{"limit=1001", `limit: "1001" is not a number from 1 to 1000`},
		{"newest=maybe", `newest: "maybe" is not true or false`},
		{"reason=timeout&reason=ttl_elapsed", `reason: given 2 times; give it once`},
		{"op_id=op-1", `op_id: unknown parameter (known: device, status, reason, after, since, limit, newest)`},
	})
}

func TestDeadLetterStoreErrorIs500(t *testing.T) {
	srv, s := deadLetterServer(t)
	s.Close()
	code, body := getDeadLetters(t, srv, "")
	if want := `{"error":"store_error","detail":"read dead letters: store is closed"}` + "\n"; code != http.StatusInternalServerError || body != want {
		t.Errorf("status %d, body %s; want 500, %s", code, body, want)
	}
}
