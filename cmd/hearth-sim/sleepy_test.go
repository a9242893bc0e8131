package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
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
	c := sleepyConfig{devices: 20, duration: 2 * time.Hour, wake: 5 * time.Minute, window: 10 * time.Second,
		rate: 2, seed: 1, quiet: 2 * time.Millisecond, settle: 30 * time.Second}
	p := newFleetPlan(sleepyStart, c.devices, c.duration, c.wake, c.window, c.rate, c.seed)
	var stdout, stderr bytes.Buffer
	log := slog.New(slog.NewTextHandler(&stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	s, err := runFleet(context.Background(), c, p, log, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	for _, e := range s.examples {
		t.Log(e)
	}
	for name, n := range map[string]int{
		"delivered twice":          s.twice,
		"delivered late":           s.late,
		"written while asleep":     s.asleep,
		"missed":                   s.missed,
		"written though not fresh": s.stale,
		"stray writes":             s.stray,
		"ended otherwise":          s.wrongEnd,
		"not dead-lettered":        s.notDead,
		"wake mismatches":          s.wakeMismatch,
		"send/receipt skews":       s.skew,
		"unsettled instants":       s.unsettled,
	} {
		if n != 0 {
			t.Errorf("%s: %d, want 0", name, n)
		}
	}
	if s.deliveredOnce != s.fresh || s.succeeded != s.fresh {
		t.Errorf("delivered once %d, succeeded %d; want both = fresh %d", s.deliveredOnce, s.succeeded, s.fresh)
	}
	if got := s.superseded + s.expired + s.deliveredOnce; got != s.issued {
		t.Errorf("superseded %d + expired %d + delivered %d = %d; want issued %d", s.superseded, s.expired, s.deliveredOnce, got, s.issued)
	}
	if s.supersededDead != s.superseded || s.expiredDead != s.expired {
		t.Errorf("dead letters: %d of %d superseded, %d of %d expired; want all", s.supersededDead, s.superseded, s.expiredDead, s.expired)
	}
	// The seed exercises every path.
	if s.issued != len(p.commands) || s.fresh == 0 || s.superseded == 0 || s.expired == 0 {
		t.Errorf("issued %d (plan %d), fresh %d, superseded %d, expired %d; want every kind", s.issued, len(p.commands), s.fresh, s.superseded, s.expired)
	}
	if f := s.failures(); len(f) > 0 {
		t.Errorf("failures: %q", f)
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

// at is an offset from the plan's start.
func at(d time.Duration) time.Time { return sleepyStart.Add(d) }

// What must become of a command, at the edges: a device that wakes at
// +0, +5m, +10m… and listens 10 s.
func TestFleetPlanExpectations(t *testing.T) {
	p := emptyFleetPlan(sleepyStart, 1, time.Hour, 5*time.Minute, 10*time.Second)
	for _, c := range []struct {
		issued, ttl time.Duration
	}{
		{0, 2 * time.Minute},                // 0: issued at a wake: delivered then
		{time.Minute, 4 * time.Minute},      // 1: deadline at the next wake: expired, never sent
		{6 * time.Minute, 2 * time.Minute},  // 2: no wake within its TTL: expired
		{9 * time.Minute, time.Hour},        // 3: fresh at +10m, the wake at which 4 is issued
		{10 * time.Minute, 2 * time.Minute}, // 4: issued inside the awake window: delivered at once
		{11 * time.Minute, time.Hour},       // 5: superseded by 6 before the wake at +15m
		{14 * time.Minute, time.Hour},       // 6: fresh at +15m
	} {
		p.add(0, at(c.issued), c.ttl, 20.5+float64(len(p.commands)))
	}
	want := []fleetExpect{
		{fresh: true, status: devices.Succeeded, at: at(0)},
		{status: devices.Expired, at: at(5 * time.Minute)},
		{status: devices.Expired, at: at(8 * time.Minute)},
		{fresh: true, status: devices.Succeeded, at: at(10 * time.Minute)},
		{fresh: true, status: devices.Succeeded, at: at(10 * time.Minute)},
		{status: devices.Superseded, at: at(14 * time.Minute)},
		{fresh: true, status: devices.Succeeded, at: at(15 * time.Minute)},
	}
	for i, w := range want {
		if got := p.expect(i); got != w {
			t.Errorf("command %d: %+v, want %+v", i, got, w)
		}
	}
}

// idealObserved is what a run of p that keeps every promise observes.
func idealObserved(p *fleetPlan) fleetObserved {
	o := fleetObserved{final: map[string]devices.Result{}, dead: map[string]devices.Status{}, stored: map[string]devices.Op{}}
	for c, cmd := range p.commands {
		e := p.expect(c)
		o.final[cmd.opID] = devices.Result{OpID: cmd.opID, Device: p.devices[cmd.device].id, Status: e.status, At: e.at}
		if e.fresh {
			o.writes = append(o.writes, fleetWrite{device: cmd.device, value: cmd.value, at: e.at})
			o.stored[cmd.opID] = devices.Op{OpID: cmd.opID, Attempts: 1, LastSentAt: e.at}
		} else {
			o.dead[cmd.opID] = e.status
			o.stored[cmd.opID] = devices.Op{OpID: cmd.opID}
		}
	}
	for i := range p.devices {
		var ws []time.Time
		for w := p.firstWake(i); !w.After(p.end); w = w.Add(p.wake) {
			ws = append(ws, w)
		}
		o.wakes = append(o.wakes, ws)
	}
	return o
}

// The checker can fail: a fabricated event log with one fault of each
// kind fails on that fault's count, and the ideal log passes.
func TestCheckFleetCatchesEveryViolation(t *testing.T) {
	p := newFleetPlan(sleepyStart, 10, 3*time.Hour, 5*time.Minute, 10*time.Second, 4, 7)
	var fresh, superseded, expired = -1, -1, -1
	for c := range p.commands {
		switch e := p.expect(c); {
		case e.fresh && fresh < 0:
			fresh = c
		case e.status == devices.Superseded && superseded < 0:
			superseded = c
		case e.status == devices.Expired && expired < 0:
			expired = c
		}
	}
	if fresh < 0 || superseded < 0 || expired < 0 {
		t.Fatalf("the plan lacks a kind: fresh %d, superseded %d, expired %d", fresh, superseded, expired)
	}
	if s := checkFleet(p, idealObserved(p)); len(s.failures()) > 0 || s.deliveredOnce == 0 || s.superseded == 0 || s.expired == 0 {
		t.Fatalf("the ideal log: failures %q (delivered %d, superseded %d, expired %d)", s.failures(), s.deliveredOnce, s.superseded, s.expired)
	}
	freshCmd, supCmd, expCmd := p.commands[fresh], p.commands[superseded], p.commands[expired]
	writeOf := func(cmd fleetCommand, at time.Time) fleetWrite {
		return fleetWrite{device: cmd.device, value: cmd.value, at: at}
	}
	indexOfWrite := func(o fleetObserved, cmd fleetCommand) int {
		for i, w := range o.writes {
			if w.device == cmd.device && w.value == cmd.value {
				return i
			}
		}
		t.Fatalf("no write of %s", cmd.opID)
		return -1
	}
	freshAt := p.expect(fresh).at
	for _, tc := range []struct {
		name  string
		fault func(*fleetObserved)
		count func(fleetSummary) int
	}{
		{"a duplicate write", func(o *fleetObserved) {
			o.writes = append(o.writes, writeOf(freshCmd, freshAt))
		}, func(s fleetSummary) int { return s.twice }},
		{"a second attempt by Hearth's count", func(o *fleetObserved) {
			op := o.stored[freshCmd.opID]
			op.Attempts = 2
			o.stored[freshCmd.opID] = op
		}, func(s fleetSummary) int { return s.twice }},
		{"a write at the deadline", func(o *fleetObserved) {
			o.writes = append(o.writes, writeOf(expCmd, expCmd.deadline))
		}, func(s fleetSummary) int { return s.late }},
		{"a write to a sleeping node", func(o *fleetObserved) {
			o.writes[indexOfWrite(*o, freshCmd)].queued = true
		}, func(s fleetSummary) int { return s.asleep }},
		{"a fresh command never written", func(o *fleetObserved) {
			i := indexOfWrite(*o, freshCmd)
			o.writes = append(o.writes[:i], o.writes[i+1:]...)
		}, func(s fleetSummary) int { return s.missed }},
		{"a fresh command written at a later wake", func(o *fleetObserved) {
			o.writes[indexOfWrite(*o, freshCmd)].at = freshAt.Add(p.wake)
		}, func(s fleetSummary) int { return s.missed }},
		{"a superseded command written before its deadline", func(o *fleetObserved) {
			o.writes = append(o.writes, writeOf(supCmd, supCmd.issued))
		}, func(s fleetSummary) int { return s.stale }},
		{"a write no command asked for", func(o *fleetObserved) {
			o.writes = append(o.writes, fleetWrite{device: 0, value: 99.5, at: p.t0})
		}, func(s fleetSummary) int { return s.stray }},
		{"an expired command ended superseded", func(o *fleetObserved) {
			r := o.final[expCmd.opID]
			r.Status = devices.Superseded
			o.final[expCmd.opID] = r
		}, func(s fleetSummary) int { return s.wrongEnd }},
		{"a command that never ended", func(o *fleetObserved) {
			delete(o.final, supCmd.opID)
		}, func(s fleetSummary) int { return s.wrongEnd }},
		{"an expiry late", func(o *fleetObserved) {
			r := o.final[expCmd.opID]
			r.At = r.At.Add(time.Second)
			o.final[expCmd.opID] = r
		}, func(s fleetSummary) int { return s.wrongEnd }},
		{"a superseded command not in the dead-letter store", func(o *fleetObserved) {
			delete(o.dead, supCmd.opID)
		}, func(s fleetSummary) int { return s.notDead }},
		{"a wake off the schedule", func(o *fleetObserved) {
			o.wakes[3] = o.wakes[3][1:]
		}, func(s fleetSummary) int { return s.wakeMismatch }},
		{"a write received later than Hearth sent it", func(o *fleetObserved) {
			op := o.stored[freshCmd.opID]
			op.LastSentAt = op.LastSentAt.Add(-time.Second)
			o.stored[freshCmd.opID] = op
		}, func(s fleetSummary) int { return s.skew }},
		{"an unsettled instant", func(o *fleetObserved) {
			o.unsettled = 1
		}, func(s fleetSummary) int { return s.unsettled }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := idealObserved(p)
			tc.fault(&o)
			s := checkFleet(p, o)
			if got := tc.count(s); got != 1 {
				t.Errorf("count %d, want 1 (examples %q)", got, s.examples)
			}
			if len(s.failures()) == 0 {
				t.Error("no failure reported")
			}
		})
	}
}
