package simulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// Protocols a simulated device speaks, in Device.Protocol.
const (
	// ProtocolZigbee2MQTT is the default: a device behind a Zigbee2MQTT
	// bridge.
	ProtocolZigbee2MQTT = "zigbee2mqtt"
	// ProtocolZWaveJS is a Z-Wave node behind Z-Wave JS UI's MQTT gateway.
	ProtocolZWaveJS = "zwavejs"
)

// ClassClimate is a thermostat: Z-Wave nodes only (Thermostat Setpoint).
const ClassClimate = "climate"

// Defaults of Z-Wave JS UI's MQTT gateway.
const (
	// DefaultZWavePrefix is the gateway's default MQTT prefix.
	DefaultZWavePrefix = "zwave"
	// DefaultZWaveGatewayName is the gateway's default MQTT name.
	DefaultZWaveGatewayName = "zwave-js-ui"
)

// Door Lock CC modes the simulated locks take and report.
const (
	// LockModeUnknown is the Door Lock CC mode 0xFE, "unknown".
	LockModeUnknown = 0xFE
	lockModeSecured = 0xFF
)

// validLockModes are the Door Lock modes a write may ask for: unsecured
// (with and without timeout, inside, outside) and secured.
var validLockModes = map[int]bool{0: true, 1: true, 16: true, 17: true, 32: true, 33: true, 255: true}

// ReasonAsleep: a Zigbee sleepy end device is asleep and its parent drops
// the set; a Z-Wave node is asleep and the gateway holds the write in its
// wake-up queue (SetEvent.Queued), applied at the next wake.
const ReasonAsleep = "asleep"

// gateway is one Z-Wave JS UI instance: a prefix and MQTT name, one MQTT
// connection, its nodes.
type gateway struct {
	prefix, name string
	client       string // <prefix>/_CLIENTS/ZWAVE_GATEWAY-<name>
	clientID     string
	nodes        map[string]*node // by address
	byID         map[int]*node
	order        []*node

	connMu sync.RWMutex
	conn   mqtt.Client

	// Guarded by Sim.mu.
	initialQueued   bool
	down, announced bool
	// driverDown: the Z-Wave driver (the controller) is gone while the
	// MQTT client stays connected (SetDriverReady); driverUntold: its
	// driver/status changed while the gateway was disconnected.
	driverDown, driverUntold, initialDriver bool
}

// driverPayload is the driver status payload: the plain JSON true or false
// (Gateway.ts publishes the boolean itself, not a time-value object).
func driverPayload(ready bool) []byte {
	if ready {
		return []byte("true")
	}
	return []byte("false")
}

// unreachable reports whether the gateway cannot reach its nodes: an
// outage (SetBridgeOnline) or its driver gone. Call with Sim.mu.
func (gw *gateway) unreachable() bool { return gw.down || gw.driverDown }

// node is one simulated Z-Wave node.
type node struct {
	Device
	path string // Name as the gateway writes it in topics (zwaveTopicName)
	gw   *gateway
	out  outbox
	kick chan struct{} // Wake

	// Guarded by Sim.mu.
	values map[string]any // "<cc>/<endpoint>/<property>[/<key>]" → value
	faulty
	asleep bool
	queue  []func(now time.Time) // the gateway's wake-up queue
	sets   int
}

func (gw *gateway) topic(n *node, rest string) string {
	return gw.prefix + "/" + n.path + "/" + rest
}

// status returns n's status word as Z-Wave JS names it. Call with Sim.mu.
func (n *node) status() string {
	switch {
	case !n.online:
		return "Dead"
	case n.asleep:
		return "Asleep"
	case n.WakeInterval > 0:
		return "Awake"
	}
	return "Alive"
}

func (n *node) statusPayload(now time.Time) []byte {
	st := n.status()
	p, _ := json.Marshal(map[string]any{"time": now.UnixMilli(), "value": st == "Alive" || st == "Awake", "status": st, "nodeId": n.NodeID})
	return p
}

func timeValue(now time.Time, v any) []byte {
	p, _ := json.Marshal(map[string]any{"time": now.UnixMilli(), "value": v})
	return p
}

