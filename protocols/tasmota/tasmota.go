// Package tasmota is Hearth's adapter for Tasmota devices over MQTT: it
// encodes a target as Tasmota commands, decodes the devices' stat and
// tele reports and their LWT into Hearth's normalized state and
// availability, and says what the transport already does (Transport). It
// never decides whether a command succeeded: it passes every report on
// and the dispatcher judges it.
//
// # Topics
//
// Topic layout as documented by Tasmota's MQTT page
// (https://tasmota.github.io/docs/MQTT/), for the default FullTopic
// %prefix%/%topic%/ (any FullTopic with %prefix% and %topic% as whole
// levels is taken: ParseFullTopic):
//
//	cmnd/<topic>/<Command>   Hearth → device: the plain parameter ("ON", "50"); empty is a query
//	stat/<topic>/RESULT      device → all: JSON answer to a command ({"POWER":"ON"})
//	stat/<topic>/POWER<n>    device → all: ON|OFF after each power change (retained with PowerRetain 1)
//	stat/<topic>/SHUTTER<n>  device → all: a shutter's position once it stopped
//	stat/<topic>/STATUS10    device → all: answer to Status 10 ({"StatusSNS":{…,"Shutter1":{…}}})
//	tele/<topic>/STATE       device → all: JSON state every TelePeriod
//	tele/<topic>/SENSOR      device → all: JSON sensors every TelePeriod, shutters included
//	tele/<topic>/LWT         device → all: Online, or Offline (its will), retained
//
// Hearth subscribes to stat and tele only: the echo of its own cmnd is
// never heard, let alone taken as a confirmation. A device's address is
// <topic> or <topic>/<n> (ParseAddress), n the relay (POWER<n>) or
// shutter (ShutterPosition<n>) from 1 to 8; the mappings are Encode's and
// Decode's. Commands are published QoS 1 and never retained: a retained
// cmnd is replayed to the device at each of its reconnects, the classic
// cause of Tasmota relays that switch by themselves ("ghost switching",
// MQTT, "Retained MQTT Messages").
//
// # Availability
//
// Each device's LWT goes to Sink.Availability of every Hearth device at
// that Topic. The service as a whole is online while at least one of its
// Topics last said Online, and offline once every one of them said
// Offline: Sink.BridgeState then opens its breaker, as a bridge's will
// does. A service of one device (or one Tasmota with several relays) has
// the breaker of that device's will.
package tasmota

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"sync"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/mqtt"
)

// Transport is what Tasmota's transport does for Hearth: Wi-Fi and MQTT
// QoS 1 to the broker, with no radio layer that retries a lost command
// (a device that was reconnecting misses it), no queue for a sleeping
// device, and a stat report after every change. Its DefaultAttempts is 3.
var Transport = devices.Transport{RadioRetries: false, WakeUpQueue: false, ReportsState: true}

// Sink receives what the devices report. The dispatcher implements it.
type Sink interface {
	// Report passes a state report of device (Hearth's device ID);
	// retained is true when the broker replayed it from its retained
	// store (PowerRetain's stat/POWER), so it is old news.
	Report(device string, state map[string]any, retained bool)
	// Availability passes the device's LWT.
	Availability(device string, online bool)
	// BridgeState passes whether the service is reachable at all: false
	// once every Topic's LWT says Offline.
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
	// Service is the service name the adapter serves.
	Service string
	// FullTopic is the devices' FullTopic; "" means DefaultFullTopic. It
	// must parse (ParseFullTopic): New fails otherwise.
	FullTopic string
	// Devices are the devices this service reaches; their Address is
	// <topic> or <topic>/<n> (ParseAddress), "" meaning the device's ID.
	Devices []devices.Device
	Logger  *slog.Logger
	// Publisher, when set, is the only username whose messages count
	// (the account every Tasmota of the service logs in with, MqttUser);
	// others are dropped and counted (Untrusted). See
	// zigbee2mqtt.Options.Publisher.
	Publisher string
	// StampProperty is the key of the user property that carries the
	// publisher's username; unused without Publisher.
	StampProperty string
}

type entry struct {
	dev  devices.Device
	addr Address
}

// Adapter speaks Tasmota's MQTT commands for one service.
type Adapter struct {
	service string
	full    FullTopic
	byTopic map[string][]entry // Tasmota Topic → its Hearth devices
	addrs   map[string]Address // device ID → address
	sink    Sink
	log     *slog.Logger
	conn    Conn
	trust   mqtt.Trust

	mu      sync.Mutex
	lwt     map[string]bool            // Topic → its last LWT (online), once heard
	written map[string]map[int]float64 // device ID → Dimmer → the brightness Hearth sent as it
}

