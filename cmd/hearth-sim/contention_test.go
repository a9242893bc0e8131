package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// contention runs the subcommand with args and returns its stdout.
func contention(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := runContention(context.Background(), args, &stdout, &stderr)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		t.Logf("stderr: %s", stderr.String())
	}
	return stdout.String(), err
}

func TestContentionHelpIsNotAnError(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := runContention(context.Background(), []string{"-h"}, &stdout, &stderr)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: err = %v, want flag.ErrHelp (main exits 0 on it)", err)
	}
	for _, want := range []string{"usage: hearth-sim contention", "-runs", "-plot", "-base", "-cap"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("-h output lacks %q:\n%s", want, stderr.String())
		}
	}
}

func TestContentionRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-min", "0"},
		{"-min", "20", "-max", "10"},
		{"-step", "0"},
		{"-runs", "0"},
		{"-base", "-1ms"},
		{"-cap", "0s"},
		{"-net-mean", "0s"},
		{"extra"},
		{"-plot", filepath.Join(t.TempDir(), "plot.gif"), "-min", "2", "-max", "2", "-runs", "1"},
	} {
		if _, err := contention(t, args...); err == nil || errors.Is(err, flag.ErrHelp) {
			t.Errorf("%q: err = %v, want an error", args, err)
		}
	}
}

// A small study prints one row per client count under a header naming
// every strategy, the same table for the same seed, and a plot.
func TestContentionPrintsTableAndWritesPlot(t *testing.T) {
	dir := t.TempDir()
	svg := filepath.Join(dir, "contention.svg")
	args := []string{"-min", "5", "-max", "15", "-step", "5", "-runs", "3", "-seed", "9", "-plot", svg}
	out, err := contention(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	const header = "clients none exponential full equal decorrelated none exponential full equal decorrelated"
	var rows []string
	headed := false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		switch {
		case strings.Join(f, " ") == header:
			headed = true
		case len(f) == 11:
			rows = append(rows, f[0])
		}
	}
	if !headed {
		t.Errorf("no header %q, calls then times per strategy:\n%s", header, out)
	}
	if got := strings.Join(rows, ","); got != "5,10,15" {
		t.Errorf("table rows for clients %s, want 5,10,15:\n%s", got, out)
	}
	data, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "clients", "calls (log scale)", "decorrelated"} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("plot lacks %q", want)
		}
	}

	args[len(args)-1] = "" // no plot
	again, err := contention(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if table, _, _ := strings.Cut(out, "\nplot written"); again != table {
		t.Errorf("same seed, different table:\n%s\nthen:\n%s", out, again)
	}
}

// The strategies are wired to retry.Backoff as the study says: no backoff,
// then exponential (×2 from -base, capped) without jitter, and full, equal
// and decorrelated jitter within their bounds.
func TestContentionStrategiesAreTheAWSPostsSet(t *testing.T) {
	const base, limit = 5 * time.Millisecond, 2 * time.Second
	s := strategies(base, limit)
	var names []string
	for _, st := range s {
		names = append(names, st.name)
	}
	if got := strings.Join(names, ","); got != "none,exponential,full,equal,decorrelated" {
		t.Fatalf("strategies %s", got)
	}
	if s[0].backoff != nil {
		t.Error("none has a backoff")
	}
	r := rand.New(rand.NewPCG(1, 1))
	ceilings := []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 1280, 2000, 2000}
	for i, c := range ceilings {
		n, c := i+1, c*time.Millisecond
		if got := s[1].backoff(n, 0, r); got != c {
			t.Errorf("exponential retry %d: %v, want %v", n, got, c)
		}
		for range 100 {
			if got := s[2].backoff(n, 0, r); got < 0 || got > c {
				t.Errorf("full jitter retry %d: %v, want within [0, %v]", n, got, c)
			}
			if got := s[3].backoff(n, 0, r); got < c/2 || got > c {
				t.Errorf("equal jitter retry %d: %v, want within [%v, %v]", n, got, c/2, c)
			}
			prev := c / 2
			if got := s[4].backoff(n, prev, r); got < base || got > min(limit, 3*max(prev, base)) {
				t.Errorf("decorrelated jitter after %v: %v, want within [%v, %v]", prev, got, base, min(limit, 3*prev))
			}
		}
	}
}
