package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/simulator/scenario/sleepy"
)

func TestSleepyHelpIsNotAnError(t *testing.T) {
	var stdout, stderr bytes.Buffer
	err := runSleepy(context.Background(), []string{"-h"}, &stdout, &stderr)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: err = %v, want flag.ErrHelp (main exits 0 on it)", err)
	}
	for _, want := range []string{"usage: hearth-sim sleepy", "-devices", "-duration", "-wake", "-window", "-rate", "-seed", "-v"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("-h output lacks %q", want)
		}
	}
}

func TestSleepyRejectsBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-devices", "0"},
		{"-devices", "4000"},
		{"-duration", "30s"},
		{"-wake", "30s"},
		{"-window", "0s"},
		{"-window", "30s"}, // a phase's window would reach into the next phase's wake
		{"-rate", "0"},
		{"-rate", "61"},
		{"-settle", "0s"},
		{"extra"},
	} {
		var stdout, stderr bytes.Buffer
		if err := runSleepy(context.Background(), args, &stdout, &stderr); err == nil || errors.Is(err, flag.ErrHelp) {
			t.Errorf("%q: err = %v, want an error", args, err)
		}
	}
}

// The "done when", small: 20 sleepy thermostats over 2 hours of
// commands, the real broker, store, adapter, dispatcher and simulated
// gateway on a fake clock. Every command fresh at a wake is written once,
// at that wake, and succeeds; every other one ends superseded or expired
// in the dead-letter store, never written; nothing is written late or to
// a sleeping node.
func TestSleepyFleetDeliversEveryFreshCommandOnceAtItsWake(t *testing.T) {
	c := sleepy.Config{Devices: 20, Duration: 2 * time.Hour, Wake: 5 * time.Minute, Window: 10 * time.Second,
		Rate: 2, Seed: 1, Quiet: 2 * time.Millisecond, Settle: 30 * time.Second}
	var stdout, stderr bytes.Buffer
	s, err := sleepy.Run(context.Background(), c, fleetHearth{}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	for _, e := range s.Examples {
		t.Log(e)
	}
	for name, n := range map[string]int{
		"delivered twice":          s.Twice,
		"delivered late":           s.Late,
		"written while asleep":     s.Asleep,
		"missed":                   s.Missed,
		"written though not fresh": s.Stale,
		"stray writes":             s.Stray,
		"ended otherwise":          s.WrongEnd,
		"not dead-lettered":        s.NotDead,
		"wake mismatches":          s.WakeMismatch,
		"send/receipt skews":       s.Skew,
		"unsettled instants":       s.Unsettled,
	} {
		if n != 0 {
			t.Errorf("%s: %d, want 0", name, n)
		}
	}
	if s.DeliveredOnce != s.Fresh || s.Succeeded != s.Fresh {
		t.Errorf("delivered once %d, succeeded %d; want both = fresh %d", s.DeliveredOnce, s.Succeeded, s.Fresh)
	}
	if got := s.Superseded + s.Expired + s.DeliveredOnce; got != s.Issued {
		t.Errorf("superseded %d + expired %d + delivered %d = %d; want issued %d", s.Superseded, s.Expired, s.DeliveredOnce, got, s.Issued)
	}
	if s.SupersededDead != s.Superseded || s.ExpiredDead != s.Expired {
		t.Errorf("dead letters: %d of %d superseded, %d of %d expired; want all", s.SupersededDead, s.Superseded, s.ExpiredDead, s.Expired)
	}
	// The seed exercises every path.
	if s.Published != s.Issued || s.Fresh == 0 || s.Superseded == 0 || s.Expired == 0 {
		t.Errorf("published %d of %d planned, fresh %d, superseded %d, expired %d; want every kind", s.Published, s.Issued, s.Fresh, s.Superseded, s.Expired)
	}
	if f := s.Failures(); len(f) > 0 || s.Err() != nil {
		t.Errorf("failures: %q (err %v)", f, s.Err())
	}
}

// The subcommand prints the counts and says that all held.
func TestSleepyPrintsTheCounts(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := runSleepy(context.Background(), []string{"-devices", "4", "-duration", "20m", "-rate", "6"}, &stdout, &stderr); err != nil {
		t.Fatalf("err = %v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	for _, want := range []string{"commands issued", "fresh at a wake", "delivered exactly once at that wake", "confirmed succeeded",
		"superseded before a wake", "expired before a wake", "delivered twice", "delivered late, past TTL",
		"written while asleep", "missed", "wall time", "All held"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
}
