// Package shelly is Hearth's adapter for Shelly Gen2+ devices (Plus, Pro,
// Gen3) over their MQTT RPC channel: it encodes a target as a JSON-RPC
// request, matches each response to its request by id, decodes status
// notifications into Hearth's normalized state, and says what the Wi-Fi
// transport already does (Transport). It never decides whether a command
// succeeded: it passes every report on and the dispatcher judges it.
//
// # Topics
//
// Topic layout as documented by Shelly's Gen2 API ("MQTT" component and
// "RPC Protocol", shelly-api-docs.shelly.cloud/gen2), with each device's
// MQTT topic prefix set to <base>/<device-id> (base "shelly" by default,
// DefaultBaseTopic):
//
//	<base>/<device-id>/rpc                 Hearth → device: a request frame
//	<base>/hearth/<service>/rpc            device → Hearth: the response (src is <base>/hearth/<service>)
//	<base>/<device-id>/events/rpc          device → all: NotifyStatus, NotifyFullStatus, NotifyEvent
//	<base>/<device-id>/status/<component>  device → all: a component's whole status (status_ntf)
//	<base>/<device-id>/online              device → all: true, or false (its will), retained
//
// # Confirmation
//
// A request is {"id":N,"src":"<base>/hearth/<service>","method":…,
// "params":{…}}; N is unique per request (a counter started from the Unix
// time in milliseconds times 1000, so that no reply to a request of an
// earlier run matches). A response with the same id, from the device the
// request went to, not retained, is the device's own answer (DESIGN.md
// principle 3): for Switch.Set and Light.Set, whose answer comes once the
// output is set, a response without error is reported as the state the
// request asked for. Cover.* and the garage door's pulse answer when the
// motor or relay starts: their responses confirm nothing, and the cover's
// or the contact's status notifications do. Only the newest request per
// device counts: the response to an earlier attempt, to another id, or
// replayed retained confirms nothing. A response with an error object goes
// to AnswerSink.AnswerFailed (else Sink.SendFailed) as an *RPCError,
// permanent or transient (see RPCError.Permanent).
//
// # Classes
//
//   - switch (switch:<n>): Switch.Set {"id":n,"on":bool}; status output
//     reports {"state":"ON"|"OFF"}.
//   - light (light:<n>): Light.Set with on, brightness (Hearth's 0–254 as
//     Shelly's percent 0–100: round(b·100/254), at least 1 above 0) and
//     transition_duration (s); status output and brightness report state
//     and brightness, the brightness Hearth last wrote for that percent,
//     else round(p·254/100). A light on switch:<n> is on/off only.
//   - cover (cover:<n>): position → Cover.GoToPosition {"id":n,"pos":p};
//     OPEN, CLOSE, STOP → Cover.Open, Cover.Close, Cover.Stop. Status
//     current_pos reports {"position":p,"state":"OPEN"|"CLOSE"} (OPEN
//     above 0), state opening/closing reports {"moving":"UP"|"DOWN"}, and
//     open/closed/stopped {"moving":"STOP"}.
//   - garage door opener (a cover on switch:<n>, its contact on input:<m>,
//     m = n unless the address names it): pulse hardware, so Send reads
//     the contact first (Input.GetStatus, waiting up to ReadTimeout for
//     the answer) and reports it; at the target nothing more is sent (a
//     CLOSE of a closed door succeeds so); otherwise one pulse,
//     Switch.Set {"id":n,"on":true,"toggle_after":PulseSeconds}: the
//     device switches the relay off itself, so no OFF is ever needed, and
//     never a bare Switch.Toggle. A second attempt for the same target
//     within DoorTravel of a pulse the relay answered sends none (a
//     second pulse would stop or reverse the moving door); a pulse never
//     answered (lost on its way) is sent again. Input state true (the contact closed)
//     reports {"state":"CLOSE","position":0}, false
//     {"state":"OPEN","position":100}. A contact that cannot be read fails
//     Send with a transient error: nothing is pulsed on an unknown state.
//
// # Reads
//
// Read sends <Component>.GetStatus for the device's component (the
// contact's Input.GetStatus for a garage door); its result is decoded as a
// status and reported live.
//
// # Availability
//
// <device-id>/online goes to Sink.Availability for every device on that
// Shelly. The service (the Wi-Fi devices as a whole: there is no bridge)
// is online while any of its Shelly devices last said true and offline
// once every one of them said false (Sink.BridgeState): a dead access
// point opens the service's breaker, one unplugged Shelly marks only its
// own devices offline.
package shelly

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/mqtt"
)

