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
	"time"
)

// listing is a command that prints the records of one of hearthd's paged
// endpoints (GET /api/v1/audit, GET /api/v1/deadletters): by default the
// newest -limit of them, or with -after those after that seq, oldest
// first, to page forward. Its flags are its filters, then -since, -limit,
// -after and -json. T is a record as the table shows it.
type listing[T any] struct {
	name  string // the command: "audit"
	about string // what it lists, for its usage
	path  string // the endpoint: "/api/v1/audit"
	key   string // the answer's list of records: "entries"
	noun  string // one record, in errors: "entry"
	// filters are the command's flags that become the endpoint's exact
	// matches.
	filters []listFilter
	// Usage texts of -since, -limit, -after and -json.
	sinceUsage, limitUsage, afterUsage, jsonUsage string
	// print prints records as a table, or says there are none.
	print func(w io.Writer, records []T) error
}

// listFilter is a string flag sent as the query parameter param when set.
type listFilter struct {
	flag, param, usage string
}

// run parses args and prints what hearthd answers.
func (l listing[T]) run(c *cli, args []string) error {
	fs := flag.NewFlagSet("hearthctl "+l.name, flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	filters := make(map[string]*string, len(l.filters))
	for _, f := range l.filters {
		filters[f.param] = fs.String(f.flag, "", f.usage)
	}
	since := fs.String("since", "", l.sinceUsage)
	limit := fs.Int("limit", 100, l.limitUsage)
	after := fs.Uint64("after", 0, l.afterUsage)
	asJSON := fs.Bool("json", false, l.jsonUsage)
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "usage: hearthctl %s [flags]\n\n%s\n\nflags:\n", l.name, l.about)
		fs.PrintDefaults()
	}
	if err := c.parseFlags(fs, args); err != nil {
		return err
	}
	paging := false
	fs.Visit(func(f *flag.Flag) { paging = paging || f.Name == "after" })

	q := url.Values{}
	for param, v := range filters {
		if *v != "" {
			q.Set(param, *v)
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

	records, nextAfter, err := l.get(c, q)
	if err != nil {
		return err
	}
	if *asJSON {
		err = printJSONLines(c.stdout, records)
	} else {
		err = l.printTable(c.stdout, records)
	}
	if err != nil {
		return err
	}
	if paging && len(records) == *limit {
		fmt.Fprintf(c.stderr, "more may follow: hearthctl %s -after %d\n", l.name, nextAfter)
	}
	return nil
}

// get asks the endpoint with q and returns the page's records, as hearthd
// wrote them, and its next_after.
func (l listing[T]) get(c *cli, q url.Values) ([]json.RawMessage, uint64, error) {
	var page map[string]json.RawMessage
	if err := c.get(l.path, q, &page); err != nil {
		return nil, 0, err
	}
	var records []json.RawMessage
	var nextAfter uint64
	if raw, ok := page[l.key]; ok {
		if err := json.Unmarshal(raw, &records); err != nil {
			return nil, 0, fmt.Errorf("unexpected answer from hearthd: %s: %v", l.key, err)
		}
	}
	if raw, ok := page["next_after"]; ok {
		if err := json.Unmarshal(raw, &nextAfter); err != nil {
			return nil, 0, fmt.Errorf("unexpected answer from hearthd: next_after: %v", err)
		}
	}
	return records, nextAfter, nil
}

// printTable decodes records and prints them with l.print.
func (l listing[T]) printTable(w io.Writer, records []json.RawMessage) error {
	decoded := make([]T, len(records))
	for i, raw := range records {
		if err := json.Unmarshal(raw, &decoded[i]); err != nil {
			return fmt.Errorf("unexpected answer from hearthd: %s %d: %v", l.noun, i, err)
		}
	}
	return l.print(w, decoded)
}

// printJSONLines prints each record as one line of compact JSON.
func printJSONLines(w io.Writer, records []json.RawMessage) error {
	for _, raw := range records {
		var line bytes.Buffer
		if err := json.Compact(&line, raw); err != nil {
			return fmt.Errorf("unexpected answer from hearthd: %v", err)
		}
		line.WriteByte('\n')
		if _, err := w.Write(line.Bytes()); err != nil {
			return err
		}
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
