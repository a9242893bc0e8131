package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/api"
	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/notify"
	"github.com/hearthd/hearth/store"
)

// damageToZeroLength truncates dir's hearth.db to zero bytes, as a power
// cut during a write can leave it, beside the marker that says a store
// existed: the damage Open quarantines.
func damageToZeroLength(t *testing.T, dir string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dir, store.MarkerName)); err != nil {
		t.Fatalf("the first start left no marker: %v", err)
	}
	if err := os.Truncate(filepath.Join(dir, store.FileName), 0); err != nil {
		t.Fatal(err)
	}
}

// quarantinedFiles lists dir's hearth.db.corrupt-* files.
func quarantinedFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, store.FileName+store.QuarantineSuffix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// subscribe connects a client to the broker at url and returns every
// message on topics.
func subscribe(t *testing.T, url string, topics ...string) <-chan paho.Message {
	t.Helper()
	got := make(chan paho.Message, 4096) // more than a test publishes: a full channel would block the client
	c := paho.NewClient(paho.NewClientOptions().AddBroker(url).
		SetClientID(fmt.Sprintf("watch-%d", time.Now().UnixNano())).SetOrderMatters(true).SetAutoReconnect(false))
	mustToken(t, c.Connect())
	t.Cleanup(func() { c.Disconnect(0) })
	filters := map[string]byte{}
	for _, topic := range topics {
		filters[topic] = 1
	}
	mustToken(t, c.SubscribeMultiple(filters, func(_ paho.Client, m paho.Message) { got <- m }))
	return got
}

// nextStoreState waits for the next message on hearth/bridge/store whose
// state is want, skipping others.
func nextStoreState(t *testing.T, ch <-chan paho.Message, want string) (api.StoreState, paho.Message) {
	t.Helper()
	deadline := time.After(eventWait)
	for {
		select {
		case m := <-ch:
			if m.Topic() != "hearth/bridge/store" {
				continue
			}
			var st api.StoreState
			if err := json.Unmarshal(m.Payload(), &st); err != nil {
				t.Fatalf("hearth/bridge/store is not JSON: %s", m.Payload())
			}
			if st.State == want {
				return st, m
			}
		case <-deadline:
			t.Fatalf("timed out waiting for hearth/bridge/store %q", want)
		}
	}
}

