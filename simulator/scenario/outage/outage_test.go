package outage

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// The derived breaker durations of the default timeline are those of the
// documented sample: open_for 15s doubling to 30s, attempts of 5s.
func TestOutageDerivesTheBreakerFromTheTimeline(t *testing.T) {
	c := Config{Outage: 5 * time.Minute, After: time.Minute}
	c.Derive(Given{})
	if c.AttemptTimeout != 5*time.Second || c.OpenFor != 15*time.Second || c.MaxOpenFor != 30*time.Second || c.ProbeTimeout != 5*time.Second {
		t.Errorf("derived attempt %v, open_for %v, max_open_for %v, probe %v", c.AttemptTimeout, c.OpenFor, c.MaxOpenFor, c.ProbeTimeout)
	}
}

// The patterns' schedules: steady at -rate, bursts of -burst-size 50 ms
// apart every -burst-every, and supersede each light every 0.4 attempt
// timeouts.
func TestOutagePatternsScheduleTheirCommands(t *testing.T) {
	base := Config{Rate: 2, BurstSize: 3, BurstEvery: 10 * time.Second, AttemptTimeout: 5 * time.Second}
	for _, tc := range []struct {
		pattern string
		want    []time.Duration // commands 0 to 4
		gap     time.Duration
	}{
		{PatternSteady, []time.Duration{0, 500 * time.Millisecond, time.Second, 1500 * time.Millisecond, 2 * time.Second}, 500 * time.Millisecond},
		{PatternBurst, []time.Duration{0, 50 * time.Millisecond, 100 * time.Millisecond, 10 * time.Second, 10*time.Second + 50*time.Millisecond}, 9900 * time.Millisecond},
		{PatternSupersede, []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second}, time.Second},
	} {
		c := base
		c.Pattern = tc.pattern
		for n, want := range tc.want {
			if got := c.IssueAt(n); got != want {
				t.Errorf("%s: command %d at %v, want %v", tc.pattern, n, got, want)
			}
		}
		if got := c.LongestGap(); got != tc.gap {
			t.Errorf("%s: longest gap %v, want %v", tc.pattern, got, tc.gap)
		}
	}
}

// observed is an observer of a silent outage that began at outageStart,
// with the given sets (offsets from it) and breaker states.
func observed(c Config, sets []bridgeSet, transitions []transition) *outageObserver {
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
	c := Config{Threshold: 5, AttemptTimeout: 5 * time.Second, OpenFor: 6 * time.Second, MaxOpenFor: 15 * time.Second, ProbeTimeout: 5 * time.Second, Rate: 1, Pattern: PatternSteady}
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
	c := Config{Threshold: 5, AttemptTimeout: time.Second, OpenFor: 6 * time.Second, MaxOpenFor: 15 * time.Second, ProbeTimeout: time.Second, Rate: 1, Pattern: PatternSteady}
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
