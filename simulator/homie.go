package simulator

// The Homie device side, written from the Homie convention
// (github.com/homieiot/convention: convention.md at v4.0.0 for Homie 4,
// the develop branch for Homie 5), not from protocols/homie: each Homie
// device is its own MQTT client whose will is $state lost. On every
// connect it says $state init, publishes its attributes (Homie 4: $homie,
// $name, $nodes, $extensions, each node's $name, $type and $properties,
// each property's $name, $datatype, $settable and $format; Homie 5: its
// $description document) and its property values, all retained,
// subscribes to its settable properties' set topics, and says ready. A
// set it accepts is reflected on the property topic, retained (Homie 5:
// after the byte-equal $target). A sleepy device says sleeping before it
// sleeps and ready when it wakes; asleep, it hears no set.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// ProtocolHomie is a device following the Homie convention. Its
// Device.Name is "<device-id>/<node-id>/<property-id>" (a switch's
// boolean on/off) or, for a light, "<device-id>/<node-id>/<on>,<brightness>"
// (brightness an integer 0:100); BaseTopic is the root ("" means
// DefaultHomieRoot; "<domain>/5" plays Homie 5). Devices of one Homie
// device ID share its MQTT connection.
const ProtocolHomie = "homie"

// DefaultHomieRoot is Homie 4's root topic.
const DefaultHomieRoot = "homie"

// homieBox is one Homie device: one MQTT connection.
type homieBox struct {
	root, id, prefix string
	v5               bool
	clientID         string
	order            []*homieDev
	kick             chan struct{} // Wake; nil unless a device of it sleeps
	wakeInterval     time.Duration
	awakeWindow      time.Duration

	connMu sync.RWMutex
	client mqtt.Client

	// Guarded by Sim.mu.
	asleep bool
}

// homieDev is one simulated device: a node's on/off property and a
// light's brightness.
type homieDev struct {
	Device
	box              *homieBox
	node, power, dim string

	// Guarded by Sim.mu.
	on         bool
	brightness int // 0–100
	faulty
	sets, delivered int
}

// newHomie adds Devices[i], a node of a Homie device.
func (s *Sim) newHomie(i int, d Device, boxes map[string]*homieBox) error {
	if d.BaseTopic == "" {
		d.BaseTopic = DefaultHomieRoot
	}
	bad := func(why string) error {
		return fmt.Errorf("simulator: Devices[%d] %q: %s", i, d.Name, why)
	}
	if d.Class != ClassSwitch && d.Class != ClassLight {
		return bad("a Homie device here is a switch or a light")
	}
	roots := strings.Split(d.BaseTopic, "/")
	v5 := len(roots) == 2 && roots[1] == "5"
	if len(roots) > 2 || (len(roots) == 2 && !v5) {
		return bad("the root is <root> (Homie 4) or <domain>/5 (Homie 5)")
	}
	parts := strings.Split(d.Name, "/")
	if len(parts) != 3 {
		return bad("a Homie device is <device-id>/<node-id>/<property-id>")
	}
	props := strings.Split(parts[2], ",")
	if len(props) > 2 || (len(props) == 2 && d.Class != ClassLight) {
		return bad("only a light has a second property, its brightness")
	}
	for _, id := range append(parts[:2:2], props...) {
		if !homieTopicID(id) {
			return bad(fmt.Sprintf("%q is not a Homie topic ID (a-z, 0-9, '-', not at either end)", id))
		}
	}
	hd := &homieDev{Device: d, node: parts[1], power: props[0], brightness: 100, faulty: faulty{online: true}}
	if len(props) == 2 {
		hd.dim = props[1]
	}
	key := d.BaseTopic + "/" + parts[0]
	b := boxes[key]
	if b == nil {
		b = &homieBox{root: d.BaseTopic, id: parts[0], prefix: key, v5: v5}
		boxes[key] = b
		s.homies = append(s.homies, b)
	}
	for _, o := range b.order {
		if o.node == hd.node && (slices.Contains([]string{o.power, o.dim}, hd.power) || hd.dim != "" && slices.Contains([]string{o.power, o.dim}, hd.dim)) {
			return bad("a property of " + parts[0] + "/" + hd.node + " is simulated twice")
		}
	}
	if _, dup := s.homieDevs[d.Name]; dup {
		return fmt.Errorf("simulator: Devices[%d]: name %q is used twice", i, d.Name)
	}
	if d.WakeInterval > 0 {
		if b.kick != nil && (b.wakeInterval != d.WakeInterval || b.awakeWindow != d.AwakeWindow) {
			return bad("the devices of one Homie device sleep together: give them one WakeInterval and AwakeWindow")
		}
		b.kick, b.wakeInterval, b.awakeWindow, b.asleep = make(chan struct{}, 1), d.WakeInterval, d.AwakeWindow, true
	}
	hd.box = b
	b.order = append(b.order, hd)
	s.homieDevs[d.Name] = hd
	return nil
}