// A store found damaged at start (zero length beside its marker, after a
// first start that ran a command) is quarantined and Hearth starts
// loudly: the damaged file is kept, a critical notification and the
// retained hearth/bridge/store say so, hearth_store_quarantined is 1,
// /readyz is 200 degraded; the command that ran before, sent again with
// its issued_at, is refused stale_command (its op_id is no longer known)
// and reaches no device; a live command succeeds. The acknowledgement
// (POST /api/v1/store/ack) is audited and clears the notification's
// state, the gauge and the degraded check, but old commands stay refused
// for the dedup window.
func TestQuarantinedStoreStartsDegradedRefusesOldCommandsUntilAcked(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	before := `{"state":"ON","op_id":"before","issued_at":"2026-11-29T18:59:00Z","ttl":"3h"}`
	h := newHarness(t, harnessOptions{dataDir: dir, brokerURL: b.URL()})
	h.publish("hall_light", before)
	if r := h.final("before"); r.Status != devices.Succeeded {
		t.Fatalf("before: %s/%s; want succeeded", r.Status, r.Reason)
	}
	h.stop()
	damageToZeroLength(t, dir)

	// Subscribed before hearthd starts: the notification is not retained.
	notes := subscribe(t, b.URL(), "hearth/notifications")
	watched := subscribe(t, b.URL(), "hearth/bridge/store")
	clock := newDueClock(t0.Add(time.Hour))
	logs := newLogTap(t)
	h2 := newHarness(t, harnessOptions{dataDir: dir, brokerURL: b.URL(), clock: clock, logger: logs.logger()})

	files := quarantinedFiles(t, dir)
	want := filepath.Join(dir, store.FileName+store.QuarantineSuffix+"20261129T200000Z")
	if len(files) != 1 || files[0] != want {
		t.Fatalf("quarantined files %v; want [%s]", files, want)
	}
	if fi, err := os.Stat(want); err != nil || fi.Size() != 0 {
		t.Errorf("the damaged file: %v, %v; want it kept as it was, zero length", fi, err)
	}

	var errorLines []tapped
	for _, r := range logs.find("quarantined") {
		if r.level == slog.LevelError {
			errorLines = append(errorLines, r)
		}
	}
	if len(errorLines) != 1 || errorLines[0].attrs["file"] != want || !strings.Contains(errorLines[0].attrs["cause"], "empty") ||
		errorLines[0].attrs["salvaged_ops"] != "0" || errorLines[0].attrs["ended"] != "0" {
		t.Errorf("ERROR lines about the quarantine: %+v; want one, naming the file, the cause and the counts", errorLines)
	}

	st, _ := nextStoreState(t, watched, api.StoreQuarantined)
	if st.StoreQuarantine == nil || st.File != want || !st.At.Equal(clock.Now()) || !strings.Contains(st.Cause, "empty") || st.LastQuarantine != nil {
		t.Errorf("hearth/bridge/store: %+v; want quarantined at %s, file %s, the cause", st, clock.Now(), want)
	}
	for n := h2.nextNotification(notes); ; n = h2.nextNotification(notes) {
		if n.Source != "store" {
			continue
		}
		if n.Severity != "critical" || n.Reason != reasonStoreQuarantined || !strings.Contains(n.Message, want) ||
			!strings.Contains(n.Message, "hearthctl store ack") || !strings.Contains(n.Message, "may be lost") {
			t.Errorf("the quarantine's notification: %+v; want critical, store_quarantined, naming %s, what was lost and hearthctl store ack", n, want)
		}
		break
	}
	if _, m := nextStoreState(t, h2.watch("hearth/bridge/store"), api.StoreQuarantined); !m.Retained() {
		t.Error("hearth/bridge/store is not retained")
	}
	if got := h2.metric("hearth_store_quarantined"); got != 1 {
		t.Errorf("hearth_store_quarantined = %v while unacknowledged; want 1", got)
	}
	status, r := h2.readyz()
	if status != http.StatusOK || r.Status != "degraded" || !strings.Contains(r.Checks["store_quarantine"], want) || r.Checks["store"] != "ok" {
		t.Errorf("/readyz while quarantined: %d %+v; want 200 degraded, store_quarantine naming %s", status, r, want)
	}
	if status, _, body := h2.call("GET", "/api/v1/store", "", ""); status != http.StatusOK || !strings.Contains(body, `"state":"quarantined"`) {
		t.Errorf("GET /api/v1/store: %d %s; want 200 quarantined", status, body)
	}

	h2.settle("hall_light", "plug")
	h2.publish("hall_light", before)
	stale := h2.result("before")
	if stale.Status != devices.Rejected || stale.Reason != devices.ReasonStaleCommand || !strings.Contains(stale.Detail, "2026-11-29T20:00:00Z") {
		t.Errorf("the command that ran before the quarantine, sent again: %s/%s (%s); want rejected stale_command naming the quarantine", stale.Status, stale.Reason, stale.Detail)
	}
	h2.publish("plug", `{"state":"ON","op_id":"live","issued_at":"2026-11-29T20:00:00Z"}`)
	if r := h2.final("live"); r.Status != devices.Succeeded {
		t.Errorf("a live command on the fresh store: %s/%s; want succeeded", r.Status, r.Reason)
	}
	if e := h2.nextSet(); e.Device != "plug" {
		t.Errorf("a set reached %s; want only the live one, to plug", e.Device)
	}
	h2.noSetsYet()

	clock.Advance(time.Minute)
	status, _, body := h2.call("POST", "/api/v1/store/ack", "", "")
	var acked api.StoreState
	if err := json.Unmarshal([]byte(body), &acked); err != nil || status != http.StatusOK || acked.State != api.StoreOK ||
		acked.LastQuarantine == nil || !acked.LastQuarantine.AckedAt.Equal(clock.Now()) || acked.LastQuarantine.File != want {
		t.Fatalf("POST /api/v1/store/ack: %d %s; want 200, state ok, last_quarantine acked at %s", status, body, clock.Now())
	}
	st, _ = nextStoreState(t, watched, api.StoreOK)
	if st.LastQuarantine == nil || !st.LastQuarantine.AckedAt.Equal(clock.Now()) || st.StoreQuarantine != nil {
		t.Errorf("hearth/bridge/store after the ack: %+v; want ok with last_quarantine acked", st)
	}
	if got := h2.metric("hearth_store_quarantined"); got != 0 {
		t.Errorf("hearth_store_quarantined = %v after the ack; want 0", got)
	}
	if status, r := h2.readyz(); status != http.StatusOK || r.Status != "ready" || r.Checks["store_quarantine"] != "ok" {
		t.Errorf("/readyz after the ack: %d %+v; want 200 ready", status, r)
	}
	_, _, body = h2.call("GET", "/api/v1/audit?newest=true", "", "")
	var page api.AuditPage
	if err := json.Unmarshal([]byte(body), &page); err != nil || len(page.Entries) == 0 {
		t.Fatalf("GET /api/v1/audit: %s", body)
	}
	if e := page.Entries[len(page.Entries)-1]; e.Event != devices.AuditStoreAcked || !e.At.Equal(clock.Now()) || !strings.Contains(e.Detail, want) {
		t.Errorf("the last audit entry: %+v; want %s at %s naming %s", e, devices.AuditStoreAcked, clock.Now(), want)
	}
	h2.publish("hall_light", before)
	if r := h2.result("before"); r.Reason != devices.ReasonStaleCommand {
		t.Errorf("the old command after the ack: %s/%s; want still stale_command within the dedup window", r.Status, r.Reason)
	}
}

