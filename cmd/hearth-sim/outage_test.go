package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// buildHearthd builds hearthd from this tree into a temporary directory,
// removed when the test ends, and returns its path.
func buildHearthd(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", dir+string(filepath.Separator), "./cmd/hearthd")
	cmd.Dir = filepath.Join("..", "..") // the module root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building hearthd: %v\n%s", err, out)
	}
	return filepath.Join(dir, "hearthd")
}

func TestOutageHelpIsNotAnError(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := runOutage(context.Background(), []string{"-h"}, &stdout, &stderr)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: err = %v, want flag.ErrHelp", err)
	}
	for _, want := range []string{"usage: hearth-sim outage", "-hearthd", "-before", "-outage", "-after", "-announce", "-rate", "-open-for", "-pattern", "-burst-size", "-burst-every"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("-h output lacks %q", want)
		}
	}
}

func TestOutageRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-outage", "0s"},
		{"-rate", "0"},
		{"-failure-threshold", "0"},
		{"-open-for", "2s", "-max-open-for", "1s"},
		{"-pattern", "random"},
		{"-pattern", "burst", "-burst-size", "0"},
		{"-pattern", "burst", "-burst-size", "10", "-burst-every", "400ms"},
		{"-hearthd", filepath.Join(t.TempDir(), "nothing")},
		{"extra"},
	} {
		var stdout, stderr bytes.Buffer
		if err := runOutage(context.Background(), args, &stdout, &stderr); err == nil || errors.Is(err, flag.ErrHelp) {
			t.Errorf("%q: err = %v, want an error", args, err)
		}
	}
}

// The derived breaker durations of the default timeline are those of the
// documented sample: open_for 15s doubling to 30s, attempts of 5s.
func TestOutageDerivesTheBreakerFromTheTimeline(t *testing.T) {
	c := outageConfig{outage: 5 * time.Minute, after: time.Minute}
	c.derive(map[string]bool{})
	if c.attemptTimeout != 5*time.Second || c.openFor != 15*time.Second || c.maxOpenFor != 30*time.Second || c.probeTimeout != 5*time.Second {
		t.Errorf("derived attempt %v, open_for %v, max_open_for %v, probe %v", c.attemptTimeout, c.openFor, c.maxOpenFor, c.probeTimeout)
	}
}

// A silent outage of the bridge under each traffic pattern, against a real
// hearthd: the breaker trips on its threshold of timeouts, commands fail
// fast, the fallback acts, one probe per cooldown, and the breaker closes
// after the recovery. The five conditions are checked by the scenario
// itself (each with the tolerance its configuration justifies, see
// outageSummary); here the test also asserts the numbers they rest on.
//
// The timeline leaves room on a loaded machine: the breaker trips within
// about a second of the outage (5 timeouts of 300 ms), leaving 5 s of the
// outage for probes every 0.6–1.5 s; the 4 s after it outlast the longest
// open period (1.5 s) plus a probe plus the longest gap between commands.
// steady sends 5 commands/s over two lights (each light every 400 ms,
// longer than an attempt); supersede each light every 120 ms, so that
// every attempt is superseded before it can time out; burst 6 commands
// 50 ms apart every 2 s.
func TestOutageSilentBridgeTripsFailsFastProbesAndCloses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs hearthd for 12 s per pattern")
	}
	hearthd := buildHearthd(t)
	for _, pattern := range []string{patternSteady, patternSupersede, patternBurst} {
		t.Run(pattern, func(t *testing.T) {
			c := outageConfig{
				hearthd:         hearthd,
				before:          2 * time.Second,
				outage:          6 * time.Second,
				after:           4 * time.Second,
				rate:            5,
				pattern:         pattern,
				burstSize:       6,
				burstEvery:      2 * time.Second,
				threshold:       5,
				attemptTimeout:  300 * time.Millisecond,
				openFor:         600 * time.Millisecond,
				maxOpenFor:      1500 * time.Millisecond,
				probeTimeout:    300 * time.Millisecond,
				summaryEvery:    2 * time.Second,
				hearthdLogLevel: "info",
				hearthdLog:      filepath.Join(t.TempDir(), "hearthd.log"),
			}
			checkOutage(t, c)
		})
	}
}

