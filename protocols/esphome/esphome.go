// Package esphome is Hearth's adapter for ESPHome nodes over ESPHome's MQTT
// component (not its native API: docs/ESPHOME.md says why): it encodes a
// target as the commands ESPHome's MQTT components read, decodes their
// state topics and the node's birth and will into Hearth's normalized
// state and availability, answers reads from the node's live reports, and
// says what the transport already does (Transport). It never decides
// whether a command succeeded: it passes every report on and the
// dispatcher judges it.
//
// # Topics
//
// Topic layout as ESPHome's MQTT component builds it
// (esphome/components/mqtt/mqtt_component.cpp, get_default_topic_for_;
// esphome-docs components/mqtt.rst), each node's topic_prefix set to
// <base>/<node> (base "esphome" by default, DefaultBaseTopic):
//
//	<base>/<node>/<component>/<object_id>/command            Hearth → node: ON, {"state":"ON",…}, OPEN, LOCK
//	<base>/<node>/<component>/<object_id>/state              node → all: ON, {"state":"ON",…}, open, LOCKED (retained by default)
//	<base>/<node>/cover/<object_id>/position/command         Hearth → node: 0–100
//	<base>/<node>/cover/<object_id>/position/state           node → all: 0–100
//	<base>/<node>/status                                     node → all: online (birth), offline (will), retained
//
// Commands go out QoS 1, never retained (command_retain: false is
// ESPHome's default too). The command topics Hearth hears back (its own
// echo, or anyone's) are ignored.
//
// # Confirmation
//
// ESPHome has no request id and no reply: only a state report after the
// send confirms, and the dispatcher judges that. A state the broker
// replays from its retained store (ESPHome retains state by default) is
// passed on as retained: old news, which confirms nothing.
//
// # Reads
//
// ESPHome's MQTT component has no "get": a node publishes a state when it
// changes and every state once after each connect (after its birth), and
// never repeats an unchanged one (its switches and locks drop a state
// equal to the last: publish_dedup_). Read therefore answers from the
// adapter's record: the newest state the node published live (heard as it
// was published, not replayed from the retained store) since its latest
// birth, while its status is still online. That is the node's current
// state, since it would have published any change since. Without one (the
// node offline, or silent since Hearth started) Read fails with
// ErrNoLiveState: the dispatcher treats the state as unknown, so a risky
// action (an unlock, opening a garage door) ends state_unknown with
// nothing sent. A command to the state a node is in already draws no
// report; the protocol's default read_back lets the read after an
// unconfirmed attempt end it succeeded.
//
// # Availability
//
// <node>/status goes to Sink.Availability for every device on that node.
// The service is online while any of its nodes last said online and
// offline once every one of them said offline (Sink.BridgeState): a dead
// access point opens the service's breaker, one unplugged node marks
// only its own devices offline.
package esphome

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"strings"
	"sync"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/mqtt"
)

// DefaultBaseTopic is the base topic of Hearth's ESPHome services: each
// node's topic_prefix is <DefaultBaseTopic>/<node>.
const DefaultBaseTopic = "esphome"

// Transport is what Wi-Fi does for Hearth: no radio-layer retry, no
// wake-up queue, and a node publishes a state after each change. Its
// DefaultAttempts is 3.
var Transport = devices.Transport{RadioRetries: false, WakeUpQueue: false, ReportsState: true}

// ErrNoLiveState is wrapped by the error of a Read that has no live state
// to answer with (see Reads).
var ErrNoLiveState = errors.New("esphome: no live state of the entity since its node's last birth (ESPHome's MQTT has no get)")

// Sink receives what the nodes report. The dispatcher implements it.
type Sink interface {
	Report(device string, state map[string]any, retained bool)
	Availability(device string, online bool)
	BridgeState(service string, online, retained bool)
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
	// ParseAddress.
	Devices []devices.Device
	Logger  *slog.Logger
	// Publisher and StampProperty: as zwavejs.Options, the only username
	// whose messages count.
	Publisher     string
	StampProperty string
}

