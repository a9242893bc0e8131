package health

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A rejection counts only as a command that ended: it was never accepted,
// so it has no attempts and no duration. A success counts its attempt
// number and its confirmation; a failure neither; a safety alert its own
// series.
func TestCommandEndedCountsWhatEachEndHas(t *testing.T) {
	m := NewMetrics()
	m.CommandEnded(CommandEnd{Service: "zigbee", Class: "light", Status: "succeeded", Accepted: true, Attempts: 2,
		Duration: 6 * time.Second, Confirm: 250 * time.Millisecond})
	m.CommandEnded(CommandEnd{Service: "zigbee", Class: "lock", Status: "failed", Reason: "jammed", Accepted: true, Attempts: 1,
		Duration: 3 * time.Second, Confirm: -1, SafetyAlert: true})
	m.CommandEnded(CommandEnd{Status: "rejected", Reason: "unknown_device"})

	want := `
# HELP hearth_command_success_by_attempt_total Commands that succeeded, by the number of the attempt that succeeded (1 for the first): a share of successes on attempt 2 or 3 that grows means a sick dependency.
# TYPE hearth_command_success_by_attempt_total counter
hearth_command_success_by_attempt_total{attempt="2",class="light",service="zigbee"} 1
# HELP hearth_safety_commands_not_carried_out_total Commands to safety-critical devices (locks, alarms, valves, garage doors) not carried out: failed or expired, or rejected unauthorized or stale_command; each also raised a critical notification.
# TYPE hearth_safety_commands_not_carried_out_total counter
hearth_safety_commands_not_carried_out_total{class="lock",reason="jammed",service="zigbee",status="failed"} 1
`
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want),
		"hearth_command_success_by_attempt_total", "hearth_safety_commands_not_carried_out_total"); err != nil {
		t.Error(err)
	}
	for _, c := range []struct {
		name string
		want int
	}{
		{"hearth_commands_total", 3},
		{"hearth_command_attempts", 2},         // the rejection has none
		{"hearth_command_duration_seconds", 2}, // nor a duration
		{"hearth_attempt_confirm_seconds", 1},  // the success alone
	} {
		if got := testutil.CollectAndCount(m.reg, c.name); got != c.want {
			t.Errorf("%s: %d series; want %d", c.name, got, c.want)
		}
	}
	if got := testutil.ToFloat64(m.cmd.ends.WithLabelValues("", "", "rejected", "unknown_device")); got != 1 {
		t.Errorf("the rejection counted %v times; want 1", got)
	}
}

// The load of each service at a scrape: queue gauges for a service that
// takes commands, a notify service's retry budget alone, and no budget
// series for a service without one (+Inf tokens).
func TestWatchLoadExportsEachServicesLoad(t *testing.T) {
	m := NewMetrics()
	m.WatchLoad(func() []ServiceLoad {
		return []ServiceLoad{
			{Service: "zigbee", Commands: true, Pending: 4, Sleepy: 1, Held: 2, Witnessed: 3, RetryTokens: 2.5},
			{Service: "alerts", RetryTokens: 3},
			{Service: "zwave", Commands: true, RetryTokens: math.Inf(1)},
		}
	})
	want := `
# HELP hearth_breaker_held_commands Commands waiting for their service's open circuit breaker to let them through (breaker.hold), per service.
# TYPE hearth_breaker_held_commands gauge
hearth_breaker_held_commands{service="zigbee"} 2
hearth_breaker_held_commands{service="zwave"} 0
# HELP hearth_breaker_witness_waiting Attempts that timed out in their service's silence, waiting for a witness read (another device of the service asked for its state) to say whether the service is talking, per service.
# TYPE hearth_breaker_witness_waiting gauge
hearth_breaker_witness_waiting{service="zigbee"} 3
hearth_breaker_witness_waiting{service="zwave"} 0
# HELP hearth_queue_depth Commands accepted and not ended, per service: waiting their turn in their device's queue or being attempted.
# TYPE hearth_queue_depth gauge
hearth_queue_depth{service="zigbee"} 4
hearth_queue_depth{service="zwave"} 0
# HELP hearth_retry_budget_tokens Retries the service's retry budget allows now: max(min_retries, ratio × first attempts in the window) less the retries in it.
# TYPE hearth_retry_budget_tokens gauge
hearth_retry_budget_tokens{service="alerts"} 3
hearth_retry_budget_tokens{service="zigbee"} 2.5
# HELP hearth_sleepy_commands_pending Commands accepted and not ended for sleepy (battery) devices, per service: most wait for the device's next wake.
# TYPE hearth_sleepy_commands_pending gauge
hearth_sleepy_commands_pending{service="zigbee"} 1
hearth_sleepy_commands_pending{service="zwave"} 0
`
	if err := testutil.GatherAndCompare(m.reg, strings.NewReader(want),
		"hearth_queue_depth", "hearth_sleepy_commands_pending", "hearth_breaker_held_commands", "hearth_breaker_witness_waiting", "hearth_retry_budget_tokens"); err != nil {
		t.Error(err)
	}
}
