// Package homie is Hearth's adapter for devices that follow the Homie
// convention (homieiot.github.io; github.com/homieiot/convention), version
// 4 and, where it differs, 5: it encodes a target as payloads on the
// settable properties' set topics, decodes the retained property values
// into Hearth's normalized state, mirrors each device's $state into its
// availability and sleep, and says what the Wi-Fi transport already does
// (Transport). It never decides whether a command succeeded: it passes
// every report on and the dispatcher judges it.
//
// # Topics
//
// Under the service's root, <root> (Homie 4: "homie"; Homie 5:
// "<domain>/5", see ParseBase):
//
//	<root>/<device>/<node>/<property>/set         Hearth → device: the target value, QoS 1, never retained
//	<root>/<device>/<node>/<property>             device → all: the property's value, retained
//	<root>/<device>/$state                        device → all: init, ready, disconnected, sleeping, lost (its will), alert
//	<root>/<device>/<node>/<property>/$datatype   Homie 4: boolean, integer, float, …  (also $format, $settable, $retained)
//	<root>/<device>/$description                  Homie 5: the JSON document of nodes and properties
//	<root>/<device>/<node>/<property>/$target     Homie 5: a value in progress
//
// # Confirmation
//
// Homie has no request id: a set is confirmed by the property's value the
// device publishes after it ("The assigned and processed payload must be
// reflected by the Homie device in the property topic"). Every value is
// passed to the sink with its retain flag, and the dispatcher counts only
// a live one that arrives after the send. The set topic is not a report:
// the echo of Hearth's own set (or anyone's) confirms nothing. A Homie 5
// $target says the device accepted a value and is on its way to it: in
// progress, not confirmed, so it is not reported as state.
//
// Hearth writes only a property the device describes as settable and
// retained, of the datatype the class needs (boolean for on/off, integer
// or float for brightness); anything else fails the Send with a permanent
// error, nothing sent. A property not described yet (its $datatype, or
// the $description, not heard) fails with a transient one.
//
// # Classes
//
//   - switch (<device>/<node>/<on>): state ON/OFF ↔ "true"/"false".
//   - light (<device>/<node>/<on>[,<brightness>]): state as a switch;
//     brightness 0–254 scaled onto the brightness property's $format range
//     (0:100 without one): v = min + b·(max−min)/254, rounded for an
//     integer; the value read back reports the brightness Hearth last wrote
//     for it, else the inverse scaling. Brightness 0 sets on false.
//   - a dimmer (a light whose one property the device describes as an
//     integer or float): OFF and brightness 0 set its minimum, ON alone its
//     maximum, a brightness as above; its value reports state (ON above
//     the minimum) and brightness.
//
// # $state
//
//   - ready: online; for a sleepy device (Device.Sleep.Sleepy) the node
//     status awake, which begins its awake lease (a retained ready,
//     replayed by the broker, begins none).
//   - sleeping: for a sleepy device the node status asleep: its commands
//     wait, queued, for the next ready and nothing is sent meanwhile (a
//     device asleep is not offline); a device not configured sleepy is
//     marked offline, so that nothing is sent into its sleep either.
//   - lost (the will), disconnected, removed (an empty $state), init (not
//     yet ready to operate): offline.
//   - alert: online (connected, operating, something needs a human);
//     logged.
//
// A Homie 5 device whose $description names a root is lost while its
// root's $state is lost (the root's will does not update its children).
//
// The service (the Wi-Fi devices as a whole: there is no bridge) is
// offline once every configured Homie device's $state is lost,
// disconnected or removed (Sink.BridgeState), which opens its breaker;
// online while any one is connected.
package homie

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/mqtt"
)

// Transport is what Wi-Fi does for Hearth: no radio-layer retry, no
// wake-up queue Hearth hands writes to, and the device publishes its
// property values. Its DefaultAttempts is 3.
var Transport = devices.Transport{RadioRetries: false, WakeUpQueue: false, ReportsState: true}

