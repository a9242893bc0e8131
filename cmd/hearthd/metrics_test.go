package main

import (
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/simulator"
)

// metricsConfig is testConfig (Zigbee2MQTT, 2 attempts of 5 s, backoff
// base 1 s) with a webhook notify service at url, which receives the
// notification of a safety-critical command not carried out.
func metricsConfig(url string) string {
	cfg := strings.Replace(testConfig, "devices:\n", fmt.Sprintf(`  alerts:
    protocol: webhook
    url: %s
devices:
`, url), 1)
	if cfg == testConfig {
		panic("testConfig has no devices section")
	}
	return cfg
}

// scrape is one GET /metrics: its text and its families by name.
type scrape struct {
	text     string
	families map[string]*dto.MetricFamily
}

// scrapeMetrics GETs /metrics over HTTP and parses it as Prometheus does.
func scrapeMetrics(t *testing.T, d *daemon) scrape {
	t.Helper()
	code, body := getAPI(t, d, "/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("GET /metrics does not parse: %v\n%s", err, body)
	}
	return scrape{text: body, families: fams}
}

// series returns the samples of name as "label=value,... → value" lines,
// sorted: counters and gauges as their value, histograms as count and
// sum, so that a test compares a whole family at once.
func (s scrape) series(name string) []string {
	f, ok := s.families[name]
	if !ok {
		return nil
	}
	var out []string
	for _, m := range f.Metric {
		var labels []string
		for _, l := range m.Label {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		key := strings.Join(labels, ",")
		switch {
		case m.Counter != nil:
			out = append(out, fmt.Sprintf("%s → %g", key, m.Counter.GetValue()))
		case m.Gauge != nil:
			out = append(out, fmt.Sprintf("%s → %g", key, m.Gauge.GetValue()))
		case m.Histogram != nil:
			out = append(out, fmt.Sprintf("%s → count %d sum %g", key, m.Histogram.GetSampleCount(), m.Histogram.GetSampleSum()))
		}
	}
	sort.Strings(out)
	return out
}

// buckets returns the cumulative bucket counts of the histogram name with
// exactly labels ("service=zigbee,class=light"), by upper bound.
func (s scrape) buckets(t *testing.T, name, labels string) map[float64]uint64 {
	t.Helper()
	f, ok := s.families[name]
	if !ok {
		t.Fatalf("no %s", name)
	}
	for _, m := range f.Metric {
		var ls []string
		for _, l := range m.Label {
			ls = append(ls, l.GetName()+"="+l.GetValue())
		}
		if canonical(strings.Join(ls, ",")) != canonical(labels) || m.Histogram == nil {
			continue
		}
		out := map[float64]uint64{}
		for _, b := range m.Histogram.Bucket {
			out[b.GetUpperBound()] = b.GetCumulativeCount()
		}
		return out
	}
	t.Fatalf("no %s{%s}", name, labels)
	return nil
}

// canonical sorts the labels of a series line ("b=1,a=2 → 3"), as the
// exposition format sorts them, so that a test may name them in the
// order that reads best.
func canonical(line string) string {
	key, value, _ := strings.Cut(line, " → ")
	labels := strings.Split(key, ",")
	sort.Strings(labels)
	return strings.Join(labels, ",") + " → " + value
}

// sameSeries checks that the samples of name are exactly want (series
// lines, in any order and with labels in any order).
func sameSeries(t *testing.T, s scrape, name string, want ...string) {
	t.Helper()
	got := s.series(name)
	for i := range want {
		want[i] = canonical(want[i])
	}
	sort.Strings(want)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s:\n got %q\nwant %q", name, got, want)
	}
}