// checkOutage runs the scenario of c and asserts that it held.
func checkOutage(t *testing.T, c outageConfig) {
	t.Helper()
	if err := c.validate(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sum, err := runOutageScenario(context.Background(), c, &out, os.Stderr)
	if err != nil || len(sum.Failed) > 0 || t.Failed() {
		defer func() {
			t.Logf("timeline:\n%s", out.String())
			if log, err := os.ReadFile(c.hearthdLog); err == nil {
				t.Logf("hearthd's log:\n%s", log)
			}
		}()
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range sum.Failed {
		t.Errorf("condition %s", f)
	}
	// The breaker opens at the timeout of the threshold-th set sent into
	// the outage, superseded or not (100 ms for a loaded machine).
	limit := c.attemptTimeout + time.Duration(c.threshold-1)*c.issueAt(1) + 100*time.Millisecond
	if c.pattern == patternBurst {
		limit = c.longestGap() + c.attemptTimeout + time.Duration(c.threshold-1)*burstSpacing + 100*time.Millisecond
	}
	if sum.OpenAfter < 0 || sum.OpenAfter > limit {
		t.Errorf("breaker opened %v after the outage began, want within %v: the attempt timeout of the %d-th set sent into it", sum.OpenAfter, limit, c.threshold)
	}
	if sum.AttemptsBeforeOpen > sum.OpenBound {
		t.Errorf("%d failed attempts before the breaker opened, want at most %d (threshold + 1 in flight)", sum.AttemptsBeforeOpen, sum.OpenBound)
	}
	if sum.FailedFast == 0 || sum.FastMedian >= c.attemptTimeout {
		t.Errorf("%d fast failures, median %v; want some, faster than the attempt timeout %v", sum.FailedFast, sum.FastMedian, c.attemptTimeout)
	}
	if sum.TimedOutAfterOpen > len(sum.Probes) {
		t.Errorf("%d commands timed out after the breaker opened, but only %d probes", sum.TimedOutAfterOpen, len(sum.Probes))
	}
	if len(sum.Probes) == 0 || sum.MaxProbesPerCooldown != 1 {
		t.Errorf("%d probes, at most %d per cooldown; want some, one per cooldown", len(sum.Probes), sum.MaxProbesPerCooldown)
	}
	// Each cooldown lasts at least the first open period (later ones are
	// longer, at least half their doubled value with equal jitter).
	for _, g := range sum.ProbeGaps {
		if g < c.openFor {
			t.Errorf("probes %v apart, want at least open_for %v", g, c.openFor)
		}
	}
	if sum.FallbackActions == 0 || sum.FallbackBefore != 0 {
		t.Errorf("fallback acted %d times in the outage, %d before it; want some, none", sum.FallbackActions, sum.FallbackBefore)
	}
	if sum.ClosedAfter < 0 || sum.ClosedAfter > c.closeBound() {
		t.Errorf("breaker closed %v after the recovery, want within %v", sum.ClosedAfter, c.closeBound())
	}
	for _, want := range []string{"OUTAGE: bridge zigbee2mqtt goes offline", "closed → open", "first fast failure", "probe reached the offline bridge", "fallback: zigbee_upstairs/landing_light/set", "fallback: notification", "half_open → closed", "All 5 conditions held."} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("timeline lacks %q", want)
		}
	}
}

