// Package zigbee2mqtt is Hearth's adapter for Zigbee2MQTT: it encodes a
// target as a set message, decodes the bridge's state, availability and
// bridge-state messages, and says what the Zigbee transport already does.
//
// Topic layout as documented by Zigbee2MQTT's "MQTT Topics and Messages"
// (https://www.zigbee2mqtt.io/guide/usage/mqtt_topics_and_messages.html):
//
//	<base_topic>/<friendly_name>/set           Hearth → device: JSON target
//	<base_topic>/<friendly_name>/get           Hearth → device: {"<attribute>":""}, to read state
//	<base_topic>/<friendly_name>               device → all: JSON state
//	<base_topic>/<friendly_name>/availability  "online"/"offline", or {"state":"online"}
//	<base_topic>/bridge/state                  "online"/"offline", or {"state":"online"}
//	<base_topic>/bridge/devices                retained JSON array: every device's definition and exposes
//	<base_topic>/bridge/logging                {"level","message","namespace"}: a failed set (logging.go)
//
// Friendly names may contain '/', so the adapter subscribes to
// <base_topic>/# and matches exact configured names. It never decides
// whether a command succeeded: it passes every report on and the
// dispatcher judges it.
package zigbee2mqtt

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/mqtt"
)

// DefaultBaseTopic is Zigbee2MQTT's default base_topic.
const DefaultBaseTopic = "zigbee2mqtt"

// DefaultMaxAttempts is Hearth's default attempt count for Zigbee devices:
// 2, because the Zigbee stack already retries at the MAC and APS layers, so
// more application attempts only add load to a mesh that is struggling.
const DefaultMaxAttempts = 2

// Transport is what Zigbee already does for Hearth: the MAC and APS layers
// retry each frame (radio retries) and Zigbee2MQTT publishes a device's
// state after a change; a parent buffers messages for a sleeping end device
// for seconds only, which is no wake-up queue. Its DefaultAttempts is 2,
// DefaultMaxAttempts.
var Transport = devices.Transport{RadioRetries: true, WakeUpQueue: false, ReportsState: true}

// Sink receives what the bridge reports. The dispatcher implements it.
type Sink interface {
	// Report passes a state report of device (Hearth's device ID);
	// retained is true when the broker replayed it from its retained store
	// on subscribe, so it is old news.
	Report(device string, state map[string]any, retained bool)
	// Availability passes the device's availability as the bridge sees it.
	Availability(device string, online bool)
	// BridgeState passes whether the bridge itself is online; retained is
	// true when the broker replayed it from its retained store (the state
	// Zigbee2MQTT last announced, perhaps long ago).
	BridgeState(service string, online, retained bool)
	// Capabilities passes what the bridge says device can do (from
	// bridge/devices), or nil when the bridge no longer describes it
	// (unknown: its class's rules apply). Called for every configured
	// device of the service each time the bridge publishes its list.
	Capabilities(device string, caps *devices.Capabilities)
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
	// BaseTopic is Zigbee2MQTT's base_topic; "" means DefaultBaseTopic.
	BaseTopic string
	// Devices are the devices this service reaches; their Address is the
	// friendly_name.
	Devices []devices.Device
	Logger  *slog.Logger
	// Publisher, when set, is the only username whose reports count: a
	// message on the bridge's topics (a state report, an availability, the
	// bridge's state) whose StampProperty user property is not Publisher is
	// dropped, confirms nothing and is counted (Untrusted), with a warning
	// at most once a minute. For a broker that stamps every message with
	// its publisher's authenticated username, as the embedded broker does
	// (broker.Options.StampUsernameProperty); "" trusts the topic itself
	// (an external broker, whose ACL must then keep everyone but the
	// bridge off it).
	Publisher string
	// StampProperty is the key of that user property ("hearth-username");
	// unused without Publisher.
	StampProperty string
}

// Adapter speaks Zigbee2MQTT's MQTT API for one service.
type Adapter struct {
	service string
	base    string
	byName  map[string]string // friendly_name → device ID
	ids     []string          // the device IDs, in configuration order
	defsMu  sync.Mutex
	defs    map[string]string // device ID → its definition last passed, encoded; "" for none
	sink    Sink
	log     *slog.Logger
	conn    Conn
	online  atomic.Bool
	trust   mqtt.Trust
}

