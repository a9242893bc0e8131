package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
)

// EventBuffer is how many events GET /api/v1/events holds for one client
// that has not taken them yet; past it the client is dropped.
const EventBuffer = 256

// MaxEventStreams is how many GET /api/v1/events streams the hub serves
// at once; one more is answered 503 too_many_streams with Retry-After.
// A stream holds its connection for as long as it is open, and hearthd's
// HTTP server holds at most 128 connections (its /healthz, /readyz and
// every command included): without this bound one client opening
// streams takes them all (and one host holds at most 32 connections,
// hearthd's per-client share). A home has a few dashboards, not dozens.
const MaxEventStreams = 16

// Keepalive is how often GET /api/v1/events writes a comment line
// (": keepalive") to an idle stream, so that proxies and clients see it
// alive.
const Keepalive = 15 * time.Second

// streamWriteTimeout bounds each write of an event stream, in real time,
// as the server's WriteTimeout bounds a whole answer: a client that
// stops reading holds its handler no longer than this.
const streamWriteTimeout = 10 * time.Second

// Events is the hub behind GET /api/v1/events: the dispatcher's hooks hand
// it what happens (wire Result to dispatcher.Options.OnResult, State to
// OnState, Availability to OnAvailability and Breaker to
// OnBreakerChange, beside what else uses them), and it fans each event
// out to every stream whose filter takes it. Its methods never block:
// each stream has a buffer of EventBuffer events, and a stream whose
// buffer is full is ended with an "event: dropped" instead of slowing
// the dispatcher. Create it with NewEvents; it is safe for concurrent
// use.
type Events struct {
	clock      clockwork.Clock
	buffer     int
	maxStreams int

	// seesAll and ops decide which results a principal's stream
	// carries (LimitResults).
	seesAll func(principal string) bool
	ops     Ops

	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	closed bool
	done   chan struct{} // closed by Close
}

// NewEvents returns a hub whose keepalives follow clock (nil: the real
// clock).
func NewEvents(clock clockwork.Clock) *Events {
	if clock == nil {
		clock = clockwork.NewRealClock()
	}
	return &Events{clock: clock, buffer: EventBuffer, maxStreams: MaxEventStreams, subs: map[*subscriber]struct{}{}, done: make(chan struct{})}
}

// LimitResults makes the streams of a principal that seesAll does not
// approve carry only the results of its own commands, as GET
// /api/v1/ops lists and GET /api/v1/ops/{op_id} shows a principal only
// its own: who unlocked what is not another principal's to read. ops
// tells a result's principal (its stored op's); a result whose op is
// not stored (a rejection) is left out of such a stream. States,
// availabilities and breakers pass, as GET /api/v1/devices shows them to
// every principal. Without LimitResults a principal's stream carries no
// result at all; the open API's (no principal) carries every one. Call
// it before serving.
func (e *Events) LimitResults(seesAll func(principal string) bool, ops Ops) {
	e.seesAll, e.ops = seesAll, ops
}

// resultFilter returns what decides whether principal's stream takes
// a result event, nil when it takes every one.
func (e *Events) resultFilter(principal string) func(event) bool {
	if principal == "" || (e.seesAll != nil && e.seesAll(principal)) {
		return nil
	}
	own := map[string]bool{} // op_id → principal's, cached per stream
	return func(ev event) bool {
		if e.ops == nil {
			return false
		}
		if mine, ok := own[ev.opID]; ok {
			return mine
		}
		op, found, err := e.ops.Lookup(ev.opID)
		mine := err == nil && found && op.Principal == principal
		if found { // not yet stored, or never (a rejection): asked again
			if len(own) >= 4096 {
				clear(own)
			}
			own[ev.opID] = mine
		}
		return mine
	}
}

// event is one server-sent event, encoded once for every stream.
type event struct {
	name string
	// opID is a result's.
	opID string
	// device is the device it is about; service, for a breaker's.
	device, service string
	data            []byte
}

// subscriber is one stream.
type subscriber struct {
	// devices and services are its filter; nil takes everything.
	devices, services map[string]bool
	ch                chan event
	dropped           chan struct{} // closed when its buffer overflowed
}

func (s *subscriber) takes(e event) bool {
	if s.devices == nil {
		return true
	}
	if e.service != "" {
		return s.services[e.service]
	}
	return s.devices[e.device]
}

