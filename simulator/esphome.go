package simulator

// The ESPHome node side, written from ESPHome's MQTT component as its
// documentation and firmware describe it (esphome-docs components/mqtt.rst;
// esphome/components/mqtt/mqtt_{switch,light,cover,lock,component,
// client}.cpp, light/light_json_schema.cpp), not from protocols/esphome:
// each node is its own MQTT client with topic_prefix <base>/<node>. On
// connect it sets its will <prefix>/status offline (retained), publishes
// its birth online (retained), then every entity's state (retained, as
// ESPHome's retain: true default). Commands come on
// <prefix>/<component>/<object_id>/command (and a cover's
// position/command); a switch or lock whose state does not change
// publishes nothing (ESPHome's publish_dedup_), a light and a cover
// publish their state after every command.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// ProtocolESPHome is an entity of an ESPHome node speaking ESPHome's MQTT
// component. Its Device.Name is "<node>/<component>/<object_id>", the
// component the class's (switch, light, cover, lock); BaseTopic is the
// level above the node ("" means DefaultESPHomeBase). Entities of one
// node share one MQTT connection. Faults: Offline, Silent, EchoOnly,
// Unreported, Jam (locks), DropFirst, DropRate; FailSets is a command the
// node logs as unknown and ignores.
const ProtocolESPHome = "esphome"

// DefaultESPHomeBase is the level above a simulated node's name in its
// topic_prefix.
const DefaultESPHomeBase = "esphome"

type espNode struct {
	base, name, prefix string
	clientID           string
	ents               map[string]*espEntity // by "<component>/<object_id>"
	order              []*espEntity
	connMu             sync.RWMutex
	client             mqtt.Client
}

type espEntity struct {
	Device
	node      *espNode
	component string
	objectID  string

	// Guarded by Sim.mu.
	on         bool
	brightness int // 0–255
	position   int // a cover's, 0–100
	locked     bool
	faulty
	sets, delivered int
}

func (s *Sim) newESPHome(i int, d Device, nodes map[string]*espNode) error {
	if d.BaseTopic == "" {
		d.BaseTopic = DefaultESPHomeBase
	}
	parts := strings.Split(d.Name, "/")
	comps := map[string]string{ClassSwitch: "switch", ClassLight: "light", ClassCover: "cover", ClassLock: "lock"}
	if len(parts) != 3 || parts[0] == "" || parts[2] == "" || comps[d.Class] != parts[1] {
		return fmt.Errorf("simulator: Devices[%d] %q: an ESPHome %s is <node>/%s/<object_id>", i, d.Name, d.Class, comps[d.Class])
	}
	key := d.BaseTopic + "/" + parts[0]
	n := nodes[key]
	if n == nil {
		n = &espNode{base: d.BaseTopic, name: parts[0], prefix: key, ents: map[string]*espEntity{}}
		nodes[key] = n
		s.esphomes = append(s.esphomes, n)
	}
	if _, dup := s.ents[d.Name]; dup {
		return fmt.Errorf("simulator: Devices[%d]: name %q is used twice", i, d.Name)
	}
	e := &espEntity{Device: d, node: n, component: parts[1], objectID: parts[2], faulty: faulty{online: true}, brightness: 255, locked: true}
	n.ents[parts[1]+"/"+parts[2]] = e
	n.order = append(n.order, e)
	s.ents[d.Name] = e
	return nil
}

// online: a node is up while none of its entities is marked offline.
// Called with Sim.mu held.
func (n *espNode) online() bool {
	for _, e := range n.order {
		if !e.online {
			return false
		}
	}
	return true
}

func (n *espNode) attach(c mqtt.Client) {
	n.connMu.Lock()
	n.client = c
	n.connMu.Unlock()
}

// publish hands a message to the connection, not awaited; nothing while
// disconnected. QoS 1 (the component's qos: 1), not ESPHome's default 0,
// so that the tests lose none.
func (n *espNode) publish(topic string, retained bool, payload string) {
	n.connMu.RLock()
	defer n.connMu.RUnlock()
	if n.client != nil {
		n.client.Publish(topic, 1, retained, payload)
	}
}

type espEndpoint struct {
	s *Sim
	n *espNode
}

func (e espEndpoint) will() (string, []byte) { return e.n.prefix + "/status", []byte("offline") }

