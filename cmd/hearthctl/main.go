// Command hearthctl is the operator's CLI over hearthd's HTTP API: it
// reads the audit trail of safety-critical commands (GET /api/v1/audit),
// the dead-letter store (GET /api/v1/deadletters) and the circuit breakers
// (GET /api/v1/breakers) and prints them as tables, or as JSON lines for
// scripts; it shows whether the store was quarantined and acknowledges a
// quarantine (GET /api/v1/store, POST /api/v1/store/ack). hearthctl
// credentials shows or rotates the accounts of hearthd's credentials
// file, which it reads directly. It acts, too: send sends a command (POST
// /api/v1/devices/{device}/commands) and get reads one by op_id (GET
// /api/v1/ops/{op_id}), each optionally waiting for it to end; devices
// lists the devices (GET /api/v1/devices); watch follows the event stream
// (GET /api/v1/events), one decoded line per event, reconnecting with
// backoff until SIGINT; status is a one-screen summary.
//
//	hearthctl [-addr ...] [-token T] send DEVICE PAYLOAD [-wait 10s] [-json]
//	hearthctl [-addr ...] [-token T] get OP_ID [-wait 30s] [-json]
//	hearthctl [-addr ...] [-token T] devices [-json]
//	hearthctl [-addr ...] [-token T] watch [-device D]... [-n N] [-json]
//	hearthctl [-addr ...] [-token T] status [-since 24h]
//	hearthctl [-addr http://127.0.0.1:8080] [-token T] audit [-device D] [-op OPID] [-principal P] [-since 24h] [-limit N] [-after SEQ] [-json]
//	hearthctl [-addr ...] [-token T] deadletters [-device D] [-status S] [-reason R] [-since 24h] [-limit N] [-after SEQ] [-json]
//	hearthctl [-addr ...] [-token T] breakers [-json]
//	hearthctl [-addr ...] [-token T] store [-json] [ack]
//	hearthctl credentials [-data-dir DIR] [rotate NAME | token [NAME]]
//
//	hearthctl [-addr ...] ready [-timeout 5s] [-q]
//
// ready asks GET /readyz, which needs no token, and exits 0 when hearthd
// is ready (degraded included: it serves commands), 1 when it is not: a
// container's health check.
//
// The token, if any (-token, or the HEARTH_TOKEN environment variable), is
// sent as "Authorization: Bearer <token>". Exit status: 0 done, 1 an error
// (hearthd unreachable or answering with an error, or a command sent or
// read that ended otherwise than succeeded), 2 a usage mistake, 3 a
// command still under way when send's or get's -wait passed. hearthctl
// -version prints the build's version, VCS revision and Go release.
package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/hearthd/hearth/buildinfo"
)

// Exit statuses (and exitPending, 3: see send).
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// defaultAddr is hearthd's default HTTP address (http.listen).
const defaultAddr = "http://127.0.0.1:8080"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs hearthctl with args (without the program name), writing its
// output to stdout and its errors to stderr, and returns the exit status.
// It reads HEARTH_TOKEN from the environment and the time from the system
// clock (for -since durations).
func run(args []string, stdout, stderr io.Writer) int {
	c := &cli{
		stdout: stdout,
		stderr: stderr,
		getenv: os.Getenv,
		now:    time.Now,
		client: &http.Client{Timeout: 30 * time.Second},
		random: crand.Reader,
		stdin:  os.Stdin,
		signals: func() (context.Context, context.CancelFunc) {
			return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		},
	}
	return c.run(args)
}

// cli is one run of hearthctl with its surroundings.
type cli struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	now            func() time.Time
	client         *http.Client
	random         io.Reader // the secrets of credentials rotate
	stdin          io.Reader // send's payload "-"
	// signals returns the context of a command that runs until
	// interrupted (watch): done at SIGINT or SIGTERM.
	signals func() (context.Context, context.CancelFunc)

	// streamIdle is how long watch waits for a byte of its stream
	// before it reconnects; 0: defaultStreamIdle.
	streamIdle time.Duration

	addr, token string // set by run from the global flags
}