// The test: commands that succeed on the first attempt, on the
// second, that fail after both, that expire on arrival at a lock, and one
// to a device that does not exist, each counted once on /metrics, with
// the exact values of every series they touch — success by attempt
// number, attempts per command, the latencies on the fake clock, the
// queues, the retry budgets, the safety alert and the Retry-After the
// alert's webhook asked for. A repeated op_id is no new command.
func TestMetricsCountEveryCommandByAttempt(t *testing.T) {
	var h *harness
	srv, posts := notifyServer(t, &h, "2", http.StatusServiceUnavailable, http.StatusOK)
	h = newHarness(t, harnessOptions{config: metricsConfig(srv.URL), faults: simulator.Faults{DropFirst: 1, Silent: []string{"plug"}}})
	h.settle("hall_light")

	// Succeeded on attempt 2: the light drops its first set. 6 s from
	// acceptance (5 s attempt timeout, 1 s backoff); the report confirms
	// the second set at once.
	h.publish("hall_light", `{"state":"ON","op_id":"second"}`)
	h.result("second")
	if e := h.nextSet(); !e.Dropped {
		t.Fatal("the simulator did not drop the first set")
	}
	h.eventually("attempt 1's timeout set", func() bool { return h.clock.dueIn(5 * time.Second) })
	h.advanceTimeout(5 * time.Second)
	h.advance(time.Second)
	if r := h.await(func(r devices.Result) bool { return r.OpID == "second" && r.Status.Terminal() }, "second's end"); r.Status != devices.Succeeded || r.Attempts != 2 {
		t.Fatalf("second: %s after %d attempts; want succeeded after 2", r.Status, r.Attempts)
	}
	// Succeeded on attempt 1, at once.
	h.publish("hall_light", `{"state":"OFF","op_id":"first"}`)
	if r := h.final("first"); r.Status != devices.Succeeded || r.Attempts != 1 {
		t.Fatalf("first: %s after %d attempts; want succeeded after 1", r.Status, r.Attempts)
	}
	// Failed after both attempts, 11 s from acceptance: the plug is silent.
	h.publish("plug", `{"state":"ON","op_id":"silent"}`)
	h.result("silent")
	h.nextSet()
	h.eventually("attempt 1's timeout set", func() bool { return h.clock.dueIn(5 * time.Second) })
	h.advanceTimeout(5 * time.Second)
	h.advance(time.Second)
	h.nextSet()
	// The witness read after attempt 1 may still have its wait pending,
	// due sooner: move only once attempt 2's own timeout is set.
	h.eventually("attempt 2's timeout set", func() bool { return h.clock.dueIn(5 * time.Second) })
	h.advance(5 * time.Second)
	if r := h.await(func(r devices.Result) bool { return r.OpID == "silent" && r.Status.Terminal() }, "silent's end"); r.Status != devices.Failed || r.Reason != devices.ReasonTimeout {
		t.Fatalf("silent: %s/%s; want failed/timeout", r.Status, r.Reason)
	}
	// Expired on arrival at the lock (issued an hour ago, TTL 1 min): a
	// safety-critical command not carried out, which notifies.
	h.publish("front_door", `{"state":"LOCK","op_id":"late","issued_at":"2026-11-29T18:00:00Z","ttl":"1m"}`)
	if r := h.await(func(r devices.Result) bool { return r.OpID == "late" && r.Status.Terminal() }, "late's end"); r.Status != devices.Expired {
		t.Fatalf("late: %s/%s; want expired", r.Status, r.Reason)
	}
	// Rejected: no such device. Then a repeat of an op_id that ended:
	// answered from the store, counted nowhere.
	h.publish("attic_fan", `{"state":"ON","op_id":"nobody"}`)
	if r := h.result("nobody"); r.Status != devices.Rejected || r.Reason != devices.ReasonUnknownDevice {
		t.Fatalf("nobody: %s/%s; want rejected/unknown_device", r.Status, r.Reason)
	}
	h.publish("hall_light", `{"state":"OFF","op_id":"first"}`)
	if r := h.result("first"); r.Status != devices.Succeeded {
		t.Fatalf("repeat of first: %s; want its stored succeeded", r.Status)
	}
	// The alert's webhook answers 503 with Retry-After: 2, then 200.
	nextPost(t, posts)
	h.advance(2 * time.Second)
	nextPost(t, posts)
	h.eventually("the webhook's retry counted", func() bool {
		return len(scrapeMetrics(t, h.d).series("hearth_retry_after_waits_total")) > 0
	})

	s := scrapeMetrics(t, h.d)
	sameSeries(t, s, "hearth_commands_total",
		"service=zigbee,class=light,status=succeeded,reason= → 2",
		"service=zigbee,class=switch,status=failed,reason=timeout → 1",
		"service=zigbee,class=lock,status=expired,reason=ttl_elapsed → 1",
		"service=,class=,status=rejected,reason=unknown_device → 1")
	sameSeries(t, s, "hearth_command_success_by_attempt_total",
		"service=zigbee,class=light,attempt=1 → 1",
		"service=zigbee,class=light,attempt=2 → 1")
	sameSeries(t, s, "hearth_attempts_sent_total",
		"service=zigbee,class=light,attempt=1 → 2",
		"service=zigbee,class=light,attempt=2 → 1",
		"service=zigbee,class=switch,attempt=1 → 1",
		"service=zigbee,class=switch,attempt=2 → 1")
	sameSeries(t, s, "hearth_command_attempts",
		"service=zigbee,class=light → count 2 sum 3",
		"service=zigbee,class=switch → count 1 sum 2",
		"service=zigbee,class=lock → count 1 sum 0")
	if got, want := s.buckets(t, "hearth_command_attempts", "service=zigbee,class=light"), map[float64]uint64{1: 1, 2: 2, 3: 2, 4: 2, 5: 2, math.Inf(1): 2}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("hearth_command_attempts{light} buckets %v; want %v", got, want)
	}
	sameSeries(t, s, "hearth_command_duration_seconds",
		"service=zigbee,class=light → count 2 sum 6",
		"service=zigbee,class=switch → count 1 sum 11",
		"service=zigbee,class=lock → count 1 sum 0")
	if got := s.buckets(t, "hearth_command_duration_seconds", "service=zigbee,class=light"); got[5] != 1 || got[10] != 2 {
		t.Errorf("hearth_command_duration_seconds{light} buckets %v; want 1 by 5 s (the first, 0 s), 2 by 10 s (the second, 6 s)", got)
	}
	sameSeries(t, s, "hearth_attempt_confirm_seconds",
		"service=zigbee,class=light → count 2 sum 0")
	sameSeries(t, s, "hearth_safety_commands_not_carried_out_total",
		"service=zigbee,class=lock,status=expired,reason=ttl_elapsed → 1")
	sameSeries(t, s, "hearth_queue_depth", "service=zigbee → 0")
	sameSeries(t, s, "hearth_sleepy_commands_pending", "service=zigbee → 0")
	sameSeries(t, s, "hearth_breaker_held_commands", "service=zigbee → 0")
	// At +19 s the 10 s windows hold one retry each (zigbee's at +12 s,
	// alerts' at +19 s) and no first attempt but the webhook's (0.2 of a
	// token): the floor of 3, less one.
	sameSeries(t, s, "hearth_retry_budget_tokens", "service=zigbee → 2", "service=alerts → 2")
	sameSeries(t, s, "hearth_retry_after_waits_total", "service=alerts → 1")
	sameSeries(t, s, "hearth_retry_after_wait_seconds_total", "service=alerts → 2")
	sameSeries(t, s, "hearth_mqtt_connected", " → 1")
	sameSeries(t, s, "hearth_mqtt_reconnects_total", " → 0")
	sameSeries(t, s, "hearth_build_info",
		fmt.Sprintf("goversion=%s,revision=%s,version=devel → 1", runtime.Version(), buildRevision()))
	// Six commands came over MQTT, each acknowledged once; the store's
	// commits are at least one per accepted command (device state and
	// attempts take more, as they come).
	if c := s.families["hearth_intake_puback_wait_seconds"].Metric[0].Histogram.GetSampleCount(); c != 6 {
		t.Errorf("hearth_intake_puback_wait_seconds count %d; want 6", c)
	}
	if c := s.families["hearth_store_commit_seconds"].Metric[0].Histogram.GetSampleCount(); c < 4 {
		t.Errorf("hearth_store_commit_seconds count %d; want at least 4", c)
	}
	if t.Failed() {
		t.Log(s.text)
	}
}