// StateEvent is the data of an "event: state".
type StateEvent struct {
	Device string         `json:"device"`
	State  map[string]any `json:"state"`
}

// AvailabilityEvent is the data of an "event: availability".
type AvailabilityEvent struct {
	Device string `json:"device"`
	Online bool   `json:"online"`
}

// BreakerEvent is the data of an "event: breaker": a transition of a
// service's circuit breaker.
type BreakerEvent struct {
	Service string    `json:"service"`
	From    string    `json:"from"` // closed, open or half_open
	To      string    `json:"to"`
	At      time.Time `json:"at"`
}

// Result publishes an "event: result": r as on <prefix>/<device>/result.
func (e *Events) Result(r devices.Result) {
	if e.listened() {
		e.publish("result", r.Device, "", r.OpID, r)
	}
}

// State publishes an "event: state": the device's state as mirrored on
// <prefix>/<device>.
func (e *Events) State(device string, state map[string]any) {
	if e.listened() {
		e.publish("state", device, "", "", StateEvent{Device: device, State: state})
	}
}

// Availability publishes an "event: availability".
func (e *Events) Availability(device string, online bool) {
	if e.listened() {
		e.publish("availability", device, "", "", AvailabilityEvent{Device: device, Online: online})
	}
}

// Breaker publishes an "event: breaker".
func (e *Events) Breaker(c dispatcher.BreakerChange) {
	e.publish("breaker", "", c.Service, "", BreakerEvent{Service: c.Service, From: c.From.String(), To: c.To.String(), At: c.At.UTC()})
}

// listened reports whether any stream is open. Every result and state of
// every command passes through the hub, on the dispatcher's goroutines:
// with no stream open (the common case) nothing is encoded. A stream
// opened as an event passes may miss it, as if it had opened a moment
// later.
func (e *Events) listened() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.subs) > 0
}

func (e *Events) publish(name, device, service, opID string, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		return // plain values and a state decoded from JSON: cannot happen
	}
	ev := event{name: name, device: device, service: service, opID: opID, data: data}
	e.mu.Lock()
	defer e.mu.Unlock()
	for s := range e.subs {
		if !s.takes(ev) {
			continue
		}
		select {
		case s.ch <- ev:
		default:
			close(s.dropped)
			delete(e.subs, s)
		}
	}
}

// Close ends every stream and refuses new ones (503): hearthd closes it
// as it stops, so that no open stream holds its HTTP server's shutdown.
func (e *Events) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.closed {
		e.closed = true
		close(e.done)
		clear(e.subs)
	}
}

// subscribe adds a stream with filter f (nil: everything); refused
// (nil, and why) once the hub is closed or holds maxStreams streams.
func (e *Events) subscribe(devs, services map[string]bool) (*subscriber, refusal) {
	s := &subscriber{devices: devs, services: services, ch: make(chan event, e.buffer), dropped: make(chan struct{})}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		return nil, refusedClosed
	case len(e.subs) >= e.maxStreams:
		return nil, refusedFull
	}
	e.subs[s] = struct{}{}
	return s, 0
}

// refusal is why subscribe refused a stream.
type refusal int

const (
	refusedClosed refusal = iota + 1
	refusedFull
)

func (e *Events) unsubscribe(s *subscriber) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.subs, s)
}

// streams returns how many streams are open, for tests.
func (e *Events) streams() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.subs)
}

// EventFilter is what GET /api/v1/events's query says: the devices whose
// events a stream takes, nil for every device.
type EventFilter struct {
	Devices []string
}

// ParseEventFilter reads GET /api/v1/events's query: device (repeatable,
// each a device ID) and nothing else. Its errors start with the
// parameter's name.
func ParseEventFilter(q map[string][]string) (EventFilter, error) {
	var f EventFilter
	for _, name := range slices.Sorted(maps.Keys(q)) {
		if name != "device" {
			return f, fmt.Errorf("%s: unknown parameter (known: device)", name)
		}
	}
	for _, id := range q["device"] {
		if err := devices.ValidID(id); err != nil {
			return f, fmt.Errorf("device: %w", err)
		}
		f.Devices = append(f.Devices, id)
	}
	return f, nil
}

