package powerloss

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/broker"
)

// powerLoss runs the scenario of c and returns its stdout.
func powerLoss(t *testing.T, c Config) (string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := Run(context.Background(), c, &stdout, &stderr)
	if err != nil {
		t.Logf("stderr: %s", stderr.String())
	}
	return stdout.String(), err
}

// floodRow is one row of the power-loss table.
type floodRow struct {
	attempts, refusals, failed, peakTenth, peakSecond, lost int
	back                                                    string
}

// floodTable parses the power-loss table's rows by strategy name.
func floodTable(t *testing.T, out string) map[string]floodRow {
	t.Helper()
	rows := map[string]floodRow{}
	headed := false
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if strings.Join(f, " ") == "strategy attempts refusals failed peak/100ms ×even peak/s all back (s) lost" {
			headed = true
			continue
		}
		if headed && len(f) == 0 {
			break // the table ends at the first empty line
		}
		if !headed || len(f) != 9 {
			continue
		}
		n := func(i int) int {
			v, err := strconv.Atoi(f[i])
			if err != nil {
				t.Fatalf("row %q: column %d: %v", line, i, err)
			}
			return v
		}
		rows[f[0]] = floodRow{attempts: n(1), refusals: n(2), failed: n(3), peakTenth: n(4), peakSecond: n(6), back: f[7], lost: n(8)}
	}
	if !headed {
		t.Fatalf("no table header in:\n%s", out)
	}
	return rows
}

// small is a quick flood: a few devices, short backoffs, and the
// defaults of hearth-sim power-loss's flags otherwise (no plot).
func small(devices int) Config {
	return Config{
		Devices: devices, Strategy: "full", Base: 50 * time.Millisecond, Cap: 200 * time.Millisecond,
		Cut: "clients", Transport: "pipe", Listen: "127.0.0.1:0",
		Timeout: 5 * time.Second, Availability: true, Seed: 1,
	}
}

// A small -compare brings every device back with every strategy, prints a
// row per strategy and draws a panel per strategy.
func TestPowerLossCompareBringsEveryDeviceBack(t *testing.T) {
	const devices = 20
	svg := filepath.Join(t.TempDir(), "flood.svg")
	c := small(devices)
	c.Compare, c.Plot = true, svg
	out, err := powerLoss(t, c)
	if err != nil {
		t.Fatal(err)
	}
	rows := floodTable(t, out)
	for _, s := range []string{"none", "fixed", "exponential", "full", "equal", "decorrelated"} {
		r, ok := rows[s]
		switch {
		case !ok:
			t.Errorf("no row for %s:\n%s", s, out)
		case r.lost != 0 || r.attempts != devices || r.refusals != 0:
			t.Errorf("%s: %+v; want %d attempts, none refused or lost", s, r, devices)
		case r.peakTenth < 1 || r.peakTenth > devices || r.peakSecond > devices:
			t.Errorf("%s: peaks %d per 100 ms, %d per second, for %d devices", s, r.peakTenth, r.peakSecond, devices)
		}
	}
	for _, want := range []string{"20 devices, cut clients, embedded broker over in-memory pipes", "Even spread N/(10·W) over W = base 50ms: 40 accepts per 100 ms"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	data, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "seconds since the cut", "decorrelated: peak", "even spread"} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("plot lacks %q", want)
		}
	}
}

// Restarting the embedded broker is a cut too: every device comes back
// to the new broker, over pipes or TCP.
func TestPowerLossBrokerRestart(t *testing.T) {
	for _, transport := range []string{"pipe", "tcp"} {
		c := small(10)
		c.Cut, c.Transport = "broker", transport
		out, err := powerLoss(t, c)
		if err != nil {
			t.Fatalf("%s: %v", transport, err)
		}
		if r := floodTable(t, out)["full"]; r.lost != 0 || r.attempts < 10 {
			t.Errorf("%s: %+v; want every device back", transport, r)
		}
		if !strings.Contains(out, "broker down") {
			t.Errorf("%s: no broker downtime reported:\n%s", transport, out)
		}
	}
}