// valuePayload is the payload of n's value key: the time-value form, or
// for a Fahrenheit thermostat's setpoint the entire ValueId object form
// with its unit "°F", as the gateway publishes a value with its metadata.
func (n *node) valuePayload(now time.Time, key string, v any) []byte {
	if n.Fahrenheit && strings.HasPrefix(key, "67/") {
		p, _ := json.Marshal(map[string]any{"id": strings.ReplaceAll(key, "/", "-"), "nodeId": n.NodeID, "commandClass": 67,
			"property": "setpoint", "propertyKey": 1, "type": "number", "unit": "°F", "lastUpdate": now.UnixMilli(), "value": v})
		return p
	}
	return timeValue(now, v)
}

// zwaveTopicName writes a node name as Z-Wave JS UI does in its topics
// (api/lib/utils.ts, sanitizeTopic): whitespace becomes '_', and only
// ASCII letters and digits, '-', '_', '/' and the Latin-1 letters
// U+00C0–U+00FF but for × (U+00D7) and ÷ (U+00F7) stay.
func zwaveTopicName(name string) string {
	out := make([]rune, 0, len(name))
	for _, r := range name {
		if unicode.IsSpace(r) && r != 0x85 || r == 0xFEFF {
			out = append(out, '_')
			continue
		}
		keep := r < 0x80 && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("-_/", r)) ||
			r >= 0xC0 && r <= 0xFF && r != 0xD7 && r != 0xF7
		if keep {
			out = append(out, r)
		}
	}
	return string(out)
}

// initialValues are a node's values at start, on endpoint 0 and on each of
// endpoints 1…endpoints: locks secured, switches and levels off,
// thermostats at 20 °C (68 °F).
func initialValues(class string, endpoints int, fahrenheit bool) map[string]any {
	out := map[string]any{}
	for ep := 0; ep <= endpoints; ep++ {
		e := "/" + strconv.Itoa(ep) + "/"
		switch class {
		case ClassLock:
			out["98"+e+"targetMode"], out["98"+e+"currentMode"] = lockModeSecured, lockModeSecured
		case ClassSwitch:
			out["37"+e+"targetValue"], out["37"+e+"currentValue"] = false, false
		case ClassLight, ClassCover:
			out["38"+e+"targetValue"], out["38"+e+"currentValue"] = 0, 0
		case ClassClimate:
			out["67"+e+"setpoint/1"] = 20.0
			if fahrenheit {
				out["67"+e+"setpoint/1"] = 68.0
			}
		}
	}
	return out
}

// newNode validates a Z-Wave device of Options.Devices and adds it to its
// gateway, creating the gateway on its first node.
func (s *Sim) newNode(i int, d Device, byGateway map[string]*gateway) error {
	if err := checkTopicName(d.Name); err != nil {
		return fmt.Errorf("simulator: Devices[%d]: node name %q %w", i, d.Name, err)
	}
	if strings.Count(d.Name, "/") > 1 || strings.HasPrefix(d.Name, "_") {
		return fmt.Errorf("simulator: Devices[%d]: node name %q is not <node> or <location>/<node>", i, d.Name)
	}
	switch d.Class {
	case ClassLight, ClassSwitch, ClassLock, ClassCover, ClassClimate:
	default:
		return fmt.Errorf("simulator: Devices[%d] %q: unknown class %q for a Z-Wave node (want light, switch, lock, cover or climate)", i, d.Name, d.Class)
	}
	if d.NodeID < 1 || d.NodeID > 4000 {
		return fmt.Errorf("simulator: Devices[%d] %q: NodeID %d is not a Z-Wave node ID (1–4000)", i, d.Name, d.NodeID)
	}
	if d.BaseTopic == "" {
		d.BaseTopic = DefaultZWavePrefix
	}
	if d.GatewayName == "" {
		d.GatewayName = DefaultZWaveGatewayName
	}
	if err := checkTopicName(d.BaseTopic); err != nil {
		return fmt.Errorf("simulator: Devices[%d] %q: prefix %q %w", i, d.Name, d.BaseTopic, err)
	}
	if _, dup := s.devices[d.Name]; dup {
		return fmt.Errorf("simulator: Devices[%d]: name %q is used twice", i, d.Name)
	}
	if _, dup := s.nodes[d.Name]; dup {
		return fmt.Errorf("simulator: Devices[%d]: name %q is used twice", i, d.Name)
	}
	key := d.BaseTopic + "\x00" + d.GatewayName
	gw := byGateway[key]
	if gw == nil {
		gw = &gateway{prefix: d.BaseTopic, name: d.GatewayName, client: d.BaseTopic + "/_CLIENTS/ZWAVE_GATEWAY-" + d.GatewayName,
			nodes: map[string]*node{}, byID: map[int]*node{}}
		byGateway[key] = gw
		s.gateways = append(s.gateways, gw)
	}
	path := zwaveTopicName(d.Name)
	for _, o := range gw.order {
		if o.path == path {
			return fmt.Errorf("simulator: Devices[%d] %q: its topic name %q is that of %q", i, d.Name, path, o.Name)
		}
	}
	if d.Endpoints < 0 || d.Endpoints > 127 {
		return fmt.Errorf("simulator: Devices[%d] %q: Endpoints %d is not 0–127", i, d.Name, d.Endpoints)
	}
	if _, dup := gw.byID[d.NodeID]; dup {
		return fmt.Errorf("simulator: Devices[%d] %q: node ID %d is used twice on gateway %s", i, d.Name, d.NodeID, gw.client)
	}
	n := &node{Device: d, path: path, gw: gw, values: initialValues(d.Class, d.Endpoints, d.Fahrenheit), faulty: faulty{online: true}, asleep: d.WakeInterval > 0, kick: make(chan struct{}, 1)}
	n.out.init()
	gw.nodes[d.Name] = n
	gw.byID[d.NodeID] = n
	gw.order = append(gw.order, n)
	s.nodes[d.Name] = n
	return nil
}

