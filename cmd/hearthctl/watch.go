package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
)

// watchBackoff spaces watch's reconnects: full jitter, base 500 ms,
// doubling, cap 30 s (the spacing DESIGN.md asks of every reconnect).
var watchBackoff = retry.Backoff{Base: 500 * time.Millisecond, Multiplier: 2, Cap: 30 * time.Second}

// maxEventBytes bounds one server-sent event's line.
const maxEventBytes = 1 << 20

// errWatchFinal is an answer of GET /api/v1/events that reconnecting will
// not change (a 4xx: no token, a bad ?device=).
type errWatchFinal struct{ err error }

func (e errWatchFinal) Error() string { return e.err.Error() }

// sse is one server-sent event (the WHATWG HTML "event stream" format):
// its event type and its data lines joined by "\n".
type sse struct {
	event string
	data  []byte
}

// watchCmd is hearthctl watch [-device D]... [-n N] [-json]: it follows
// GET /api/v1/events and prints one decoded line per event, reconnecting
// with full-jitter backoff when the stream ends or hearthd cannot be
// reached, until SIGINT (or SIGTERM), or -n events.
func (c *cli) watchCmd(args []string) error {
	fs := flag.NewFlagSet("hearthctl watch", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	var devs deviceList
	fs.Var(&devs, "device", "only this device's events (repeatable); results, states and availability carry a device, breaker events none: they are left out")
	count := fs.Int("n", 0, "exit after this many events; 0 follows until interrupted")
	asJSON := fs.Bool("json", false, `print each event as one line of JSON: {"event":"result","data":{...}}`)
	fs.Usage = func() {
		fmt.Fprintf(c.stderr, "usage: hearthctl watch [-device D]... [-n N] [-json]\n\n"+
			"Follows hearthd's events (GET /api/v1/events) and prints one line per event: every command's\n"+
			"results, devices' mirrored states and availability, breaker transitions. Reconnects with\n"+
			"backoff when the stream ends (events meanwhile are not replayed); Ctrl-C ends it.\n\nflags:\n")
		fs.PrintDefaults()
	}
	if err := c.parseFlags(fs, args); err != nil {
		return err
	}
	if *count < 0 {
		return usagef("-n %d: want 0 or more", *count)
	}
	ctx, stop := c.signals()
	defer stop()
	q := url.Values{}
	for _, d := range devs {
		q.Add("device", d)
	}
	printed, failures := 0, 0
	var prev time.Duration
	for {
		connected := false
		err := c.stream(ctx, q, func() {
			connected = true
			if failures > 0 {
				fmt.Fprintln(c.stderr, "hearthctl watch: reconnected; events while away are not replayed")
			} else {
				fmt.Fprintf(c.stderr, "hearthctl watch: following %s/api/v1/events%s\n", c.addr, queryText(q))
			}
		}, func(ev sse) bool {
			if ev.event == "dropped" {
				fmt.Fprintf(c.stderr, "hearthctl watch: hearthd dropped this stream, too far behind (%s)\n", cell(string(ev.data)))
				return false
			}
			if *asJSON {
				printEventJSON(c.stdout, ev)
			} else {
				fmt.Fprintln(c.stdout, eventLine(ev, c.now()))
			}
			printed++
			return *count == 0 || printed < *count
		})
		if *count > 0 && printed >= *count {
			return nil
		}
		if ctx.Err() != nil {
			return nil // interrupted: done
		}
		var final errWatchFinal
		if errors.As(err, &final) {
			return final.err
		}
		if connected {
			failures, prev = 0, 0
		}
		failures++
		delay := watchBackoff.Delay(failures, prev, randN(rand.Int64N))
		prev = delay
		why := "the stream ended"
		if err != nil {
			why = err.Error()
		}
		fmt.Fprintf(c.stderr, "hearthctl watch: %s; reconnecting in %v\n", why, delay.Round(time.Millisecond))
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil
		}
	}
}

// randN adapts math/rand/v2 to retry.Rand.
type randN func(int64) int64

func (f randN) Int64N(n int64) int64 { return f(n) }

// stream opens GET /api/v1/events with q and hands each event to each
// until each returns false, the stream ends (nil) or fails, or ctx ends.
// connected is called once the answer is 200.
func (c *cli) stream(ctx context.Context, q url.Values, connected func(), each func(sse) bool) error {
	c.addr = strings.TrimRight(c.addr, "/")
	if !strings.Contains(c.addr, "://") {
		c.addr = "http://" + c.addr
	}
	// hearthd writes a keepalive every 15 s: a stream silent for longer
	// than streamIdle is a dead connection (a hub cut off without a FIN,
	// a proxy that holds it) and is dropped so that watch reconnects.
	idle := c.streamIdle
	if idle <= 0 {
		idle = defaultStreamIdle
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var silent atomic.Bool
	watchdog := time.AfterFunc(idle, func() { silent.Store(true); cancel() })
	defer watchdog.Stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.addr+"/api/v1/events"+queryText(q), nil)
	if err != nil {
		return errWatchFinal{usagef("bad -addr %q: %v", c.addr, err)}
	}
	req.Header.Set("Accept", "text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	client := *c.client
	client.Timeout = 0 // a stream has no end to wait for
	resp, err := client.Do(req)
	if err != nil && silent.Load() {
		return fmt.Errorf("hearthd at %s sent no answer for %v", c.addr, idle)
	}
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("cannot reach hearthd at %s: %v", c.addr, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		err := answerError(resp, body)
		if resp.StatusCode/100 == 4 && resp.StatusCode != http.StatusTooManyRequests {
			return errWatchFinal{err}
		}
		return err
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return errWatchFinal{fmt.Errorf("unexpected answer from %s/api/v1/events: Content-Type %q, not text/event-stream", c.addr, ct)}
	}
	connected()
	err = readEvents(readFunc(func(p []byte) (int, error) {
		n, err := resp.Body.Read(p)
		if n > 0 {
			watchdog.Reset(idle)
		}
		return n, err
	}), each)
	if silent.Load() {
		return fmt.Errorf("no event nor keepalive for %v", idle)
	}
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("the stream broke: %v", err)
	}
	return nil
}

