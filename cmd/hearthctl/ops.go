package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hearthd/hearth/devices"
)

// maxWaitPerCall is the longest ?wait= hearthctl asks for in one request:
// api.MaxWait, the most hearthd accepts. A longer -wait is several long
// polls of GET /api/v1/ops/{op_id}.
const maxWaitPerCall = 60 * time.Second

// waitSlack is how long past its ?wait= a long poll may take to answer
// before hearthctl gives up on it.
const waitSlack = 15 * time.Second

// errNotSucceeded is a command that ended in a terminal status other than
// succeeded (said on stderr): exit status 1.
var errNotSucceeded = errors.New("the command did not succeed")

// errStillPending is a command not terminal when -wait passed (said on
// stderr): exit status 3.
var errStillPending = errors.New("the command has not ended")

// exitPending is the exit status of a command still under way when its
// -wait passed: it may yet succeed.
const exitPending = 3

// sendCmd is hearthctl send DEVICE PAYLOAD [-wait D] [-json]: POST
// /api/v1/devices/{device}/commands with PAYLOAD as the body (the body of
// an MQTT command on <prefix>/<device>/set: a plain string such as ON, or
// a JSON object; "-" reads it from stdin), with ?wait= when -wait is
// given, and then, if the command has not ended yet and time is left,
// GET /api/v1/ops/{op_id}?wait= until it ends or -wait passes.
func (c *cli) sendCmd(args []string) error {
	fs := flag.NewFlagSet("hearthctl send", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	wait := fs.Duration("wait", 0, "wait this long (a Go duration) for the command to end; 0 prints the first answer (accepted)")
	asJSON := fs.Bool("json", false, "print the result as one line of JSON, as hearthd sent it")
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "usage: hearthctl send DEVICE PAYLOAD [-wait 10s] [-json]\n\n"+
			"Sends a command: PAYLOAD is what an automation publishes to <prefix>/DEVICE/set, a plain\n"+
			"string (taken as state: ON, LOCK) or a JSON object of target attributes with the optional\n"+
			"op_id, ttl and issued_at; - reads it from stdin. Prints the result. Exit status: 0 accepted\n"+
			"(without -wait) or succeeded, 1 the command ended otherwise (failed, expired, superseded,\n"+
			"rejected) or an error, 3 still under way when -wait passed.\n\nflags:\n")
		fs.PrintDefaults()
	}
	pos, err := c.parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return usagef("want DEVICE and PAYLOAD, got %d arguments (hearthctl send -h)", len(pos))
	}
	if *wait < 0 {
		return usagef("-wait %v: want 0 or more", *wait)
	}
	device, payload := pos[0], []byte(pos[1])
	if pos[1] == "-" {
		if payload, err = io.ReadAll(io.LimitReader(c.stdin, devices.MaxPayloadBytes+1)); err != nil {
			return fmt.Errorf("read the payload from stdin: %v", err)
		}
	}
	deadline := c.now().Add(*wait)
	q := url.Values{}
	first := min(*wait, maxWaitPerCall)
	if first > 0 {
		q.Set("wait", first.String())
	}
	timeout := time.Duration(0) // the client's
	if first > 0 {
		timeout = first + waitSlack
	}
	resp, body, err := c.send(http.MethodPost, "/api/v1/devices/"+url.PathEscape(device)+"/commands", q, payload, timeout)
	if err != nil {
		return err
	}
	raw, res, err := resultOf(resp, body)
	if err != nil {
		return err
	}
	if !res.Status.Terminal() && *wait > 0 && res.OpID != "" {
		if raw, res, err = c.follow(res.OpID, deadline); err != nil {
			return err
		}
	}
	return c.printResult(raw, res, *asJSON, *wait > 0)
}

// getCmd is hearthctl get OP_ID [-wait D] [-json]: GET
// /api/v1/ops/{op_id}, with ?wait= (several long polls when -wait is
// over a minute).
func (c *cli) getCmd(args []string) error {
	fs := flag.NewFlagSet("hearthctl get", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	wait := fs.Duration("wait", 0, "wait this long (a Go duration) for the command to end")
	asJSON := fs.Bool("json", false, "print the result as one line of JSON, as hearthd sent it")
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "usage: hearthctl get OP_ID [-wait 30s] [-json]\n\n"+
			"Prints the stored command OP_ID as a result. Exit status: 0 succeeded or, without -wait,\n"+
			"still under way; 1 it ended otherwise, or an error (unknown_op: no such command is stored);\n"+
			"3 still under way when -wait passed.\n\nflags:\n")
		fs.PrintDefaults()
	}
	pos, err := c.parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one OP_ID, got %d arguments (hearthctl get -h)", len(pos))
	}
	if *wait < 0 {
		return usagef("-wait %v: want 0 or more", *wait)
	}
	raw, res, err := c.follow(pos[0], c.now().Add(*wait))
	if err != nil {
		return err
	}
	return c.printResult(raw, res, *asJSON, *wait > 0)
}

