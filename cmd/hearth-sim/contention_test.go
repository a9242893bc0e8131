package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"path/filepath"
	"strings"
	"testing"
)

// contentionCLI runs the subcommand with args and returns its stdout.
func contentionCLI(t *testing.T, args ...string) (string, error) {
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
		if _, err := contentionCLI(t, args...); err == nil || errors.Is(err, flag.ErrHelp) {
			t.Errorf("%q: err = %v, want an error", args, err)
		}
	}
}

// The flags reach the study: one client count, one run, the seed in the
// header, and no plot.
func TestContentionFlagsReachTheStudy(t *testing.T) {
	out, err := contentionCLI(t, "-min", "7", "-max", "7", "-runs", "1", "-seed", "4", "-plot", "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "mean of 1 runs, seed 4;") {
		t.Errorf("header does not say 1 run, seed 4:\n%s", out)
	}
	var rows []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 11 && f[0] != "clients" {
			rows = append(rows, f[0])
		}
	}
	if got := strings.Join(rows, ","); got != "7" || strings.Contains(out, "plot written") {
		t.Errorf("rows for clients %s, want 7 and no plot:\n%s", got, out)
	}
}