// DefaultBaseTopic is the base topic of Hearth's Shelly services: each
// device's MQTT prefix is <DefaultBaseTopic>/<device-id>.
const DefaultBaseTopic = "shelly"

// DefaultPulseSeconds is the garage door relay's pulse, toggle_after.
const DefaultPulseSeconds = 1.0

// DefaultDoorTravel is how long after a pulse a garage door is taken to be
// still moving toward that pulse's target.
const DefaultDoorTravel = 30 * time.Second

// DefaultReadTimeout bounds the wait for the garage contact's answer.
const DefaultReadTimeout = 5 * time.Second

// Transport is what Wi-Fi does for Hearth: no radio-layer retry a Hearth
// attempt could stack on (MQTT QoS 1 covers the TCP hop to the broker, not
// a device that missed it), no wake-up queue, and the device reports its
// status (NotifyStatus). Its DefaultAttempts is 3.
var Transport = devices.Transport{RadioRetries: false, WakeUpQueue: false, ReportsState: true}

// Sink receives what the devices report. The dispatcher implements it.
type Sink interface {
	Report(device string, state map[string]any, retained bool)
	Availability(device string, online bool)
	BridgeState(service string, online, retained bool)
	// SendFailed takes a request's error response: the attempt ends now.
	SendFailed(device, attribute string, err error)
}

// AnswerSink is a Sink that also takes a device's error answer to the
// newest request as the end of the attempt waiting for it, whichever
// attempt (the dispatcher implements it: Dispatcher.AnswerFailed). A Sink
// without it gets the error through SendFailed.
type AnswerSink interface {
	AnswerFailed(device string, err error)
}

// Conn is the part of the MQTT connection the adapter uses; *mqtt.Conn
// satisfies it.
type Conn interface {
	Publish(ctx context.Context, topic string, qos byte, retained bool, payload []byte) error
	Subscribe(ctx context.Context, filter string, qos byte, h mqtt.Handler) error
}

// Options configures an Adapter.
type Options struct {
	Service string
	// BaseTopic: "" means DefaultBaseTopic.
	BaseTopic string
	// Devices are the devices this service reaches; Address is read by
	// ParseAddress (default: the ID).
	Devices []devices.Device
	Logger  *slog.Logger
	// Publisher and StampProperty: as zwavejs.Options, the only username
	// whose messages count.
	Publisher     string
	StampProperty string
	// PulseSeconds: 0 means DefaultPulseSeconds.
	PulseSeconds float64
	// DoorTravel: 0 means DefaultDoorTravel.
	DoorTravel time.Duration
	// ReadTimeout: 0 means DefaultReadTimeout.
	ReadTimeout time.Duration
}

type entry struct {
	dev  devices.Device
	addr Address
}

// pending is a request waiting for its response.
type pending struct {
	dev      string
	shelly   string
	method   string
	read     bool           // a GetStatus: decode the result as a status
	confirms map[string]any // what a response without error confirms; nil for nothing
	wait     chan Response  // a synchronous call's answer
	answered func()         // called on a response without error
}

// pulse is a garage door's last pulse.
type pulse struct {
	want string
	at   time.Time
}

// Adapter speaks Shelly's MQTT RPC for one service.
type Adapter struct {
	service string
	base    string
	src     string
	byDev   map[string]entry
	bySh    map[string][]entry
	sink    Sink
	log     *slog.Logger
	conn    Conn
	trust   mqtt.Trust
	pulseS  float64
	travel  time.Duration
	readTO  time.Duration
	now     func() time.Time
	nextID  atomic.Int64

	mu       sync.Mutex
	pend     map[int64]*pending
	lastSet  map[string]int64   // device → its newest set's id
	lastRead map[string]int64   // device → its newest read's id
	written  map[string]written // device → the last percent written and the brightness it stood for
	online   map[string]bool    // Shelly device ID → what its online topic last said
	pulses   map[string]pulse
}

