package simulator

// The device side of plain HTTP devices (protocol: http), written from
// the contract in docs/HTTP.md, not from protocols/httpdev: each device
// is one REST resource,
//
//	PUT|POST|PATCH <path>   a JSON object of target attributes; 204 once applied,
//	                        400 for a body that is no JSON object, 422 for an
//	                        attribute or value the class does not take (TOGGLE)
//	GET <path>              200, the device's state as a JSON object
//
// and any other path is 404, any other method 405. With a token set,
// every request without "Authorization: Bearer <token>" is 401.

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
)

// HTTPDevice is one resource an HTTPServer plays.
type HTTPDevice struct {
	// Path is the resource's path, "/api/doors/1".
	Path string
	// Class is switch, light, cover, lock or climate.
	Class string
	// State is the initial state; nil means the class's: switch and
	// light OFF (brightness 0), cover CLOSE at position 0, lock LOCK
	// (lock_state locked), climate {"system_mode":"off",
	// "occupied_heating_setpoint":20}.
	State map[string]any
}

// HTTPFaults are the faults an HTTPServer injects, on commands only
// (a GET is always answered, but for Hang).
type HTTPFaults struct {
	// DropFirst closes the connection of the first n commands without an
	// answer, before applying them: the request is lost on its way.
	DropFirst int
	// FailFirst answers the first n commands (after the dropped ones)
	// with FailStatus, applying nothing.
	FailFirst int
	// FailStatus is the status of a FailFirst answer; 0 means 503.
	FailStatus int
	// RetryAfter, if set, goes with every FailFirst answer as its
	// Retry-After header (delay-seconds or an HTTP-date).
	RetryAfter string
	// Refuse lists paths whose commands are answered 400, applying
	// nothing.
	Refuse []string
	// EchoOnly lists paths whose commands are answered 200 with the
	// request's body echoed, applying nothing: an optimistic echo.
	EchoOnly []string
	// Hang lists paths whose requests, commands and GETs, are never
	// answered: the server holds each until the client gives up.
	Hang []string
}

// HTTPEvent is one request an HTTPServer received.
type HTTPEvent struct {
	Method, Path string
	Body         []byte
	// Status is the answer's status code; 0 when dropped or held.
	Status int
	// Dropped says the connection was closed without an answer.
	Dropped bool
}

// HTTPOptions configures an HTTPServer.
type HTTPOptions struct {
	// Listen is the address to listen on; "" means 127.0.0.1:0.
	Listen  string
	Devices []HTTPDevice
	Faults  HTTPFaults
	// Token, if set, is the bearer token every request must carry.
	Token string
	// OnCommand and OnGet, if set, are called for each request, just
	// before its answer goes out (or its connection is closed: dropped),
	// from the request's goroutine.
	OnCommand func(HTTPEvent)
	OnGet     func(HTTPEvent)
}

// HTTPServer plays HTTP devices on a loopback listener.
type HTTPServer struct {
	// URL is the server's base URL, http://127.0.0.1:<port>.
	URL string
	srv *httptest.Server
	o   HTTPOptions

	mu       sync.Mutex
	states   map[string]map[string]any
	classes  map[string]string
	commands map[string]int // path → commands received
	dropped  int
	failed   int
}

// NewHTTPServer starts a server that plays o.Devices. It returns an error
// for a device without a path beginning with '/', a path given twice, an
// unknown class, or an address it cannot listen on.
func NewHTTPServer(o HTTPOptions) (*HTTPServer, error) {
	s := &HTTPServer{o: o, states: map[string]map[string]any{}, classes: map[string]string{}, commands: map[string]int{}}
	for i, d := range o.Devices {
		if !strings.HasPrefix(d.Path, "/") {
			return nil, fmt.Errorf("simulator: HTTP device %d: path %q does not begin with '/'", i, d.Path)
		}
		if _, dup := s.states[d.Path]; dup {
			return nil, fmt.Errorf("simulator: HTTP device %d: path %q given twice", i, d.Path)
		}
		st := maps.Clone(d.State)
		if st == nil {
			switch d.Class {
			case "switch":
				st = map[string]any{"state": "OFF"}
			case "light":
				st = map[string]any{"state": "OFF", "brightness": 0.0}
			case "cover":
				st = map[string]any{"state": "CLOSE", "position": 0.0}
			case "lock":
				st = map[string]any{"state": "LOCK", "lock_state": "locked"}
			case "climate":
				st = map[string]any{"system_mode": "off", "occupied_heating_setpoint": 20.0}
			default:
				return nil, fmt.Errorf("simulator: HTTP device %s: class %q (want switch, light, cover, lock or climate)", d.Path, d.Class)
			}
		}
		s.states[d.Path], s.classes[d.Path] = st, d.Class
	}
	listen := o.Listen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("simulator: HTTP devices: %w", err)
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Listener.Close()
	s.srv.Listener = l
	s.srv.Start()
	s.URL = s.srv.URL
	return s, nil
}

// Close stops the server, ending held requests.
func (s *HTTPServer) Close() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// State returns a copy of the device's state at path.
func (s *HTTPServer) State(path string) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.states[path])
}

// Commands returns how many commands reached path (dropped and refused
// ones included).
func (s *HTTPServer) Commands(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commands[path]
}