// New returns an adapter that speaks over conn. It fails on a FullTopic
// or device address that cannot be Tasmota's.
func New(conn Conn, opts Options) (*Adapter, error) {
	full, err := ParseFullTopic(opts.FullTopic)
	if err != nil {
		return nil, fmt.Errorf("tasmota: %w", err)
	}
	a := &Adapter{
		service: opts.Service,
		full:    full,
		byTopic: map[string][]entry{},
		addrs:   map[string]Address{},
		log:     opts.Logger,
		conn:    conn,
		lwt:     map[string]bool{},
		written: map[string]map[int]float64{},
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.trust = mqtt.Trust{Publisher: opts.Publisher, StampProperty: opts.StampProperty, Logger: a.log, What: "tasmota"}
	for _, d := range opts.Devices {
		s := d.Address
		if s == "" {
			s = d.ID
		}
		addr, err := ParseAddress(s)
		if err != nil {
			return nil, fmt.Errorf("tasmota: device %s: %w", d.ID, err)
		}
		a.addrs[d.ID] = addr
		a.byTopic[addr.Topic] = append(a.byTopic[addr.Topic], entry{d, addr})
	}
	return a, nil
}

// Start subscribes to the stat and tele topics of every device and passes
// what they report to sink. Call it once, before the connection runs.
func (a *Adapter) Start(ctx context.Context, sink Sink) error {
	a.sink = sink
	for _, p := range []string{PrefixStatus, PrefixTelemetry} {
		if err := a.conn.Subscribe(ctx, a.full.Filter(p), 1, a.handle); err != nil {
			return err
		}
	}
	return nil
}

// Send publishes target's commands (Encode) to the device, each QoS 1,
// not retained, in order, waiting for each PUBACK. A nil error means the
// broker has them, not that the device acted on them. A target Tasmota
// cannot carry is an error whose Permanent method returns true, with
// nothing sent.
func (a *Adapter) Send(ctx context.Context, dev devices.Device, target devices.Target) error {
	addr, err := a.address(dev)
	if err != nil {
		return err
	}
	cmds, err := Encode(dev.Class, addr, target)
	if err != nil {
		return err
	}
	if b, ok := number(target["brightness"]); ok && dev.Class == devices.Light {
		a.mu.Lock()
		w := a.written[dev.ID]
		if w == nil {
			w = map[int]float64{}
			a.written[dev.ID] = w
		}
		w[DimmerOf(b)] = min(b, 254)
		a.mu.Unlock()
	}
	for _, c := range cmds {
		if err := a.conn.Publish(ctx, a.full.Topic(PrefixCommand, addr.Topic, c.Name), 1, false, []byte(c.Payload)); err != nil {
			return err
		}
	}
	return nil
}

// Read publishes the device's query (ReadCommand), QoS 1, not retained,
// and waits for the PUBACK. The device answers, if it does, on stat,
// which reaches the dispatcher as an ordinary report.
func (a *Adapter) Read(ctx context.Context, dev devices.Device, _ devices.Target) error {
	addr, err := a.address(dev)
	if err != nil {
		return err
	}
	c := ReadCommand(dev.Class, addr)
	return a.conn.Publish(ctx, a.full.Topic(PrefixCommand, addr.Topic, c.Name), 1, false, []byte(c.Payload))
}

// DeviceWills reports true: every Tasmota is its own MQTT client with its
// own will (its LWT), so one that has not said Online is not listening,
// even while another device of the service is. The dispatcher sends a
// device's fresh read after the start only once its own LWT said Online.
func (a *Adapter) DeviceWills() bool { return true }

// Untrusted returns how many messages on the devices' topics were dropped
// since New because Options.Publisher did not publish them.
func (a *Adapter) Untrusted() uint64 { return a.trust.Dropped() }

func (a *Adapter) address(dev devices.Device) (Address, error) {
	if addr, ok := a.addrs[dev.ID]; ok {
		return addr, nil
	}
	s := dev.Address
	if s == "" {
		s = dev.ID
	}
	addr, err := ParseAddress(s)
	if err != nil {
		return Address{}, permanentError{err.Error()}
	}
	return addr, nil
}

func (a *Adapter) handle(m mqtt.Message) {
	prefix, topic, cmd, ok := a.full.Split(m.Topic)
	if !ok {
		return
	}
	entries := a.byTopic[topic]
	if len(entries) == 0 || (prefix != PrefixStatus && prefix != PrefixTelemetry) {
		return // another device, or a FullTopic whose literal levels look like a prefix
	}
	if !a.trust.Trusted(m) {
		return
	}
	if prefix == PrefixTelemetry && cmd == "LWT" {
		online, ok := parseLWT(m.Payload)
		if !ok {
			a.log.Warn("tasmota: unreadable LWT", "topic", m.Topic, "payload", truncate(m.Payload))
			return
		}
		for _, e := range entries {
			a.sink.Availability(e.dev.ID, online)
		}
		a.serviceState(topic, online, m.Retained)
		return
	}
	for _, e := range entries {
		state, ok := Decode(e.dev.Class, e.addr.Index, cmd, m.Payload)
		if !ok {
			a.log.Debug("tasmota: payload not read", "topic", m.Topic, "payload", truncate(m.Payload))
			return
		}
		if b, ok := state["brightness"].(float64); ok {
			a.mu.Lock()
			if w, ok := a.written[e.dev.ID][DimmerOf(b)]; ok {
				state["brightness"] = w
			}
			a.mu.Unlock()
		}
		a.sink.Report(e.dev.ID, maps.Clone(state), m.Retained)
	}
}

// serviceState records topic's LWT and passes the service's state once it
// is known: online while any Topic said Online, offline once all said
// Offline. It passes it at every LWT (the dispatcher ignores a repeat), so
// that the retained LWTs replayed after Hearth reconnects say it again.
func (a *Adapter) serviceState(topic string, online, retained bool) {
	a.mu.Lock()
	a.lwt[topic] = online
	up, known := false, len(a.lwt) == len(a.byTopic)
	for _, v := range a.lwt {
		if v {
			up, known = true, true
		}
	}
	a.mu.Unlock()
	if known {
		a.sink.BridgeState(a.service, up, retained)
	}
}

func truncate(p []byte) string {
	if len(p) > 120 {
		return string(p[:117]) + "..."
	}
	return string(p)
}
