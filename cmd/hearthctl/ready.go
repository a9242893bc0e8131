package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/hearthd/hearth/health"
)

// errNotReady is hearthd's answer 503 to GET /readyz: exit status 1, the
// failing checks already printed.
var errNotReady = errors.New("hearthd is not ready")

// ready asks GET /readyz and exits 0 when hearthd is ready, 1 when it is
// not or cannot be reached: the probe of the Docker image's HEALTHCHECK,
// which has no curl. /readyz needs no token. Degraded (a failing degraded
// check, such as an unacknowledged quarantine of the store) is ready:
// it exits 0, printing the degraded checks even with -q.
func (c *cli) ready(args []string) error {
	fs := flag.NewFlagSet("hearthctl ready", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	timeout := fs.Duration("timeout", 5*time.Second, "give up after this long (a Go duration)")
	quiet := fs.Bool("q", false, "print nothing when ready and not degraded")
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "usage: hearthctl ready [-timeout 5s] [-q]\n\nExit 0 if hearthd answers GET /readyz with 200 (ready, or degraded: it serves\ncommands), 1 otherwise, printing the checks that fail.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := c.parseFlags(fs, args); err != nil {
		return err
	}
	if *timeout <= 0 {
		return usagef("-timeout %v: want more than 0", *timeout)
	}
	answer, err := c.readyz(*timeout)
	if err != nil {
		return err
	}
	resp, body, report, jsonErr := answer.resp, answer.body, answer.report, answer.jsonErr
	addr := c.addr
	switch {
	case resp.StatusCode == http.StatusOK && jsonErr == nil && report.Status == "ready":
		if !*quiet {
			fmt.Fprintln(c.stdout, "ready")
		}
		return nil
	case resp.StatusCode == http.StatusOK && jsonErr == nil && report.Status == "degraded":
		// Ready: it serves commands; what an operator must look at is
		// printed, -q or not.
		fmt.Fprintln(c.stdout, "ready, degraded:")
		for _, n := range report.Degraded {
			fmt.Fprintf(c.stdout, "  %s: %s\n", n, cell(report.Checks[n]))
		}
		return nil
	case resp.StatusCode == http.StatusServiceUnavailable && jsonErr == nil:
		fmt.Fprintln(c.stdout, "not ready:")
		names := make([]string, 0, len(report.Checks))
		for n := range report.Checks {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if v := report.Checks[n]; v != "ok" {
				fmt.Fprintf(c.stdout, "  %s: %s\n", n, cell(v))
			}
		}
		return errNotReady
	default:
		return fmt.Errorf("unexpected answer from %s/readyz: %s: %s", addr, resp.Status, cell(strings.TrimSpace(string(body))))
	}
}

// readyAnswer is hearthd's answer to GET /readyz.
type readyAnswer struct {
	resp    *http.Response
	body    []byte
	report  health.Report
	jsonErr error // the body is not a health.Report
}

// readyz asks GET /readyz (no token) within timeout. Its error says that
// hearthd could not be reached.
func (c *cli) readyz(timeout time.Duration) (readyAnswer, error) {
	var a readyAnswer
	c.addr = strings.TrimRight(c.addr, "/")
	if !strings.Contains(c.addr, "://") {
		c.addr = "http://" + c.addr
	}
	req, err := http.NewRequest(http.MethodGet, c.addr+"/readyz", nil)
	if err != nil {
		return a, usagef("bad -addr %q: %v", c.addr, err)
	}
	client := *c.client
	client.Timeout = timeout
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return a, fmt.Errorf("cannot reach hearthd at %s: %v", c.addr, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return a, fmt.Errorf("read answer of %s/readyz: %v", c.addr, err)
	}
	a.resp, a.body = resp, body
	a.jsonErr = json.Unmarshal(body, &a.report)
	return a, nil
}
