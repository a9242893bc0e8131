package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/hearthd/hearth/simulator/scenario/outage"
)

// outageUsage heads the outage subcommand's -h output.
const outageUsage = `usage: hearth-sim outage [flags]

The bridge outage: an embedded broker, a simulated Zigbee2MQTT bridge
"zigbee2mqtt" (lights hall_light and kitchen_light) and a second one
"zigbee_upstairs" (light landing_light), and a hearthd child process
configured for both, with a circuit breaker on the service "zigbee" and a
local automation that stands in for it: while zigbee's breaker is not
closed, motion in the hall (a message on hearth-sim/hall_motion) turns the
landing light on, notifies, and publishes on hearth-sim/fallback.

An automation client commands the two lights of the failing bridge in
turn, alternately ON and OFF, in one of three patterns (-pattern):

  steady     -rate commands per second (each light gets one every
             2/rate s: at the defaults, 2 s, faster than the 5 s attempt
             timeout, so each command supersedes the last one's attempt);
  burst      bursts of -burst-size commands 50 ms apart (a scene, an
             automation firing), one every -burst-every, silence between;
  supersede  each light a new command every 0.4 attempt timeouts, however
             long that is: traffic that always supersedes itself before an
             attempt can time out (a dimmer drag, a slider).

After -before, the bridge goes offline for -outage: it ignores every set
and get (silently, a hung coordinator, so that the breaker must trip on
timeouts; or, with -announce, saying {"state":"offline"} on its
bridge/state). Then it is back for -after. Motion is seen once before the outage, three times
during it and once after it.

The run is in real time (hearthd is a separate process). It prints a
timeline from what it observes over MQTT, then a summary, and fails if
any of these did not hold:

  1. the breaker opened during the outage, once no more than
     failure_threshold sets (plus one per other light, in flight) had run
     out their attempt timeout unanswered; a set whose command a newer one
     superseded counts too: it went out, and nothing answered it;
  2. commands sent during the outage failed fast (breaker_open, no
     attempt, in less than the attempt timeout, median), and of those sent
     after the breaker opened no more timed out than there were probes;
  3. the fallback automation acted during the outage (its publish, its
     notification or its command), and never before it;
  4. after the breaker first opened, at most one set per cooldown (an open
     period and the half-open one after it) reached the silent bridge: the
     probe (max_probes 1); and at least one in all, when the outage
     outlasted a cooldown and a command came after it. A set that reaches
     the bridge within 50 ms of an opening left hearthd before it, and
     counts before it;
  5. the breaker closed after the bridge came back, within the longest
     open period (max_open_for) plus one probe (probe_timeout) plus the
     longest gap between two commands.

Durations of the breaker not given are derived from the timeline:
attempt_timeout = outage/60 within [250ms, 5s], max_open_for =
min(outage/4, after/2), open_for = min(outage/10, max_open_for/2),
probe_timeout = attempt_timeout.

flags:
`

