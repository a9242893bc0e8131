package main

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/hearthd/hearth/devices"
)

// auditListing is hearthctl audit: the audit trail, GET /api/v1/audit.
var auditListing = listing[devices.AuditEntry]{
	name:  "audit",
	about: "The audit trail of safety-critical commands: each check before each\nattempt and its result, each send, and the outcome.",
	path:  "/api/v1/audit",
	key:   "entries",
	noun:  "entry",
	filters: []listFilter{
		{"device", "device", "only the entries of this `device`"},
		{"op", "op_id", "only the entries of this `op_id`"},
		{"principal", "principal", "only the entries of this `principal`"},
	},
	sinceUsage: "only entries at or after this `time`: RFC 3339 (2026-11-29T19:00:00Z), or a duration back from now (90m, 24h, 7d)",
	limitUsage: "at most `N` entries (1 to 1000)",
	afterUsage: "the entries after this `seq`, oldest first, to page forward (without it: the newest entries)",
	jsonUsage:  "print each entry as one line of JSON, as the API gives it",
	print:      printAudit,
}

// audit prints the audit trail: by default the newest -limit entries, or
// with -after the entries after that seq, oldest first, to page forward.
func (c *cli) audit(args []string) error { return auditListing.run(c, args) }

// printAudit prints entries as a table, one per line, with a header; or
// says there are none.
func printAudit(w io.Writer, entries []devices.AuditEntry) error {
	if len(entries) == 0 {
		_, err := fmt.Fprintln(w, "no audit entries")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tTIME\tEVENT\tDEVICE\tOP_ID\tPRINCIPAL\tACTION\tATTEMPT\tRESULT\tDETAIL")
	for _, e := range entries {
		attempt := "-"
		if e.Attempt > 0 {
			attempt = strconv.Itoa(e.Attempt)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			e.Seq, e.At.Format(time.RFC3339), cell(string(e.Event)), cell(e.Device), cell(e.OpID),
			cell(e.Principal), cell(e.Action), attempt, cell(auditResult(e)), cell(e.Detail))
	}
	return tw.Flush()
}

// auditResult is an entry's RESULT cell: a check and whether it passed,
// or a status and its reason.
func auditResult(e devices.AuditEntry) string {
	switch {
	case e.Check != "" && e.Passed:
		return e.Check + " passed"
	case e.Check != "":
		return e.Check + " FAILED"
	case e.Status != "" && e.Reason != "":
		return string(e.Status) + "/" + string(e.Reason)
	default:
		return string(e.Status)
	}
}
