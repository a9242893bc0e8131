package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
)

// Commander takes commands; *dispatcher.Dispatcher is one.
type Commander interface {
	// Submit hands req to the intake; req.Done gets the first result.
	// An error (dispatcher.ErrStopped, or ctx's) means it was not taken.
	Submit(ctx context.Context, req dispatcher.Request) error
}

// Ops reads stored commands by op_id; *store.Store is one.
type Ops interface {
	Lookup(opID string) (devices.Op, bool, error)
}

// MaxWait is the longest ?wait= of GET /api/v1/ops/{op_id}.
const MaxWait = 60 * time.Second

// longPollSlack is how long past its ?wait= a long poll may take to write
// its answer, beyond the server's WriteTimeout it replaces.
const longPollSlack = 10 * time.Second

// RetryAfter is the Retry-After of a 503 answer, in seconds: about the
// time a restarting hearthd needs.
const RetryAfter = 5

// Commands is what the command endpoints use.
type Commands struct {
	Commander Commander
	Ops       Ops
	// Waiter wakes GET ?wait= requests; it must be the one the
	// dispatcher's OnResult notifies.
	Waiter *Waiter
	// Clock times ?wait= and dates the API's own rejections; nil means the
	// real clock.
	Clock  clockwork.Clock
	Logger *slog.Logger
}

// RegisterCommands adds the command endpoints to mux. They serve only
// requests that passed Authenticate (any other is answered 500), which
// must wrap mux.
//
// POST /api/v1/devices/{device}/commands takes the body of an MQTT
// command on hearth/<device>/set (a plain string such as LOCK, or a JSON
// object; any Content-Type), from the authenticated principal, and answers
// with the command's first result (devices.Result JSON, as on
// hearth/<device>/result):
//
//   - 202 Accepted, accepted: stored, it will be attempted; Location is
//     /api/v1/ops/<op_id>. A repeated op_id of a command still under way
//     is answered the same way.
//   - 200 OK, a terminal status: a repeated op_id answered from the store
//     (the command ran before), or a command whose TTL had passed on
//     arrival (expired); Location as for 202.
//   - rejected: 404 unknown_device, 403 unauthorized, 409 op_id_conflict,
//     413 payload_too_large (a body over devices.MaxPayloadBytes, answered
//     here, nothing submitted, so its op_id is ""), 500 store_error, 400
//     any other reason.
//   - 503 with Retry-After when Hearth is shutting down: the command may
//     or may not be accepted; sending it again with the same op_id is
//     safe.
//
// With ?wait=<Go duration> (at most MaxWait; otherwise 400 invalid_wait,
// nothing submitted) an accepted command is waited for: 200 with its
// terminal result if it ends within the wait, else 202 with its latest
// stored result; other first results are answered at once, as without.
//
// GET /api/v1/ops/{op_id} answers 200 with the stored command as a result
// (devices.Result JSON, the shape of hearth/<device>/result and of the
// POST's answer; the status is the stored one, so a command waiting for
// a sleepy device or an open breaker reads accepted, not queued), or 404
// {"error":"unknown_op"}: rejected commands are never stored. With
// ?wait=<Go duration> (at most MaxWait; otherwise 400 invalid_wait) it
// answers once the command is terminal or the wait has passed, 200 either
// way.
//
// It panics if c lacks its Commander, Ops or Waiter, as a mux does on a
// bad pattern: a wiring mistake.
func RegisterCommands(mux *http.ServeMux, c Commands) {
	if c.Commander == nil || c.Ops == nil || c.Waiter == nil {
		panic("api: RegisterCommands needs a Commander, Ops and a Waiter")
	}
	h := &commands{Commands: c}
	if h.Clock == nil {
		h.Clock = clockwork.NewRealClock()
	}
	if h.Logger == nil {
		h.Logger = slog.New(slog.DiscardHandler)
	}
	mux.HandleFunc("POST /api/v1/devices/{device}/commands", h.post)
	mux.HandleFunc("GET /api/v1/ops/{op_id}", h.get)
}

type commands struct{ Commands }

func (c *commands) post(w http.ResponseWriter, r *http.Request) {
	principal, ok := principalOf(r)
	if !ok {
		c.notAuthenticated(w, r)
		return
	}
	device := r.PathValue("device")
	wait, ok := c.parseWait(w, r)
	if !ok {
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, devices.MaxPayloadBytes))
	if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
		writeJSON(w, http.StatusRequestEntityTooLarge, devices.Result{
			Device: device, Status: devices.Rejected, Reason: devices.ReasonPayloadTooLarge,
			Detail: fmt.Sprintf("the body is over %d bytes, the limit", devices.MaxPayloadBytes),
			At:     c.Clock.Now(),
		})
		return
	} else if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_body", "the body could not be read: "+err.Error())
		return
	}
	first := make(chan devices.Result, 1) // Done never waits for this handler
	err = c.Commander.Submit(r.Context(), dispatcher.Request{
		Device:    device,
		Payload:   body,
		Principal: principal,
		Done:      func(res devices.Result) { first <- res },
	})
	if err != nil {
		c.unavailable(w, "Hearth is not taking commands (shutting down); nothing was accepted")
		return
	}
	select {
	case res := <-first:
		status := statusOf(res)
		if status == http.StatusAccepted || status == http.StatusOK {
			w.Header().Set("Location", "/api/v1/ops/"+url.PathEscape(res.OpID))
		}
		if status == http.StatusAccepted && wait > 0 {
			res = c.awaitEnd(w, r, res, wait)
			if res.Status.Terminal() {
				status = http.StatusOK
			}
		}
		writeJSON(w, status, res)
	case <-r.Context().Done():
		c.unavailable(w, "Hearth stopped before it answered: the command may or may not be accepted; send it again with the same op_id to learn its result")
	}
}