// runOutage is the outage subcommand: it parses args into an
// outage.Config, finds the hearthd to run, and runs the scenario against
// it, which prints its timeline and summary on stdout; it returns an
// error naming the conditions that did not hold.
func runOutage(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("hearth-sim outage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), outageUsage)
		fs.PrintDefaults()
	}
	var c outage.Config
	var h hearthdLauncher
	fs.StringVar(&h.bin, "hearthd", "", `hearthd executable; default: "hearthd" next to hearth-sim, else in PATH`)
	fs.DurationVar(&c.Before, "before", 30*time.Second, "traffic before the outage")
	fs.DurationVar(&c.Outage, "outage", 5*time.Minute, "how long the bridge is offline")
	fs.DurationVar(&c.After, "after", time.Minute, "traffic after the bridge is back")
	fs.BoolVar(&c.Announce, "announce", false, `the bridge says {"state":"offline"} on its bridge/state; default: a silent outage (a hung coordinator)`)
	fs.Float64Var(&c.Rate, "rate", 1, "commands per second to the failing bridge's lights (-pattern steady)")
	fs.StringVar(&c.Pattern, "pattern", outage.PatternSteady, "traffic pattern: steady, burst or supersede (see above)")
	fs.IntVar(&c.BurstSize, "burst-size", 6, "commands per burst (-pattern burst)")
	fs.DurationVar(&c.BurstEvery, "burst-every", 10*time.Second, "time from one burst to the next (-pattern burst)")
	fs.IntVar(&c.Threshold, "failure-threshold", 5, "breaker failure_threshold: consecutive failed attempts that open it")
	fs.DurationVar(&c.AttemptTimeout, "attempt-timeout", 0, "retry attempt_timeout of the zigbee service; default: derived (see above)")
	fs.DurationVar(&c.OpenFor, "open-for", 0, "breaker open_for; default: derived")
	fs.DurationVar(&c.MaxOpenFor, "max-open-for", 0, "breaker max_open_for; default: derived")
	fs.DurationVar(&c.ProbeTimeout, "probe-timeout", 0, "breaker probe_timeout; default: the attempt timeout")
	fs.DurationVar(&c.SummaryEvery, "summary-every", 10*time.Second, "the timeline sums up results over windows this long")
	fs.StringVar(&c.HearthdLog, "hearthd-log", "", "file for hearthd's log; default: hearthd.log in the run's temporary directory, kept only if the run fails")
	fs.StringVar(&h.logLevel, "hearthd-log-level", "info", "hearthd's -log-level")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("outage: unexpected argument %q (flags start with -)", fs.Arg(0))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	c.Derive(outage.Given{AttemptTimeout: set["attempt-timeout"], OpenFor: set["open-for"], MaxOpenFor: set["max-open-for"], ProbeTimeout: set["probe-timeout"]})
	if err := c.Validate(); err != nil {
		return fmt.Errorf("outage: %w", err)
	}
	bin, err := findHearthd(h.bin)
	if err != nil {
		return fmt.Errorf("outage: %w", err)
	}
	h.bin = bin
	c.Progress = phasesFor(stderr, "outage")
	sum, err := outage.Run(ctx, c, h, stdout, stderr)
	if err != nil {
		return fmt.Errorf("outage: %w", err)
	}
	if err := sum.Err(); err != nil {
		return fmt.Errorf("outage: %w", err)
	}
	return nil
}

// findHearthd returns the hearthd executable to run: path if given, else
// "hearthd" next to this executable, else "hearthd" in PATH.
func findHearthd(path string) (string, error) {
	if path != "" {
		if _, err := os.Stat(path); err != nil {
			return "", fmt.Errorf("-hearthd: %w", err)
		}
		return path, nil
	}
	if self, err := os.Executable(); err == nil {
		next := filepath.Join(filepath.Dir(self), "hearthd")
		if st, err := os.Stat(next); err == nil && !st.IsDir() {
			return next, nil
		}
	}
	if p, err := exec.LookPath("hearthd"); err == nil {
		return p, nil
	}
	return "", errors.New(`no hearthd next to hearth-sim nor in PATH: build both with "go build -o bin/ ./cmd/..." and run bin/hearth-sim, or pass -hearthd PATH`)
}

// hearthdProc is the hearthd child process.
type hearthdProc struct {
	bin  string // as given, for String
	cmd  *exec.Cmd
	done chan struct{} // closed once it exited
	err  error         // Wait's result, set before done closes
}

// hearthdLauncher is the scenario's outage.Hearth: it runs the hearthd
// executable bin as a child process with -log-level logLevel.
type hearthdLauncher struct {
	bin, logLevel string
}

// Start starts hearthd with -config configFile, its output to out.
func (l hearthdLauncher) Start(configFile string, out io.Writer) (outage.Process, error) {
	p := &hearthdProc{bin: l.bin, done: make(chan struct{})}
	p.cmd = exec.Command(l.bin, "-config", configFile, "-log-level", l.logLevel)
	p.cmd.Stdout, p.cmd.Stderr = out, out
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start hearthd: %w", err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Done is closed once hearthd exited.
func (p *hearthdProc) Done() <-chan struct{} { return p.done }

// Err is why hearthd exited, once Done is closed.
func (p *hearthdProc) Err() error { return p.err }

// String names the process for the scenario's header.
func (p *hearthdProc) String() string {
	return fmt.Sprintf("hearthd %s, pid %d", p.bin, p.cmd.Process.Pid)
}

// Stop ends hearthd with SIGTERM, and kills it if it has not exited
// within 10 s.
func (p *hearthdProc) Stop() error {
	select {
	case <-p.done:
		return fmt.Errorf("hearthd exited early: %v", p.err)
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
		return errors.New("hearthd did not stop within 10s of SIGTERM: killed")
	}
}
