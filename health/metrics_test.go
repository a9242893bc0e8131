package health

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestBreakerStateSetsOneSeriesPerState(t *testing.T) {
	m := NewMetrics()
	m.BreakerState("z2m", "open")
	want := `
# HELP hearth_breaker_state Circuit breaker state of each service (bridge or cloud service): 1 for the state it is in (closed, open or half_open), 0 for the other two. Open means commands to the service fail fast with breaker_open.
# TYPE hearth_breaker_state gauge
hearth_breaker_state{service="z2m",state="closed"} 0
hearth_breaker_state{service="z2m",state="half_open"} 0
hearth_breaker_state{service="z2m",state="open"} 1
`
	if err := testutil.CollectAndCompare(m.state, strings.NewReader(want), "hearth_breaker_state"); err != nil {
		t.Error(err)
	}
	m.BreakerState("z2m", "bogus")
	for _, s := range BreakerStates {
		if got := testutil.ToFloat64(m.state.WithLabelValues("z2m", s)); got != 0 {
			t.Errorf("unknown state: %s = %v; want 0", s, got)
		}
	}
	if got := testutil.CollectAndCount(m.state); got != 3 {
		t.Errorf("series after an unknown state: %d; want 3 (no series for it)", got)
	}
}

func TestBreakerTransitionCountsAndMovesTheGauge(t *testing.T) {
	m := NewMetrics()
	m.BreakerTransition("z2m", "closed", "open")
	m.BreakerTransition("z2m", "open", "half_open")
	m.BreakerTransition("z2m", "half_open", "open")
	m.BreakerTransition("z2m", "open", "half_open")
	m.BreakerTransition("cloud", "closed", "open")

	want := `
# HELP hearth_breaker_transitions_total Circuit breaker state changes of each service since Hearth started, by the state left (from) and the state entered (to).
# TYPE hearth_breaker_transitions_total counter
hearth_breaker_transitions_total{from="closed",service="cloud",to="open"} 1
hearth_breaker_transitions_total{from="closed",service="z2m",to="open"} 1
hearth_breaker_transitions_total{from="half_open",service="z2m",to="open"} 1
hearth_breaker_transitions_total{from="open",service="z2m",to="half_open"} 2
`
	if err := testutil.CollectAndCompare(m.transitions, strings.NewReader(want), "hearth_breaker_transitions_total"); err != nil {
		t.Error(err)
	}
	for _, tc := range []struct {
		service, state string
		want           float64
	}{
		{"z2m", "half_open", 1}, {"z2m", "open", 0}, {"z2m", "closed", 0},
		{"cloud", "open", 1}, {"cloud", "half_open", 0}, {"cloud", "closed", 0},
	} {
		if got := testutil.ToFloat64(m.state.WithLabelValues(tc.service, tc.state)); got != tc.want {
			t.Errorf("hearth_breaker_state{service=%q,state=%q} = %v; want %v", tc.service, tc.state, got, tc.want)
		}
	}
}

func TestMetricsEndpointServesBreakerAndRuntimeSeries(t *testing.T) {
	m := NewMetrics()
	m.BreakerTransition("z2m", "closed", "open")
	mux := http.NewServeMux()
	NewChecker().Register(mux)
	m.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %d; want 200", resp.StatusCode)
	}
	for _, line := range []string{
		`hearth_breaker_state{service="z2m",state="open"} 1`,
		`hearth_breaker_state{service="z2m",state="closed"} 0`,
		`hearth_breaker_transitions_total{from="closed",service="z2m",to="open"} 1`,
		"# TYPE go_goroutines gauge",
		"# TYPE process_cpu_seconds_total counter",
	} {
		if !strings.Contains(string(body), line+"\n") {
			t.Errorf("/metrics lacks %q", line)
		}
	}
	if resp, err := http.Get(srv.URL + "/readyz"); err != nil || resp.StatusCode != 200 {
		t.Errorf("/readyz next to /metrics: %v %v; want 200", resp, err)
	} else {
		resp.Body.Close()
	}
}

func TestStoreCommitCountsFailuresAndSaysWhileFailing(t *testing.T) {
	m := NewMetrics()
	for _, ok := range []bool{true, false, false, true} {
		m.StoreCommit(ok)
	}
	if got := testutil.ToFloat64(m.storeFailures); got != 2 {
		t.Errorf("hearth_store_commit_failures_total = %v after 2 failed commits; want 2", got)
	}
	if got := testutil.ToFloat64(m.storeFailing); got != 0 {
		t.Errorf("hearth_store_failing = %v after a commit succeeded; want 0", got)
	}
	m.StoreCommit(false)
	if got := testutil.ToFloat64(m.storeFailing); got != 1 {
		t.Errorf("hearth_store_failing = %v after a failed commit; want 1", got)
	}
}

func TestStoreQuarantinedIsOneUntilAcknowledged(t *testing.T) {
	m := NewMetrics()
	if got := testutil.ToFloat64(m.storeQuarantined); got != 0 {
		t.Errorf("hearth_store_quarantined = %v at first; want 0", got)
	}
	m.StoreQuarantined(true)
	if got := testutil.ToFloat64(m.storeQuarantined); got != 1 {
		t.Errorf("hearth_store_quarantined = %v while unacknowledged; want 1", got)
	}
	m.StoreQuarantined(false)
	if got := testutil.ToFloat64(m.storeQuarantined); got != 0 {
		t.Errorf("hearth_store_quarantined = %v once acknowledged; want 0", got)
	}
}
