package main

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hearthd/hearth/health"
)

// readyServer serves a real health.Checker's /readyz whose "mqtt" check
// fails while down is set.
func readyServer(t *testing.T, down *atomic.Bool) *httptest.Server {
	t.Helper()
	c := health.NewChecker()
	c.Add("mqtt", func() error {
		if down.Load() {
			return errors.New("not connected to tcp://mosquitto:1883")
		}
		return nil
	})
	c.Add("store", func() error { return nil })
	mux := http.NewServeMux()
	c.Register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func TestReadyExitsZeroWhenReadyAndOneWithTheFailingChecks(t *testing.T) {
	var down atomic.Bool
	srv := readyServer(t, &down)
	code, out, errOut := hearthctl("-addr", srv.URL, "ready")
	if code != exitOK || out != "ready\n" {
		t.Errorf("ready: exit %d, stdout %q, stderr %q; want 0 and \"ready\"", code, out, errOut)
	}
	if code, out, _ := hearthctl("-addr", srv.URL, "ready", "-q"); code != exitOK || out != "" {
		t.Errorf("ready -q: exit %d, stdout %q; want 0 and nothing", code, out)
	}
	down.Store(true)
	code, out, errOut = hearthctl("-addr", srv.URL, "ready")
	want := "not ready:\n  mqtt: not connected to tcp://mosquitto:1883\n"
	if code != exitError || out != want {
		t.Errorf("not ready: exit %d, stdout %q, stderr %q; want 1 and %q", code, out, errOut, want)
	}
}

func TestReadyExitsOneWhenHearthdCannotBeReached(t *testing.T) {
	var down atomic.Bool
	srv := readyServer(t, &down)
	addr := srv.URL
	srv.Close()
	code, _, errOut := hearthctl("-addr", addr, "ready")
	if code != exitError || !strings.Contains(errOut, "cannot reach hearthd") {
		t.Errorf("exit %d, stderr %q; want 1 and \"cannot reach hearthd\"", code, errOut)
	}
}

// Something else on the port that answers 200 is not a ready hearthd.
func TestReadyExitsOneOnAnAnswerThatIsNotHearthds(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("<html>it works</html>"))
	}))
	defer srv.Close()
	code, _, errOut := hearthctl("-addr", srv.URL, "ready")
	if code != exitError || !strings.Contains(errOut, "unexpected answer") {
		t.Errorf("exit %d, stderr %q; want 1 and \"unexpected answer\"", code, errOut)
	}
}

func TestReadyUsageMistakesExitTwo(t *testing.T) {
	for _, args := range [][]string{{"ready", "-timeout", "0s"}, {"ready", "extra"}, {"ready", "-nope"}} {
		if code, _, _ := hearthctl(args...); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
	}
}

// Degraded is ready: hearthd serves commands, so the health check exits 0,
// and the degraded check's text is printed, -q or not.
func TestReadyExitsZeroWhenDegradedPrintingTheDegradedChecks(t *testing.T) {
	c := health.NewChecker()
	c.Add("store", func() error { return nil })
	c.AddDegraded("store_quarantine", func() error { return errors.New("the store was quarantined; hearthctl store ack") })
	mux := http.NewServeMux()
	c.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	want := "ready, degraded:\n  store_quarantine: the store was quarantined; hearthctl store ack\n"
	for _, args := range [][]string{{"-addr", srv.URL, "ready"}, {"-addr", srv.URL, "ready", "-q"}} {
		if code, out, errOut := hearthctl(args...); code != exitOK || out != want {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 0 and %q", args, code, out, errOut, want)
		}
	}
}
