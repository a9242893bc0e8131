package sleepy

import (
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

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
	if s := checkFleet(p, idealObserved(p)); len(s.Failures()) > 0 || s.DeliveredOnce == 0 || s.Superseded == 0 || s.Expired == 0 {
		t.Fatalf("the ideal log: failures %q (delivered %d, superseded %d, expired %d)", s.Failures(), s.DeliveredOnce, s.Superseded, s.Expired)
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
		count func(Summary) int
	}{
		{"a duplicate write", func(o *fleetObserved) {
			o.writes = append(o.writes, writeOf(freshCmd, freshAt))
		}, func(s Summary) int { return s.Twice }},
		{"a second attempt by Hearth's count", func(o *fleetObserved) {
			op := o.stored[freshCmd.opID]
			op.Attempts = 2
			o.stored[freshCmd.opID] = op
		}, func(s Summary) int { return s.Twice }},
		{"a write at the deadline", func(o *fleetObserved) {
			o.writes = append(o.writes, writeOf(expCmd, expCmd.deadline))
		}, func(s Summary) int { return s.Late }},
		{"a write to a sleeping node", func(o *fleetObserved) {
			o.writes[indexOfWrite(*o, freshCmd)].queued = true
		}, func(s Summary) int { return s.Asleep }},
		{"a fresh command never written", func(o *fleetObserved) {
			i := indexOfWrite(*o, freshCmd)
			o.writes = append(o.writes[:i], o.writes[i+1:]...)
		}, func(s Summary) int { return s.Missed }},
		{"a fresh command written at a later wake", func(o *fleetObserved) {
			o.writes[indexOfWrite(*o, freshCmd)].at = freshAt.Add(p.wake)
		}, func(s Summary) int { return s.Missed }},
		{"a superseded command written before its deadline", func(o *fleetObserved) {
			o.writes = append(o.writes, writeOf(supCmd, supCmd.issued))
		}, func(s Summary) int { return s.Stale }},
		{"a write no command asked for", func(o *fleetObserved) {
			o.writes = append(o.writes, fleetWrite{device: 0, value: 99.5, at: p.t0})
		}, func(s Summary) int { return s.Stray }},
		{"an expired command ended superseded", func(o *fleetObserved) {
			r := o.final[expCmd.opID]
			r.Status = devices.Superseded
			o.final[expCmd.opID] = r
		}, func(s Summary) int { return s.WrongEnd }},
		{"a command that never ended", func(o *fleetObserved) {
			delete(o.final, supCmd.opID)
		}, func(s Summary) int { return s.WrongEnd }},
		{"an expiry late", func(o *fleetObserved) {
			r := o.final[expCmd.opID]
			r.At = r.At.Add(time.Second)
			o.final[expCmd.opID] = r
		}, func(s Summary) int { return s.WrongEnd }},
		{"a superseded command not in the dead-letter store", func(o *fleetObserved) {
			delete(o.dead, supCmd.opID)
		}, func(s Summary) int { return s.NotDead }},
		{"a wake off the schedule", func(o *fleetObserved) {
			o.wakes[3] = o.wakes[3][1:]
		}, func(s Summary) int { return s.WakeMismatch }},
		{"a write received later than Hearth sent it", func(o *fleetObserved) {
			op := o.stored[freshCmd.opID]
			op.LastSentAt = op.LastSentAt.Add(-time.Second)
			o.stored[freshCmd.opID] = op
		}, func(s Summary) int { return s.Skew }},
		{"an unsettled instant", func(o *fleetObserved) {
			o.unsettled = 1
		}, func(s Summary) int { return s.Unsettled }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := idealObserved(p)
			tc.fault(&o)
			s := checkFleet(p, o)
			if got := tc.count(s); got != 1 {
				t.Errorf("count %d, want 1 (examples %q)", got, s.Examples)
			}
			if len(s.Failures()) == 0 {
				t.Error("no failure reported")
			}
		})
	}
}
