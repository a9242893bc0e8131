package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/hearthd/hearth/simulator/scenario/powerloss"
)

// powerLossUsage heads the power-loss subcommand's -h output.
const powerLossUsage = `usage: hearth-sim power-loss [flags]

The power-loss flood: connects -devices simulated devices (one MQTT client
each) to the broker, cuts them all at once, and measures how they come back
with the -strategy's reconnect backoff: the peak connections accepted per
100 ms at the broker, against the even spread N/(10·base) that full jitter
aims at; the most accepted in any one second; the time until all are back;
the devices' connection attempts, refusals and failures; and the devices
lost (not back within -timeout). -compare runs every strategy, prints one
table and writes a plot of accepts per 100 ms. See docs/RECONNECT.md.

Strategies (retry.Backoff, multiplier 2, -base and -cap): none (reconnect
at once); fixed (every retry waits base, no jitter: paho's auto-reconnect
style); exponential (no jitter); full, equal and decorrelated jitter. With
full jitter the first reconnect after the cut is uniform over [0, base].

-cut clients drops every device's connection at the same instant, from
below MQTT (the devices see a lost connection, the broker sends their
wills); -cut broker closes the embedded broker and starts a new one on the
same address. -transport pipe (the default) connects the devices to the
embedded broker through in-memory pipes, which use no file descriptors;
tcp uses loopback TCP, two descriptors per device. With -broker URL the
devices connect over TCP to an external broker: the broker-side
measurements are then unavailable, and accepts are timed by the devices.

flags:
`

// runPowerLoss is the power-loss subcommand: it parses args into a
// powerloss.Config and runs the scenario, for one strategy or, with
// -compare, for every strategy, which prints the table on stdout and
// writes the plot.
func runPowerLoss(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hearth-sim power-loss", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), powerLossUsage)
		fs.PrintDefaults()
	}
	var c powerloss.Config
	fs.IntVar(&c.Devices, "devices", 10000, "number of simulated devices")
	fs.StringVar(&c.Strategy, "strategy", "full", "reconnect backoff: none, fixed, exponential, full, equal or decorrelated")
	fs.BoolVar(&c.Compare, "compare", false, "run every strategy and print one table")
	fs.DurationVar(&c.Base, "base", 5*time.Second, "backoff base: the first reconnect's delay (fixed, exponential) or its ceiling (full jitter's window W)")
	fs.DurationVar(&c.Cap, "cap", 16*time.Second, "backoff cap: no delay is longer")
	fs.StringVar(&c.Cut, "cut", "clients", "what fails: clients (every connection dropped at once) or broker (the embedded broker restarts)")
	fs.StringVar(&c.Transport, "transport", "pipe", "how devices reach the embedded broker: pipe (in memory) or tcp (loopback)")
	fs.StringVar(&c.BrokerURL, "broker", "", "external broker URL, tcp://host:port (implies -transport tcp); default: an embedded broker")
	fs.StringVar(&c.Listen, "listen", "127.0.0.1:0", "TCP listen address of the embedded broker, with -transport tcp")
	fs.Float64Var(&c.MaxRate, "max-connect-rate", 0, "embedded broker's accept guard: CONNECTs accepted per second, 0 for none")
	fs.IntVar(&c.Burst, "connect-burst", 0, "the accept guard's bucket size; 0 means 1")
	fs.DurationVar(&c.Timeout, "timeout", time.Minute, "how long to wait for the devices, before and after the cut; those not back are lost")
	fs.DurationVar(&c.Settle, "settle", time.Second, "quiet time between the last device connecting and the cut")
	fs.BoolVar(&c.Availability, "availability", true, "devices publish availability online after connecting, with a retained offline will")
	fs.Uint64Var(&c.Seed, "seed", 1, "random seed: device i draws its jitter from PCG(seed, i)")
	fs.StringVar(&c.Plot, "plot", "docs/reconnect-power-loss.svg", `plot file of -compare, SVG (or PNG if it ends in .png); written for one strategy only if given; "" writes none`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	c.PlotSet = set["plot"]
	if fs.NArg() > 0 {
		return fmt.Errorf("power-loss: unexpected argument %q (flags start with -)", fs.Arg(0))
	}
	if c.External() && !set["transport"] {
		c.Transport = "tcp"
	}
	c.Progress = phasesFor(stderr, "power-loss")
	return powerloss.Run(ctx, c, stdout, stderr)
}
