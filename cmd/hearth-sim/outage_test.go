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

	"github.com/hearthd/hearth/simulator/scenario/outage"
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

// A silent outage of the bridge under each traffic pattern, against a real
// hearthd: the breaker trips on its threshold of timeouts, commands fail
// fast, the fallback acts, one probe per cooldown, and the breaker closes
// after the recovery. The five conditions are checked by the scenario
// itself (each with the tolerance its configuration justifies, see
// outage.Summary); here the test also asserts the numbers they rest on.
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
	for _, pattern := range []string{outage.PatternSteady, outage.PatternSupersede, outage.PatternBurst} {
		t.Run(pattern, func(t *testing.T) {
			c := outage.Config{
				Before:         2 * time.Second,
				Outage:         6 * time.Second,
				After:          4 * time.Second,
				Rate:           5,
				Pattern:        pattern,
				BurstSize:      6,
				BurstEvery:     2 * time.Second,
				Threshold:      5,
				AttemptTimeout: 300 * time.Millisecond,
				OpenFor:        600 * time.Millisecond,
				MaxOpenFor:     1500 * time.Millisecond,
				ProbeTimeout:   300 * time.Millisecond,
				SummaryEvery:   2 * time.Second,
				HearthdLog:     filepath.Join(t.TempDir(), "hearthd.log"),
			}
			checkOutage(t, c, hearthdLauncher{bin: hearthd, logLevel: "info"})
		})
	}
}

// checkOutage runs the scenario of c and asserts that it held.
func checkOutage(t *testing.T, c outage.Config, h outage.Hearth) {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sum, err := outage.Run(context.Background(), c, h, &out, os.Stderr)
	if err != nil || len(sum.Failed) > 0 || t.Failed() {
		defer func() {
			t.Logf("timeline:\n%s", out.String())
			if log, err := os.ReadFile(c.HearthdLog); err == nil {
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
	// the outage, superseded or not, or of the next one when that set's
	// timeout was counted after it (the same one attempt in flight that
	// OpenBound allows; a loaded machine shifts when each timeout is
	// counted), plus 100 ms for a loaded machine.
	limit := c.AttemptTimeout + time.Duration(c.Threshold)*c.IssueAt(1) + 100*time.Millisecond
	if c.Pattern == outage.PatternBurst {
		limit = c.LongestGap() + c.AttemptTimeout + time.Duration(c.Threshold)*outage.BurstSpacing + 100*time.Millisecond
	}
	if sum.OpenAfter < 0 || sum.OpenAfter > limit {
		t.Errorf("breaker opened %v after the outage began, want within %v: the attempt timeout of the %d-th set sent into it, or the next", sum.OpenAfter, limit, c.Threshold)
	}
	if sum.AttemptsBeforeOpen > sum.OpenBound {
		t.Errorf("%d failed attempts before the breaker opened, want at most %d (threshold + 1 in flight)", sum.AttemptsBeforeOpen, sum.OpenBound)
	}
	if sum.FailedFast == 0 || sum.FastMedian >= c.AttemptTimeout {
		t.Errorf("%d fast failures, median %v; want some, faster than the attempt timeout %v", sum.FailedFast, sum.FastMedian, c.AttemptTimeout)
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
		if g < c.OpenFor {
			t.Errorf("probes %v apart, want at least open_for %v", g, c.OpenFor)
		}
	}
	if sum.FallbackActions == 0 || sum.FallbackBefore != 0 {
		t.Errorf("fallback acted %d times in the outage, %d before it; want some, none", sum.FallbackActions, sum.FallbackBefore)
	}
	if sum.ClosedAfter < 0 || sum.ClosedAfter > c.CloseBound() {
		t.Errorf("breaker closed %v after the recovery, want within %v", sum.ClosedAfter, c.CloseBound())
	}
	if l, ok := h.(hearthdLauncher); ok && !strings.Contains(out.String(), "\nhearthd "+l.bin+", pid ") {
		t.Errorf("header does not name hearthd %s and its pid", l.bin)
	}
	for _, want := range []string{"OUTAGE: bridge zigbee2mqtt goes offline", "closed → open", "first fast failure", "probe reached the offline bridge", "fallback: zigbee_upstairs/landing_light/set", "fallback: notification", "half_open → closed", "All 5 conditions held."} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("timeline lacks %q", want)
		}
	}
}