// gatewayEndpoint is a Z-Wave JS UI gateway as an endpoint the sim keeps
// connected: its will is the gateway status false.
type gatewayEndpoint struct {
	s  *Sim
	gw *gateway
}

func (e gatewayEndpoint) will() (string, []byte) {
	return e.gw.client + "/status", timeValue(e.s.clock.Now(), false)
}

func (e gatewayEndpoint) announce(ctx context.Context, c mqtt.Client) error {
	return e.s.announceGateway(ctx, e.gw, c)
}

func (e gatewayEndpoint) attach(c mqtt.Client) { e.gw.attach(c) }

// announceGateway runs once per connection: each node's status and, the
// first time, its values (queued ahead of any report), then the
// subscription, then the gateway's status.
func (s *Sim) announceGateway(ctx context.Context, gw *gateway, client mqtt.Client) error {
	gw.attach(client)
	s.mu.Lock()
	now := s.clock.Now()
	toks := make([]mqtt.Token, 0, len(gw.order))
	for _, n := range gw.order {
		toks = append(toks, client.Publish(gw.topic(n, "status"), 1, true, n.statusPayload(now)))
	}
	if !gw.initialQueued {
		gw.initialQueued = true
		for _, n := range gw.order {
			for _, k := range slices.Sorted(maps.Keys(n.values)) {
				n.out.push(report{topic: gw.topic(n, k), payload: n.valuePayload(now, k, n.values[k]), due: now})
			}
		}
	}
	// The driver's status: published when the driver gets ready (at the
	// first connection) and when it changes, retained as the gateway's
	// default "retain" setting publishes it (Gateway.ts, _onDriverStatus).
	var driver *bool
	if !gw.initialDriver || gw.driverUntold {
		gw.initialDriver, gw.driverUntold = true, false
		ready := !gw.driverDown
		driver = &ready
	}
	s.mu.Unlock()
	if driver != nil {
		if err := await(ctx, client.Publish(gw.prefix+"/driver/status", 1, true, driverPayload(*driver))); err != nil {
			return fmt.Errorf("publish driver status: %w", err)
		}
	}
	for _, t := range toks {
		if err := await(ctx, t); err != nil {
			return fmt.Errorf("publish node status: %w", err)
		}
	}
	if err := await(ctx, client.Subscribe(gw.prefix+"/#", 1, s.gatewayHandler(gw))); err != nil {
		return fmt.Errorf("subscribe %s/#: %w", gw.prefix, err)
	}
	s.mu.Lock()
	online := !gw.announced
	s.mu.Unlock()
	return await(ctx, client.Publish(gw.client+"/status", 1, true, timeValue(now, online)))
}

