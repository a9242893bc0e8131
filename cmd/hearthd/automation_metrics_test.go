package main

import (
	"regexp"
	"strconv"
	"testing"
)

// automationSeries reads one per-rule series of the automations' metrics.
func automationSeries(h *harness, name, rule string) float64 {
	h.t.Helper()
	_, _, body := h.call("GET", "/metrics", "", "")
	m := regexp.MustCompile(`(?m)^` + name + `\{rule="` + rule + `"\} (\S+)$`).FindStringSubmatch(body)
	if m == nil {
		h.t.Fatalf("/metrics lacks %s{rule=%q}", name, rule)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		h.t.Fatal(err)
	}
	return v
}

// An arrival announced twice at once is one event: the greeting rule runs
// once, and the copy shows as a repeat in /metrics.
func TestAutomationMetricsCountRunsAndRepeats(t *testing.T) {
	h := newHarness(t, harnessOptions{config: automationConfig})
	h.settle("hall_light")
	greetings := h.watch("hearth-test/greeting")
	for range 2 {
		mustToken(t, h.client.Publish("presence/arrived", 1, false, "alice"))
	}
	<-greetings
	h.eventually("the copy counted a repeat", func() bool {
		return automationSeries(h, "hearth_automation_repeats_total", "greet_arrival") == 1
	})
	if got := automationSeries(h, "hearth_automation_runs_total", "greet_arrival"); got != 1 {
		t.Errorf("hearth_automation_runs_total{rule=greet_arrival} = %v; want 1", got)
	}
	if got := h.metric("hearth_automation_events_dropped_total"); got != 0 {
		t.Errorf("hearth_automation_events_dropped_total = %v; want 0", got)
	}
}