func (s *HTTPServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	ev := HTTPEvent{Method: r.Method, Path: r.URL.Path, Body: body}
	get := r.Method == http.MethodGet
	// The event is told before the client can see the answer (or the
	// closed connection), so that its next request comes after it.
	told := false
	tell := func() {
		if told {
			return
		}
		told = true
		if get && s.o.OnGet != nil {
			s.o.OnGet(ev)
		} else if !get && s.o.OnCommand != nil {
			s.o.OnCommand(ev)
		}
	}
	defer tell() // a held request: once the client gave up
	answer := func(code int, v any) {
		ev.Status = code
		tell()
		if v == nil {
			w.WriteHeader(code)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		json.NewEncoder(w).Encode(v)
	}
	if s.o.Token != "" && r.Header.Get("Authorization") != "Bearer "+s.o.Token {
		answer(http.StatusUnauthorized, map[string]string{"error": "no or wrong bearer token"})
		return
	}
	s.mu.Lock()
	class, known := s.classes[ev.Path]
	s.mu.Unlock()
	if !known {
		answer(http.StatusNotFound, map[string]string{"error": "no such device"})
		return
	}
	if slices.Contains(s.o.Faults.Hang, ev.Path) {
		<-r.Context().Done() // the client gives up, or the server closes
		return
	}
	switch r.Method {
	case http.MethodGet:
		answer(http.StatusOK, s.State(ev.Path))
		return
	case http.MethodPut, http.MethodPost, http.MethodPatch:
	default:
		w.Header().Set("Allow", "GET, PUT, POST, PATCH")
		answer(http.StatusMethodNotAllowed, nil)
		return
	}
	s.mu.Lock()
	s.commands[ev.Path]++
	drop := s.dropped < s.o.Faults.DropFirst
	if drop {
		s.dropped++
	}
	fail := !drop && s.failed < s.o.Faults.FailFirst
	if fail {
		s.failed++
	}
	s.mu.Unlock()
	f := s.o.Faults
	switch {
	case drop:
		ev.Dropped = true
		tell()
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
				return
			}
		}
		panic(http.ErrAbortHandler) // closes the connection without an answer
	case fail:
		code := f.FailStatus
		if code == 0 {
			code = http.StatusServiceUnavailable
		}
		if f.RetryAfter != "" {
			w.Header().Set("Retry-After", f.RetryAfter)
		}
		answer(code, map[string]string{"error": "simulated failure"})
		return
	case slices.Contains(f.Refuse, ev.Path):
		answer(http.StatusBadRequest, map[string]string{"error": "simulated refusal"})
		return
	}
	var attrs map[string]any
	if err := json.Unmarshal(body, &attrs); err != nil || attrs == nil {
		answer(http.StatusBadRequest, map[string]string{"error": "the body is not a JSON object"})
		return
	}
	if slices.Contains(f.EchoOnly, ev.Path) {
		ev.Status = http.StatusOK
		tell()
		w.Header().Set("Content-Type", "application/json")
		w.Write(body)
		return
	}
	s.mu.Lock()
	next, err := applyHTTP(class, s.states[ev.Path], attrs)
	if err == nil {
		s.states[ev.Path] = next
	}
	s.mu.Unlock()
	if err != nil {
		answer(http.StatusUnprocessableEntity, map[string]string{"error": err.Error()})
		return
	}
	answer(http.StatusNoContent, nil)
}

// applyHTTP returns the state of a device of class after attrs, or what
// it does not take. Values are absolute; TOGGLE and steps are refused.
// state is applied first: a position or brightness in the same command
// wins.
func applyHTTP(class string, cur, attrs map[string]any) (map[string]any, error) {
	next := maps.Clone(cur)
	keys := slices.Sorted(maps.Keys(attrs))
	if i := slices.Index(keys, "state"); i > 0 {
		keys = append([]string{"state"}, slices.Delete(keys, i, i+1)...)
	}
	for _, k := range keys {
		v := attrs[k]
		switch {
		case k == "state":
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("state %v is not a string", v)
			}
			s = strings.ToUpper(s)
			want := map[string][]string{"switch": {"ON", "OFF"}, "light": {"ON", "OFF"}, "cover": {"OPEN", "CLOSE"}, "lock": {"LOCK", "UNLOCK"}}[class]
			if !slices.Contains(want, s) {
				return nil, fmt.Errorf("a %s takes state %s, not %q", class, strings.Join(want, " or "), s)
			}
			next["state"] = s
			if class == "lock" {
				next["lock_state"] = map[string]string{"LOCK": "locked", "UNLOCK": "unlocked"}[s]
			}
			if class == "cover" {
				next["position"] = map[string]float64{"OPEN": 100, "CLOSE": 0}[s]
			}
		case (k == "position" && class == "cover") || (k == "brightness" && class == "light") || (strings.HasSuffix(k, "_heating_setpoint") && class == "climate"):
			n, ok := v.(float64)
			if !ok || math.IsNaN(n) {
				return nil, fmt.Errorf("%s %v is not a number", k, v)
			}
			next[k] = n
			if k == "position" {
				next["state"] = "CLOSE"
				if n > 0 {
					next["state"] = "OPEN"
				}
			}
			if k == "brightness" {
				next["state"] = "OFF"
				if n > 0 {
					next["state"] = "ON"
				}
			}
		case (k == "system_mode" || k == "preset") && class == "climate":
			s, ok := v.(string)
			if !ok {
				return nil, fmt.Errorf("%s %v is not a string", k, v)
			}
			next[k] = s
		default:
			return nil, fmt.Errorf("a %s has no attribute %q", class, k)
		}
	}
	return next, nil
}
