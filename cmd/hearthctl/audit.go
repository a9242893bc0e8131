package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hearthd/hearth/devices"
)

// audit prints the audit trail: by default the newest -limit entries, or
// with -after the entries after that seq, oldest first, to page forward.
func (c *cli) audit(args []string) error {
	fs := flag.NewFlagSet("hearthctl audit", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	device := fs.String("device", "", "only the entries of this `device`")
	op := fs.String("op", "", "only the entries of this `op_id`")
	principal := fs.String("principal", "", "only the entries of this `principal`")
	since := fs.String("since", "", "only entries at or after this `time`: RFC 3339 (2026-11-29T19:00:00Z), or a duration back from now (90m, 24h, 7d)")
	limit := fs.Int("limit", 100, "at most `N` entries (1 to 1000)")
	after := fs.Uint64("after", 0, "the entries after this `seq`, oldest first, to page forward (without it: the newest entries)")
	asJSON := fs.Bool("json", false, "print each entry as one line of JSON, as the API gives it")
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "usage: hearthctl audit [flags]\n\nThe audit trail of safety-critical commands: each check before each\nattempt and its result, each send, and the outcome.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := c.parseFlags(fs, args); err != nil {
		return err
	}
	paging := false
	fs.Visit(func(f *flag.Flag) { paging = paging || f.Name == "after" })

	q := url.Values{}
	for name, v := range map[string]string{"device": *device, "op_id": *op, "principal": *principal} {
		if v != "" {
			q.Set(name, v)
		}
	}
	if *since != "" {
		t, err := parseSince(*since, c.now())
		if err != nil {
			return err
		}
		q.Set("since", t.UTC().Format(time.RFC3339Nano))
	}
	q.Set("limit", strconv.Itoa(*limit)) // hearthd checks the range
	if paging {
		q.Set("after", strconv.FormatUint(*after, 10))
	} else {
		q.Set("newest", "true")
	}

	var page struct {
		Entries   []json.RawMessage `json:"entries"`
		NextAfter uint64            `json:"next_after"`
	}
	if err := c.get("/api/v1/audit", q, &page); err != nil {
		return err
	}
	if *asJSON {
		for _, raw := range page.Entries {
			var line bytes.Buffer
			if err := json.Compact(&line, raw); err != nil {
				return fmt.Errorf("unexpected answer from hearthd: %v", err)
			}
			line.WriteByte('\n')
			if _, err := c.stdout.Write(line.Bytes()); err != nil {
				return err
			}
		}
	} else {
		entries := make([]devices.AuditEntry, len(page.Entries))
		for i, raw := range page.Entries {
			if err := json.Unmarshal(raw, &entries[i]); err != nil {
				return fmt.Errorf("unexpected answer from hearthd: entry %d: %v", i, err)
			}
		}
		if err := printAudit(c.stdout, entries); err != nil {
			return err
		}
	}
	if paging && len(page.Entries) == *limit {
		fmt.Fprintf(c.stderr, "more may follow: hearthctl audit -after %d\n", page.NextAfter)
	}
	return nil
}

// parseSince reads -since: an RFC 3339 time, or a positive duration back
// from now (Go's syntax, plus whole days such as 7d).
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	var d time.Duration
	var err error
	if days, ok := strings.CutSuffix(s, "d"); ok {
		var n int
		n, err = strconv.Atoi(days)
		d = time.Duration(n) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d <= 0 {
		return time.Time{}, usagef("-since %q: want an RFC 3339 time such as 2026-11-29T19:00:00Z, or a duration back from now such as 90m, 24h or 7d", s)
	}
	return now.Add(-d), nil
}

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