// promtool finds Debian's promtool (package prometheus): CI must have it
// (.ci/run installs it); elsewhere a test without it is skipped.
func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not found: CI must install Debian's prometheus package (.ci/run does)")
		}
		t.Skip("promtool not found: apt-get install prometheus (do not start its service) to run this test")
	}
	return p
}

// runPromtool runs promtool with args and stdin, failing the test with
// its output unless it exits 0.
func runPromtool(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(promtool(t), args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// hearthdScrape is /metrics of a hearthd that has run a command of each
// kind the series count, so that every family has a sample.
func hearthdScrape(t *testing.T) scrape {
	h := newHarness(t, harnessOptions{faults: simulator.Faults{Silent: []string{"plug"}}})
	h.settle("hall_light")
	h.publish("hall_light", `{"state":"ON","op_id":"ok"}`)
	h.final("ok")
	h.publish("plug", `{"state":"ON","op_id":"silent"}`)
	h.result("silent")
	if op := h.driveUntilEnded("silent", 1); op.Status != devices.Failed {
		t.Fatalf("silent: %s/%s; want failed", op.Status, op.Reason)
	}
	h.await(func(r devices.Result) bool { return r.OpID == "silent" && r.Status.Terminal() }, "silent's end")
	return scrapeMetrics(t, h.d)
}

// /metrics passes promtool's lint (names, units, _total on counters,
// help on every family), as Prometheus' own tooling reads it.
func TestMetricsPassPromtoolCheck(t *testing.T) {
	promtool(t)
	s := hearthdScrape(t)
	runPromtool(t, s.text, "check", "metrics")
}
