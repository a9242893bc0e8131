package simulator

// The Shelly Gen2+ device side, written from Shelly's Gen2 API
// documentation (shelly-api-docs.shelly.cloud/gen2: "RPC Protocol",
// "Notifications", "Common Errors", the MQTT, Switch, Light, Cover and
// Input components), not from protocols/shelly: each Shelly is its own
// MQTT client with topic prefix <base>/<device-id>. It takes request
// frames on <prefix>/rpc, answers on <src>/rpc with the request's id, and
// publishes NotifyStatus on <prefix>/events/rpc for every status change,
// <prefix>/online true (retained) on connect and false as its will.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// ProtocolShelly is a component of a Shelly Gen2+ device speaking RPC over
// MQTT. Its Device.Name is "<device-id>", "<device-id>/<component>:<n>"
// (switch, light, cover) or, a garage door (ClassCover) on a relay and a
// contact, "<device-id>/switch:<n>[/input:<m>]"; BaseTopic is the prefix
// above the device ID ("" means DefaultShellyBase). Components of one
// device ID share one MQTT connection.
const ProtocolShelly = "shelly"

// DefaultShellyBase is the base of a simulated Shelly's topic prefix.
const DefaultShellyBase = "shelly"

// Shelly's RPC error codes the simulated devices answer with ("Common
// Errors"), and the one of a method without a handler.
const (
	shellyInvalidArgument = -103
	shellyNotFound        = -105
	shellyNoHandler       = 404
)

// ReasonEchoOnly: a Shelly in Faults.EchoOnly heard the request and does
// nothing: no response, no notification; the only echo Hearth may see is
// its own request on <prefix>/rpc. (A Shelly in Faults.Unreported applies
// a request and answers it, but publishes no NotifyStatus.)
const ReasonEchoOnly = "echo_only"

// shellyBox is one Shelly device: one MQTT connection.
type shellyBox struct {
	base, id, prefix string
	clientID         string
	comps            map[string]*shellyComp // by component key: switch:0
	order            []*shellyComp          // the simulated devices, in Options.Devices order
	connMu           sync.RWMutex
	client           mqtt.Client
}

// shellyComp is one simulated device on a Shelly: a switch, light or
// cover component, or a garage door (a relay and its contact input).
type shellyComp struct {
	Device
	box   *shellyBox
	kind  string
	id    int
	input int // the contact's instance for a garage door; -1 otherwise

	// Guarded by Sim.mu.
	output     bool
	brightness int // 0–100
	pos        int // a cover's position, 0–100
	closed     bool
	faulty
	sets, delivered, pulses int
}

func (c *shellyComp) garage() bool { return c.input >= 0 }

// newShelly adds Devices[i], a component of a Shelly.
func (s *Sim) newShelly(i int, d Device, boxes map[string]*shellyBox) error {
	if d.BaseTopic == "" {
		d.BaseTopic = DefaultShellyBase
	}
	parts := strings.Split(d.Name, "/")
	c := &shellyComp{Device: d, input: -1, faulty: faulty{online: true}, brightness: 50, closed: true}
	kinds := map[string]string{ClassSwitch: "switch", ClassLight: "light", ClassCover: "cover"}
	kind, ok := kinds[d.Class]
	if !ok || len(parts) > 3 || parts[0] == "" {
		return fmt.Errorf("simulator: Devices[%d] %q: a Shelly switch, light or cover is <device-id>[/<component>:<n>]", i, d.Name)
	}
	c.kind = kind
	if len(parts) >= 2 {
		k, n, ok := strings.Cut(parts[1], ":")
		id, err := strconv.Atoi(n)
		if !ok || err != nil || id < 0 || (k != kind && !(k == "switch" && (d.Class == ClassLight || d.Class == ClassCover))) {
			return fmt.Errorf("simulator: Devices[%d] %q: component %q does not fit a %s", i, d.Name, parts[1], d.Class)
		}
		c.kind, c.id = k, id
	}
	if d.Class == ClassCover && c.kind == "switch" {
		c.input = c.id
		if len(parts) == 3 {
			k, n, ok := strings.Cut(parts[2], ":")
			m, err := strconv.Atoi(n)
			if !ok || err != nil || k != "input" || m < 0 {
				return fmt.Errorf("simulator: Devices[%d] %q: a garage door's contact is input:<m>", i, d.Name)
			}
			c.input = m
		}
	} else if len(parts) == 3 {
		return fmt.Errorf("simulator: Devices[%d] %q: only a garage door takes a contact", i, d.Name)
	}
	if d.Class == ClassLight && c.kind == "switch" {
		c.brightness = 0
	}
	key := d.BaseTopic + "/" + parts[0]
	b := boxes[key]
	if b == nil {
		b = &shellyBox{base: d.BaseTopic, id: parts[0], prefix: key, comps: map[string]*shellyComp{}}
		boxes[key] = b
		s.shellies = append(s.shellies, b)
	}
	ck := c.kind + ":" + strconv.Itoa(c.id)
	if _, dup := b.comps[ck]; dup {
		return fmt.Errorf("simulator: Devices[%d] %q: component %s of %s is simulated twice", i, d.Name, ck, parts[0])
	}
	if _, dup := s.comps[d.Name]; dup {
		return fmt.Errorf("simulator: Devices[%d]: name %q is used twice", i, d.Name)
	}
	c.box = b
	b.comps[ck] = c
	if c.garage() {
		b.comps["input:"+strconv.Itoa(c.input)] = c
	}
	b.order = append(b.order, c)
	s.comps[d.Name] = c
	return nil
}