// usageError is a mistake in the command line: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return usageError{fmt.Sprintf(format, args...)}
}

// errFlags is a flag mistake that package flag already printed, with the
// usage: exit status 2, nothing more to say.
var errFlags = errors.New("bad flags")

// commands are hearthctl's subcommands.
var commands = []struct {
	name, summary string
	run           func(c *cli, args []string) error
}{
	{"audit", "the audit trail of safety-critical commands (GET /api/v1/audit)", (*cli).audit},
	{"credentials", "show the accounts of <data_dir>/credentials.yaml, or rotate one (reads the file, not the API)", (*cli).credentials},
	{"breakers", "the circuit breaker of every service (GET /api/v1/breakers)", (*cli).breakers},
	{"deadletters", "commands that ended expired, failed or superseded (GET /api/v1/deadletters)", (*cli).deadLetters},
	{"devices", "every device: availability, pending commands, breaker, state (GET /api/v1/devices)", (*cli).devicesCmd},
	{"get", "a command's result by op_id, -wait for it to end (GET /api/v1/ops/{op_id})", (*cli).getCmd},
	{"ready", "exit 0 if hearthd is ready, 1 if not (GET /readyz; a container's health check)", (*cli).ready},
	{"send", "send a command to a device and print its result, -wait for it to end (POST /api/v1/devices/{device}/commands)", (*cli).sendCmd},
	{"status", "a one-screen summary: readiness, breakers, devices, pending commands, recent failures, dead letters", (*cli).status},
	{"store", "whether the store was quarantined (GET /api/v1/store); store ack acknowledges it (POST /api/v1/store/ack)", (*cli).store},
	{"watch", "follow results, states, availability and breakers as they happen (GET /api/v1/events)", (*cli).watchCmd},
}

func (c *cli) run(args []string) int {
	fs := flag.NewFlagSet("hearthctl", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.StringVar(&c.addr, "addr", defaultAddr, "hearthd's HTTP address (`URL`; default $HEARTH_ADDR, else "+defaultAddr+")")
	fs.StringVar(&c.token, "token", "", "bearer `token` for the API (default $HEARTH_TOKEN)")
	printVersion := fs.Bool("version", false, "print the version, the VCS revision and the Go release, and exit")
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "usage: hearthctl [-addr URL] [-token T] <command> [flags]\n\ncommands:\n")
		for _, cmd := range commands {
			fmt.Fprintf(c.stderr, "  %-12s %s\n", cmd.name, cmd.summary)
		}
		fmt.Fprintf(c.stderr, "\n'hearthctl <command> -h' shows a command's flags.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage // flag printed the error and the usage
	}
	if *printVersion {
		fmt.Fprintln(c.stdout, buildinfo.Resolve(version, revision).Line("hearthctl"))
		return exitOK
	}
	if c.token == "" {
		c.token = c.getenv("HEARTH_TOKEN")
	}
	addrSet := false
	fs.Visit(func(f *flag.Flag) { addrSet = addrSet || f.Name == "addr" })
	if env := c.getenv("HEARTH_ADDR"); env != "" && !addrSet {
		c.addr = env
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return exitUsage
	}
	name, rest := fs.Arg(0), fs.Args()[1:]
	for _, cmd := range commands {
		if cmd.name != name {
			continue
		}
		err := cmd.run(c, rest)
		var ue usageError
		switch {
		case err == nil:
			return exitOK
		case errors.Is(err, flag.ErrHelp):
			return exitOK
		case errors.Is(err, errNotReady), errors.Is(err, errNotSucceeded), errors.Is(err, errStatusIncomplete):
			return exitError // the failing checks, or the result, are printed
		case errors.Is(err, errStillPending):
			return exitPending // the result so far is printed
		case errors.Is(err, errFlags):
			return exitUsage
		case errors.As(err, &ue):
			fmt.Fprintf(c.stderr, "hearthctl %s: %v\n", name, err)
			return exitUsage
		default:
			fmt.Fprintf(c.stderr, "hearthctl: %v\n", err)
			return exitError
		}
	}
	fmt.Fprintf(c.stderr, "hearthctl: unknown command %q\n", name)
	fs.Usage()
	return exitUsage
}