// New returns an adapter that speaks over conn.
func New(conn Conn, opts Options) *Adapter {
	a := &Adapter{
		service: opts.Service,
		base:    opts.BaseTopic,
		byName:  make(map[string]string, len(opts.Devices)),
		defs:    make(map[string]string, len(opts.Devices)),
		log:     opts.Logger,
		conn:    conn,
	}
	if a.base == "" {
		a.base = DefaultBaseTopic
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.trust = mqtt.Trust{Publisher: opts.Publisher, StampProperty: opts.StampProperty, Logger: a.log, What: "zigbee2mqtt"}
	for _, d := range opts.Devices {
		name := d.Address
		if name == "" {
			name = d.ID
		}
		a.byName[name] = d.ID
		a.ids = append(a.ids, d.ID)
	}
	return a
}

// Start subscribes to everything under the base topic and passes what the
// bridge reports to sink. Call it once, before the connection runs.
func (a *Adapter) Start(ctx context.Context, sink Sink) error {
	a.sink = sink
	return a.conn.Subscribe(ctx, a.base+"/#", 1, a.handle)
}

// Send publishes target to the device's set topic, QoS 1, not retained,
// and waits for the broker's PUBACK. A nil error means the bridge's broker
// has the message, not that the device acted on it.
func (a *Adapter) Send(ctx context.Context, dev devices.Device, target devices.Target) error {
	payload, err := json.Marshal(target)
	if err != nil {
		return fmt.Errorf("zigbee2mqtt: encode target: %w", err)
	}
	return a.conn.Publish(ctx, a.topic(dev)+"/set", 1, false, payload)
}

// Read publishes a get for the attributes target names to the device's
// get topic, QoS 1, not retained, and waits for the broker's PUBACK: each
// attribute with an empty value, as Zigbee2MQTT's device pages document
// ({"state": ""} reads a lock, whose report then carries lock_state too,
// which cannot be read by itself; {"position": ""} reads a cover). The
// device answers, if it does, with an ordinary state report.
func (a *Adapter) Read(ctx context.Context, dev devices.Device, target devices.Target) error {
	get := make(map[string]string, len(target))
	for _, k := range target.Attributes() {
		get[k] = ""
	}
	payload, err := json.Marshal(get)
	if err != nil {
		return fmt.Errorf("zigbee2mqtt: encode get: %w", err)
	}
	return a.conn.Publish(ctx, a.topic(dev)+"/get", 1, false, payload)
}

// BridgeOnline reports whether the bridge last said it was online.
func (a *Adapter) BridgeOnline() bool { return a.online.Load() }

// Untrusted returns how many messages on the bridge's topics were dropped
// since New because Options.Publisher did not publish them.
func (a *Adapter) Untrusted() uint64 { return a.trust.Dropped() }

func (a *Adapter) topic(dev devices.Device) string {
	name := dev.Address
	if name == "" {
		name = dev.ID
	}
	return a.base + "/" + name
}

func (a *Adapter) handle(m mqtt.Message) {
	rest, ok := strings.CutPrefix(m.Topic, a.base+"/")
	if !ok {
		return
	}
	if rest == "bridge/state" {
		if !a.trust.Trusted(m) {
			return
		}
		online, ok := parseOnline(m.Payload)
		if !ok {
			a.log.Warn("zigbee2mqtt: unreadable bridge state", "topic", m.Topic, "payload", truncate(m.Payload))
			return
		}
		a.online.Store(online)
		a.sink.BridgeState(a.service, online, m.Retained)
		return
	}
	if rest == "bridge/devices" {
		if a.trust.Trusted(m) {
			a.bridgeDevices(m)
		}
		return
	}
	if rest == LoggingTopic {
		a.handleLogging(m) // a failed set ends its attempt at once (logging.go)
		return
	}
	if name, ok := strings.CutSuffix(rest, "/availability"); ok {
		if id, known := a.byName[name]; known {
			if !a.trust.Trusted(m) {
				return
			}
			online, ok := parseOnline(m.Payload)
			if !ok {
				a.log.Warn("zigbee2mqtt: unreadable availability", "topic", m.Topic, "payload", truncate(m.Payload))
				return
			}
			a.sink.Availability(id, online)
			return
		}
	}
	id, known := a.byName[rest]
	if !known {
		return // /set and /get echoes, other devices, bridge/* topics
	}
	if !a.trust.Trusted(m) {
		return
	}
	var state map[string]any
	if err := json.Unmarshal(m.Payload, &state); err != nil || state == nil {
		a.log.Warn("zigbee2mqtt: unreadable state report", "topic", m.Topic, "payload", truncate(m.Payload))
		return
	}
	a.sink.Report(id, state, m.Retained)
}

// bridgeDevices passes each configured device's capabilities from a
// bridge/devices message (retained or not: the list is retained by design
// and is as current as the bridge's last word) when they differ from
// those last passed (none at first): nil for a device the list does not
// describe. An unreadable list changes nothing.
func (a *Adapter) bridgeDevices(m mqtt.Message) {
	list, err := ParseBridgeDevices(m.Payload)
	if err != nil {
		a.log.Warn("zigbee2mqtt: unreadable bridge/devices", "topic", m.Topic, "err", err, "payload", truncate(m.Payload))
		return
	}
	described := make(map[string]*BridgeDevice, len(a.byName))
	for i := range list {
		if id, ok := a.byName[list[i].FriendlyName]; ok && list[i].Definition != nil {
			described[id] = &list[i]
		}
	}
	a.defsMu.Lock()
	defer a.defsMu.Unlock()
	for _, id := range a.ids {
		dev := described[id]
		key := ""
		var caps *devices.Capabilities
		if dev != nil {
			b, _ := json.Marshal(dev) // a decoded BridgeDevice always encodes
			key = string(b)
			caps = dev.Definition.Capabilities()
			caps.IEEEAddress = dev.IEEEAddress
		}
		if key == a.defs[id] {
			continue // Zigbee2MQTT republishes the list at every join, rename and interview
		}
		a.defs[id] = key
		a.sink.Capabilities(id, caps)
	}
}

// parseOnline reads Zigbee2MQTT's availability and bridge state, in the
// JSON form ({"state":"online"}) and the legacy plain form ("online").
func parseOnline(p []byte) (online, ok bool) {
	s := strings.TrimSpace(string(p))
	if strings.HasPrefix(s, "{") {
		var v struct {
			State string `json:"state"`
		}
		if json.Unmarshal(p, &v) != nil {
			return false, false
		}
		s = v.State
	}
	switch strings.ToLower(s) {
	case "online":
		return true, true
	case "offline":
		return false, true
	}
	return false, false
}

func truncate(p []byte) string {
	if len(p) > 120 {
		return string(p[:117]) + "..."
	}
	return string(p)
}