// follow asks GET /api/v1/ops/{op_id} until the command is terminal or
// deadline has passed, each time with ?wait= the time left (at most
// maxWaitPerCall); once when deadline is not in the future.
func (c *cli) follow(opID string, deadline time.Time) (json.RawMessage, devices.Result, error) {
	for {
		left := min(deadline.Sub(c.now()), maxWaitPerCall).Round(time.Millisecond)
		q := url.Values{}
		if left > 0 {
			q.Set("wait", left.String())
		}
		resp, body, err := c.send(http.MethodGet, "/api/v1/ops/"+url.PathEscape(opID), q, nil, max(left, 0)+waitSlack)
		if err != nil {
			return nil, devices.Result{}, err
		}
		raw, res, err := resultOf(resp, body)
		if err != nil {
			return nil, devices.Result{}, err
		}
		if res.Status.Terminal() || !c.now().Before(deadline) {
			return raw, res, nil
		}
	}
}

// resultOf reads a command endpoint's answer: a devices.Result (200, 202,
// and the 4xx of a rejected command, which carry one), or else an error
// that quotes hearthd's {"error","detail"}.
func resultOf(resp *http.Response, body []byte) (json.RawMessage, devices.Result, error) {
	var res devices.Result
	if err := json.Unmarshal(body, &res); err != nil || res.Status == "" {
		if resp.StatusCode/100 != 2 {
			return nil, res, answerError(resp, body)
		}
		return nil, res, fmt.Errorf("unexpected answer from %s: %s", resp.Request.URL, cell(strings.TrimSpace(string(body))))
	}
	return json.RawMessage(body), res, nil
}

// printResult prints a command's result (or its raw JSON) and returns
// errNotSucceeded for a terminal status other than succeeded, and, when
// the caller waited, errStillPending for one not terminal; both said on
// stderr.
func (c *cli) printResult(raw json.RawMessage, res devices.Result, asJSON, waited bool) error {
	if asJSON {
		if err := printJSONLines(c.stdout, []json.RawMessage{raw}); err != nil {
			return err
		}
	} else {
		printResultBlock(c.stdout, res)
	}
	switch {
	case res.Status == devices.Succeeded:
		return nil
	case res.Status.Terminal():
		fmt.Fprintf(c.stderr, "hearthctl: %s: the command %s ended %s\n", res.Device, res.OpID, outcome(res))
		return errNotSucceeded
	case waited:
		fmt.Fprintf(c.stderr, "hearthctl: %s: the command %s is still %s; follow it with: hearthctl get %s -wait 1m\n",
			res.Device, res.OpID, res.Status, res.OpID)
		return errStillPending
	}
	return nil
}

// outcome is a result's status, reason and detail in one phrase:
// "failed (timeout: no report within 5s)".
func outcome(r devices.Result) string {
	s := string(r.Status)
	switch {
	case r.Reason != "" && r.Detail != "":
		s += " (" + string(r.Reason) + ": " + r.Detail + ")"
	case r.Reason != "":
		s += " (" + string(r.Reason) + ")"
	case r.Detail != "":
		s += " (" + r.Detail + ")"
	}
	return s
}

// printResultBlock prints r as "key: value" lines, leaving out what it
// lacks.
func printResultBlock(w io.Writer, r devices.Result) {
	line := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "%-9s %s\n", k+":", v)
		}
	}
	line("op_id", r.OpID)
	line("device", r.Device)
	line("status", string(r.Status))
	line("reason", string(r.Reason))
	if r.Detail != "" {
		line("detail", cell(r.Detail))
	}
	fmt.Fprintf(w, "%-9s %d\n", "attempts:", r.Attempts)
	line("target", compactJSON(r.Target))
	line("state", compactJSON(r.State))
	if !r.At.IsZero() {
		line("at", r.At.UTC().Format(time.RFC3339Nano))
	}
}

// compactJSON is v as compact JSON with sorted keys, "" for an empty map.
func compactJSON[M ~map[string]any](v M) string {
	if len(v) == 0 {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// parseInterleaved parses a subcommand's flags (with -addr and -token, as
// parseFlags) wherever they are among its positional arguments, as people
// type them (hearthctl send lamp ON -wait 10s), and returns the
// positional ones. After "--" every argument is positional.
func (c *cli) parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.StringVar(&c.addr, "addr", c.addr, "hearthd's HTTP address (`URL`), as before the command")
	fs.StringVar(&c.token, "token", c.token, "bearer `token` for the API, as before the command")
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errFlags
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}