// RegisterEvents adds GET /api/v1/events to mux: a stream of server-sent
// events (text/event-stream, the WHATWG HTML standard's format):
//
//	event: result        data: a devices.Result, as on <prefix>/<device>/result
//	event: state         data: StateEvent, {"device":…,"state":{…}}
//	event: availability  data: AvailabilityEvent, {"device":…,"online":true}
//	event: breaker       data: BreakerEvent, {"service":…,"from":…,"to":…,"at":…}
//
// in the order the dispatcher told them, with a comment line ": keepalive"
// every Keepalive. ?device=<id> (repeatable) keeps the events of those
// devices and the breaker events of their services; an unknown device is
// 404 unknown_device, another parameter 400 invalid_parameter; past
// MaxEventStreams open streams, 503 too_many_streams with Retry-After.
// A principal's stream carries only the results LimitResults lets it
// read. A client
// that falls EventBuffer events behind gets "event: dropped" and the
// stream ends: it should read the state again (GET /api/v1/devices,
// /api/v1/ops) and reconnect. The stream clears the server's write
// deadline, and ends when the client leaves, the request's context ends
// (hearthd's shutdown) or the hub is closed; a client that takes no byte
// for 10 s (streamWriteTimeout) is cut off. devs tells the devices'
// services.
func RegisterEvents(mux *http.ServeMux, e *Events, devs Devices) {
	mux.HandleFunc("GET /api/v1/events", func(w http.ResponseWriter, r *http.Request) {
		f, err := ParseEventFilter(r.URL.Query())
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid_parameter", err.Error())
			return
		}
		var byDevice, byService map[string]bool
		if f.Devices != nil {
			byDevice, byService = map[string]bool{}, map[string]bool{}
			for _, id := range f.Devices {
				st, ok := devs.Device(id)
				if !ok {
					writeError(w, http.StatusNotFound, "unknown_device", "no device "+fmt.Sprintf("%q", id)+" is configured")
					return
				}
				byDevice[id], byService[st.Service] = true, true
			}
		}
		principal, _ := principalOf(r)
		e.serve(w, r, byDevice, byService, e.resultFilter(principal))
	})
}

func (e *Events) serve(w http.ResponseWriter, r *http.Request, devs, services map[string]bool, takesResult func(event) bool) {
	rc := http.NewResponseController(w)
	s, refused := e.subscribe(devs, services)
	switch refused {
	case refusedClosed:
		w.Header().Set("Retry-After", fmt.Sprint(RetryAfter))
		writeError(w, http.StatusServiceUnavailable, "unavailable", "Hearth is shutting down")
		return
	case refusedFull:
		w.Header().Set("Retry-After", fmt.Sprint(RetryAfter))
		writeError(w, http.StatusServiceUnavailable, "too_many_streams",
			fmt.Sprintf("%d event streams are open, the most Hearth serves at once; close one, or retry later", e.maxStreams))
		return
	}
	defer e.unsubscribe(s)
	// A stream has no end the server's WriteTimeout could bound: each
	// write gets its own deadline instead.
	rc.SetWriteDeadline(time.Time{})
	write := func(b []byte) bool {
		rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		if _, err := w.Write(b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	if rc.Flush() != nil {
		return
	}
	tick := e.clock.NewTicker(Keepalive)
	defer tick.Stop()
	var b strings.Builder
	for {
		b.Reset()
		select {
		case <-s.dropped:
			// Before what is still buffered: a dropped client is told at
			// once, not after events it has lost the thread of anyway.
			write(droppedEvent(e.buffer))
			return
		default:
		}
		select {
		case ev := <-s.ch:
			if ev.name == "result" && takesResult != nil && !takesResult(ev) {
				continue // another principal's command
			}
			fmt.Fprintf(&b, "event: %s\ndata: %s\n\n", ev.name, ev.data)
		case <-tick.Chan():
			b.WriteString(": keepalive\n\n")
		case <-s.dropped:
			write(droppedEvent(e.buffer))
			return
		case <-e.done:
			return
		case <-r.Context().Done():
			return
		}
		if !stillAuthenticated(r) && authenticatedAtAll(r) {
			return // its token was revoked by a reload: no more for it
		}
		if !write([]byte(b.String())) {
			return
		}
	}
}

// droppedEvent is the last event of a stream whose buffer of n events
// overflowed.
func droppedEvent(n int) []byte {
	data, _ := json.Marshal(apiError{Error: "dropped",
		Detail: fmt.Sprintf("this client fell %d events behind; read the state again and reconnect", n)})
	return fmt.Appendf(nil, "event: dropped\ndata: %s\n\n", data)
}
