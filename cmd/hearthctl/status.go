package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hearthd/hearth/api"
	"github.com/hearthd/hearth/dispatcher"
)

// statusFailures is how many recent failures status shows.
const statusFailures = 5

// statusDeadLetters is the most dead letters status counts.
const statusDeadLetters = 1000

// errStatusIncomplete is a status with a part hearthd did not answer, or
// a hearthd not ready (all said on stdout): exit status 1.
var errStatusIncomplete = errors.New("hearthd is not ready, or a part of its status could not be read")

// status is hearthctl status [-since 24h]: one screen that says whether
// hearthd is ready (GET /readyz), its breakers (GET /api/v1/breakers), its
// devices online, offline and unknown and the commands pending for them
// (GET /api/v1/devices), the newest failed commands (GET
// /api/v1/ops?status=failed) and how many dead letters there are (GET
// /api/v1/deadletters). A part hearthd does not answer is said in its
// place, and status then exits 1, as it does when hearthd is not ready.
func (c *cli) status(args []string) error {
	fs := flag.NewFlagSet("hearthctl status", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	since := fs.String("since", "24h", "recent failures and dead letters: since this RFC 3339 time, or this long back from now (90m, 24h, 7d)")
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "usage: hearthctl status [-since 24h]\n\nOne screen: readiness, breakers, devices online and offline, pending commands, the\n"+
			"newest failed commands and the count of dead letters. Exit status 1 when hearthd is not\n"+
			"ready or a part could not be read.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := c.parseFlags(fs, args); err != nil {
		return err
	}
	from, err := parseSince(*since, c.now())
	if err != nil {
		return err
	}
	ready, err := c.readyz(10 * time.Second)
	if err != nil {
		return err // nothing else would answer either
	}
	w := c.stdout
	complete := true
	failed := func(part string, err error) {
		complete = false
		fmt.Fprintf(w, "%-13s cannot be read: %v\n", part+":", strings.TrimPrefix(err.Error(), "hearthd answered "))
	}

	// Readiness.
	switch r := ready.report; {
	case ready.jsonErr != nil:
		complete = false
		fmt.Fprintf(w, "%-13s unexpected answer to /readyz: %s: %s\n", "hearthd:", ready.resp.Status, cell(strings.TrimSpace(string(ready.body))))
	case ready.resp.StatusCode == http.StatusOK && r.Status == "degraded":
		var parts []string
		for _, n := range r.Degraded {
			parts = append(parts, n+": "+cell(r.Checks[n]))
		}
		fmt.Fprintf(w, "%-13s %s ready, DEGRADED (%s)\n", "hearthd:", c.addr, strings.Join(parts, "; "))
	case ready.resp.StatusCode == http.StatusOK:
		fmt.Fprintf(w, "%-13s %s ready\n", "hearthd:", c.addr)
	default:
		complete = false
		var parts []string
		names := make([]string, 0, len(r.Checks))
		for n := range r.Checks {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if v := r.Checks[n]; v != "ok" {
				parts = append(parts, n+": "+cell(v))
			}
		}
		fmt.Fprintf(w, "%-13s %s NOT READY (%s)\n", "hearthd:", c.addr, strings.Join(parts, "; "))
	}

	// Breakers.
	var breakers struct {
		Breakers []dispatcher.BreakerStatus `json:"breakers"`
	}
	if err := c.get("/api/v1/breakers", nil, &breakers); err != nil {
		failed("breakers", err)
	} else {
		fmt.Fprintf(w, "%-13s %s\n", "breakers:", breakerSummary(breakers.Breakers))
	}

	// Devices and pending commands.
	if list, _, err := c.getDevices(); err != nil {
		failed("devices", err)
		failed("pending", err)
	} else {
		byAvail := map[string][]string{}
		pending, pendingBy := 0, []string{}
		for _, d := range list {
			byAvail[d.Availability] = append(byAvail[d.Availability], d.ID)
			if d.Pending > 0 {
				pending += d.Pending
				pendingBy = append(pendingBy, d.ID+" "+strconv.Itoa(d.Pending))
			}
		}
		line := fmt.Sprintf("%d: %d online, %d offline", len(list), len(byAvail["online"]), len(byAvail["offline"]))
		if off := byAvail["offline"]; len(off) > 0 {
			line += " (" + strings.Join(off, ", ") + ")"
		}
		line += fmt.Sprintf(", %d unknown", len(byAvail["unknown"]))
		if unk := byAvail["unknown"]; len(unk) > 0 {
			line += " (" + strings.Join(unk, ", ") + ")"
		}
		fmt.Fprintf(w, "%-13s %s\n", "devices:", line)
		if pending == 0 {
			fmt.Fprintf(w, "%-13s none\n", "pending:")
		} else {
			fmt.Fprintf(w, "%-13s %s (%s)\n", "pending:", plural(pending, "command"), strings.Join(pendingBy, ", "))
		}
	}

	// Recent failures.
	sinceText := from.UTC().Format(time.RFC3339)
	q := url.Values{"status": {"failed"}, "since": {from.UTC().Format(time.RFC3339Nano)}, "limit": {strconv.Itoa(statusFailures)}}
	var ops struct {
		Ops  []api.OpSummary `json:"ops"`
		Next string          `json:"next"`
	}
	if err := c.get("/api/v1/ops", q, &ops); err != nil {
		failed("failures", err)
	} else if len(ops.Ops) == 0 {
		fmt.Fprintf(w, "%-13s none since %s\n", "failures:", sinceText)
	} else {
		more := ""
		if ops.Next != "" {
			more = ", more before them"
		}
		fmt.Fprintf(w, "%-13s %s since %s%s, newest first:\n", "failures:", plural(len(ops.Ops), "failed command"), sinceText, more)
		for _, op := range ops.Ops {
			fmt.Fprintf(w, "  %s  %s  %s  %s\n", op.At.UTC().Format(time.RFC3339), op.Device, op.OpID, outcome(op.Result))
		}
	}

	// Dead letters.
	q = url.Values{"since": {from.UTC().Format(time.RFC3339Nano)}, "limit": {strconv.Itoa(statusDeadLetters)}, "newest": {"true"}}
	var dl struct {
		DeadLetters []json.RawMessage `json:"dead_letters"`
	}
	if err := c.get("/api/v1/deadletters", q, &dl); err != nil {
		failed("dead letters", err)
	} else {
		n := strconv.Itoa(len(dl.DeadLetters))
		if len(dl.DeadLetters) >= statusDeadLetters {
			n += " or more"
		}
		fmt.Fprintf(w, "%-13s %s since %s (hearthctl deadletters -since %s)\n", "dead letters:", n, sinceText, *since)
	}
	if !complete {
		return errStatusIncomplete
	}
	return nil
}

// breakerSummary is every breaker in a phrase: "zigbee closed; cloud OPEN
// until 19:00:30Z (2 trips)", or "none".
func breakerSummary(list []dispatcher.BreakerStatus) string {
	if len(list) == 0 {
		return "none"
	}
	parts := make([]string, len(list))
	for i, b := range list {
		p := b.Service + " " + b.State
		if b.State != "closed" {
			p = b.Service + " " + strings.ToUpper(b.State)
			if !b.Until.IsZero() {
				p += " until " + b.Until.UTC().Format(time.RFC3339)
			}
		}
		if b.Trips > 0 {
			p += " (" + plural(b.Trips, "trip") + ")"
		}
		parts[i] = p
	}
	return strings.Join(parts, "; ")
}

// plural is "1 command", "2 commands".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
