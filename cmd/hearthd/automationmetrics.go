package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hearthd/hearth/automations"
)

// automationMetrics exports the automations engine's counts, read at each
// scrape from Engine.Status and Engine.EventsDropped.
type automationMetrics struct {
	engine                                *automations.Engine
	runs, skips, repeats, dropped, queued *prometheus.Desc
	eventsDropped                         *prometheus.Desc
}

func newAutomationMetrics(e *automations.Engine) *automationMetrics {
	rule := []string{"rule"}
	return &automationMetrics{
		engine:        e,
		runs:          prometheus.NewDesc("hearth_automation_runs_total", "Runs of an automation's actions.", rule, nil),
		skips:         prometheus.NewDesc("hearth_automation_skips_total", "Triggers of an automation that ran nothing: paused by fallback_for or requires, or a condition did not hold.", rule, nil),
		repeats:       prometheus.NewDesc("hearth_automation_repeats_total", "Copies of an event already seen within the trigger's repeat_window: they ran nothing.", rule, nil),
		dropped:       prometheus.NewDesc("hearth_automation_dropped_total", "Runs dropped from a full queue of the automation before their actions ran (the oldest waiting goes).", rule, nil),
		queued:        prometheus.NewDesc("hearth_automation_queued", "Runs of an automation waiting for its earlier runs' actions.", rule, nil),
		eventsDropped: prometheus.NewDesc("hearth_automation_events_dropped_total", "MQTT messages for automations dropped because the engine's event queue was full.", nil, nil),
	}
}

func (m *automationMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.runs, m.skips, m.repeats, m.dropped, m.queued, m.eventsDropped} {
		ch <- d
	}
}

func (m *automationMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, s := range m.engine.Status() {
		ch <- prometheus.MustNewConstMetric(m.runs, prometheus.CounterValue, float64(s.Runs), s.Name)
		ch <- prometheus.MustNewConstMetric(m.skips, prometheus.CounterValue, float64(s.Skipped), s.Name)
		ch <- prometheus.MustNewConstMetric(m.repeats, prometheus.CounterValue, float64(s.Repeats), s.Name)
		ch <- prometheus.MustNewConstMetric(m.dropped, prometheus.CounterValue, float64(s.Dropped), s.Name)
		ch <- prometheus.MustNewConstMetric(m.queued, prometheus.GaugeValue, float64(s.Queued), s.Name)
	}
	ch <- prometheus.MustNewConstMetric(m.eventsDropped, prometheus.CounterValue, float64(m.engine.EventsDropped()))
}