// With the accept guard, no second accepts more than its rate; the
// refused devices retry and all come back.
func TestPowerLossGuardCapsEverySecond(t *testing.T) {
	const devices, rate = 40, 100
	c := small(devices)
	c.Strategy, c.MaxRate, c.Base = "none", rate, 100*time.Millisecond
	out, err := powerLoss(t, c)
	if err != nil {
		t.Fatal(err)
	}
	r := floodTable(t, out)["none"]
	if r.lost != 0 || r.peakSecond > rate || r.refusals == 0 || r.attempts != devices+r.refusals {
		t.Errorf("%+v; want none lost, at most %d accepts in any second, refusals retried", r, rate)
	}
	if !strings.Contains(out, "broker refusals: rate") {
		t.Errorf("no broker refusals reported:\n%s", out)
	}
}

// Against an external broker the devices time the accepts themselves.
func TestPowerLossExternalBroker(t *testing.T) {
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	c := small(10)
	c.Strategy, c.BrokerURL, c.Transport = "equal", b.URL(), "tcp"
	out, err := powerLoss(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if r := floodTable(t, out)["equal"]; r.lost != 0 || r.attempts != 10 {
		t.Errorf("%+v; want every device back", r)
	}
	if !strings.Contains(out, "Broker-side measurements unavailable") {
		t.Errorf("table does not say the broker side is unmeasured:\n%s", out)
	}
}

func TestFloodRunPeaks(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	r := floodRun{accepts: ms(0, 50, 99, 100, 950, 1000, 1049, 1999, 2500)}
	if got, want := r.perTenth(), []int{3, 1, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1}; !equalInts(got, want) {
		t.Errorf("perTenth %v, want %v", got, want)
	}
	if got := r.peakTenth(); got != 3 {
		t.Errorf("peakTenth %d, want 3", got)
	}
	// [50 ms, 1050 ms) holds 50, 99, 100, 950, 1000, 1049.
	if got := r.peakSecond(); got != 6 {
		t.Errorf("peakSecond %d, want 6", got)
	}
	if got := (floodRun{}).peakTenth(); got != 0 {
		t.Errorf("empty run: peakTenth %d", got)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The strategies map to retry.Backoff as the usage says: none is nil,
// fixed waits base every time, exponential doubles to the cap without
// jitter, and the jitters stay within their bounds.
func TestReconnectStrategies(t *testing.T) {
	const base, limit = time.Second, 5 * time.Second
	s := Strategies(base, limit)
	var names []string
	for _, st := range s {
		names = append(names, st.Name)
	}
	if got := strings.Join(names, ","); got != "none,fixed,exponential,full,equal,decorrelated" {
		t.Fatalf("strategies %s", got)
	}
	if s[0].Backoff != nil {
		t.Error("none has a backoff")
	}
	r := rand.New(rand.NewPCG(1, 2))
	for n, ceiling := range []time.Duration{0, 1, 2, 4, 5, 5} {
		if n == 0 {
			continue
		}
		ceiling *= time.Second
		if got := s[1].Backoff(n, 0, r); got != base {
			t.Errorf("fixed retry %d: %v, want %v", n, got, base)
		}
		if got := s[2].Backoff(n, 0, r); got != ceiling {
			t.Errorf("exponential retry %d: %v, want %v", n, got, ceiling)
		}
		for range 100 {
			if got := s[3].Backoff(n, 0, r); got < 0 || got > ceiling {
				t.Errorf("full jitter retry %d: %v, want within [0, %v]", n, got, ceiling)
			}
			if got := s[4].Backoff(n, 0, r); got < ceiling/2 || got > ceiling {
				t.Errorf("equal jitter retry %d: %v, want within [%v, %v]", n, got, ceiling/2, ceiling)
			}
			if got := s[5].Backoff(n, 2*time.Second, r); got < base || got > limit {
				t.Errorf("decorrelated jitter after 2s: %v, want within [%v, %v]", got, base, limit)
			}
		}
	}
}