// defaultStreamIdle is how long watch waits for a byte of an open stream
// before it takes the connection for dead: three of hearthd's 15 s
// keepalives.
const defaultStreamIdle = 45 * time.Second

// readFunc is an io.Reader of a function.
type readFunc func([]byte) (int, error)

func (f readFunc) Read(p []byte) (int, error) { return f(p) }

// readEvents reads a text/event-stream (the WHATWG HTML "event stream"
// format) from r and hands each event to each until each returns false
// (nil) or r ends (nil, or r's error). Comments (": keepalive") and
// fields other than event and data are skipped; an event without an
// event field is "message"; a line over maxEventBytes is an error.
func readEvents(r io.Reader, each func(sse) bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxEventBytes)
	var ev sse
	var data [][]byte
	for sc.Scan() {
		line := bytes.TrimSuffix(sc.Bytes(), []byte("\r"))
		switch {
		case len(line) == 0: // dispatch
			if data != nil {
				ev.data = bytes.Join(data, []byte("\n"))
				if ev.event == "" {
					ev.event = "message"
				}
				if !each(ev) {
					return nil
				}
			}
			ev, data = sse{}, nil
		case line[0] == ':': // a comment: the keepalive
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "event":
				ev.event = string(value)
			case "data":
				data = append(data, bytes.Clone(value))
			}
		}
	}
	return sc.Err()
}

// queryText is "?"+q encoded, or "" for no query.
func queryText(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// eventLine is ev as one line: the time (the event's own, or now for
// states and availability, which carry none), the kind, what it is about
// and what it says.
//
//	2026-12-03T14:05:01Z  result        kitchen_light  op_id=try-1 status=succeeded attempts=1 target={"state":"ON"} state={"state":"ON"}
//	2026-12-03T14:05:01Z  state         kitchen_light  {"state":"ON"}
//	2026-12-03T14:05:01Z  availability  kitchen_light  online
//	2026-12-03T14:05:01Z  breaker       zigbee         closed -> open
func eventLine(ev sse, now time.Time) string {
	at, about, says := now, "-", ""
	switch ev.event {
	case "result":
		var r devices.Result
		if json.Unmarshal(ev.data, &r) != nil {
			break
		}
		if !r.At.IsZero() {
			at = r.At
		}
		about = r.Device
		parts := []string{"op_id=" + r.OpID, "status=" + string(r.Status)}
		if r.Reason != "" {
			parts = append(parts, "reason="+string(r.Reason))
		}
		parts = append(parts, fmt.Sprintf("attempts=%d", r.Attempts))
		if t := compactJSON(r.Target); t != "" {
			parts = append(parts, "target="+t)
		}
		if s := compactJSON(r.State); s != "" {
			parts = append(parts, "state="+s)
		}
		if r.Detail != "" {
			parts = append(parts, fmt.Sprintf("detail=%q", r.Detail))
		}
		says = strings.Join(parts, " ")
	case "state":
		var s struct {
			Device string         `json:"device"`
			State  map[string]any `json:"state"`
		}
		if json.Unmarshal(ev.data, &s) != nil {
			break
		}
		about, says = s.Device, compactJSON(s.State)
		if says == "" {
			says = "{}"
		}
	case "availability":
		var a struct {
			Device string `json:"device"`
			Online bool   `json:"online"`
		}
		if json.Unmarshal(ev.data, &a) != nil {
			break
		}
		about, says = a.Device, "offline"
		if a.Online {
			says = "online"
		}
	case "breaker":
		var b struct {
			Service string    `json:"service"`
			From    string    `json:"from"`
			To      string    `json:"to"`
			At      time.Time `json:"at"`
		}
		if json.Unmarshal(ev.data, &b) != nil {
			break
		}
		if !b.At.IsZero() {
			at = b.At
		}
		about, says = b.Service, b.From+" -> "+b.To
	}
	if says == "" { // an event this hearthctl does not know, or cannot read
		var line bytes.Buffer
		if json.Compact(&line, ev.data) != nil {
			line.Reset()
			line.WriteString(strings.ReplaceAll(string(ev.data), "\n", " "))
		}
		says = line.String()
	}
	// One line whatever the server sent: a device, op_id or event type
	// with a line break in it (JSON allows it) would forge a line.
	return strings.NewReplacer("\n", " ", "\r", " ").Replace(
		fmt.Sprintf("%-20s  %-12s  %-14s %s", at.UTC().Format(time.RFC3339), ev.event, about, says))
}

// printEventJSON prints ev as {"event":…,"data":…} on one line; data that
// is not JSON is given as a string.
func printEventJSON(w io.Writer, ev sse) {
	data := json.RawMessage(ev.data)
	var compact bytes.Buffer
	if json.Compact(&compact, ev.data) == nil {
		data = compact.Bytes()
	} else {
		data, _ = json.Marshal(string(ev.data))
	}
	b, _ := json.Marshal(struct {
		Event string          `json:"event"`
		Data  json.RawMessage `json:"data"`
	}{ev.event, data})
	fmt.Fprintf(w, "%s\n", b)
}

// deviceList is a repeatable -device flag.
type deviceList []string

func (d *deviceList) String() string { return strings.Join(*d, ",") }

func (d *deviceList) Set(s string) error {
	if s == "" {
		return errors.New("want a device ID")
	}
	*d = append(*d, s)
	return nil
}
