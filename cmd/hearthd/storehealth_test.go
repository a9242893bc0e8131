package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/health"
	"github.com/hearthd/hearth/notify"
)

// diskFull makes every write to a file fail, as a full (or failing) disk
// does: the process's RLIMIT_FSIZE becomes 0, so bbolt's writes of
// hearth.db, its meta page included, fail with "file too large", with
// SIGXFSZ ignored. The returned func lifts it. The limit is the whole
// process's: call it only in a child process (inChild).
func diskFull(t *testing.T) (lift func()) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	signal.Ignore(syscall.SIGXFSZ)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 0, Max: old.Max}); err != nil {
		t.Skipf("cannot limit file size: %v", err)
	}
	lifted := false
	lift = func() {
		if !lifted {
			lifted = true
			if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
				t.Fatal(err)
			}
			signal.Reset(syscall.SIGXFSZ)
		}
	}
	t.Cleanup(lift)
	return lift
}

// inChild reports whether this is the child process inChild runs: the
// test binary again with only t's test, so that a process-wide setting
// (a file size limit) touches no other test nor the test log. In the
// parent it runs the child, fails t if the child failed, and returns
// false.
func inChild(t *testing.T) bool {
	t.Helper()
	const env = "HEARTH_TEST_CHILD"
	if os.Getenv(env) == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("child process: %v\n%s", err, out)
	}
	if testing.Verbose() {
		t.Logf("child process:\n%s", out)
	}
	return false
}

// readyz returns /readyz's status code and report.
func (h *harness) readyz() (int, health.Report) {
	h.t.Helper()
	status, _, body := h.call("GET", "/readyz", "", "")
	var r health.Report
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		h.t.Fatalf("/readyz: %d %s", status, body)
	}
	return status, r
}

// metric returns the value of an unlabelled series on /metrics.
func (h *harness) metric(name string) float64 {
	h.t.Helper()
	_, _, body := h.call("GET", "/metrics", "", "")
	m := regexp.MustCompile(`(?m)^` + name + ` (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		h.t.Fatalf("/metrics lacks %s", name)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		h.t.Fatal(err)
	}
	return v
}

// A full disk makes /readyz tell the truth: while commits fail, commands
// answer store_error, the store check fails (503), every failed commit is
// counted, and the outage raises one critical notification, not one per
// command; the first commit that succeeds makes Hearth ready again by
// itself.
func TestStoreCommitsFailingMakeReadyzFailUntilOneSucceeds(t *testing.T) {
	if !inChild(t) {
		return
	}
	h := newHarness(t, harnessOptions{})
	notes := h.notifications()
	if status, r := h.readyz(); status != http.StatusOK || r.Checks["store"] != "ok" {
		t.Fatalf("/readyz before: %d %+v; want 200, store ok", status, r)
	}

	lift := diskFull(t)
	const refused = 5
	for i := range refused {
		status, _, body := h.call("POST", "/api/v1/devices/plug/commands", "", fmt.Sprintf(`{"state":"ON","op_id":"full-%d"}`, i))
		if status != http.StatusInternalServerError || decodeResult(t, body).Reason != devices.ReasonStoreError {
			t.Fatalf("full-%d on a full disk: %d %s; want 500 store_error", i, status, body)
		}
	}
	status, r := h.readyz()
	if status != http.StatusServiceUnavailable || r.Status != "not_ready" || !strings.Contains(r.Checks["store"], "file too large") {
		t.Errorf("/readyz while commits fail: %d %+v; want 503, the store check naming the error", status, r)
	}
	if got := h.metric("hearth_store_commit_failures_total"); got < float64(refused) {
		t.Errorf("hearth_store_commit_failures_total = %v after %d refused commands; want at least %d", got, refused, refused)
	}
	if got := h.metric("hearth_store_failing"); got != 1 {
		t.Errorf("hearth_store_failing = %v while commits fail; want 1", got)
	}

	lift()
	if status, _, body := h.call("POST", "/api/v1/devices/plug/commands", "", `{"state":"ON","op_id":"freed"}`); status != http.StatusAccepted {
		t.Fatalf("a command once the disk has room: %d %s; want 202", status, body)
	}
	if status, r := h.readyz(); status != http.StatusOK || r.Checks["store"] != "ok" {
		t.Errorf("/readyz after a commit succeeded: %d %+v; want 200, store ok", status, r)
	}
	if got := h.metric("hearth_store_failing"); got != 0 {
		t.Errorf("hearth_store_failing = %v after a commit succeeded; want 0", got)
	}

	// The outbox publishes in order: every notification of the outage
	// comes before this marker.
	h.d.disp.Notify(notify.Notification{Title: "marker", Source: "test"})
	var store []notify.Notification
	for n := h.nextNotification(notes); n.Title != "marker"; n = h.nextNotification(notes) {
		if n.Source == "store" {
			store = append(store, n)
		}
	}
	if len(store) != 1 {
		t.Fatalf("%d store notifications for one outage of %d refused commands: %+v; want 1", len(store), refused, store)
	}
	if n := store[0]; n.Severity != "critical" || n.Reason != string(devices.ReasonStoreError) || !strings.Contains(n.Message, h.d.store.Path()) {
		t.Errorf("the outage's notification: %+v; want critical, store_error, naming %s", n, h.d.store.Path())
	}
}