// online reports whether the Shelly is up: none of its devices offline.
// Called with Sim.mu held.
func (b *shellyBox) online() bool {
	for _, c := range b.order {
		if !c.online {
			return false
		}
	}
	return true
}

func (b *shellyBox) attach(c mqtt.Client) {
	b.connMu.Lock()
	b.client = c
	b.connMu.Unlock()
}

// publish hands a QoS 1 message to the connection, not awaited (the
// caller may be on paho's receive path); nothing while disconnected.
func (b *shellyBox) publish(topic string, retained bool, payload []byte) {
	b.connMu.RLock()
	defer b.connMu.RUnlock()
	if b.client != nil {
		b.client.Publish(topic, 1, retained, payload)
	}
}

type shellyEndpoint struct {
	s *Sim
	b *shellyBox
}

func (e shellyEndpoint) will() (string, []byte) { return e.b.prefix + "/online", []byte("false") }

func (e shellyEndpoint) attach(c mqtt.Client) { e.b.attach(c) }

// announce subscribes to the RPC channel, then publishes online (retained),
// as the MQTT component does on connect.
func (e shellyEndpoint) announce(ctx context.Context, c mqtt.Client) error {
	e.b.attach(c)
	if err := await(ctx, c.Subscribe(e.b.prefix+"/rpc", 1, e.s.shellyHandler(e.b))); err != nil {
		return err
	}
	e.s.mu.Lock()
	up := e.b.online()
	e.s.mu.Unlock()
	return await(ctx, c.Publish(e.b.prefix+"/online", 1, true, []byte(strconv.FormatBool(up))))
}

// rpcRequest is a request frame as the device reads it.
type rpcRequest struct {
	ID     json.RawMessage `json:"id"`
	Src    string          `json:"src"`
	Method string          `json:"method"`
	Params map[string]any  `json:"params"`
}

// parseRequest reads a request frame: a JSON object with an id, a src
// and a method. Without an id it is a notification, without a src there
// is nowhere to answer: the device answers neither.
func parseRequest(p []byte) (rpcRequest, bool) {
	var req rpcRequest
	if err := json.Unmarshal(p, &req); err != nil || req.Method == "" || len(req.ID) == 0 || req.Src == "" {
		return rpcRequest{}, false
	}
	return req, true
}

// rpcOut is what one request makes the device publish: its response, then
// its notifications.
type rpcOut struct {
	result  any
	errCode int
	errMsg  string
	notify  []map[string]any // component key → partial status, one notification each
	silent  bool             // no response at all
}

