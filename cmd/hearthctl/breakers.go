package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hearthd/hearth/dispatcher"
)

// breakers prints the circuit breaker of every service.
func (c *cli) breakers(args []string) error {
	fs := flag.NewFlagSet("hearthctl breakers", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	asJSON := fs.Bool("json", false, "print each breaker as one line of JSON")
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "usage: hearthctl breakers [-json]\n\nThe circuit breaker of every service that has one, in config order.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := c.parseFlags(fs, args); err != nil {
		return err
	}
	var answer struct {
		Breakers []json.RawMessage `json:"breakers"`
	}
	if err := c.get("/api/v1/breakers", nil, &answer); err != nil {
		return err
	}
	list := make([]dispatcher.BreakerStatus, len(answer.Breakers))
	for i, raw := range answer.Breakers {
		if err := json.Unmarshal(raw, &list[i]); err != nil {
			return fmt.Errorf("unexpected answer from hearthd: breaker %d: %v", i, err)
		}
		if *asJSON {
			if _, err := fmt.Fprintf(c.stdout, "%s\n", raw); err != nil {
				return err
			}
		}
	}
	if *asJSON {
		return nil
	}
	return printBreakers(c.stdout, list)
}

// printBreakers prints breakers as a table with a header, or says there
// are none.
func printBreakers(w io.Writer, list []dispatcher.BreakerStatus) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "no circuit breakers")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVICE\tSTATE\tSINCE\tUNTIL\tTRIPS\tBRIDGE\tNOTE")
	for _, b := range list {
		var notes []string
		if b.Offline {
			notes = append(notes, "service says offline")
		}
		if b.Watched {
			notes = append(notes, "watched only")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", cell(b.Service), cell(b.State),
			timeCell(b.Since), timeCell(b.Until), strconv.Itoa(b.Trips), cell(b.Bridge), cell(strings.Join(notes, ", ")))
	}
	return tw.Flush()
}

// timeCell is t in RFC 3339, or "-" when zero.
func timeCell(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Format(time.RFC3339)
}