type entry struct {
	dev  devices.Device
	addr Address
}

// known is what the adapter last heard of one entity.
type known struct {
	state map[string]any // merged: the newest value of each attribute
	live  bool           // some of it heard live since the node's latest birth
}

// Adapter speaks ESPHome's MQTT component for one service.
type Adapter struct {
	service string
	base    string
	byDev   map[string]entry
	byNode  map[string][]entry
	byAddr  map[Address]entry
	sink    Sink
	log     *slog.Logger
	conn    Conn
	trust   mqtt.Trust

	mu      sync.Mutex
	known   map[string]*known  // device ID → its entity's state
	online  map[string]bool    // node → what its status last said
	written map[string]float64 // device ID → the brightness Hearth last sent
}

// New returns an adapter that speaks over conn. A device whose address
// ParseAddress refuses is logged and left out (config refuses it first).
func New(conn Conn, opts Options) *Adapter {
	a := &Adapter{
		service: opts.Service, base: opts.BaseTopic, conn: conn, log: opts.Logger,
		byDev: map[string]entry{}, byNode: map[string][]entry{}, byAddr: map[Address]entry{},
		known: map[string]*known{}, online: map[string]bool{}, written: map[string]float64{},
	}
	if a.base == "" {
		a.base = DefaultBaseTopic
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.trust = mqtt.Trust{Publisher: opts.Publisher, StampProperty: opts.StampProperty, Logger: a.log, What: "esphome"}
	for _, d := range opts.Devices {
		addr, err := ParseAddress(d.Address, d.Class)
		if err != nil {
			a.log.Error("esphome: device left out", "device", d.ID, "err", err)
			continue
		}
		e := entry{d, addr}
		a.byDev[d.ID] = e
		a.byNode[addr.Node] = append(a.byNode[addr.Node], e)
		a.byAddr[addr] = e
		a.known[d.ID] = &known{state: map[string]any{}}
	}
	return a
}

// Start subscribes to everything under the base topic and passes what the
// nodes report to sink. Call it once, before the connection runs.
func (a *Adapter) Start(ctx context.Context, sink Sink) error {
	a.sink = sink
	return a.conn.Subscribe(ctx, a.base+"/#", 1, a.handle)
}

// Untrusted returns how many messages were dropped because
// Options.Publisher did not publish them.
func (a *Adapter) Untrusted() uint64 { return a.trust.Dropped() }

// Send publishes target's commands (Encode) to the device's node, QoS 1,
// not retained, waiting for each PUBACK. A nil error means the broker has
// them, not that the node acted on them. A target ESPHome cannot carry is
// a permanent error, with nothing sent.
func (a *Adapter) Send(ctx context.Context, dev devices.Device, target devices.Target) error {
	e, ok := a.byDev[dev.ID]
	if !ok {
		return unsupportedError{fmt.Sprintf("device %s is not on service %s", dev.ID, a.service)}
	}
	msgs, err := Encode(e.addr, target)
	if err != nil {
		return err
	}
	if b, ok := number(target["brightness"]); ok && e.addr.Component == ComponentLight && b > 0 {
		a.mu.Lock()
		a.written[dev.ID] = min(b, 254)
		a.mu.Unlock()
	}
	prefix := a.base + "/" + e.addr.Node + "/"
	for _, m := range msgs {
		if err := a.conn.Publish(ctx, prefix+m.Topic, 1, false, []byte(m.Payload)); err != nil {
			return err
		}
	}
	return nil
}

// LinkLost forgets every state heard live: while Hearth's own MQTT
// connection was down it may have missed a change (ESPHome publishes at
// QoS 0 by default, and no broker keeps those for Hearth), so what it heard
// before is no answer to a read. The states the broker replays at the
// resubscribe are retained, old news; the next live one counts again.
// Safe for concurrent use.
func (a *Adapter) LinkLost() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, k := range a.known {
		k.live = false
	}
}

