package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/hearthd/hearth/simulator"
	"github.com/hearthd/hearth/simulator/scenario/contention"
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

// runContention is the contention subcommand: it parses args into a
// contention.Config and runs the study, which prints the table on stdout
// and writes the plot.
func runContention(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hearth-sim contention", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), contentionUsage)
		fs.PrintDefaults()
	}
	var c contention.Config
	fs.DurationVar(&c.Base, "base", 5*time.Millisecond, "backoff base: the ceiling of the first retry's delay")
	fs.DurationVar(&c.Cap, "cap", 2*time.Second, "backoff cap: no delay is longer")
	fs.IntVar(&c.MinN, "min", 10, "smallest number of clients")
	fs.IntVar(&c.MaxN, "max", 190, "largest number of clients")
	fs.IntVar(&c.StepN, "step", 10, "step between client counts")
	fs.Uint64Var(&c.Seed, "seed", 1, "random seed; the same seed prints the same table")
	fs.IntVar(&c.Runs, "runs", 100, "runs averaged per client count and strategy")
	fs.StringVar(&c.Plot, "plot", "docs/retry-contention.svg", `plot file, SVG (or PNG if it ends in .png); "" writes none`)
	fs.DurationVar(&c.NetMean, "net-mean", simulator.DefaultNetMean, "mean network delay of every message")
	fs.DurationVar(&c.NetStdDev, "net-sd", simulator.DefaultNetStdDev, "standard deviation of the network delay")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("contention: unexpected argument %q (flags start with -)", fs.Arg(0))
	}
	return contention.Run(ctx, c, stdout)
}