func (gw *gateway) attach(c mqtt.Client) {
	gw.connMu.Lock()
	gw.conn = c
	gw.connMu.Unlock()
}

func (gw *gateway) publish(topic string, retained bool, payload []byte) mqtt.Token {
	gw.connMu.RLock()
	defer gw.connMu.RUnlock()
	if gw.conn == nil {
		return nil
	}
	return gw.conn.Publish(topic, 1, retained, payload)
}

// gatewayHandler routes the messages of a gateway's subscription: value
// writes (<address>/<value>/set) and API calls (pollValue, refreshValues).
func (s *Sim) gatewayHandler(gw *gateway) mqtt.MessageHandler {
	return func(_ mqtt.Client, m mqtt.Message) {
		topic := m.Topic()
		if api, ok := strings.CutPrefix(topic, gw.client+"/api/"); ok {
			if name, ok := strings.CutSuffix(api, "/set"); ok {
				s.apiCall(gw, topic, name, m.Payload())
			}
			return
		}
		rest, ok := strings.CutPrefix(topic, gw.prefix+"/")
		if !ok {
			return
		}
		rest, ok = strings.CutSuffix(rest, "/set")
		if !ok {
			return
		}
		for _, n := range gw.order {
			if value, ok := strings.CutPrefix(rest, n.path+"/"); ok {
				s.write(n, topic, value, m.Payload(), m.Retained())
				return
			}
		}
		s.log.Debug("write for an unknown node ignored", "topic", topic)
	}
}

// writeValue reads a write's payload: {"value": …} or the plain JSON value.
func writeValue(p []byte) (any, error) {
	var v any
	if err := json.Unmarshal(p, &v); err != nil {
		return nil, fmt.Errorf("%w: %v", errMalformed, err)
	}
	if obj, ok := v.(map[string]any); ok {
		val, ok := obj["value"]
		if !ok {
			return nil, fmt.Errorf("%w: an object without value", errMalformed)
		}
		return val, nil
	}
	return v, nil
}

// write takes one value write for n through the fault stages: an asleep
// node's write waits in the wake-up queue.
func (s *Sim) write(n *node, topic, value string, payload []byte, retained bool) {
	ev := SetEvent{Device: n.Name, Topic: topic, Payload: slices.Clone(payload), Retained: retained}
	v, perr := writeValue(payload)
	if perr == nil {
		ev.Attrs = map[string]any{"value": v}
	}
	s.mu.Lock()
	now := s.clock.Now()
	ev.At = now
	n.sets++
	switch {
	case perr != nil:
		ev.Reason = ReasonMalformed
	case n.gw.unreachable():
		ev.Reason = ReasonBridgeOffline
	case !n.online:
		ev.Reason = ReasonOffline
	default:
		apply, echo, err := s.zwaveApply(n, value, v)
		if err != nil {
			ev.Reason = ReasonNoValidAttribute
			s.log.Error("write: "+err.Error(), "node", n.Name)
			break
		}
		if echo != "" {
			// The gateway publishes the target as soon as it takes the
			// write, whether or not the node heard it.
			n.values[echo] = v
			n.out.push(report{topic: n.gw.topic(n, echo), payload: n.valuePayload(now, echo, v), due: now})
		}
		if n.asleep {
			ev.Queued = true
			n.queue = append(n.queue, apply)
			break
		}
		apply(now)
	}
	s.mu.Unlock()
	ev.Dropped = ev.Reason != ""
	if retained {
		s.log.Warn("write arrived retained", "node", n.Name)
	}
	if s.onSet != nil {
		s.onSet(ev)
	}
}