type written struct {
	percent    int
	brightness float64
}

// New returns an adapter that speaks over conn. A device whose address
// ParseAddress refuses is logged and left out (config refuses it first).
func New(conn Conn, opts Options) *Adapter {
	a := &Adapter{
		service: opts.Service, base: opts.BaseTopic, conn: conn, log: opts.Logger,
		byDev: map[string]entry{}, bySh: map[string][]entry{},
		pulseS: opts.PulseSeconds, travel: opts.DoorTravel, readTO: opts.ReadTimeout, now: time.Now,
		pend: map[int64]*pending{}, lastSet: map[string]int64{}, lastRead: map[string]int64{},
		written: map[string]written{}, online: map[string]bool{}, pulses: map[string]pulse{},
	}
	if a.base == "" {
		a.base = DefaultBaseTopic
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.pulseS <= 0 {
		a.pulseS = DefaultPulseSeconds
	}
	if a.travel <= 0 {
		a.travel = DefaultDoorTravel
	}
	if a.readTO <= 0 {
		a.readTO = DefaultReadTimeout
	}
	a.src = Src(a.base, a.service)
	a.trust = mqtt.Trust{Publisher: opts.Publisher, StampProperty: opts.StampProperty, Logger: a.log, What: "shelly"}
	a.nextID.Store(time.Now().UnixMilli() * 1000)
	for _, d := range opts.Devices {
		raw := d.Address
		if raw == "" {
			raw = d.ID
		}
		addr, err := ParseAddress(raw, d.Class)
		if err != nil {
			a.log.Error("shelly: device unreachable", "device", d.ID, "err", err)
			continue
		}
		e := entry{dev: d, addr: addr}
		a.byDev[d.ID] = e
		a.bySh[addr.Device] = append(a.bySh[addr.Device], e)
	}
	return a
}

// Src is the src of the requests of service under base, and the topic
// level of its responses: <base>/hearth/<service>.
func Src(base, service string) string { return base + "/" + SrcLevel + "/" + service }

// CommandFilters returns the filters of the topics on which a Shelly under
// base takes commands, which only Hearth may publish on: its RPC channel
// <base>/+/rpc and the MQTT control interface <base>/+/command and
// <base>/+/command/+ (enable_control).
func CommandFilters(base string) []string {
	if base == "" {
		base = DefaultBaseTopic
	}
	return []string{base + "/+/rpc", base + "/+/command", base + "/+/command/+"}
}

// Start subscribes to everything under the base topic and passes what the
// devices report to sink. Call it once, before the connection runs.
func (a *Adapter) Start(ctx context.Context, sink Sink) error {
	a.sink = sink
	return a.conn.Subscribe(ctx, a.base+"/#", 1, a.handle)
}

// DeviceWills reports true: every Shelly is its own MQTT client with its
// own will (<device-id>/online false), so one that has not said online is
// not listening, even while another Shelly of the service is. The
// dispatcher sends a device's fresh read after the start only once its
// own Shelly said online.
func (a *Adapter) DeviceWills() bool { return true }

// Untrusted returns how many messages were dropped because
// Options.Publisher did not publish them.
func (a *Adapter) Untrusted() uint64 { return a.trust.Dropped() }

// unsupportedError is a target the adapter cannot write: permanent.
type unsupportedError struct{ msg string }

func (e unsupportedError) Error() string   { return "shelly: " + e.msg }
func (e unsupportedError) Permanent() bool { return true }

// ErrNoAnswer is wrapped by the error of a garage door's Send whose
// contact did not answer within ReadTimeout: transient, nothing pulsed.
var ErrNoAnswer = errors.New("shelly: the device did not answer")

// Send encodes target as one request to the device (see Classes) and
// publishes it QoS 1, not retained, waiting for the broker's PUBACK. A nil
// error means the broker has it. An attribute the class cannot write fails
// with a permanent error before anything is sent. A garage door's Send
// reads its contact first and may send nothing.
func (a *Adapter) Send(ctx context.Context, dev devices.Device, target devices.Target) error {
	e, ok := a.byDev[dev.ID]
	if !ok {
		return unsupportedError{fmt.Sprintf("device %s is not on service %s", dev.ID, a.service)}
	}
	if e.addr.Garage() {
		return a.sendGarage(ctx, e, target)
	}
	method, params, confirms, remember, err := encode(e.addr, dev.Class, target)
	if err != nil {
		return err
	}
	if remember != nil {
		a.mu.Lock()
		a.written[dev.ID] = *remember
		a.mu.Unlock()
	}
	_, err = a.call(ctx, e, method, params, &pending{confirms: confirms})
	return err
}

// call publishes method to e's Shelly, registered as p; with p.wait it
// waits for the answer, up to ReadTimeout.
func (a *Adapter) call(ctx context.Context, e entry, method string, params map[string]any, p *pending) (Response, error) {
	id := a.nextID.Add(1)
	p.dev, p.shelly, p.method = e.dev.ID, e.addr.Device, method
	payload, err := json.Marshal(Request{ID: id, Src: a.src, Method: method, Params: params})
	if err != nil {
		return Response{}, fmt.Errorf("shelly: encode %s: %w", method, err)
	}
	a.mu.Lock()
	last := a.lastSet
	if p.read || p.wait != nil {
		last = a.lastRead
	}
	if old, ok := last[e.dev.ID]; ok {
		delete(a.pend, old) // an earlier attempt's answer confirms nothing now
	}
	last[e.dev.ID] = id
	a.pend[id] = p
	a.mu.Unlock()
	if err := a.conn.Publish(ctx, a.base+"/"+e.addr.Device+"/rpc", 1, false, payload); err != nil {
		a.forget(id)
		return Response{}, err
	}
	if p.wait == nil {
		return Response{}, nil
	}
	timer := time.NewTimer(a.readTO)
	defer timer.Stop()
	select {
	case r := <-p.wait:
		return r, nil
	case <-timer.C:
		a.forget(id)
		return Response{}, fmt.Errorf("%w to %s within %v", ErrNoAnswer, method, a.readTO)
	case <-ctx.Done():
		a.forget(id)
		return Response{}, ctx.Err()
	}
}

func (a *Adapter) forget(id int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p, ok := a.pend[id]; ok {
		delete(a.pend, id)
		for _, last := range []map[string]int64{a.lastSet, a.lastRead} {
			if last[p.dev] == id {
				delete(last, p.dev)
			}
		}
	}
}

// sendGarage reads the door's contact, reports it, and pulses the relay
// once when the door is not at the target (see Classes).
func (a *Adapter) sendGarage(ctx context.Context, e entry, target devices.Target) error {
	want, err := doorTarget(target)
	if err != nil {
		return err
	}
	r, err := a.call(ctx, e, "Input.GetStatus", map[string]any{"id": e.addr.Input}, &pending{read: true, wait: make(chan Response, 1)})
	if err != nil {
		return fmt.Errorf("shelly: the garage door's contact %s could not be read, nothing pulsed: %w", e.addr.InputKey(), err)
	}
	if r.Error != nil {
		r.Error.Method = "Input.GetStatus"
		return fmt.Errorf("shelly: the garage door's contact %s could not be read, nothing pulsed: %w", e.addr.InputKey(), r.Error)
	}
	var st map[string]any
	if json.Unmarshal(r.Result, &st) != nil || st == nil {
		return fmt.Errorf("shelly: the garage door's contact %s answered %s, no status; nothing pulsed", e.addr.InputKey(), truncate(r.Result))
	}
	state := doorState(st)
	if state == nil {
		return fmt.Errorf("shelly: the garage door's contact %s answered %s, no state; nothing pulsed", e.addr.InputKey(), truncate(r.Result))
	}
	a.sink.Report(e.dev.ID, state, false)
	if state["state"] == want {
		return nil // at the target already: nothing to pulse
	}
	a.mu.Lock()
	last, pulsed := a.pulses[e.dev.ID]
	if pulsed && last.want == want && a.now().Sub(last.at) < a.travel {
		a.mu.Unlock()
		a.log.Info("shelly: the relay answered a pulse for this target moments ago; not pulsing again while the door travels", "device", e.dev.ID, "target", want)
		return nil
	}
	a.mu.Unlock()
	// The guard starts when the Shelly answers the pulse: a pulse it
	// never answered (lost on the way) may be sent again.
	answered := func() {
		a.mu.Lock()
		a.pulses[e.dev.ID] = pulse{want: want, at: a.now()}
		a.mu.Unlock()
	}
	_, err = a.call(ctx, e, "Switch.Set", map[string]any{"id": e.addr.ID, "on": true, "toggle_after": a.pulseS}, &pending{answered: answered})
	return err
}

// doorTarget reads a garage door's target: OPEN or CLOSE, or position 100
// or 0.
func doorTarget(t devices.Target) (string, error) {
	for k := range t {
		if k != "state" && k != "position" {
			return "", unsupportedError{fmt.Sprintf("a garage door has no attribute %q here", k)}
		}
	}
	if s, ok := t["state"].(string); ok && (s == "OPEN" || s == "CLOSE") {
		return s, nil
	}
	if p, ok := number(t["position"]); ok && (p == 0 || p == 100) {
		if p == 0 {
			return "CLOSE", nil
		}
		return "OPEN", nil
	}
	return "", unsupportedError{fmt.Sprintf("garage door target %v: a relay and a contact know OPEN and CLOSE only (position 100 or 0); no STOP, no position between", map[string]any(t))}
}

// encode maps target to a request for a device at addr of class c, what a
// response without error confirms, and the brightness to remember.
func encode(addr Address, c devices.Class, t devices.Target) (string, map[string]any, map[string]any, *written, error) {
	allow := func(keys ...string) error {
		for k := range t {
			if !contains(keys, k) {
				return unsupportedError{fmt.Sprintf("a Shelly %s has no attribute %q here", addr.Kind, k)}
			}
		}
		return nil
	}
	state, _ := t["state"].(string)
	id := addr.ID
	switch addr.Kind {
	case KindSwitch:
		if err := allow("state"); err != nil {
			return "", nil, nil, nil, err
		}
		if state != "ON" && state != "OFF" {
			return "", nil, nil, nil, unsupportedError{fmt.Sprintf("switch state %v", t["state"])}
		}
		return "Switch.Set", map[string]any{"id": id, "on": state == "ON"}, map[string]any{"state": state}, nil, nil
	case KindLight:
		if err := allow("state", "brightness", "transition"); err != nil {
			return "", nil, nil, nil, err
		}
		params := map[string]any{"id": id}
		confirms := map[string]any{}
		var remember *written
		b, hasB := number(t["brightness"])
		switch {
		case state == "OFF" || (hasB && b <= 0):
			params["on"] = false
			confirms["state"] = "OFF"
		case hasB:
			p := percent(b)
			params["on"], params["brightness"] = true, p
			confirms["state"], confirms["brightness"] = "ON", b
			remember = &written{p, b}
		case state == "ON":
			params["on"] = true
			confirms["state"] = "ON"
		default:
			return "", nil, nil, nil, unsupportedError{"a light target needs state or brightness"}
		}
		if tr, ok := number(t["transition"]); ok && tr >= 0 {
			params["transition_duration"] = tr
		}
		return "Light.Set", params, confirms, remember, nil
	case KindCover:
		if err := allow("state", "position"); err != nil {
			return "", nil, nil, nil, err
		}
		if p, ok := number(t["position"]); ok {
			return "Cover.GoToPosition", map[string]any{"id": id, "pos": int(math.Round(max(0, min(100, p))))}, nil, nil, nil
		}
		switch state {
		case "OPEN":
			return "Cover.Open", map[string]any{"id": id}, nil, nil, nil
		case "CLOSE":
			return "Cover.Close", map[string]any{"id": id}, nil, nil, nil
		case "STOP":
			return "Cover.Stop", map[string]any{"id": id}, nil, nil, nil
		}
		return "", nil, nil, nil, unsupportedError{fmt.Sprintf("cover target %v", map[string]any(t))}
	}
	return "", nil, nil, nil, unsupportedError{fmt.Sprintf("component %s takes no commands", addr.Kind)}
}

// percent maps a brightness 0–254 to Shelly's 0–100, at least 1 above 0.
func percent(b float64) int {
	if b <= 0 {
		return 0
	}
	return max(1, min(100, int(math.Round(b*100/254))))
}

// Read sends the GetStatus of the device's component (its contact's for a
// garage door); the answer is reported as a status.
func (a *Adapter) Read(ctx context.Context, dev devices.Device, _ devices.Target) error {
	e, ok := a.byDev[dev.ID]
	if !ok {
		return unsupportedError{fmt.Sprintf("device %s is not on service %s", dev.ID, a.service)}
	}
	method, id := methodPrefix(e.addr.Kind)+".GetStatus", e.addr.ID
	if e.addr.Garage() {
		method, id = "Input.GetStatus", e.addr.Input
	}
	_, err := a.call(ctx, e, method, map[string]any{"id": id}, &pending{read: true})
	return err
}

func methodPrefix(kind string) string {
	return strings.ToUpper(kind[:1]) + kind[1:]
}

func (a *Adapter) handle(m mqtt.Message) {
	rest, ok := strings.CutPrefix(m.Topic, a.base+"/")
	if !ok {
		return
	}
	if rest == SrcLevel+"/"+a.service+"/rpc" {
		a.response(m)
		return
	}
	id, sub, ok := strings.Cut(rest, "/")
	ents := a.bySh[id]
	if !ok || len(ents) == 0 {
		return
	}
	switch {
	case sub == "rpc", sub == "command", strings.HasPrefix(sub, "command/"):
		return // requests, ours or anyone's
	case sub == "online":
		if !a.trust.Trusted(m) {
			return
		}
		up, ok := ParseOnline(m.Payload)
		if !ok {
			a.log.Warn("shelly: unreadable online payload", "topic", m.Topic, "payload", truncate(m.Payload))
			return
		}
		a.availability(id, ents, up, m.Retained)
	case sub == "events/rpc":
		if !a.trust.Trusted(m) {
			return
		}
		n, err := ParseNotification(m.Payload)
		if err != nil {
			a.log.Warn("shelly: unreadable notification", "topic", m.Topic, "err", err)
			return
		}
		if n.Method != "NotifyStatus" && n.Method != "NotifyFullStatus" {
			return // NotifyEvent: a button pushed, a config changed; no state
		}
		for _, e := range ents {
			if st, ok := n.Components[statusKey(e.addr)]; ok {
				if state := a.decode(e, st); state != nil {
					a.sink.Report(e.dev.ID, state, m.Retained)
				}
			}
		}
	case strings.HasPrefix(sub, "status/"):
		if !a.trust.Trusted(m) {
			return
		}
		key := strings.TrimPrefix(sub, "status/")
		var st map[string]any
		if err := json.Unmarshal(m.Payload, &st); err != nil || st == nil {
			a.log.Warn("shelly: unreadable status", "topic", m.Topic, "payload", truncate(m.Payload))
			return
		}
		for _, e := range ents {
			if statusKey(e.addr) == key {
				if state := a.decode(e, st); state != nil {
					a.sink.Report(e.dev.ID, state, m.Retained)
				}
			}
		}
	}
}

// statusKey is the component whose status reports e's state: its contact
// for a garage door.
func statusKey(a Address) string {
	if a.Garage() {
		return a.InputKey()
	}
	return a.Key()
}

// response matches a response frame to its request.
func (a *Adapter) response(m mqtt.Message) {
	if m.Retained {
		return // a retained answer is old news, whoever left it
	}
	if !a.trust.Trusted(m) {
		return
	}
	r, err := ParseResponse(m.Payload)
	if err != nil {
		a.log.Warn("shelly: unreadable response", "topic", m.Topic, "err", err)
		return
	}
	a.mu.Lock()
	p, ok := a.pend[r.ID]
	if ok && r.Src != "" && r.Src != p.shelly {
		a.mu.Unlock()
		a.log.Warn("shelly: a response with a pending request's id from another device; ignored", "id", r.ID, "src", r.Src, "want_src", p.shelly)
		return
	}
	if ok {
		delete(a.pend, r.ID)
		for _, last := range []map[string]int64{a.lastSet, a.lastRead} {
			if last[p.dev] == r.ID {
				delete(last, p.dev)
			}
		}
	}
	a.mu.Unlock()
	if !ok {
		a.log.Debug("shelly: a response to no pending request (an earlier attempt's, or another caller's); it confirms nothing", "id", r.ID, "src", r.Src)
		return
	}
	if p.wait != nil {
		p.wait <- r
		return
	}
	e := a.byDev[p.dev]
	if r.Error != nil {
		r.Error.Method = p.method
		if p.read {
			a.log.Warn("shelly: a status read failed", "device", p.dev, "err", r.Error)
			return
		}
		a.log.Info("shelly: the device refused a request", "device", p.dev, "err", r.Error, "permanent", r.Error.Permanent())
		if af, ok := a.sink.(AnswerSink); ok {
			af.AnswerFailed(p.dev, r.Error)
		} else {
			a.sink.SendFailed(p.dev, "", r.Error)
		}
		return
	}
	if p.answered != nil {
		p.answered()
	}
	switch {
	case p.read:
		var st map[string]any
		if json.Unmarshal(r.Result, &st) != nil || st == nil {
			a.log.Warn("shelly: a status read answered no status", "device", p.dev, "result", truncate(r.Result))
			return
		}
		if state := a.decode(e, st); state != nil {
			a.sink.Report(p.dev, state, false)
		}
	case p.confirms != nil:
		a.sink.Report(p.dev, maps.Clone(p.confirms), false)
	}
}

// availability passes the service's state to BridgeState, then a
// Shelly's online word to its devices.
func (a *Adapter) availability(id string, ents []entry, up, retained bool) {
	a.mu.Lock()
	a.online[id] = up
	some, all := false, len(a.online) == len(a.bySh)
	for _, v := range a.online {
		some = some || v
	}
	a.mu.Unlock()
	switch {
	case some:
		a.sink.BridgeState(a.service, true, retained)
	case all:
		a.sink.BridgeState(a.service, false, retained)
	}
	// After the service's state: once a device reads online, commands
	// to it find the service up.
	for _, e := range ents {
		a.sink.Availability(e.dev.ID, up)
	}
}

// decode maps a component's (partial) status to Hearth's state for e, or
// nil when it says nothing Hearth reads.
func (a *Adapter) decode(e entry, st map[string]any) map[string]any {
	if e.addr.Garage() {
		return doorState(st)
	}
	out := map[string]any{}
	switch e.addr.Kind {
	case KindSwitch, KindLight:
		if on, ok := st["output"].(bool); ok {
			out["state"] = onOff(on)
		}
		if e.addr.Kind == KindLight {
			if p, ok := number(st["brightness"]); ok && p >= 0 && p <= 100 {
				b := math.Round(p * 254 / 100)
				a.mu.Lock()
				if w, ok := a.written[e.dev.ID]; ok && float64(w.percent) == p {
					b = w.brightness
				}
				a.mu.Unlock()
				out["brightness"] = b
			}
		}
	case KindCover:
		switch st["state"] {
		case "opening":
			out["moving"] = "UP"
		case "closing":
			out["moving"] = "DOWN"
		case "open", "closed", "stopped":
			out["moving"] = "STOP"
		}
		if p, ok := number(st["current_pos"]); ok && p >= 0 && p <= 100 {
			out["position"] = p
			out["state"] = "CLOSE"
			if p > 0 {
				out["state"] = "OPEN"
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// doorState reads a garage door's contact status: state true (closed) or
// false; nil without one.
func doorState(st map[string]any) map[string]any {
	closed, ok := st["state"].(bool)
	if !ok {
		return nil
	}
	if closed {
		return map[string]any{"state": "CLOSE", "position": 0.0}
	}
	return map[string]any{"state": "OPEN", "position": 100.0}
}

func onOff(on bool) string {
	if on {
		return "ON"
	}
	return "OFF"
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, !math.IsNaN(n) && !math.IsInf(n, 0)
	case int:
		return float64(n), true
	}
	return 0, false
}