func (s *Sim) shellyHandler(b *shellyBox) mqtt.MessageHandler {
	return func(_ mqtt.Client, m mqtt.Message) {
		req, ok := parseRequest(m.Payload())
		if !ok {
			s.log.Warn("shelly: not a request frame with an id, a src and a method; not answered", "device", b.id, "payload", string(m.Payload()))
			return
		}
		if m.Retained() {
			s.log.Warn("shelly: request arrived retained", "device", b.id, "payload", string(m.Payload()))
		}
		out, fire := s.shellyCall(b, m.Topic(), m.Payload(), m.Retained(), req)
		defer fire() // after the answer: what the callbacks check has happened
		if out.silent {
			return
		}
		s.mu.Lock()
		ts := float64(s.clock.Now().UnixMilli()) / 1000
		s.mu.Unlock()
		resp := map[string]any{"id": req.ID, "src": b.id, "dst": req.Src}
		if out.errCode != 0 {
			resp["error"] = map[string]any{"code": out.errCode, "message": out.errMsg}
		} else {
			resp["result"] = out.result
		}
		p, _ := json.Marshal(resp)
		b.publish(req.Src+"/rpc", false, p)
		for _, n := range out.notify {
			params := map[string]any{"ts": ts}
			maps.Copy(params, n)
			p, _ := json.Marshal(map[string]any{"src": b.id, "dst": b.prefix + "/events", "method": "NotifyStatus", "params": params})
			b.publish(b.prefix+"/events/rpc", false, p)
		}
	}
}

// shellyCall runs one request on b, through the fault stages for the
// methods that change state (Set, Toggle, Cover.*).
func (s *Sim) shellyCall(b *shellyBox, topic string, payload []byte, retained bool, req rpcRequest) (rpcOut, func()) {
	fire := func() {}
	out := s.shellyCallLocked(b, topic, payload, retained, req, &fire)
	return out, fire
}

