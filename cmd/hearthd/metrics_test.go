package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"github.com/hearthd/hearth/buildinfo"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/simulator"
)

// metricsConfig is testConfig (Zigbee2MQTT, 2 attempts of 5 s, backoff
// base 1 s) with its breaker holding commands while open, and a webhook
// notify service at url, which receives the notification of a
// safety-critical command not carried out.
func metricsConfig(url string) string {
	cfg := strings.Replace(testConfig, "devices:\n", fmt.Sprintf(`  alerts:
    protocol: webhook
    url: %s
devices:
`, url), 1)
	cfg = strings.Replace(cfg, "    protocol: zigbee2mqtt\n", "    protocol: zigbee2mqtt\n    breaker: {hold: true}\n", 1)
	if strings.Count(cfg, "alerts:") != 1 || strings.Count(cfg, "hold: true") != 1 || strings.Contains(cfg, "automations:") {
		panic("testConfig changed: update metricsConfig")
	}
	// An automation, so that the per-rule series are there.
	return cfg + `automations:
  probe:
    triggers:
      - mqtt: {topic: hearth-test/probe}
    actions:
      - publish: {topic: hearth-test/probed, payload: "1"}
`
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

// metricsScenario runs, on a hearthd with a webhook notify service,
// commands that succeed on the first attempt, on the second, that fail
// after both, that expire on arrival at a lock, and one to a device that
// does not exist, then a repeat of an op_id that ended, and the
// webhook's Retry-After; then it opens the bridge's breaker and sends a
// command it holds; and returns GET /metrics then, every family of
// Hearth's with a sample. The fake clock stands at +19 s.
func metricsScenario(t *testing.T) scrape {
	t.Helper()
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
	// The bridge goes offline: its breaker opens, and a command waits
	// for it, held (counted held before its queued result is out).
	h.openBreaker()
	h.publish("hall_light", `{"state":"ON","op_id":"held"}`)
	if r := h.await(func(r devices.Result) bool { return r.OpID == "held" && r.Status == devices.Queued }, "held queued"); r.Reason != devices.ReasonBreakerOpen {
		t.Fatalf("held: queued %s; want breaker_open", r.Reason)
	}
	return scrapeMetrics(t, h.d)
}

// The test: the commands of metricsScenario, each counted once on
// /metrics, with the exact values of every series they touch — success by
// attempt number, attempts per command, the latencies on the fake clock,
// the queues, the retry budgets, the safety alert and the Retry-After the
// alert's webhook asked for. A repeated op_id is no new command.
func TestMetricsCountEveryCommandByAttempt(t *testing.T) {
	s := metricsScenario(t)
	// Every configured service and class has its succeeded and
	// attempt="1" series from the start, at 0 until one succeeds.
	sameSeries(t, s, "hearth_commands_total",
		"service=zigbee,class=light,status=succeeded,reason= → 2",
		"service=zigbee,class=switch,status=succeeded,reason= → 0",
		"service=zigbee,class=lock,status=succeeded,reason= → 0",
		"service=zigbee,class=cover,status=succeeded,reason= → 0",
		"service=zigbee,class=switch,status=failed,reason=timeout → 1",
		"service=zigbee,class=lock,status=expired,reason=ttl_elapsed → 1",
		"service=,class=,status=rejected,reason=unknown_device → 1")
	sameSeries(t, s, "hearth_command_success_by_attempt_total",
		"service=zigbee,class=light,attempt=1 → 1",
		"service=zigbee,class=switch,attempt=1 → 0",
		"service=zigbee,class=lock,attempt=1 → 0",
		"service=zigbee,class=cover,attempt=1 → 0",
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
	sameSeries(t, s, "hearth_queue_depth", "service=zigbee → 1")
	sameSeries(t, s, "hearth_sleepy_commands_pending", "service=zigbee → 0")
	sameSeries(t, s, "hearth_breaker_held_commands", "service=zigbee → 1")
	sameSeries(t, s, "hearth_breaker_transitions_total", "service=zigbee,from=closed,to=open → 1")
	sameSeries(t, s, "hearth_breaker_state",
		"service=zigbee,state=open → 1", "service=zigbee,state=closed → 0", "service=zigbee,state=half_open → 0",
		"service=alerts,state=open → 0", "service=alerts,state=closed → 1", "service=alerts,state=half_open → 0")
	// At +19 s the 10 s windows hold one retry each (zigbee's at +12 s,
	// alerts' at +19 s) and no first attempt but the webhook's (0.2 of a
	// token): the floor of 3, less one.
	sameSeries(t, s, "hearth_retry_budget_tokens", "service=zigbee → 2", "service=alerts → 2")
	sameSeries(t, s, "hearth_retry_after_waits_total", "service=alerts → 1")
	sameSeries(t, s, "hearth_retry_after_wait_seconds_total", "service=alerts → 2")
	sameSeries(t, s, "hearth_mqtt_connected", " → 1")
	sameSeries(t, s, "hearth_mqtt_reconnects_total", " → 0")
	sameSeries(t, s, "hearth_build_info",
		fmt.Sprintf("goversion=%s,revision=%s,version=devel → 1", runtime.Version(), buildinfo.Resolve(version, revision).Revision))
	// Seven commands came over MQTT, each acknowledged once; the store's
	// commits are at least one per accepted command (device state and
	// attempts take more, as they come).
	if c := s.families["hearth_intake_puback_wait_seconds"].Metric[0].Histogram.GetSampleCount(); c != 7 {
		t.Errorf("hearth_intake_puback_wait_seconds count %d; want 7", c)
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

// /metrics passes promtool's lint (names, units, _total on counters,
// help on every family), as Prometheus' own tooling reads it.
func TestMetricsPassPromtoolCheck(t *testing.T) {
	promtool(t)
	s := metricsScenario(t)
	runPromtool(t, s.text, "check", "metrics")
}

// The shipped alert rules pass promtool's check, and their unit tests
// (deploy/prometheus/hearth-rules.test.yml: the attempt-1 ratio, the
// safety-critical command, the breaker and the store) pass.
func TestShippedAlertRulesPassPromtool(t *testing.T) {
	promtool(t)
	runPromtool(t, "", "check", "rules", "../../deploy/prometheus/hearth-rules.yml")
	runPromtool(t, "", "test", "rules", "../../deploy/prometheus/hearth-rules.test.yml")
}

// hearthMetric finds the names of Hearth's series in a PromQL expression,
// with its quoted strings (label values) left out.
var (
	hearthMetric = regexp.MustCompile(`\bhearth_[a-zA-Z0-9_:]*`)
	promQLString = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
)

// exported returns the series names a scrape shows: each family's, and
// a histogram's _bucket, _sum and _count.
func (s scrape) exported() map[string]bool {
	names := map[string]bool{}
	for name, f := range s.families {
		names[name] = true
		if f.GetType() == dto.MetricType_HISTOGRAM {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[name+suffix] = true
			}
		}
	}
	return names
}

// namesOnlyExported fails for every hearth_ name in expr that /metrics
// does not show, and for an expression that names none.
func namesOnlyExported(t *testing.T, where, expr string, exported map[string]bool) {
	t.Helper()
	names := hearthMetric.FindAllString(promQLString.ReplaceAllString(expr, `""`), -1)
	if len(names) == 0 {
		t.Errorf("%s: %q names no series of Hearth's", where, expr)
	}
	for _, n := range names {
		if !exported[n] {
			t.Errorf("%s: %q names %s, which hearthd does not export", where, expr, n)
		}
	}
}

// The Grafana dashboard (deploy/grafana/hearth.json) is JSON Grafana
// imports — a title, a uid, the Prometheus data source as an input, every
// panel a target or more — and every expression in it, and in the alert
// rules, names only series hearthd exports, read from a scrape of a
// hearthd that ran every kind of command; with Grafana's variables
// replaced, every dashboard expression is PromQL promtool accepts.
func TestShippedDashboardAndRulesNameOnlyExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile("../../deploy/grafana/hearth.json")
	if err != nil {
		t.Fatal(err)
	}
	type target struct {
		Expr string `json:"expr"`
	}
	type panel struct {
		ID      int      `json:"id"`
		Type    string   `json:"type"`
		Title   string   `json:"title"`
		Targets []target `json:"targets"`
		Panels  []panel  `json:"panels"`
	}
	var dash struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Inputs []struct {
			Name, Type, PluginID string
		} `json:"__inputs"`
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Query struct {
					Query string `json:"query"`
				} `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("hearth.json: %v", err)
	}
	if dash.Title == "" || dash.UID == "" || len(dash.Inputs) != 1 || dash.Inputs[0].Name != "DS_PROMETHEUS" {
		t.Errorf("dashboard title %q uid %q inputs %+v; want a title, a uid and the one input DS_PROMETHEUS", dash.Title, dash.UID, dash.Inputs)
	}

	s := metricsScenario(t)
	exported := s.exported()
	var exprs []string
	ids := map[int]bool{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if ids[p.ID] {
				t.Errorf("panel %q: id %d used twice", p.Title, p.ID)
			}
			ids[p.ID] = true
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				t.Errorf("panel %q has no target", p.Title)
			}
			for _, tg := range p.Targets {
				namesOnlyExported(t, "dashboard panel "+strconv.Quote(p.Title), tg.Expr, exported)
				exprs = append(exprs, tg.Expr)
			}
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		namesOnlyExported(t, "dashboard variable", v.Query.Query, exported)
	}
	for _, want := range []string{"hearth_command_success_by_attempt_total", "hearth_commands_total", "hearth_command_duration_seconds_bucket",
		"hearth_attempt_confirm_seconds_bucket", "hearth_queue_depth", "hearth_breaker_state", "hearth_store_commit_seconds_bucket", "hearth_mqtt_connected"} {
		if !slices.ContainsFunc(exprs, func(e string) bool { return strings.Contains(e, want) }) {
			t.Errorf("no dashboard panel shows %s", want)
		}
	}

	rawRules, err := os.ReadFile("../../deploy/prometheus/hearth-rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(rawRules, &rules); err != nil {
		t.Fatalf("hearth-rules.yml: %v", err)
	}
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			alerts++
			namesOnlyExported(t, "alert "+r.Alert, r.Expr, exported)
		}
	}
	if alerts < 4 {
		t.Errorf("hearth-rules.yml has %d alerts; want at least the 4 the issue names", alerts)
	}

	// The dashboard's expressions as recording rules, for promtool to
	// parse: Grafana's variables become what Grafana would put there.
	promtool(t)
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	vars := strings.NewReplacer("$__rate_interval", "5m", "$service", ".*")
	for i, e := range exprs {
		q, _ := json.Marshal(vars.Replace(e)) // a JSON string is a YAML string
		fmt.Fprintf(&b, "      - record: hearth:dashboard_panel_%d\n        expr: %s\n", i, q)
	}
	file := filepath.Join(t.TempDir(), "dashboard-rules.yml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	runPromtool(t, "", "check", "rules", file)
}

// The README's Metrics table lists every series of Hearth's that /metrics
// shows, and no other.
func TestREADMEListsEveryMetric(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(raw), "\n### Metrics\n")
	if !ok {
		t.Fatal("README.md has no ### Metrics section")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	listed := map[string]bool{}
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `hearth_") {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "| "), " |")
		for _, n := range hearthMetric.FindAllString(first, -1) {
			listed[n] = true
		}
	}
	s := metricsScenario(t)
	for name := range s.families {
		if strings.HasPrefix(name, "hearth_") && !listed[name] {
			t.Errorf("README's Metrics section does not list %s", name)
		}
	}
	for name := range listed {
		if _, ok := s.families[name]; !ok {
			t.Errorf("README's Metrics section lists %s, which hearthd does not export", name)
		}
	}
}
