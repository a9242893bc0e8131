package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/hearthd/hearth/devices"
)

// maxDetail is the most runes of a dead letter's detail the table shows;
// -json shows all of it.
const maxDetail = 60

// deadLetters prints the dead-letter store: by default the newest -limit
// dead letters, or with -after those after that seq, oldest first, to page
// forward.
func (c *cli) deadLetters(args []string) error {
	fs := flag.NewFlagSet("hearthctl deadletters", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	device := fs.String("device", "", "only the dead letters of this `device`")
	status := fs.String("status", "", "only those that ended with this `status`: failed, expired or superseded")
	reason := fs.String("reason", "", "only those that ended with this `reason` (timeout, ttl_elapsed, newer_command, …)")
	since := fs.String("since", "", "only those that ended at or after this `time`: RFC 3339 (2026-11-29T19:00:00Z), or a duration back from now (90m, 24h, 7d)")
	limit := fs.Int("limit", 100, "at most `N` dead letters (1 to 1000)")
	after := fs.Uint64("after", 0, "the dead letters after this `seq`, oldest first, to page forward (without it: the newest)")
	asJSON := fs.Bool("json", false, "print each dead letter as one line of JSON, as the API gives it")
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "usage: hearthctl deadletters [flags]\n\nThe dead-letter store: commands that ended expired or failed, or were\nsuperseded before they reached a sleeping device, and will never be\nattempted again.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := c.parseFlags(fs, args); err != nil {
		return err
	}
	paging := false
	fs.Visit(func(f *flag.Flag) { paging = paging || f.Name == "after" })

	q := url.Values{}
	for name, v := range map[string]string{"device": *device, "status": *status, "reason": *reason} {
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
		DeadLetters []json.RawMessage `json:"dead_letters"`
		NextAfter   uint64            `json:"next_after"`
	}
	if err := c.get("/api/v1/deadletters", q, &page); err != nil {
		return err
	}
	if *asJSON {
		for _, raw := range page.DeadLetters {
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
		dead := make([]devices.DeadLetter, len(page.DeadLetters))
		for i, raw := range page.DeadLetters {
			if err := json.Unmarshal(raw, &dead[i]); err != nil {
				return fmt.Errorf("unexpected answer from hearthd: dead letter %d: %v", i, err)
			}
		}
		if err := printDeadLetters(c.stdout, dead); err != nil {
			return err
		}
	}
	if paging && len(page.DeadLetters) == *limit {
		fmt.Fprintf(c.stderr, "more may follow: hearthctl deadletters -after %d\n", page.NextAfter)
	}
	return nil
}

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