// homieTopicID reports whether id is a Homie topic level ID.
func homieTopicID(id string) bool {
	if id == "" || id[0] == '-' || id[len(id)-1] == '-' {
		return false
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func (b *homieBox) attach(c mqtt.Client) {
	b.connMu.Lock()
	b.client = c
	b.connMu.Unlock()
}

// publish hands a retained QoS 1 message to the connection, not awaited
// (the caller may be on paho's receive path); nothing while disconnected.
func (b *homieBox) publish(topic string, payload string) {
	b.connMu.RLock()
	defer b.connMu.RUnlock()
	if b.client != nil {
		b.client.Publish(topic, 1, true, payload)
	}
}

// online reports whether the device is up: none of its nodes offline.
// Called with Sim.mu held.
func (b *homieBox) online() bool {
	for _, d := range b.order {
		if !d.online {
			return false
		}
	}
	return true
}

// stateWord is the $state the device says now. Called with Sim.mu held.
func (b *homieBox) stateWord() string {
	switch {
	case !b.online():
		return "lost"
	case b.asleep:
		return "sleeping"
	}
	return "ready"
}

type homieEndpoint struct {
	s *Sim
	b *homieBox
}

// will is $state lost, the convention's required last will (also said on
// a clean stop, which Homie would call disconnected).
func (e homieEndpoint) will() (string, []byte) { return e.b.prefix + "/$state", []byte("lost") }

func (e homieEndpoint) attach(c mqtt.Client) { e.b.attach(c) }

// announce runs the convention's start: $state init, the attributes and
// values, the set subscriptions, then $state ready (or sleeping, or lost
// for a device SetOnline took offline).
func (e homieEndpoint) announce(ctx context.Context, c mqtt.Client) error {
	b, s := e.b, e.s
	b.attach(c)
	pub := func(topic, payload string) error { return await(ctx, c.Publish(topic, 1, true, payload)) }
	if err := pub(b.prefix+"/$state", "init"); err != nil {
		return err
	}
	s.mu.Lock()
	msgs := b.attributes()
	for _, d := range b.order {
		msgs = append(msgs, [2]string{b.prefix + "/" + d.node + "/" + d.power, strconv.FormatBool(d.on)})
		if d.dim != "" {
			msgs = append(msgs, [2]string{b.prefix + "/" + d.node + "/" + d.dim, strconv.Itoa(d.brightness)})
		}
	}
	s.mu.Unlock()
	for _, m := range msgs {
		if err := pub(m[0], m[1]); err != nil {
			return err
		}
	}
	if err := await(ctx, c.Subscribe(b.prefix+"/+/+/set", 1, s.homieHandler(b))); err != nil {
		return err
	}
	s.mu.Lock()
	word := b.stateWord()
	s.mu.Unlock()
	return pub(b.prefix+"/$state", word)
}

// attributes are the device's Homie 4 attribute messages or its Homie 5
// $description. Called with Sim.mu held.
func (b *homieBox) attributes() [][2]string {
	nodes := map[string][]*homieDev{}
	var order []string
	for _, d := range b.order {
		if _, ok := nodes[d.node]; !ok {
			order = append(order, d.node)
		}
		nodes[d.node] = append(nodes[d.node], d)
	}
	type prop struct {
		id, datatype, format string
	}
	propsOf := func(n string) []prop {
		var ps []prop
		for _, d := range nodes[n] {
			ps = append(ps, prop{d.power, "boolean", ""})
			if d.dim != "" {
				ps = append(ps, prop{d.dim, "integer", "0:100"})
			}
		}
		return ps
	}
	if b.v5 {
		doc := map[string]any{"homie": "5.0", "version": 1, "name": b.id}
		ns := map[string]any{}
		for _, n := range order {
			ps := map[string]any{}
			for _, p := range propsOf(n) {
				o := map[string]any{"datatype": p.datatype, "settable": true}
				if p.format != "" {
					o["format"] = p.format
				}
				ps[p.id] = o
			}
			ns[n] = map[string]any{"name": n, "properties": ps}
		}
		doc["nodes"] = ns
		p, _ := json.Marshal(doc)
		return [][2]string{{b.prefix + "/$description", string(p)}}
	}
	out := [][2]string{
		{b.prefix + "/$homie", "4.0.0"}, {b.prefix + "/$name", b.id},
		{b.prefix + "/$nodes", strings.Join(order, ",")}, {b.prefix + "/$extensions", ""},
	}
	for _, n := range order {
		var ids []string
		for _, p := range propsOf(n) {
			ids = append(ids, p.id)
		}
		out = append(out, [2]string{b.prefix + "/" + n + "/$name", n}, [2]string{b.prefix + "/" + n + "/$type", "hearth-sim"},
			[2]string{b.prefix + "/" + n + "/$properties", strings.Join(ids, ",")})
		for _, p := range propsOf(n) {
			pt := b.prefix + "/" + n + "/" + p.id
			out = append(out, [2]string{pt + "/$name", p.id}, [2]string{pt + "/$datatype", p.datatype}, [2]string{pt + "/$settable", "true"})
			if p.format != "" {
				out = append(out, [2]string{pt + "/$format", p.format})
			}
		}
	}
	return out
}

func (s *Sim) homieHandler(b *homieBox) mqtt.MessageHandler {
	return func(_ mqtt.Client, m mqtt.Message) {
		levels := strings.Split(strings.TrimPrefix(m.Topic(), b.prefix+"/"), "/")
		if len(levels) != 3 || levels[2] != "set" {
			return
		}
		if m.Retained() {
			// Homie: "A Homie controller publishes to the set command
			// topic with non-retained messages only."
			s.log.Error("homie: a retained set: a controller must never publish one", "topic", m.Topic(), "payload", string(m.Payload()))
		}
		outs, fire := s.homieSet(b, levels[0], levels[1], m.Topic(), m.Payload(), m.Retained())
		for _, o := range outs {
			b.publish(o[0], o[1])
		}
		fire()
	}
}

// homieSet runs one set through the fault stages and applies it; it
// returns what the device publishes and the OnSet call to make after.
func (s *Sim) homieSet(b *homieBox, node, prop, topic string, payload []byte, retained bool) ([][2]string, func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d *homieDev
	for _, x := range b.order {
		if x.node == node && (x.power == prop || x.dim == prop) {
			d = x
		}
	}
	if d == nil {
		return nil, func() {}
	}
	d.sets++
	attrs := map[string]any{"property": prop, "value": string(payload)}
	event := func(reason string) func() {
		if s.onSet == nil {
			return func() {}
		}
		ev := SetEvent{Device: d.Name, Topic: topic, Payload: slices.Clone(payload), Retained: retained, Attrs: maps.Clone(attrs), Dropped: reason != "", Reason: reason, At: s.clock.Now()}
		return func() { s.onSet(ev) }
	}
	pt := b.prefix + "/" + node + "/" + prop
	switch {
	case !b.online():
		return nil, event(ReasonOffline)
	case b.asleep:
		return nil, event(ReasonAsleep)
	case d.silent:
		return nil, event(ReasonSilent)
	case d.echoOnly:
		// Homie 5 says it took the value ($target), and never gets there.
		if b.v5 {
			return [][2]string{{pt + "/$target", string(payload)}}, event(ReasonEchoOnly)
		}
		return nil, event(ReasonEchoOnly)
	}
	d.delivered++
	switch {
	case d.delivered <= s.faults.DropFirst:
		return nil, event(ReasonDropFirst)
	case s.faults.DropRate > 0 && s.rand.Float64() < s.faults.DropRate:
		return nil, event(ReasonDropRate)
	}
	var value string
	if prop == d.power {
		switch string(payload) {
		case "true", "false":
			d.on = string(payload) == "true"
			value = string(payload)
		default:
			return nil, event(ReasonNoValidAttribute) // "TRUE", "ON", "1": not a Homie boolean
		}
	} else {
		n, err := strconv.ParseInt(string(payload), 10, 64)
		if err != nil || n < 0 || n > 100 {
			return nil, event(ReasonNoValidAttribute)
		}
		d.brightness = int(n)
		value = string(payload)
	}
	var out [][2]string
	if b.v5 {
		out = append(out, [2]string{pt + "/$target", string(payload)})
	}
	if !d.quiet {
		out = append(out, [2]string{pt, value})
	}
	return out, event("")
}

// homieState is a device's state in Hearth's words, for State. Called
// with Sim.mu held.
func (d *homieDev) state() map[string]any {
	st := map[string]any{"state": "OFF"}
	if d.on {
		st["state"] = "ON"
	}
	if d.dim != "" {
		st["brightness_percent"] = d.brightness
	}
	return st
}

// setHomieOnline is SetOnline of a Homie device's node: the whole device
// goes with it, $state lost (as its will would say) or back to ready
// (sleeping, if asleep).
func (s *Sim) setHomieOnline(d *homieDev, online bool) {
	s.mu.Lock()
	d.online = online
	if online {
		d.silent = false
	}
	word := d.box.stateWord()
	s.mu.Unlock()
	d.box.publish(d.box.prefix+"/$state", word)
	s.log.Info("homie $state changed", "device", d.box.id, "state", word)
}

// wakeHomie and sleepHomie are a sleepy Homie device's wake and sleep:
// it says ready, or sleeping before it sleeps.
func (s *Sim) wakeHomie(b *homieBox) { s.homieSleep(b, false) }

func (s *Sim) sleepHomie(b *homieBox) { s.homieSleep(b, true) }

func (s *Sim) homieSleep(b *homieBox, asleep bool) {
	s.mu.Lock()
	b.asleep = asleep
	word := b.stateWord()
	s.mu.Unlock()
	b.publish(b.prefix+"/$state", word)
	s.log.Info("homie sleep", "device", b.id, "state", word)
}