// zwaveApply validates a write of value (the topic's value part) for n and
// returns what applying it does, and the target value the gateway echoes
// ("" for none). Call with Sim.mu held; so must apply be called.
func (s *Sim) zwaveApply(n *node, value string, v any) (apply func(now time.Time), echo string, err error) {
	emit := func(now time.Time, key string, val any) {
		n.values[key] = val
		n.out.push(report{topic: n.gw.topic(n, key), payload: n.valuePayload(now, key, val), due: now.Add(s.faults.Latency)})
	}
	// The value's endpoint: value is <cc>/<endpoint>/<property>…; the
	// cases below match it at endpoint 0 and emit at its own.
	parts := strings.SplitN(value, "/", 3)
	if len(parts) < 3 {
		return nil, "", fmt.Errorf("the node has no writable value %s", value)
	}
	ep := parts[1]
	if _, ok := n.values[parts[0]+"/"+ep+"/"+map[string]string{"98": "currentMode", "37": "currentValue", "38": "currentValue", "67": "setpoint/1"}[parts[0]]]; !ok {
		return nil, "", fmt.Errorf("the node has no writable value %s (no such endpoint)", value)
	}
	at := func(key string) string { // key at endpoint 0 → at ep
		c, rest, _ := strings.Cut(key, "/0/")
		return c + "/" + ep + "/" + rest
	}
	value = parts[0] + "/0/" + parts[2]
	num := func() (int, bool) {
		f, ok := v.(float64)
		return int(f), ok && f == math.Trunc(f)
	}
	switch {
	case n.Class == ClassLock && (value == "98/0/targetMode" || value == "98/0/currentMode"):
		mode, ok := num()
		if !ok || !validLockModes[mode] {
			return nil, "", fmt.Errorf("invalid lock mode %v", v)
		}
		return func(now time.Time) {
			switch {
			case n.jammed:
				emit(now, at("113/0/Access_Control/Lock_state"), 11) // Lock jammed; the bolt does not move
			case n.echoOnly:
			default:
				emit(now, at("98/0/currentMode"), mode)
			}
		}, at("98/0/targetMode"), nil
	case n.Class == ClassSwitch && (value == "37/0/targetValue" || value == "37/0/currentValue"):
		on, ok := v.(bool)
		if !ok {
			return nil, "", fmt.Errorf("invalid binary switch value %v", v)
		}
		return func(now time.Time) {
			if !n.echoOnly {
				emit(now, at("37/0/currentValue"), on)
			}
		}, at("37/0/targetValue"), nil
	case (n.Class == ClassLight || n.Class == ClassCover) && (value == "38/0/targetValue" || value == "38/0/currentValue"):
		level, ok := num()
		if !ok || (level > 99 && level != 255) || level < 0 {
			return nil, "", fmt.Errorf("invalid multilevel switch value %v", v)
		}
		return func(now time.Time) {
			if n.echoOnly {
				return
			}
			l := level
			if l == 255 { // on at the last level
				l = 99
				if last, ok := n.values["last_level/"+ep].(int); ok && last > 0 {
					l = last
				}
			}
			if l > 0 {
				n.values["last_level/"+ep] = l
			}
			emit(now, at("38/0/currentValue"), l)
		}, at("38/0/targetValue"), nil
	case n.Class == ClassClimate && value == "67/0/setpoint/1":
		f, ok := v.(float64)
		if !ok {
			return nil, "", fmt.Errorf("invalid setpoint %v", v)
		}
		return func(now time.Time) {
			if !n.echoOnly {
				emit(now, at("67/0/setpoint/1"), f)
			}
		}, "", nil
	}
	return nil, "", fmt.Errorf("the node has no writable value %s", value)
}