func (e espEndpoint) attach(c mqtt.Client) { e.n.attach(c) }

// announce subscribes to the command topics, publishes the birth, then
// every state, as MQTTClientComponent does after it connects.
func (e espEndpoint) announce(ctx context.Context, c mqtt.Client) error {
	n := e.n
	n.attach(c)
	filters := map[string]byte{n.prefix + "/+/+/command": 0, n.prefix + "/cover/+/position/command": 0}
	if err := await(ctx, c.SubscribeMultiple(filters, e.s.espHandler(n))); err != nil {
		return err
	}
	e.s.mu.Lock()
	up := n.online()
	e.s.mu.Unlock()
	status := "online"
	if !up {
		status = "offline"
	}
	if err := await(ctx, c.Publish(n.prefix+"/status", 1, true, status)); err != nil {
		return err
	}
	if up {
		e.s.espPublishAll(n)
	}
	return nil
}

// espPublishAll publishes every entity's state but the silent ones'.
func (s *Sim) espPublishAll(n *espNode) {
	for _, e := range n.order {
		s.mu.Lock()
		silent := e.silent
		msgs := e.stateMessages()
		s.mu.Unlock()
		if !silent {
			for _, m := range msgs {
				n.publish(m[0], true, m[1])
			}
		}
	}
}

// stateMessages are the entity's state topics and payloads, in ESPHome's
// order (a cover's position before its state). Called with Sim.mu held.
func (e *espEntity) stateMessages() [][2]string {
	t := e.node.prefix + "/" + e.component + "/" + e.objectID + "/"
	switch e.component {
	case "switch":
		return [][2]string{{t + "state", onOffWord(e.on)}}
	case "light":
		// light_json_schema.cpp dump_json: brightness is uint8(b·255)
		// of the float brightness.
		b := uint8(float32(e.brightness) / 255 * 255)
		p, _ := json.Marshal(map[string]any{"color_mode": "brightness", "state": onOffWord(e.on), "brightness": b, "color": map[string]any{}})
		return [][2]string{{t + "state", string(p)}}
	case "cover":
		st := "open"
		if e.position == 0 {
			st = "closed"
		}
		return [][2]string{{t + "position/state", strconv.Itoa(e.position)}, {t + "state", st}}
	case "lock":
		st := "UNLOCKED"
		switch {
		case e.jammed:
			st = "JAMMED"
		case e.locked:
			st = "LOCKED"
		}
		return [][2]string{{t + "state", st}}
	}
	return nil
}

func onOffWord(on bool) string {
	if on {
		return "ON"
	}
	return "OFF"
}

func (s *Sim) espHandler(n *espNode) mqtt.MessageHandler {
	return func(_ mqtt.Client, m mqtt.Message) {
		rest := strings.TrimPrefix(m.Topic(), n.prefix+"/")
		parts := strings.Split(rest, "/")
		if len(parts) < 3 {
			return
		}
		e := n.ents[parts[0]+"/"+parts[1]]
		if e == nil {
			return
		}
		position := len(parts) == 4 && parts[2] == "position"
		if m.Retained() {
			s.log.Warn("esphome: command arrived retained", "entity", e.Name, "payload", string(m.Payload()))
		}
		msgs, ev := s.espCommand(e, m.Topic(), m.Payload(), m.Retained(), position)
		for _, x := range msgs {
			n.publish(x[0], true, x[1])
		}
		if s.onSet != nil {
			s.onSet(ev)
		}
	}
}

// espCommand runs one command through the fault stages and applies it; it
// returns what the node publishes and the SetEvent.
func (s *Sim) espCommand(e *espEntity, topic string, payload []byte, retained, position bool) ([][2]string, SetEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ev := SetEvent{Device: e.Name, Topic: topic, Payload: slices.Clone(payload), Retained: retained, At: s.clock.Now(), Attrs: map[string]any{"command": string(payload)}}
	e.sets++
	reason := ""
	switch {
	case !e.node.online():
		reason = ReasonOffline
	case e.silent:
		reason = ReasonSilent
	case e.echoOnly:
		reason = ReasonEchoOnly
	default:
		e.delivered++
		switch {
		case e.delivered <= s.faults.DropFirst:
			reason = ReasonDropFirst
		case s.faults.DropRate > 0 && s.rand.Float64() < s.faults.DropRate:
			reason = ReasonDropRate
		case e.failSets:
			reason = ReasonSetFailed
		}
	}
	if reason != "" {
		ev.Dropped, ev.Reason = true, reason
		return nil, ev
	}
	changed, ok := e.apply(string(payload), position)
	if !ok {
		ev.Dropped, ev.Reason = true, ReasonNoValidAttribute
		return nil, ev
	}
	if e.quiet || (!changed && (e.component == "switch" || e.component == "lock")) {
		// Unreported; or publish_dedup_: an unchanged state is not
		// published again. The command was applied either way.
		return nil, ev
	}
	return e.stateMessages(), ev
}

