package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
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
	for _, want := range []string{"usage: hearth-sim outage", "-hearthd", "-before", "-outage", "-after", "-announce", "-rate", "-open-for"} {
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

// A silent outage of the bridge under steady traffic, against a real
// hearthd: the breaker trips on its threshold of timeouts, commands fail
// fast, the fallback acts, one probe per cooldown, and the breaker closes
// after the recovery. The five conditions are checked by the scenario
// itself (each with the tolerance its configuration justifies, see
// outageSummary); here the test also asserts the numbers they rest on.
//
// The timeline leaves room on a loaded machine: the breaker trips within
// about a second of the outage (5 timeouts of 300 ms at 5 commands/s over
// two lights), leaving 5 s of the outage for probes every 0.6–1.5 s; the
// 4 s after it outlast the longest open period (1.5 s) plus a probe.
func TestOutageSilentBridgeTripsFailsFastProbesAndCloses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs hearthd for 12 s")
	}
	c := outageConfig{
		hearthd:         buildHearthd(t),
		before:          2 * time.Second,
		outage:          6 * time.Second,
		after:           4 * time.Second,
		rate:            5,
		threshold:       5,
		attemptTimeout:  300 * time.Millisecond,
		openFor:         600 * time.Millisecond,
		maxOpenFor:      1500 * time.Millisecond,
		probeTimeout:    300 * time.Millisecond,
		summaryEvery:    2 * time.Second,
		hearthdLogLevel: "info",
		hearthdLog:      filepath.Join(t.TempDir(), "hearthd.log"),
	}
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
	if sum.OpenAfter < 0 || sum.OpenAfter >= c.outage {
		t.Errorf("breaker opened %v after the outage began, want within it", sum.OpenAfter)
	}
	if sum.AttemptsBeforeOpen > c.threshold+1 {
		t.Errorf("%d failed attempts before the breaker opened, want at most %d (threshold + 1 in flight)", sum.AttemptsBeforeOpen, c.threshold+1)
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
	if sum.ClosedAfter < 0 || sum.ClosedAfter >= c.after {
		t.Errorf("breaker closed %v after the recovery, want within %v", sum.ClosedAfter, c.after)
	}
	for _, want := range []string{"OUTAGE: bridge zigbee2mqtt goes offline", "closed → open", "first fast failure", "probe reached the offline bridge", "fallback: zigbee_upstairs/landing_light/set", "half_open → closed", "All 5 conditions held."} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("timeline lacks %q", want)
		}
	}
}