// Read reports the entity's live state (see Reads) as the read's answer,
// or fails with ErrNoLiveState, or for a node whose status is not online.
func (a *Adapter) Read(_ context.Context, dev devices.Device, _ devices.Target) error {
	e, ok := a.byDev[dev.ID]
	if !ok {
		return unsupportedError{fmt.Sprintf("device %s is not on service %s", dev.ID, a.service)}
	}
	a.mu.Lock()
	k := a.known[dev.ID]
	up, heard := a.online[e.addr.Node]
	var state map[string]any
	if k.live && up {
		state = maps.Clone(k.state)
	}
	a.mu.Unlock()
	switch {
	case !heard || !up:
		return fmt.Errorf("%w: node %s is not online", ErrNoLiveState, e.addr.Node)
	case state == nil:
		return fmt.Errorf("%w: %s has published nothing since Hearth heard its node's birth", ErrNoLiveState, e.addr)
	}
	a.sink.Report(dev.ID, state, false)
	return nil
}

func (a *Adapter) handle(m mqtt.Message) {
	rest, ok := strings.CutPrefix(m.Topic, a.base+"/")
	if !ok {
		return
	}
	node, ent, sub, ok := Split(rest)
	if !ok || len(a.byNode[node]) == 0 {
		return
	}
	if sub == "status" {
		if !a.trust.Trusted(m) {
			return
		}
		up, ok := ParseStatus(m.Payload)
		if !ok {
			a.log.Warn("esphome: unreadable status (ESPHome's birth online, will offline)", "topic", m.Topic, "payload", truncate(m.Payload))
			return
		}
		a.availability(node, up, m.Retained)
		return
	}
	e, ok := a.byAddr[ent]
	if !ok || (sub != SubState && sub != SubPositionState) {
		return // commands (ours echoed, or anyone's), other entities, debug logs
	}
	if !a.trust.Trusted(m) {
		return
	}
	var state map[string]any
	var err error
	if sub == SubPositionState {
		if ent.Component != ComponentCover {
			return
		}
		state, err = DecodePosition(m.Payload)
	} else {
		state, err = DecodeState(ent.Component, m.Payload)
	}
	if err != nil {
		a.log.Warn("esphome: unreadable state", "topic", m.Topic, "err", err)
		return
	}
	if len(state) == 0 {
		return
	}
	a.mu.Lock()
	k := a.known[e.dev.ID]
	if e.addr.Component == ComponentCover && sub == SubState {
		// ESPHome publishes position/state before state: "open" at the
		// position heard with it (a cover without position is open at 100).
		if _, has := state["position"]; !has && state["state"] == "OPEN" {
			state["position"] = 100.0
			if p, ok := number(k.state["position"]); ok {
				state["position"] = p
			}
		}
	}
	if b, ok := number(state["brightness"]); ok {
		if w, ok := a.written[e.dev.ID]; ok && math.Abs(w-b) <= 1 {
			state["brightness"] = w
		}
	}
	maps.Copy(k.state, state)
	if !m.Retained {
		k.live = true
	}
	a.mu.Unlock()
	a.sink.Report(e.dev.ID, state, m.Retained)
}

// availability records node's status, passes the service's state to
// BridgeState once known, then the node's to its devices. A birth or a
// will ends what was heard live before it: after a birth the node
// publishes every state again.
func (a *Adapter) availability(node string, up, retained bool) {
	a.mu.Lock()
	a.online[node] = up
	if !retained {
		for _, e := range a.byNode[node] {
			a.known[e.dev.ID].live = false
		}
	}
	some, all := false, len(a.online) == len(a.byNode)
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
	for _, e := range a.byNode[node] {
		a.sink.Availability(e.dev.ID, up)
	}
}