// apiCall answers pollValue and refreshValues; other APIs are answered
// with a failure. The answer is published on the topic without /set; the
// values follow on their topics (after Faults.Latency), once the node is
// awake.
func (s *Sim) apiCall(gw *gateway, topic, name string, payload []byte) {
	var req struct {
		Args []json.RawMessage `json:"args"`
	}
	answer := func(ok bool, msg string) {
		p, _ := json.Marshal(map[string]any{"success": ok, "message": msg, "origin": json.RawMessage(payload)})
		gw.publish(strings.TrimSuffix(topic, "/set"), false, p)
	}
	if err := json.Unmarshal(payload, &req); err != nil || len(req.Args) == 0 {
		answer(false, "Args must be an array")
		return
	}
	var nodeID int
	var keys []string // the values asked for; nil: all
	switch name {
	case "refreshValues":
		if json.Unmarshal(req.Args[0], &nodeID) != nil {
			answer(false, "invalid node ID")
			return
		}
	case "pollValue":
		var vid struct {
			NodeID       int    `json:"nodeId"`
			CommandClass int    `json:"commandClass"`
			Endpoint     int    `json:"endpoint"`
			Property     string `json:"property"`
			PropertyKey  *int   `json:"propertyKey"`
		}
		if json.Unmarshal(req.Args[0], &vid) != nil {
			answer(false, "invalid value ID")
			return
		}
		nodeID = vid.NodeID
		key := fmt.Sprintf("%d/%d/%s", vid.CommandClass, vid.Endpoint, vid.Property)
		if vid.PropertyKey != nil {
			key += "/" + strconv.Itoa(*vid.PropertyKey)
		}
		keys = []string{key}
	default:
		answer(false, "unknown API "+name)
		return
	}
	n := gw.byID[nodeID]
	if n == nil {
		answer(false, "node not found")
		return
	}
	ev := GetEvent{Device: n.Name, Topic: topic, Payload: slices.Clone(payload)}
	s.mu.Lock()
	now := s.clock.Now()
	ev.At = now
	for _, k := range keys {
		if _, ok := n.values[k]; !ok {
			ev.Reason = ReasonNoValidAttribute
		}
	}
	switch {
	case ev.Reason != "":
	case gw.unreachable():
		ev.Reason = ReasonBridgeOffline
	case !n.online:
		ev.Reason = ReasonOffline
	case n.deaf:
		ev.Reason = ReasonIgnoreGets
	default:
		refresh := func(now time.Time) {
			ks := keys
			if ks == nil {
				ks = slices.Sorted(maps.Keys(n.values))
			}
			for _, k := range ks {
				if strings.HasPrefix(k, "last_level") || strings.Contains(k, "/target") || strings.HasPrefix(k, "113/") {
					continue
				}
				n.out.push(report{topic: gw.topic(n, k), payload: n.valuePayload(now, k, n.values[k]), due: now.Add(s.faults.Latency)})
			}
		}
		if n.asleep {
			n.queue = append(n.queue, refresh)
		} else {
			refresh(now)
		}
	}
	s.mu.Unlock()
	ev.Ignored = ev.Reason != ""
	answer(!ev.Ignored || ev.Reason == ReasonIgnoreGets, "Success zwave api call")
	if s.onGet != nil {
		s.onGet(ev)
	}
}

// deliverNode publishes n's reports in order, each at its due time.
func (s *Sim) deliverNode(ctx context.Context, n *node) {
	for {
		r, ok := n.out.pop(ctx)
		if !ok {
			return
		}
		if wait := r.due.Sub(s.clock.Now()); wait > 0 && !s.wait(ctx, wait) {
			return
		}
		s.mu.Lock()
		down := n.gw.unreachable()
		s.mu.Unlock()
		if down {
			s.log.Info("value lost: gateway offline", "node", n.Name)
			continue
		}
		tok := n.gw.publish(r.topic, true, r.payload)
		if tok == nil {
			s.log.Warn("value lost: gateway disconnected", "node", n.Name)
			continue
		}
		if err := await(ctx, tok); err != nil && ctx.Err() == nil {
			s.log.Warn("value not published", "node", n.Name, "err", err)
		}
	}
}

// publishStatus publishes n's status, retained. Call without Sim.mu.
func (s *Sim) publishStatus(n *node) {
	s.mu.Lock()
	p := n.statusPayload(s.clock.Now())
	s.mu.Unlock()
	n.gw.publish(n.gw.topic(n, "status"), true, p)
}

// wakeNode wakes n: status Awake, then its wake-up queue in order.
func (s *Sim) wakeNode(n *node) {
	s.mu.Lock()
	n.asleep = false
	q := n.queue
	n.queue = nil
	s.mu.Unlock()
	s.publishStatus(n)
	s.mu.Lock()
	now := s.clock.Now()
	for _, f := range q {
		f(now)
	}
	s.mu.Unlock()
	s.log.Info("node awake", "node", n.Name, "queued", len(q))
}

func (s *Sim) sleepNode(n *node) {
	s.mu.Lock()
	n.asleep = true
	s.mu.Unlock()
	s.publishStatus(n)
	s.log.Info("node asleep", "node", n.Name)
}