// statusOf is the HTTP status of a command's first result: see
// RegisterCommands.
func statusOf(r devices.Result) int {
	switch r.Status {
	case devices.Accepted, devices.Queued:
		return http.StatusAccepted
	case devices.Rejected:
		switch r.Reason {
		case devices.ReasonUnknownDevice:
			return http.StatusNotFound
		case devices.ReasonUnauthorized:
			return http.StatusForbidden
		case devices.ReasonOpIDConflict:
			return http.StatusConflict
		case devices.ReasonPayloadTooLarge:
			return http.StatusRequestEntityTooLarge
		case devices.ReasonStoreError:
			return http.StatusInternalServerError
		}
		return http.StatusBadRequest
	}
	return http.StatusOK
}

func (c *commands) get(w http.ResponseWriter, r *http.Request) {
	principal, ok := principalOf(r)
	if !ok {
		c.notAuthenticated(w, r)
		return
	}
	opID := r.PathValue("op_id")
	wait, ok := c.parseWait(w, r)
	if !ok {
		return
	}
	var wake <-chan struct{}
	if wait > 0 {
		extendDeadline(w, wait)
		var stop func()
		wake, stop = c.Waiter.watch(opID) // before the read: see Waiter.watch
		defer stop()
	}
	op, found, err := c.Ops.Lookup(opID)
	switch {
	case err != nil:
		c.Logger.Error("lookup op", "op_id", opID, "err", err)
		writeError(w, http.StatusInternalServerError, "store_error", "the command store could not be read")
		return
	case !found:
		writeError(w, http.StatusNotFound, "unknown_op", "no command with op_id "+strconv.Quote(opID)+
			" is stored (rejected commands never are; ended ones are kept for 7 days)")
		return
	case principal != "" && op.Principal != principal:
		// As the intake answers a repeated op_id: who unlocked what is
		// not another principal's to read.
		writeError(w, http.StatusForbidden, "unauthorized", "op_id "+strconv.Quote(opID)+" belongs to a command of another principal")
		return
	}
	if wait > 0 && !op.Status.Terminal() {
		op = c.waitFor(r, opID, op, wait, wake)
	}
	writeJSON(w, http.StatusOK, op.Result())
}

// ParseWait reads a ?wait= value: a Go duration from 0s to MaxWait.
func ParseWait(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > MaxWait {
		return 0, fmt.Errorf("wait is %q; want a Go duration from 0s to %s, such as 30s", s, MaxWait)
	}
	return d, nil
}

// parseWait reads r's ?wait= (0 when not given), or answers 400
// invalid_wait and returns false.
func (c *commands) parseWait(w http.ResponseWriter, r *http.Request) (time.Duration, bool) {
	s := r.URL.Query().Get("wait")
	if s == "" {
		return 0, true
	}
	d, err := ParseWait(s)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_wait", err.Error())
		return 0, false
	}
	return d, true
}

// extendDeadline moves w's write deadline past wait: the server's
// WriteTimeout counts from the end of the request's headers, and a long
// poll answers after its wait. A writer that cannot (a test's recorder)
// has no deadline to move.
func extendDeadline(w http.ResponseWriter, wait time.Duration) {
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + longPollSlack))
}

// waitFor waits up to wait (on c's clock) for op, read from the store,
// to end: woken by wake (Waiter.watch of opID, registered before op was
// read), it reads op again. It returns op as last read, ended or not,
// when the wait passes or r's context ends (the client left, or Hearth
// stops).
func (c *commands) waitFor(r *http.Request, opID string, op devices.Op, wait time.Duration, wake <-chan struct{}) devices.Op {
	timer := c.Clock.NewTimer(wait)
	defer timer.Stop()
	for !op.Status.Terminal() {
		select {
		case <-wake:
			if now, found, err := c.Ops.Lookup(opID); err == nil && found {
				op = now
			}
		case <-timer.Chan():
			return op
		case <-r.Context().Done():
			return op
		}
	}
	return op
}

// awaitEnd waits up to wait for the command whose first result, accepted,
// is first to end, and returns its terminal result, or, if it has not
// ended by then, its latest stored one (first if it cannot be read).
func (c *commands) awaitEnd(w http.ResponseWriter, r *http.Request, first devices.Result, wait time.Duration) devices.Result {
	extendDeadline(w, wait)
	// A terminal result is stored before the waiter hears of it: watching
	// first, then reading, misses none.
	wake, stop := c.Waiter.watch(first.OpID)
	defer stop()
	op, found, err := c.Ops.Lookup(first.OpID)
	if err != nil || !found {
		if err != nil {
			c.Logger.Error("lookup op", "op_id", first.OpID, "err", err)
		}
		return first
	}
	return c.waitFor(r, first.OpID, op, wait, wake).Result()
}

func (c *commands) unavailable(w http.ResponseWriter, detail string) {
	w.Header().Set("Retry-After", strconv.Itoa(RetryAfter))
	writeError(w, http.StatusServiceUnavailable, "unavailable", detail)
}

func (c *commands) notAuthenticated(w http.ResponseWriter, r *http.Request) {
	c.Logger.Error("the command API is served without api.Authenticate: refusing", "path", r.URL.Path)
	writeError(w, http.StatusInternalServerError, "not_authenticated", "the server is misconfigured: its API is not behind authentication")
}
