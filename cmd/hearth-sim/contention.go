package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/hearthd/hearth/retry"
	"github.com/hearthd/hearth/simulator"
)

// contentionUsage heads the contention subcommand's -h output.
const contentionUsage = `usage: hearth-sim contention [flags]

Simulates N clients updating one optimistically locked row, in virtual time,
with each backoff strategy (the setup of "Exponential Backoff And Jitter",
AWS Architecture Blog, 2015), and prints the mean write attempts (calls) and
completion time per client count. See docs/RETRY.md.

Strategies: none (retry at once); exponential (no jitter); full, equal and
decorrelated jitter. All but none are retry.Backoff values with Multiplier 2
and the -base and -cap below.

flags:
`

// strategy is one column of the study.
type strategy struct {
	// name is the column and legend name.
	name string
	// backoff spaces retries; nil is no backoff.
	backoff simulator.Backoff
}

// strategies are the five columns of the study, in the AWS post's set:
// no backoff, exponential without jitter, and the three jitters.
func strategies(base, limit time.Duration) []strategy {
	b := retry.Backoff{Strategy: retry.Exponential, Base: base, Multiplier: 2, Cap: limit}
	with := func(j retry.Jitter) simulator.Backoff {
		b := b
		b.Jitter = j
		// retry.Backoff.Delay takes a retry.Rand; simulator.Rand has its
		// Int64N, so it passes through.
		return func(n int, prev time.Duration, r simulator.Rand) time.Duration { return b.Delay(n, prev, r) }
	}
	return []strategy{
		{name: "none"},
		{name: "exponential", backoff: with(retry.None)},
		{name: "full", backoff: with(retry.Full)},
		{name: "equal", backoff: with(retry.Equal)},
		{name: "decorrelated", backoff: with(retry.Decorrelated)},
	}
}

// studyConfig is the contention subcommand's flags.
type studyConfig struct {
	base, cap          time.Duration
	minN, maxN, stepN  int
	seed               uint64
	runs               int
	plot               string
	netMean, netStdDev time.Duration
}

// point is the mean of the runs at one client count, per strategy (in the
// order of strategies).
type point struct {
	clients    int
	calls      []float64
	completion []time.Duration
}

// runContention is the contention subcommand: it parses args, runs the
// study, prints the table on stdout and writes the plot.
func runContention(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hearth-sim contention", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), contentionUsage)
		fs.PrintDefaults()
	}
	var c studyConfig
	fs.DurationVar(&c.base, "base", 5*time.Millisecond, "backoff base: the ceiling of the first retry's delay")
	fs.DurationVar(&c.cap, "cap", 2*time.Second, "backoff cap: no delay is longer")
	fs.IntVar(&c.minN, "min", 10, "smallest number of clients")
	fs.IntVar(&c.maxN, "max", 190, "largest number of clients")
	fs.IntVar(&c.stepN, "step", 10, "step between client counts")
	fs.Uint64Var(&c.seed, "seed", 1, "random seed; the same seed prints the same table")
	fs.IntVar(&c.runs, "runs", 100, "runs averaged per client count and strategy")
	fs.StringVar(&c.plot, "plot", "docs/retry-contention.svg", `plot file, SVG (or PNG if it ends in .png); "" writes none`)
	fs.DurationVar(&c.netMean, "net-mean", simulator.DefaultNetMean, "mean network delay of every message")
	fs.DurationVar(&c.netStdDev, "net-sd", simulator.DefaultNetStdDev, "standard deviation of the network delay")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("contention: unexpected argument %q (flags start with -)", fs.Arg(0))
	}
	if err := c.validate(); err != nil {
		return fmt.Errorf("contention: %w", err)
	}
	strats := strategies(c.base, c.cap)
	points, err := study(ctx, c, strats)
	if err != nil {
		return err
	}
	if err := printTable(stdout, c, strats, points); err != nil {
		return err
	}
	if c.plot == "" {
		return nil
	}
	if err := writePlot(c.plot, c, strats, points); err != nil {
		return fmt.Errorf("contention: plot: %w", err)
	}
	fmt.Fprintf(stdout, "\nplot written to %s\n", c.plot)
	return nil
}