// The patterns' schedules: steady at -rate, bursts of -burst-size 50 ms
// apart every -burst-every, and supersede each light every 0.4 attempt
// timeouts.
func TestOutagePatternsScheduleTheirCommands(t *testing.T) {
	base := outageConfig{rate: 2, burstSize: 3, burstEvery: 10 * time.Second, attemptTimeout: 5 * time.Second}
	for _, tc := range []struct {
		pattern string
		want    []time.Duration // commands 0 to 4
		gap     time.Duration
	}{
		{patternSteady, []time.Duration{0, 500 * time.Millisecond, time.Second, 1500 * time.Millisecond, 2 * time.Second}, 500 * time.Millisecond},
		{patternBurst, []time.Duration{0, 50 * time.Millisecond, 100 * time.Millisecond, 10 * time.Second, 10*time.Second + 50*time.Millisecond}, 9900 * time.Millisecond},
		{patternSupersede, []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second}, time.Second},
	} {
		c := base
		c.pattern = tc.pattern
		for n, want := range tc.want {
			if got := c.issueAt(n); got != want {
				t.Errorf("%s: command %d at %v, want %v", tc.pattern, n, got, want)
			}
		}
		if got := c.longestGap(); got != tc.gap {
			t.Errorf("%s: longest gap %v, want %v", tc.pattern, got, tc.gap)
		}
	}
}

// observed is an observer of a silent outage that began at outageStart,
// with the given sets (offsets from it) and breaker states.
func observed(c outageConfig, sets []bridgeSet, transitions []transition) *outageObserver {
	o := newOutageObserver(c, io.Discard)
	o.t0 = outageStart.Add(-10 * time.Second)
	o.outageStart, o.outageEnd = outageStart, outageStart.Add(time.Minute)
	o.sets, o.transitions = sets, transitions
	return o
}

var outageStart = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func after(d time.Duration) time.Time { return outageStart.Add(d) }

// Sets whose commands newer ones superseded count as failed attempts once
// their attempt timeout passed unanswered: hearthd's breaker counts them.
func TestOutageCountsSupersededSetsAsFailedAttempts(t *testing.T) {
	c := outageConfig{threshold: 5, attemptTimeout: 5 * time.Second, openFor: 6 * time.Second, maxOpenFor: 15 * time.Second, probeTimeout: 5 * time.Second, rate: 1, pattern: patternSteady}
	var sets []bridgeSet
	for i := range 9 { // each light every 2 s: each set superseded before its timeout
		sets = append(sets, bridgeSet{at: after(time.Duration(i) * time.Second), device: trafficDevices[i%2]})
	}
	sum := observed(c, sets, []transition{{at: after(9*time.Second + 10*time.Millisecond), state: "open"}}).summary()
	if sum.AttemptsBeforeOpen != 5 || sum.SetsBeforeOpen != 9 {
		t.Errorf("%d failed attempts, %d sets before the opening; want 5 (those whose timeout passed), 9", sum.AttemptsBeforeOpen, sum.SetsBeforeOpen)
	}
	if slices.ContainsFunc(sum.Failed, func(f string) bool { return strings.HasPrefix(f, "1:") }) {
		t.Errorf("condition 1 failed: %v", sum.Failed)
	}
}

// A set that reaches the bridge a few milliseconds after the breaker
// opened left hearthd before it: it is not a second probe in that
// cooldown. One that arrives later is.
func TestOutageCountsASetInFlightAtTheOpeningBeforeIt(t *testing.T) {
	c := outageConfig{threshold: 5, attemptTimeout: time.Second, openFor: 6 * time.Second, maxOpenFor: 15 * time.Second, probeTimeout: time.Second, rate: 1, pattern: patternSteady}
	opened := after(5 * time.Second)
	states := []transition{{at: opened, state: "open"}, {at: opened.Add(6 * time.Second), state: "half_open"}}
	for _, tc := range []struct {
		late time.Duration
		want int
	}{{time.Millisecond, 1}, {200 * time.Millisecond, 2}} {
		sets := []bridgeSet{
			{at: opened.Add(tc.late), device: "hall_light"},
			{at: opened.Add(6*time.Second + 10*time.Millisecond), device: "kitchen_light"}, // the probe
		}
		if got := observed(c, sets, states).summary().MaxProbesPerCooldown; got != tc.want {
			t.Errorf("a set %v after the opening: %d sets in the cooldown, want %d", tc.late, got, tc.want)
		}
	}
}