// apply changes e as the command says, as the ESPHome components parse
// it; changed says whether the state moved. Called with Sim.mu held.
func (e *espEntity) apply(p string, position bool) (changed, ok bool) {
	switch e.component {
	case "switch": // parse_on_off: ON, OFF, TOGGLE, case-insensitive
		was := e.on
		switch strings.ToUpper(p) {
		case "ON":
			e.on = true
		case "OFF":
			e.on = false
		case "TOGGLE":
			e.on = !e.on
		default:
			return false, false
		}
		return was != e.on, true
	case "light":
		var cmd map[string]any
		if json.Unmarshal([]byte(p), &cmd) != nil {
			return false, false
		}
		if st, ok := cmd["state"].(string); ok {
			switch strings.ToUpper(st) {
			case "ON":
				e.on = true
			case "OFF":
				e.on = false
			case "TOGGLE":
				e.on = !e.on
			}
		}
		if b, ok := cmd["brightness"].(float64); ok {
			e.brightness = int(max(0, min(255, b)))
		}
		return true, true
	case "cover":
		if position {
			v, err := strconv.ParseFloat(p, 64)
			if err != nil {
				return false, false
			}
			e.position = int(max(0, min(100, v)))
			return true, true
		}
		switch strings.ToUpper(p) {
		case "OPEN":
			e.position = 100
		case "CLOSE":
			e.position = 0
		case "STOP":
		case "TOGGLE":
			e.position = 100 - e.position
		default:
			return false, false
		}
		return true, true
	case "lock":
		was := e.locked
		switch strings.ToUpper(p) {
		case "LOCK":
			if !e.jammed {
				e.locked = true
			}
		case "UNLOCK", "OPEN":
			if !e.jammed {
				e.locked = false
			}
		default:
			return false, false
		}
		return was != e.locked || e.jammed, true
	}
	return false, false
}

// espState is an entity's state in Hearth's words, for State.
func (e *espEntity) espState() map[string]any {
	switch e.component {
	case "light":
		return map[string]any{"state": onOffWord(e.on), "brightness": e.brightness}
	case "cover":
		st := "CLOSE"
		if e.position > 0 {
			st = "OPEN"
		}
		return map[string]any{"state": st, "position": e.position}
	case "lock":
		if e.locked {
			return map[string]any{"state": "LOCK"}
		}
		return map[string]any{"state": "UNLOCK"}
	}
	return map[string]any{"state": onOffWord(e.on)}
}

// setESPOnline is SetOnline of a node's entity: the whole node goes with
// it. Going offline, the broker publishes its will (offline); back, the
// node publishes its birth and every state, as after a reconnect.
func (s *Sim) setESPOnline(e *espEntity, online bool) {
	s.mu.Lock()
	e.online = online
	if online {
		e.silent = false
	}
	up := e.node.online()
	s.mu.Unlock()
	if !up {
		e.node.publish(e.node.prefix+"/status", true, "offline")
		return
	}
	e.node.publish(e.node.prefix+"/status", true, "online")
	s.espPublishAll(e.node)
}

// SetCoverPosition moves a simulated ESPHome cover by hand (its wall
// button): the node publishes its position and state.
func (s *Sim) SetCoverPosition(name string, position int) error {
	s.mu.Lock()
	e := s.ents[name]
	if e == nil || e.component != "cover" {
		s.mu.Unlock()
		return fmt.Errorf("%w: %q is no simulated ESPHome cover", ErrUnknownDevice, name)
	}
	e.position = max(0, min(100, position))
	msgs := e.stateMessages()
	s.mu.Unlock()
	for _, m := range msgs {
		e.node.publish(m[0], true, m[1])
	}
	return nil
}