func (c studyConfig) validate() error {
	switch {
	case c.minN < 1:
		return errors.New("-min must be at least 1")
	case c.maxN < c.minN:
		return fmt.Errorf("-max %d is below -min %d", c.maxN, c.minN)
	case c.stepN < 1:
		return errors.New("-step must be at least 1")
	case c.runs < 1:
		return errors.New("-runs must be at least 1")
	case c.base < 0:
		return errors.New("-base must not be negative")
	case c.cap <= 0:
		return errors.New("-cap must be positive") // retry reads 0 as no cap: delays would overflow
	case c.netMean <= 0 || c.netStdDev < 0:
		return errors.New("-net-mean must be positive and -net-sd not negative")
	}
	return nil
}

// study runs every strategy c.runs times at every client count, on all
// processors. Run r at n clients draws from PCG(seed, n<<32|r) whatever the
// strategy, so the strategies meet the same seeds and a point's numbers
// depend neither on which other points are run nor on scheduling.
func study(ctx context.Context, c studyConfig, strats []strategy) ([]point, error) {
	var points []point
	for n := c.minN; n <= c.maxN; n += c.stepN {
		points = append(points, point{clients: n, calls: make([]float64, len(strats)), completion: make([]time.Duration, len(strats))})
	}
	type job struct{ point, strat int }
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Go(func() {
			for j := range jobs {
				p := &points[j.point]
				var calls int
				var completion time.Duration
				for r := range c.runs {
					res := simulator.Contention{
						Clients:   p.clients,
						Backoff:   strats[j.strat].backoff,
						NetMean:   c.netMean,
						NetStdDev: c.netStdDev,
						Rand:      rand.New(rand.NewPCG(c.seed, uint64(p.clients)<<32|uint64(r))),
					}.Run()
					calls += res.Calls
					completion += res.Completion
				}
				p.calls[j.strat] = float64(calls) / float64(c.runs)
				p.completion[j.strat] = completion / time.Duration(c.runs)
			}
		})
	}
feed:
	// Largest client counts first: they take longest, so the workers end
	// together.
	for i := len(points) - 1; i >= 0; i-- {
		for s := range strats {
			select {
			case jobs <- job{i, s}:
			case <-ctx.Done():
				break feed
			}
		}
	}
	close(jobs)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return points, nil
}

// printTable writes the study as one table: a row per client count, the
// mean calls per strategy, then the mean completion time per strategy in
// milliseconds.
func printTable(w io.Writer, c studyConfig, strats []strategy, points []point) error {
	fmt.Fprintf(w, "Contention for one row: mean of %d runs, seed %d; network |Normal(%v, %v)| per message;\n",
		c.runs, c.seed, c.netMean, c.netStdDev)
	fmt.Fprintf(w, "backoff base %v, cap %v, multiplier 2. calls = write attempts; time = completion, ms.\n\n", c.base, c.cap)
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "\tcalls")
	for range strats[1:] {
		fmt.Fprint(tw, "\t")
	}
	fmt.Fprint(tw, "\ttime (ms)")
	for range strats[1:] {
		fmt.Fprint(tw, "\t")
	}
	fmt.Fprint(tw, "\t\nclients")
	for range 2 {
		for _, s := range strats {
			fmt.Fprintf(tw, "\t%s", s.name)
		}
	}
	fmt.Fprint(tw, "\t\n")
	for _, p := range points {
		fmt.Fprintf(tw, "%d", p.clients)
		for _, calls := range p.calls {
			fmt.Fprintf(tw, "\t%.0f", calls)
		}
		for _, d := range p.completion {
			fmt.Fprintf(tw, "\t%.0f", float64(d)/float64(time.Millisecond))
		}
		fmt.Fprint(tw, "\t\n")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// Right-aligned cells end in padding; drop it from every line.
	for line := range strings.Lines(table.String()) {
		if _, err := fmt.Fprintln(w, strings.TrimRight(line, " \n")); err != nil {
			return err
		}
	}
	return nil
}
