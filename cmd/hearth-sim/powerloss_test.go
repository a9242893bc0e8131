package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthd/hearth/broker"
)

// powerLoss runs the subcommand with args and returns its stdout.
func powerLoss(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := runPowerLoss(context.Background(), args, &stdout, &stderr)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		t.Logf("stderr: %s", stderr.String())
	}
	return stdout.String(), err
}

func TestPowerLossHelpIsNotAnError(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := runPowerLoss(context.Background(), []string{"-h"}, &stdout, &stderr)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: err = %v, want flag.ErrHelp (main exits 0 on it)", err)
	}
	for _, want := range []string{"usage: hearth-sim power-loss", "-devices", "-strategy", "-compare", "-cut", "-transport", "-broker", "-max-connect-rate", "-timeout", "-plot"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("-h output lacks %q:\n%s", want, stderr.String())
		}
	}
}

func TestPowerLossRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-devices", "0"},
		{"-strategy", "linear"},
		{"-base", "0s"},
		{"-base", "2s", "-cap", "1s"},
		{"-cut", "power"},
		{"-transport", "udp"},
		{"-broker", "tcp://127.0.0.1:1883", "-transport", "pipe"},
		{"-broker", "tcp://127.0.0.1:1883", "-cut", "broker"},
		{"-broker", "tcp://127.0.0.1:1883", "-max-connect-rate", "10"},
		{"-broker", "ws://127.0.0.1:1883"},
		{"-max-connect-rate", "-1"},
		{"-timeout", "0s"},
		{"-transport", "tcp", "-devices", "1000000"}, // more descriptors than allowed
		{"-compare", "-plot", filepath.Join(t.TempDir(), "plot.gif")},
		{"extra"},
	} {
		if _, err := powerLoss(t, args...); err == nil || errors.Is(err, flag.ErrHelp) {
			t.Errorf("%q: err = %v, want an error", args, err)
		}
	}
}

// The flags reach the scenario, and -broker without -transport means
// tcp: every device comes back to the external broker, timed by the
// devices, and one strategy writes no plot unless -plot is given.
func TestPowerLossBrokerFlagImpliesTCP(t *testing.T) {
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	out, err := powerLoss(t, "-devices", "5", "-base", "50ms", "-cap", "200ms", "-timeout", "5s", "-settle", "0s", "-strategy", "equal", "-broker", b.URL())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"5 devices, cut clients, external broker " + b.URL() + " over TCP", "Broker-side measurements unavailable", "equal: setup"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	back := false
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) == 9 && f[0] == "equal" {
			back = f[1] == "5" && f[8] == "0" // 5 attempts, none lost
		}
	}
	if !back {
		t.Errorf("no row of equal with 5 attempts and none lost:\n%s", out)
	}
	if strings.Contains(out, "plot written") {
		t.Errorf("one strategy without -plot wrote a plot:\n%s", out)
	}
}