// sleepCycle runs a sleepy device's wake-ups on the sim's clock until ctx
// ends: asleep at start, it wakes interval after the start and then every
// interval after its last wake (a kick wakes it at once), and stays awake
// for window each time.
func (s *Sim) sleepCycle(ctx context.Context, interval, window time.Duration, kick <-chan struct{}, wake, sleep func()) {
	asleepFor := interval
	for {
		t := s.clock.NewTimer(asleepFor)
		asleepFor = interval - window
		select {
		case <-t.Chan():
		case <-kick:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return
		}
		wake()
		if !s.wait(ctx, window) {
			return
		}
		sleep()
	}
}

// SetDriverReady ends (ready true) or starts (ready false) an outage of
// the Z-Wave driver of the gateway of prefix prefix ("" means
// DefaultZWavePrefix): the controller is gone (unplugged, crashed) while
// the gateway's MQTT client stays connected and its _CLIENTS status stays
// true. The gateway publishes <prefix>/driver/status false, retained, and
// ignores every write and API call of its nodes (reported with
// ReasonBridgeOffline); values still waiting on Faults.Latency are lost.
// Ready again, it publishes driver/status true. A change while the gateway
// is disconnected is published when it reconnects. It returns
// ErrUnknownBridge for a prefix of no node.
func (s *Sim) SetDriverReady(prefix string, ready bool) error {
	if prefix == "" {
		prefix = DefaultZWavePrefix
	}
	j := slices.IndexFunc(s.gateways, func(gw *gateway) bool { return gw.prefix == prefix })
	if j < 0 {
		return fmt.Errorf("%w: Z-Wave prefix %q", ErrUnknownBridge, prefix)
	}
	gw := s.gateways[j]
	s.mu.Lock()
	gw.driverDown = !ready
	s.mu.Unlock()
	if gw.publish(gw.prefix+"/driver/status", true, driverPayload(ready)) == nil {
		s.mu.Lock()
		gw.driverUntold = true
		s.mu.Unlock()
	}
	s.log.Info("driver status changed", "prefix", prefix, "ready", ready)
	return nil
}

// ErrNotALock is returned by SetLockMode for a device that is not a Z-Wave lock.
var ErrNotALock = errors.New("simulator: not a Z-Wave lock")

// SetLockMode makes a Z-Wave lock report Door Lock mode mode as its
// currentMode, as a lock does whose bolt position it cannot tell
// (LockModeUnknown, 0xFE) or one turned by hand; it is published now and
// answers every later read until a write moves the lock.
func (s *Sim) SetLockMode(name string, mode int) error {
	n := s.nodes[name]
	if n == nil {
		return fmt.Errorf("%w: %q", ErrUnknownDevice, name)
	}
	if n.Class != ClassLock {
		return fmt.Errorf("%w: %q is a %s", ErrNotALock, name, n.Class)
	}
	s.mu.Lock()
	now := s.clock.Now()
	n.values["98/0/currentMode"] = mode
	n.out.push(report{topic: n.gw.topic(n, "98/0/currentMode"), payload: timeValue(now, mode), due: now})
	s.mu.Unlock()
	return nil
}

// Wake wakes a sleepy device now, as its wake-up button does: a Z-Wave
// node reports Awake and the gateway delivers its wake-up queue; a
// Zigbee2MQTT device checks in with its full state. It then stays awake
// for its AwakeWindow and its wake interval counts from now. It returns
// ErrUnknownDevice for a name the sim does not play, and an error for a
// device that does not sleep.
func (s *Sim) Wake(name string) error {
	var kick chan struct{}
	switch {
	case s.nodes[name] != nil:
		kick = s.nodes[name].kick
	case s.devices[name] != nil:
		kick = s.devices[name].kick
	case s.homieDevs[name] != nil:
		kick = s.homieDevs[name].box.kick
	default:
		return fmt.Errorf("%w: %q", ErrUnknownDevice, name)
	}
	if kick == nil {
		return fmt.Errorf("simulator: %q does not sleep", name)
	}
	select {
	case kick <- struct{}{}:
	default:
	}
	return nil
}

// Asleep reports whether a sleepy device is asleep now.
func (s *Sim) Asleep(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := s.nodes[name]; n != nil {
		return n.asleep
	}
	if d := s.devices[name]; d != nil {
		return d.asleep
	}
	if h := s.homieDevs[name]; h != nil {
		return h.box.asleep
	}
	return false
}