// parseFlags parses a subcommand's flags, which take -addr and -token as
// well (after the command, as people type them): -h is flag.ErrHelp, a
// flag mistake (already printed by flag) is errFlags, and a positional
// argument is a usageError.
func (c *cli) parseFlags(fs *flag.FlagSet, args []string) error {
	fs.StringVar(&c.addr, "addr", c.addr, "hearthd's HTTP address (`URL`), as before the command")
	fs.StringVar(&c.token, "token", c.token, "bearer `token` for the API, as before the command")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errFlags
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// get GETs path (with query) from hearthd and decodes its JSON answer
// into v. Its errors say whether hearthd could not be reached, answered
// with an error (quoting the server's "error"), or answered something
// that is not what v expects.
func (c *cli) get(path string, query url.Values, v any) error {
	return c.call(http.MethodGet, path, query, v)
}

// post POSTs to path with no body and decodes the JSON answer into v,
// with get's errors.
func (c *cli) post(path string, v any) error {
	return c.call(http.MethodPost, path, nil, v)
}

// call sends a request with no body to hearthd; see get.
func (c *cli) call(method, path string, query url.Values, v any) error {
	resp, body, err := c.send(method, path, query, nil, 0)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return answerError(resp, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("unexpected answer from %s: %v", resp.Request.URL, err)
	}
	return nil
}

// send sends a request to hearthd with body (nil for none) and returns
// its answer and body, whatever the status. timeout, when more than 0,
// replaces the client's for this request (a long poll's). Its errors say
// that hearthd could not be reached, or its answer not read.
func (c *cli) send(method, path string, query url.Values, body []byte, timeout time.Duration) (*http.Response, []byte, error) {
	c.addr = strings.TrimRight(c.addr, "/")
	if !strings.Contains(c.addr, "://") {
		c.addr = "http://" + c.addr
	}
	u := c.addr + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, u, rd)
	if err != nil {
		return nil, nil, usagef("bad -addr %q: %v", c.addr, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	client := c.client
	if timeout > 0 {
		cl := *c.client
		cl.Timeout = timeout
		client = &cl
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, nil, fmt.Errorf("cannot reach hearthd at %s: %v (is it running? -addr)", c.addr, err)
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, nil, fmt.Errorf("read answer of %s: %v", u, err)
	}
	return resp, answer, nil
}

// answerError describes a non-2xx answer: its status and the server's
// {"error":...,"detail":...} message (or its body's first line, if it is
// not that).
func answerError(resp *http.Response, body []byte) error {
	var e struct {
		Error  string `json:"error"`
		Detail string `json:"detail"`
	}
	msg := strings.TrimSpace(string(body))
	if json.Unmarshal(body, &e) == nil && e.Error != "" {
		msg = e.Error
		if e.Detail != "" {
			msg += ": " + e.Detail
		}
	} else if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	hint := ""
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		hint = " (give a token with -token or HEARTH_TOKEN)"
	}
	if msg == "" {
		return fmt.Errorf("hearthd answered %s%s", resp.Status, hint)
	}
	return fmt.Errorf("hearthd answered %s: %s%s", resp.Status, msg, hint)
}

// cell is s for a table cell: "-" when empty, on one line.
func cell(s string) string {
	if s == "" {
		return "-"
	}
	return strings.NewReplacer("\t", " ", "\n", " ", "\r", " ").Replace(s)
}
