package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/hearthd/hearth/devices"
)

// maxDetail is the most runes of a dead letter's detail the table shows;
// -json shows all of it.
const maxDetail = 60

// deadLetterListing is hearthctl deadletters: the dead-letter store, GET
// /api/v1/deadletters.
var deadLetterListing = listing[devices.DeadLetter]{
	name:  "deadletters",
	about: "The dead-letter store: commands that ended expired or failed, or were\nsuperseded before they reached a sleeping device, and will never be\nattempted again.",
	path:  "/api/v1/deadletters",
	key:   "dead_letters",
	noun:  "dead letter",
	filters: []listFilter{
		{"device", "device", "only the dead letters of this `device`"},
		{"status", "status", "only those that ended with this `status`: failed, expired or superseded"},
		{"reason", "reason", "only those that ended with this `reason` (timeout, ttl_elapsed, newer_command, …)"},
	},
	sinceUsage: "only those that ended at or after this `time`: RFC 3339 (2026-11-29T19:00:00Z), or a duration back from now (90m, 24h, 7d)",
	limitUsage: "at most `N` dead letters (1 to 1000)",
	afterUsage: "the dead letters after this `seq`, oldest first, to page forward (without it: the newest)",
	jsonUsage:  "print each dead letter as one line of JSON, as the API gives it",
	print:      printDeadLetters,
}

// deadLetters prints the dead-letter store: by default the newest -limit
// dead letters, or with -after those after that seq, oldest first, to page
// forward.
func (c *cli) deadLetters(args []string) error { return deadLetterListing.run(c, args) }

// printDeadLetters prints dead as a table, one per line, with a header;
// or says there are none.
func printDeadLetters(w io.Writer, dead []devices.DeadLetter) error {
	if len(dead) == 0 {
		_, err := fmt.Fprintln(w, "no dead letters")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tUPDATED_AT\tDEVICE\tOP_ID\tSTATUS\tREASON\tATTEMPTS\tTARGET\tDETAIL")
	for _, d := range dead {
		target, err := json.Marshal(d.Target)
		if err != nil {
			return fmt.Errorf("dead letter %d: target: %v", d.Seq, err)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n",
			d.Seq, d.UpdatedAt.Format(time.RFC3339), cell(d.Device), cell(d.OpID), cell(string(d.Status)),
			cell(string(d.Reason)), d.Attempts, cell(string(target)), cell(truncate(d.Detail, maxDetail)))
	}
	return tw.Flush()
}

// truncate returns s cut to n runes, the last of them "…", if it is
// longer.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
