// Package contention is hearth-sim's retry contention study (docs/RETRY.md):
// for a range of client counts it runs simulator.Contention — N clients
// updating one optimistically locked row, in virtual time — with each
// backoff strategy of the AWS post "Exponential Backoff And Jitter", and
// prints the mean calls and completion times as a table and a plot.
//
// It owns the strategies (retry.Backoff values), the schedule of runs and
// seeds, the averaging, the table and the plot. It parses no flags and
// never sleeps: the command hearth-sim contention fills a [Config] and
// calls [Run].
package contention

import (
	"bytes"
	"context"
	"errors"
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

// Strategy is one column of the study.
type Strategy struct {
	// Name is the column and legend name.
	Name string
	// Backoff spaces retries; nil is no backoff.
	Backoff simulator.Backoff
}

// Strategies are the five columns of the study, in the AWS post's set:
// no backoff, exponential without jitter, and the three jitters, all
// retry.Backoff values with Multiplier 2, base and limit.
func Strategies(base, limit time.Duration) []Strategy {
	b := retry.Backoff{Strategy: retry.Exponential, Base: base, Multiplier: 2, Cap: limit}
	with := func(j retry.Jitter) simulator.Backoff {
		b := b
		b.Jitter = j
		// retry.Backoff.Delay takes a retry.Rand; simulator.Rand has its
		// Int64N, so it passes through.
		return func(n int, prev time.Duration, r simulator.Rand) time.Duration { return b.Delay(n, prev, r) }
	}
	return []Strategy{
		{Name: "none"},
		{Name: "exponential", Backoff: with(retry.None)},
		{Name: "full", Backoff: with(retry.Full)},
		{Name: "equal", Backoff: with(retry.Equal)},
		{Name: "decorrelated", Backoff: with(retry.Decorrelated)},
	}
}

// Config is one study: hearth-sim contention's flags, named alike.
type Config struct {
	// Base and Cap are the backoff's base and cap (-base, -cap).
	Base, Cap time.Duration
	// MinN, MaxN and StepN are the client counts: MinN, MinN+StepN, … up
	// to MaxN (-min, -max, -step).
	MinN, MaxN, StepN int
	// Seed seeds every run (-seed); the same seed prints the same table.
	Seed uint64
	// Runs are averaged per client count and strategy (-runs).
	Runs int
	// Plot is the plot file, SVG or PNG by its extension; "" writes none
	// (-plot).
	Plot string
	// NetMean and NetStdDev are the network delay of every message
	// (-net-mean, -net-sd).
	NetMean, NetStdDev time.Duration
}

// Validate reports the first bad value of c. Its messages name the
// values by hearth-sim contention's flags.
func (c Config) Validate() error {
	switch {
	case c.MinN < 1:
		return errors.New("-min must be at least 1")
	case c.MaxN < c.MinN:
		return fmt.Errorf("-max %d is below -min %d", c.MaxN, c.MinN)
	case c.StepN < 1:
		return errors.New("-step must be at least 1")
	case c.Runs < 1:
		return errors.New("-runs must be at least 1")
	case c.Base < 0:
		return errors.New("-base must not be negative")
	case c.Cap <= 0:
		return errors.New("-cap must be positive") // retry reads 0 as no cap: delays would overflow
	case c.NetMean <= 0 || c.NetStdDev < 0:
		return errors.New("-net-mean must be positive and -net-sd not negative")
	}
	return nil
}

// Point is the mean of the runs at one client count, per strategy (in the
// order of the strategies).
type Point struct {
	Clients    int
	Calls      []float64
	Completion []time.Duration
}

// Run runs the study of c, prints its table on stdout and writes its plot
// (then says so on stdout). Its errors start with "contention: ", but
// for the context's.
func Run(ctx context.Context, c Config, stdout io.Writer) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("contention: %w", err)
	}
	strats := Strategies(c.Base, c.Cap)
	points, err := Study(ctx, c, strats)
	if err != nil {
		return err
	}
	if err := PrintTable(stdout, c, strats, points); err != nil {
		return err
	}
	if c.Plot == "" {
		return nil
	}
	if err := WritePlot(c.Plot, c, strats, points); err != nil {
		return fmt.Errorf("contention: plot: %w", err)
	}
	fmt.Fprintf(stdout, "\nplot written to %s\n", c.Plot)
	return nil
}

// Study runs every strategy c.Runs times at every client count, on all
// processors. Run r at n clients draws from PCG(seed, n<<32|r) whatever the
// strategy, so the strategies meet the same seeds and a point's numbers
// depend neither on which other points are run nor on scheduling.
func Study(ctx context.Context, c Config, strats []Strategy) ([]Point, error) {
	var points []Point
	for n := c.MinN; n <= c.MaxN; n += c.StepN {
		points = append(points, Point{Clients: n, Calls: make([]float64, len(strats)), Completion: make([]time.Duration, len(strats))})
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
				for r := range c.Runs {
					res := simulator.Contention{
						Clients:   p.Clients,
						Backoff:   strats[j.strat].Backoff,
						NetMean:   c.NetMean,
						NetStdDev: c.NetStdDev,
						Rand:      rand.New(rand.NewPCG(c.Seed, uint64(p.Clients)<<32|uint64(r))),
					}.Run()
					calls += res.Calls
					completion += res.Completion
				}
				p.Calls[j.strat] = float64(calls) / float64(c.Runs)
				p.Completion[j.strat] = completion / time.Duration(c.Runs)
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

// PrintTable writes the study as one table: a row per client count, the
// mean calls per strategy, then the mean completion time per strategy in
// milliseconds.
func PrintTable(w io.Writer, c Config, strats []Strategy, points []Point) error {
	fmt.Fprintf(w, "Contention for one row: mean of %d runs, seed %d; network |Normal(%v, %v)| per message;\n",
		c.Runs, c.Seed, c.NetMean, c.NetStdDev)
	fmt.Fprintf(w, "backoff base %v, cap %v, multiplier 2. calls = write attempts; time = completion, ms.\n\n", c.Base, c.Cap)
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
			fmt.Fprintf(tw, "\t%s", s.Name)
		}
	}
	fmt.Fprint(tw, "\t\n")
	for _, p := range points {
		fmt.Fprintf(tw, "%d", p.Clients)
		for _, calls := range p.Calls {
			fmt.Fprintf(tw, "\t%.0f", calls)
		}
		for _, d := range p.Completion {
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