// shellyCallLocked is shellyCall; it sets *fire to the call of OnSet or
// OnGet for the caller to make after Sim.mu is released.
func (s *Sim) shellyCallLocked(b *shellyBox, topic string, payload []byte, retained bool, req rpcRequest, fire *func()) rpcOut {
	comp, verb, _ := strings.Cut(req.Method, ".")
	comp = strings.ToLower(comp)
	if comp == "shelly" && verb == "GetStatus" {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !b.online() {
			return rpcOut{silent: true}
		}
		st := map[string]any{}
		for k, c := range b.comps {
			st[k] = c.status(k)
		}
		return rpcOut{result: st}
	}
	id, ok := wholeNumber(req.Params["id"])
	if !ok {
		return rpcOut{errCode: shellyInvalidArgument, errMsg: "Missing required 'id'"}
	}
	key := comp + ":" + strconv.Itoa(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	c := b.comps[key]
	if !b.online() {
		if c != nil {
			s.shellyEvent(fire, c, topic, payload, retained, req, verb, ReasonOffline)
		}
		return rpcOut{silent: true}
	}
	if c == nil {
		return rpcOut{errCode: shellyNotFound, errMsg: fmt.Sprintf("Argument 'id', value %d not found!", id)}
	}
	if verb == "GetStatus" {
		reason := ""
		switch {
		case c.silent:
			reason = ReasonSilent
		case c.deaf:
			reason = ReasonIgnoreGets
		}
		s.shellyEvent(fire, c, topic, payload, retained, req, verb, reason)
		if reason != "" {
			return rpcOut{silent: true}
		}
		return rpcOut{result: c.status(key)}
	}
	setter := verb == "Set" || verb == "Toggle" || comp == "cover"
	if !setter {
		return rpcOut{errCode: shellyNoHandler, errMsg: "No handler for " + req.Method}
	}
	c.sets++
	reason := ""
	// Lost on the way first (Wi-Fi), then the device's own doing.
	switch {
	case c.silent:
		reason = ReasonSilent
	case c.echoOnly:
		reason = ReasonEchoOnly
	default:
		c.delivered++
		switch {
		case c.delivered <= s.faults.DropFirst:
			reason = ReasonDropFirst
		case s.faults.DropRate > 0 && s.rand.Float64() < s.faults.DropRate:
			reason = ReasonDropRate
		case c.failSets:
			reason = ReasonSetFailed
		}
	}
	if reason == ReasonSetFailed {
		s.shellyEvent(fire, c, topic, payload, retained, req, verb, reason)
		code := s.faults.ShellyErrorCode
		if code == 0 {
			code = shellyInvalidArgument
		}
		return rpcOut{errCode: code, errMsg: "simulated failure (Faults.FailSets)"}
	}
	if reason != "" {
		s.shellyEvent(fire, c, topic, payload, retained, req, verb, reason)
		return rpcOut{silent: true}
	}
	out := s.shellyApply(c, key, comp, verb, req.Params)
	if c.quiet {
		out.notify = nil // Faults.Unreported: answered, never notified
	}
	r := ""
	if out.errCode != 0 {
		r = ReasonNoValidAttribute
	}
	s.shellyEvent(fire, c, topic, payload, retained, req, verb, r)
	return out
}

// shellyApply changes c as the method asks, with Sim.mu held, and says
// what to answer and notify; an invalid argument changes nothing.
func (s *Sim) shellyApply(c *shellyComp, key, comp, verb string, params map[string]any) rpcOut {
	invalid := func(msg string) rpcOut { return rpcOut{errCode: shellyInvalidArgument, errMsg: msg} }
	switch {
	case comp == "switch" && c.garage() && (verb == "Set" || verb == "Toggle"):
		on, ok := params["on"].(bool)
		if verb == "Set" && !ok {
			return invalid("Missing required 'on'")
		}
		if verb == "Toggle" {
			s.log.Error("shelly: a bare Switch.Toggle of a garage door's relay: the door moves whatever it did", "device", c.Name)
			on = !c.output
		}
		was := c.output
		if !on {
			c.output = false
			return rpcOut{result: map[string]any{"was_on": was}, notify: []map[string]any{{key: map[string]any{"id": c.id, "output": false}}}}
		}
		after, pulsed := params["toggle_after"].(float64)
		if !pulsed {
			s.log.Error("shelly: a garage door's relay switched on without toggle_after: the button stays held", "device", c.Name)
		}
		c.pulses++
		c.closed = !c.closed // the door moves; the contact follows at once (opening) or at the end of travel (closing)
		ik := "input:" + strconv.Itoa(c.input)
		notes := []map[string]any{{key: map[string]any{"id": c.id, "output": true}}, {ik: map[string]any{"id": c.input, "state": c.closed}}}
		if pulsed && after > 0 {
			notes = append(notes, map[string]any{key: map[string]any{"id": c.id, "output": false}})
		} else {
			c.output = true
		}
		return rpcOut{result: map[string]any{"was_on": was}, notify: notes}
	case comp == "switch" && verb == "Set":
		on, ok := params["on"].(bool)
		if !ok {
			return invalid("Missing required 'on'")
		}
		was := c.output
		c.output = on
		return rpcOut{result: map[string]any{"was_on": was}, notify: []map[string]any{{key: map[string]any{"id": c.id, "output": on}}}}
	case comp == "switch" && verb == "Toggle":
		was := c.output
		c.output = !c.output
		return rpcOut{result: map[string]any{"was_on": was}, notify: []map[string]any{{key: map[string]any{"id": c.id, "output": c.output}}}}
	case comp == "light" && verb == "Set":
		st := map[string]any{"id": c.id}
		if v, present := params["on"]; present {
			on, ok := v.(bool)
			if !ok {
				return invalid("Argument 'on' must be a boolean")
			}
			c.output = on
			st["output"] = on
		}
		if v, present := params["brightness"]; present {
			b, ok := wholeNumber(v)
			if !ok || b < 0 || b > 100 {
				return invalid("Argument 'brightness' must be a number 0–100")
			}
			c.brightness = b
			st["brightness"] = b
		}
		if len(st) == 1 {
			return invalid("Nothing to set: give on or brightness")
		}
		return rpcOut{result: nil, notify: []map[string]any{{key: st}}}
	case comp == "cover":
		target := -1
		switch verb {
		case "GoToPosition":
			p, ok := wholeNumber(params["pos"])
			if !ok || p < 0 || p > 100 {
				return invalid("Argument 'pos' must be a number 0–100")
			}
			target = p
		case "Open":
			target = 100
		case "Close":
			target = 0
		case "Stop":
			return rpcOut{result: nil, notify: []map[string]any{{key: map[string]any{"id": c.id, "state": "stopped", "current_pos": c.pos}}}}
		default:
			return rpcOut{errCode: shellyNoHandler, errMsg: "No handler for Cover." + verb}
		}
		moving := "opening"
		if target < c.pos {
			moving = "closing"
		}
		end := "stopped"
		switch target {
		case 100:
			end = "open"
		case 0:
			end = "closed"
		}
		from := c.pos
		c.pos = target
		return rpcOut{result: nil, notify: []map[string]any{
			{key: map[string]any{"id": c.id, "state": moving, "current_pos": from, "target_pos": target}},
			{key: map[string]any{"id": c.id, "state": end, "current_pos": target, "target_pos": nil}},
		}}
	}
	return rpcOut{errCode: shellyNoHandler, errMsg: "No handler for " + comp + "." + verb}
}

// status is the component's whole status under key, as GetStatus answers
// it. Called with Sim.mu held.
func (c *shellyComp) status(key string) map[string]any {
	switch {
	case strings.HasPrefix(key, "input:"):
		return map[string]any{"id": c.input, "state": c.closed}
	case c.kind == "cover":
		state := "stopped"
		switch c.pos {
		case 100:
			state = "open"
		case 0:
			state = "closed"
		}
		return map[string]any{"id": c.id, "source": "init", "state": state, "current_pos": c.pos}
	case c.kind == "light":
		return map[string]any{"id": c.id, "source": "init", "output": c.output, "brightness": c.brightness}
	}
	return map[string]any{"id": c.id, "source": "init", "output": c.output}
}

// shellyEvent reports one request to OnSet (a method that changes state)
// or OnGet (GetStatus), with Sim.mu held: *fire makes the call, after.
func (s *Sim) shellyEvent(fire *func(), c *shellyComp, topic string, payload []byte, retained bool, req rpcRequest, verb, reason string) {
	now := s.clock.Now()
	if verb == "GetStatus" {
		if s.onGet != nil {
			ev := GetEvent{Device: c.Name, Topic: topic, Payload: slices.Clone(payload), Ignored: reason != "", Reason: reason, At: now}
			*fire = func() { s.onGet(ev) }
		}
		return
	}
	if s.onSet != nil {
		attrs := maps.Clone(req.Params)
		if attrs == nil {
			attrs = map[string]any{}
		}
		attrs["method"] = req.Method
		ev := SetEvent{Device: c.Name, Topic: topic, Payload: slices.Clone(payload), Retained: retained, Attrs: attrs, Dropped: reason != "", Reason: reason, At: now}
		*fire = func() { s.onSet(ev) }
	}
}

// shellyState is a component's state in Hearth's words, for State.
func (c *shellyComp) state() map[string]any {
	switch {
	case c.garage():
		if c.closed {
			return map[string]any{"state": "CLOSE", "position": 0}
		}
		return map[string]any{"state": "OPEN", "position": 100}
	case c.kind == "cover":
		st := "CLOSE"
		if c.pos > 0 {
			st = "OPEN"
		}
		return map[string]any{"state": st, "position": c.pos}
	}
	st := map[string]any{"state": "OFF"}
	if c.output {
		st["state"] = "ON"
	}
	if c.kind == "light" {
		st["brightness_percent"] = c.brightness
	}
	return st
}

// setShellyOnline is SetOnline of a Shelly's device: the whole Shelly goes
// with it, and says so on its online topic.
func (s *Sim) setShellyOnline(c *shellyComp, online bool) {
	s.mu.Lock()
	c.online = online
	if online {
		c.silent = false
	}
	up := c.box.online()
	s.mu.Unlock()
	c.box.publish(c.box.prefix+"/online", true, []byte(strconv.FormatBool(up)))
	s.log.Info("shelly online changed", "device", c.box.id, "online", up)
}

// Pulses returns how many times a simulated garage door's relay was
// pulsed (switched on), 0 for any other name.
func (s *Sim) Pulses(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.comps[name]; c != nil {
		return c.pulses
	}
	return 0
}

// SetDoorClosed moves a simulated garage door by hand (its wall button):
// the contact changes and the Shelly notifies it.
func (s *Sim) SetDoorClosed(name string, closed bool) error {
	s.mu.Lock()
	c := s.comps[name]
	if c == nil || !c.garage() {
		s.mu.Unlock()
		return fmt.Errorf("%w: %q is no simulated garage door", ErrUnknownDevice, name)
	}
	c.closed = closed
	ts := float64(s.clock.Now().UnixMilli()) / 1000
	s.mu.Unlock()
	ik := "input:" + strconv.Itoa(c.input)
	p, _ := json.Marshal(map[string]any{"src": c.box.id, "method": "NotifyStatus", "params": map[string]any{"ts": ts, ik: map[string]any{"id": c.input, "state": closed}}})
	c.box.publish(c.box.prefix+"/events/rpc", false, p)
	return nil
}

// wholeNumber reads a JSON number that is a whole number.
func wholeNumber(v any) (int, bool) {
	f, ok := v.(float64)
	if !ok || f != math.Trunc(f) || math.Abs(f) > 1<<31 {
		return 0, false
	}
	return int(f), true
}