// Sink receives what the devices report. The dispatcher implements it.
type Sink interface {
	Report(device string, state map[string]any, retained bool)
	Availability(device string, online bool)
	BridgeState(service string, online, retained bool)
	NodeStatus(device string, status devices.NodeStatus, retained bool)
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
	// BaseTopic is the root (see ParseBase); "" means DefaultBaseTopic.
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

// written is the last brightness value Hearth wrote to a light and the
// brightness it stood for.
type written struct {
	value      float64
	brightness float64
}

// Adapter speaks Homie for one service.
type Adapter struct {
	service string
	root    Root
	byDev   map[string]entry
	byHomie map[string][]entry // Homie device ID → Hearth's devices on it
	sink    Sink
	log     *slog.Logger
	conn    Conn
	trust   mqtt.Trust

	retainedSets atomic.Uint64

	mu      sync.Mutex
	meta    map[string]Meta    // "<device>/<node>/<property>" → what the device said of it
	states  map[string]State   // configured Homie device ID → its state, its root's lost included
	own     map[string]State   // Homie device ID → the $state it last said itself
	rootOf  map[string]string  // Homie 5 device ID → the root its $description names
	written map[string]written // Hearth device → its last brightness written
}

// New returns an adapter that speaks over conn. A base topic ParseBase
// refuses falls back to DefaultBaseTopic, and a device whose address
// ParseAddress refuses is left out; both are logged (config refuses them
// first).
func New(conn Conn, opts Options) *Adapter {
	a := &Adapter{
		service: opts.Service, conn: conn, log: opts.Logger,
		byDev: map[string]entry{}, byHomie: map[string][]entry{},
		meta: map[string]Meta{}, states: map[string]State{}, own: map[string]State{}, rootOf: map[string]string{}, written: map[string]written{},
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	root, err := ParseBase(opts.BaseTopic)
	if err != nil {
		a.log.Error("homie: bad base topic; using the default", "err", err)
		root = Root{Topic: DefaultBaseTopic, Version: 4}
	}
	a.root = root
	a.trust = mqtt.Trust{Publisher: opts.Publisher, StampProperty: opts.StampProperty, Logger: a.log, What: "homie"}
	for _, d := range opts.Devices {
		addr, err := ParseAddress(d.Address, d.Class)
		if err != nil {
			a.log.Error("homie: device unreachable", "device", d.ID, "err", err)
			continue
		}
		e := entry{dev: d, addr: addr}
		a.byDev[d.ID] = e
		a.byHomie[addr.Device] = append(a.byHomie[addr.Device], e)
	}
	return a
}

// Root returns the service's root topic and Homie version.
func (a *Adapter) Root() Root { return a.root }

// Start subscribes to everything under the root and passes what the
// devices report to sink. Call it once, before the connection runs.
func (a *Adapter) Start(ctx context.Context, sink Sink) error {
	a.sink = sink
	return a.conn.Subscribe(ctx, a.root.Topic+"/#", 1, a.handle)
}

// RetainedSets returns how many retained set messages the broker replayed
// to Hearth: each one a command some other controller left on the
// broker, which the device applies again at every reconnect.
func (a *Adapter) RetainedSets() uint64 { return a.retainedSets.Load() }

// Untrusted returns how many messages were dropped because
// Options.Publisher did not publish them.
func (a *Adapter) Untrusted() uint64 { return a.trust.Dropped() }

// unsupportedError is a target the adapter cannot write: permanent.
type unsupportedError struct{ msg string }

func (e unsupportedError) Error() string   { return "homie: " + e.msg }
func (e unsupportedError) Permanent() bool { return true }

// ErrNotDescribed is wrapped by the transient error of a Send to a
// property the device has not described yet.
var ErrNotDescribed = errors.New("homie: the property is not described yet")

// ErrNoRead is Read's error: Homie has no request that makes a device
// publish its state; its retained values are all there is. Permanent.
var ErrNoRead = unsupportedError{"Homie has no read request: a device's state is the values it published"}

// set is one payload for one property.
type set struct {
	prop, payload string
}

// Send encodes target as the set payloads of the device's properties (see
// Classes) and publishes each QoS 1, not retained, waiting for the
// broker's PUBACK. A nil error means the broker has them. An attribute the
// class cannot write, or a property the device does not describe as
// settable and retained of the right datatype, fails with a permanent
// error before anything is sent.
func (a *Adapter) Send(ctx context.Context, dev devices.Device, target devices.Target) error {
	e, ok := a.byDev[dev.ID]
	if !ok {
		return unsupportedError{fmt.Sprintf("device %s is not on service %s", dev.ID, a.service)}
	}
	sets, remember, err := a.encode(e, target)
	if err != nil {
		return err
	}
	if remember != nil {
		a.mu.Lock()
		a.written[dev.ID] = *remember
		a.mu.Unlock()
	}
	for _, s := range sets {
		topic := a.root.Topic + "/" + e.addr.Device + "/" + e.addr.Node + "/" + s.prop + "/set"
		if err := a.conn.Publish(ctx, topic, 1, false, []byte(s.payload)); err != nil {
			return err
		}
	}
	return nil
}

// describe returns what the device said of prop, checked against the
// datatypes the role takes.
func (a *Adapter) describe(e entry, prop string, datatypes ...string) (Meta, error) {
	key := e.addr.Device + "/" + e.addr.Node + "/" + prop
	a.mu.Lock()
	m, ok := a.meta[key]
	a.mu.Unlock()
	switch {
	case !ok || m.Datatype == "":
		return Meta{}, fmt.Errorf("%w: %s (no $datatype or $description heard)", ErrNotDescribed, key)
	case !m.Settable:
		return Meta{}, unsupportedError{fmt.Sprintf("%s is not settable (the device says $settable false, or nothing)", key)}
	case !m.Retained:
		return Meta{}, unsupportedError{fmt.Sprintf("%s is not retained: a momentary event, no state to reach", key)}
	}
	for _, d := range datatypes {
		if m.Datatype == d {
			return m, nil
		}
	}
	return Meta{}, unsupportedError{fmt.Sprintf("%s is a %s; Hearth writes it as %s", key, m.Datatype, strings.Join(datatypes, " or "))}
}

// encode maps target to the sets of e's properties and the brightness to
// remember.
func (a *Adapter) encode(e entry, t devices.Target) ([]set, *written, error) {
	for k := range t {
		if k != "state" && !(k == "brightness" && e.dev.Class == devices.Light) {
			return nil, nil, unsupportedError{fmt.Sprintf("a Homie %s has no attribute %q here", e.dev.Class, k)}
		}
	}
	state, hasState := t["state"].(string)
	if _, present := t["state"]; present && (!hasState || state != "ON" && state != "OFF") {
		return nil, nil, unsupportedError{fmt.Sprintf("state %v: ON or OFF", t["state"])}
	}
	b, hasB := number(t["brightness"])
	if _, present := t["brightness"]; present && !hasB {
		return nil, nil, unsupportedError{fmt.Sprintf("brightness %v is not a number", t["brightness"])}
	}
	if !hasState && !hasB {
		return nil, nil, unsupportedError{"a target needs state (or a light's brightness)"}
	}
	if e.dev.Class == devices.Light && e.addr.Brightness == "" && a.numeric(e, e.addr.Power) {
		return a.encodeDimmer(e, state, b, hasB)
	}
	if _, err := a.describe(e, e.addr.Power, Boolean); err != nil {
		return nil, nil, err
	}
	if state == "OFF" || (hasB && b <= 0) {
		return []set{{e.addr.Power, "false"}}, nil, nil
	}
	sets := []set{{e.addr.Power, "true"}}
	if !hasB {
		return sets, nil, nil
	}
	if e.addr.Brightness == "" {
		return nil, nil, unsupportedError{fmt.Sprintf("%s names no brightness property (write <on>,<brightness>)", e.addr)}
	}
	s, w, err := a.scale(e, e.addr.Brightness, b)
	if err != nil {
		return nil, nil, err
	}
	return append(sets, s), w, nil
}

// numeric reports whether e's prop is described as an integer or float.
func (a *Adapter) numeric(e entry, prop string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := a.meta[e.addr.Device+"/"+e.addr.Node+"/"+prop]
	return m.Datatype == Integer || m.Datatype == Float
}

// scale maps a brightness 0–254 (above 0) onto prop's $format range: the
// set and what to remember.
func (a *Adapter) scale(e entry, prop string, b float64) (set, *written, error) {
	m, err := a.describe(e, prop, Integer, Float)
	if err != nil {
		return set{}, nil, err
	}
	r, err := ParseRange(m.Format, Range{Min: 0, Max: 100})
	if err != nil {
		return set{}, nil, unsupportedError{fmt.Sprintf("%s/%s: %v", e.addr.Device, prop, err)}
	}
	b = min(b, 254)
	v := r.Min + b*(r.Max-r.Min)/254
	if m.Datatype == Integer {
		v = math.Round(v)
		if v <= r.Min { // above off, at least one step
			v = min(r.Min+1, r.Max)
		}
	} else {
		v = math.Round(v*1000) / 1000
	}
	return set{prop, strconv.FormatFloat(v, 'f', -1, 64)}, &written{value: v, brightness: b}, nil
}

// encodeDimmer maps a light target onto a light whose one property is
// numeric (a dimmer without an on/off property): OFF or brightness 0 is
// its minimum, brightness b scaled as a light's brightness, ON alone its
// maximum.
func (a *Adapter) encodeDimmer(e entry, state string, b float64, hasB bool) ([]set, *written, error) {
	m, err := a.describe(e, e.addr.Power, Integer, Float)
	if err != nil {
		return nil, nil, err
	}
	r, err := ParseRange(m.Format, Range{Min: 0, Max: 100})
	if err != nil {
		return nil, nil, unsupportedError{fmt.Sprintf("%s/%s: %v", e.addr.Device, e.addr.Power, err)}
	}
	switch {
	case state == "OFF" || (hasB && b <= 0):
		return []set{{e.addr.Power, strconv.FormatFloat(r.Min, 'f', -1, 64)}}, &written{value: r.Min, brightness: 0}, nil
	case !hasB:
		b = 254
	}
	s, w, err := a.scale(e, e.addr.Power, b)
	if err != nil {
		return nil, nil, err
	}
	return []set{s}, w, nil
}

// Read fails with ErrNoRead: Homie has no request that reads a device.
func (a *Adapter) Read(context.Context, devices.Device, devices.Target) error { return ErrNoRead }

func (a *Adapter) handle(m mqtt.Message) {
	rest, ok := strings.CutPrefix(m.Topic, a.root.Topic+"/")
	if !ok {
		return
	}
	levels := strings.Split(rest, "/")
	ents := a.byHomie[levels[0]]
	if len(ents) == 0 {
		if len(levels) == 2 && levels[1] == "$state" && a.isRoot(levels[0]) && a.trust.Trusted(m) {
			// Homie 5: the root device of a configured child.
			if s, err := ParseState(m.Payload); err == nil {
				a.lifecycle(levels[0], nil, s, m.Retained)
			}
		}
		return // $broadcast, or a device Hearth does not command
	}
	switch {
	case len(levels) == 2 && levels[1] == "$state":
		if !a.trust.Trusted(m) {
			return
		}
		s, err := ParseState(m.Payload)
		if err != nil {
			a.log.Warn("homie: unreadable $state", "topic", m.Topic, "err", err)
			return
		}
		a.lifecycle(levels[0], ents, s, m.Retained)
	case len(levels) == 2 && levels[1] == "$description" && a.root.Version == 5:
		if !a.trust.Trusted(m) {
			return
		}
		d, err := ParseDescription(m.Payload)
		if err != nil {
			a.log.Warn("homie: unreadable $description", "topic", m.Topic, "err", err)
			return
		}
		a.mu.Lock()
		for k := range a.meta {
			if strings.HasPrefix(k, levels[0]+"/") {
				delete(a.meta, k)
			}
		}
		for k, pm := range d.Props {
			a.meta[levels[0]+"/"+k] = pm
		}
		a.rootOf[levels[0]] = d.Root
		a.mu.Unlock()
		for _, e := range ents {
			for _, p := range e.addr.Properties() {
				if _, ok := d.Props[e.addr.Node+"/"+p]; !ok {
					a.log.Warn("homie: the device's $description has no such property; commands to it fail", "device", e.dev.ID, "property", e.addr.Device+"/"+e.addr.Node+"/"+p)
				}
			}
		}
		if d.Root != "" {
			// The root's $state may have come first: the child follows it.
			a.mu.Lock()
			own, known := a.own[levels[0]]
			a.mu.Unlock()
			if known {
				a.lifecycle(levels[0], ents, own, m.Retained)
			}
		}
	case len(levels) == 2 && levels[1] == "$nodes" && a.root.Version == 4:
		a.exposed(ents, m.Payload, true)
	case len(levels) == 3 && levels[2] == "$properties" && a.root.Version == 4:
		for _, e := range ents {
			if e.addr.Node == levels[1] {
				a.exposed([]entry{e}, m.Payload, false)
			}
		}
	case len(levels) == 3:
		if !a.trust.Trusted(m) {
			return
		}
		a.value(levels, ents, m)
	case len(levels) == 4 && levels[3] == "set":
		if m.Retained {
			// Kept on the broker, replayed to the device at every
			// reconnect: the fault the convention's non-retained rule is
			// for. Hearth never publishes one; it says so when it finds one.
			a.log.Warn("homie: a retained set is on the broker: the device will apply it again at every reconnect; clear it with an empty retained message", "topic", m.Topic, "payload", truncate(m.Payload))
			a.retainedSets.Add(1)
		}
		return // a command, Hearth's own or anyone's: no report
	case len(levels) == 4 && levels[3] == "$target":
		a.log.Debug("homie: a value in progress ($target); it confirms nothing", "topic", m.Topic, "payload", truncate(m.Payload))
	case len(levels) == 4 && a.root.Version == 4 && strings.HasPrefix(levels[3], "$"):
		if !a.trust.Trusted(m) {
			return
		}
		a.attribute(strings.Join(levels[:3], "/"), levels[3], m.Payload)
	}
}

// attribute takes a Homie 4 property attribute.
func (a *Adapter) attribute(key, attr string, p []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m, known := a.meta[key]
	if !known {
		m.Retained = true
	}
	switch attr {
	case "$datatype":
		m.Datatype = string(p)
	case "$format":
		m.Format = string(p)
	case "$settable":
		m.Settable = string(p) == "true"
	case "$retained":
		m.Retained = string(p) != "false"
	default:
		return // $name, $unit
	}
	a.meta[key] = m // described once its $datatype has come
}

// value decodes a property value for the devices whose property it is.
func (a *Adapter) value(levels []string, ents []entry, m mqtt.Message) {
	for _, e := range ents {
		if e.addr.Node != levels[1] {
			continue
		}
		switch levels[2] {
		case e.addr.Power:
			if e.dev.Class == devices.Light && e.addr.Brightness == "" && a.numeric(e, e.addr.Power) {
				if b, v, r, ok := a.brightness(e, levels, m); ok {
					a.sink.Report(e.dev.ID, map[string]any{"state": onOff(v > r.Min), "brightness": b}, m.Retained)
				}
				continue
			}
			on, err := ParseBool(m.Payload)
			if err != nil {
				a.log.Warn("homie: unreadable value", "topic", m.Topic, "err", err)
				continue
			}
			a.sink.Report(e.dev.ID, map[string]any{"state": onOff(on)}, m.Retained)
		case e.addr.Brightness:
			if e.addr.Brightness == "" {
				continue
			}
			if b, _, _, ok := a.brightness(e, levels, m); ok {
				a.sink.Report(e.dev.ID, map[string]any{"brightness": b}, m.Retained)
			}
		}
	}
}

// brightness reads a numeric property's value as Hearth's brightness: the
// one Hearth last wrote for that value, else the inverse scaling of its
// $format range; with the value and the range.
func (a *Adapter) brightness(e entry, levels []string, m mqtt.Message) (float64, float64, Range, bool) {
	key := strings.Join(levels, "/")
	a.mu.Lock()
	meta := a.meta[key]
	w, wrote := a.written[e.dev.ID]
	a.mu.Unlock()
	dt := meta.Datatype
	if dt != Integer {
		dt = Float
	}
	v, err := ParseNumber(m.Payload, dt)
	if err != nil {
		a.log.Warn("homie: unreadable value", "topic", m.Topic, "err", err)
		return 0, 0, Range{}, false
	}
	r, err := ParseRange(meta.Format, Range{Min: 0, Max: 100})
	if err != nil || v < r.Min || v > r.Max {
		a.log.Warn("homie: a brightness outside its format", "topic", m.Topic, "value", v, "format", meta.Format)
		return 0, 0, Range{}, false
	}
	b := math.Round((v - r.Min) * 254 / (r.Max - r.Min))
	if wrote && w.value == v {
		b = w.brightness
	}
	return b, v, r, true
}

// exposed warns of a configured node or property that a Homie 4 device's
// $nodes or a node's $properties does not list: commands to it would
// reach nothing. nodes says the list is $nodes, else $properties.
func (a *Adapter) exposed(ents []entry, list []byte, nodes bool) {
	ids := strings.Split(string(list), ",")
	for _, e := range ents {
		want := e.addr.Properties()
		if nodes {
			want = []string{e.addr.Node}
		}
		for _, w := range want {
			if !slices.Contains(ids, w) {
				a.log.Warn("homie: the device does not list a configured node or property", "device", e.dev.ID, "address", e.addr.String(), "missing", w, "list", truncate(list))
			}
		}
	}
}

// isRoot reports whether a Homie 5 $description named id as the root of
// a configured device.
func (a *Adapter) isRoot(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, r := range a.rootOf {
		if r == id {
			return true
		}
	}
	return false
}

// lifecycle takes device id's own $state s: the state of a configured
// device is its own, or lost while its Homie 5 root device is lost (the
// convention: the root's will does not update its children). It passes
// the service's state to BridgeState, then each affected configured
// device's state to its Hearth devices (see the package doc). ents are
// id's devices (none for a root Hearth does not command).
func (a *Adapter) lifecycle(id string, ents []entry, s State, retained bool) {
	a.mu.Lock()
	a.own[id] = s
	type change struct {
		ents []entry
		s    State
	}
	var changes []change
	for dev, devEnts := range a.byHomie {
		if dev != id && a.rootOf[dev] != id {
			continue
		}
		eff, ok := a.own[dev]
		if !ok {
			continue // its own state not heard yet
		}
		if r := a.rootOf[dev]; r != "" && a.own[r] == StateLost {
			eff = StateLost
		}
		if dev != id && a.states[dev] == eff {
			continue // a root's change that does not change the child
		}
		a.states[dev] = eff
		changes = append(changes, change{devEnts, eff})
	}
	some, all := false, len(a.states) == len(a.byHomie)
	for _, v := range a.states {
		some = some || v.Up()
	}
	a.mu.Unlock()
	switch {
	case some:
		a.sink.BridgeState(a.service, true, retained)
	case all:
		a.sink.BridgeState(a.service, false, retained)
	}
	for _, c := range changes {
		a.apply(c.ents, c.s, retained)
	}
}

// apply passes a device's (effective) $state s to its Hearth devices.
func (a *Adapter) apply(ents []entry, s State, retained bool) {
	if s == StateAlert && len(ents) > 0 {
		a.log.Warn("homie: the device says $state alert: something needs a human", "homie_device", ents[0].addr.Device)
	}
	for _, e := range ents {
		sleepy := e.dev.Sleep.Sleepy
		switch {
		case s == StateReady && sleepy:
			a.sink.NodeStatus(e.dev.ID, devices.NodeAwake, retained)
		case s == StateReady, s == StateAlert:
			a.sink.Availability(e.dev.ID, true)
		case s == StateSleeping && sleepy:
			// Asleep first: the availability that follows begins no lease.
			a.sink.NodeStatus(e.dev.ID, devices.NodeAsleep, retained)
			a.sink.Availability(e.dev.ID, true)
		case s == StateSleeping:
			a.log.Warn("homie: a device not configured sleepy says $state sleeping; marked offline until ready (set sleepy: true and wake_interval)", "device", e.dev.ID)
			a.sink.Availability(e.dev.ID, false)
		case sleepy:
			a.sink.NodeStatus(e.dev.ID, devices.NodeDead, retained)
		default:
			a.sink.Availability(e.dev.ID, false)
		}
	}
}

func onOff(on bool) string {
	if on {
		return "ON"
	}
	return "OFF"
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