// ackConfig has principals: admin may do everything, kitchen only the
// hall light, almost everything but unlocking the front door.
var ackConfig = withBridgeAccount(testConfig) + `principals:
  admin:
    http_token: admin-token-0123456789
    allow: {"*": ["*"]}
  kitchen:
    http_token: kitchen-token-0123456789
    allow: {hall_light: ["*"]}
  almost:
    http_token: almost-token-0123456789
    allow: {"*": ["*"], front_door: [lock]}
`

// Closed by default: only a principal allowed every action on every
// device may acknowledge a quarantine; a stranger without a token, one
// with a wrong token, and principals allowed less are refused and change
// nothing. Anyone may read the state with a token.
func TestStoreAckNeedsAPrincipalAllowedEveryDevice(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir, store.Options{}) // a first start
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	damageToZeroLength(t, dir)
	h := newHarness(t, harnessOptions{dataDir: dir, config: ackConfig, simLogin: bridgeLogin, automationLogin: bridgeLogin})

	for _, c := range []struct{ who, token string }{
		{"no token", ""}, {"a wrong token", "guess-0123456789"},
		{"kitchen", "kitchen-token-0123456789"}, {"almost", "almost-token-0123456789"},
	} {
		status, _, body := h.call("POST", "/api/v1/store/ack", c.token, "")
		if status != http.StatusUnauthorized && status != http.StatusForbidden {
			t.Errorf("ack by %s: %d %s; want 401 or 403", c.who, status, body)
		}
	}
	if q, _, _ := h.d.store.Quarantine(); q.Acked() {
		t.Fatalf("a refused ack acknowledged the quarantine: %+v", q)
	}
	if status, _, body := h.call("GET", "/api/v1/store", "kitchen-token-0123456789", ""); status != http.StatusOK || !strings.Contains(body, `"quarantined"`) {
		t.Errorf("GET /api/v1/store as kitchen: %d %s; want 200 quarantined", status, body)
	}
	status, _, body := h.call("POST", "/api/v1/store/ack", "admin-token-0123456789", "")
	if status != http.StatusOK || !strings.Contains(body, `"acked_by":"admin"`) {
		t.Errorf("ack by admin: %d %s; want 200 acked_by admin", status, body)
	}
	if q, _, _ := h.d.store.Quarantine(); q.AckedBy != "admin" {
		t.Errorf("stored quarantine after admin's ack: %+v; want acked by admin", q)
	}
}

// An acknowledged quarantine is not announced again at the next start:
// no critical notification, hearth/bridge/store {"state":"ok"} with the
// quarantine as last_quarantine, the gauge 0 and /readyz ready.
func TestAcknowledgedQuarantineIsNotAnnouncedAfterARestart(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	damageToZeroLength(t, dir)
	h := newHarness(t, harnessOptions{dataDir: dir})
	if status, _, body := h.call("POST", "/api/v1/store/ack", "", ""); status != http.StatusOK {
		t.Fatalf("ack: %d %s", status, body)
	}
	h.stop()

	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	notes := subscribe(t, b.URL(), "hearth/notifications")
	watched := subscribe(t, b.URL(), "hearth/bridge/store")
	h2 := newHarness(t, harnessOptions{dataDir: dir, brokerURL: b.URL()})
	st, _ := nextStoreState(t, watched, api.StoreOK)
	if st.LastQuarantine == nil || !st.LastQuarantine.AckedAt.Equal(t0) {
		t.Errorf("hearth/bridge/store after the restart: %+v; want ok with the acknowledged last_quarantine", st)
	}
	if got := h2.metric("hearth_store_quarantined"); got != 0 {
		t.Errorf("hearth_store_quarantined = %v; want 0", got)
	}
	if status, r := h2.readyz(); status != http.StatusOK || r.Status != "ready" {
		t.Errorf("/readyz: %d %+v; want 200 ready", status, r)
	}
	// The outbox publishes notifications in order: one raised at start
	// comes before this marker.
	h2.d.disp.Notify(notify.Notification{Title: "marker", Source: "test"})
	for n := h2.nextNotification(notes); n.Title != "marker"; n = h2.nextNotification(notes) {
		if n.Reason == reasonStoreQuarantined {
			t.Errorf("a notification of the acknowledged quarantine after the restart: %+v", n)
		}
	}
}
