package contention

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/simulator"
)

// small is a study of three client counts, 3 runs each, seed 9.
func small(plot string) Config {
	return Config{
		Base: 5 * time.Millisecond, Cap: 2 * time.Second,
		MinN: 5, MaxN: 15, StepN: 5, Runs: 3, Seed: 9, Plot: plot,
		NetMean: simulator.DefaultNetMean, NetStdDev: simulator.DefaultNetStdDev,
	}
}

// A small study prints one row per client count under a header naming
// every strategy, the same table for the same seed, and a plot.
func TestContentionPrintsTableAndWritesPlot(t *testing.T) {
	dir := t.TempDir()
	svg := filepath.Join(dir, "contention.svg")
	var stdout bytes.Buffer
	if err := Run(context.Background(), small(svg), &stdout); err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
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

	var again bytes.Buffer
	if err := Run(context.Background(), small(""), &again); err != nil { // no plot
		t.Fatal(err)
	}
	if table, _, _ := strings.Cut(out, "\nplot written"); again.String() != table {
		t.Errorf("same seed, different table:\n%s\nthen:\n%s", out, again.String())
	}
}

// A plot file that is neither SVG nor PNG fails the run, and a bad
// value fails it before the study runs.
func TestContentionRejectsBadConfig(t *testing.T) {
	bad := []Config{small(filepath.Join(t.TempDir(), "plot.gif"))}
	for _, mutate := range []func(*Config){
		func(c *Config) { c.MinN = 0 },
		func(c *Config) { c.MinN, c.MaxN = 20, 10 },
		func(c *Config) { c.StepN = 0 },
		func(c *Config) { c.Runs = 0 },
		func(c *Config) { c.Base = -time.Millisecond },
		func(c *Config) { c.Cap = 0 },
		func(c *Config) { c.NetMean = 0 },
	} {
		c := small("")
		mutate(&c)
		bad = append(bad, c)
	}
	for _, c := range bad {
		var stdout bytes.Buffer
		err := Run(context.Background(), c, &stdout)
		if err == nil || !strings.HasPrefix(err.Error(), "contention: ") {
			t.Errorf("%+v: err = %v, want an error starting with \"contention: \"", c, err)
		}
	}
}

// The strategies are wired to retry.Backoff as the study says: no backoff,
// then exponential (×2 from -base, capped) without jitter, and full, equal
// and decorrelated jitter within their bounds.
func TestContentionStrategiesAreTheAWSPostsSet(t *testing.T) {
	const base, limit = 5 * time.Millisecond, 2 * time.Second
	s := Strategies(base, limit)
	var names []string
	for _, st := range s {
		names = append(names, st.Name)
	}
	if got := strings.Join(names, ","); got != "none,exponential,full,equal,decorrelated" {
		t.Fatalf("strategies %s", got)
	}
	if s[0].Backoff != nil {
		t.Error("none has a backoff")
	}
	r := rand.New(rand.NewPCG(1, 1))
	ceilings := []time.Duration{5, 10, 20, 40, 80, 160, 320, 640, 1280, 2000, 2000}
	for i, c := range ceilings {
		n, c := i+1, c*time.Millisecond
		if got := s[1].Backoff(n, 0, r); got != c {
			t.Errorf("exponential retry %d: %v, want %v", n, got, c)
		}
		for range 100 {
			if got := s[2].Backoff(n, 0, r); got < 0 || got > c {
				t.Errorf("full jitter retry %d: %v, want within [0, %v]", n, got, c)
			}
			if got := s[3].Backoff(n, 0, r); got < c/2 || got > c {
				t.Errorf("equal jitter retry %d: %v, want within [%v, %v]", n, got, c/2, c)
			}
			prev := c / 2
			if got := s[4].Backoff(n, prev, r); got < base || got > min(limit, 3*max(prev, base)) {
				t.Errorf("decorrelated jitter after %v: %v, want within [%v, %v]", prev, got, base, min(limit, 3*prev))
			}
		}
	}
}
