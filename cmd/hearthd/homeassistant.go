package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/homeassistant"
	"github.com/hearthd/hearth/protocols/mqtt"
)

// haRecordFile is the file in the data directory that records the topics
// of the discovery configs Hearth announced, so that a later start removes
// those the config no longer has. The broker's retained store cannot say:
// the embedded broker keeps none across a restart, while Home Assistant
// keeps every entity it ever discovered until its config is emptied.
const haRecordFile = "homeassistant.json"

// haRecord is haRecordFile's content.
type haRecord struct {
	// Announced are config topics announced, or still to be removed.
	Announced []string `json:"announced"`
}

// homeAssistant wires Home Assistant's MQTT discovery (package
// homeassistant): it publishes the configs of every service and device at
// each connect and at Home Assistant's birth, removes those of earlier
// runs that the config no longer has (all of them when discovery is off),
// and publishes the state locks and covers show while a command is under
// way.
type homeAssistant struct {
	disc    homeassistant.Discovery
	on      bool
	conn    link
	log     *slog.Logger
	view    *homeassistant.View
	devices []homeassistant.Device
	index   map[string]int // device ID → its place in devices
	// breakers are the services with a breaker, whose problem entity is
	// announced.
	breakers []string
	// current are the topics of this run's configs; guarded by mu.
	current map[string]bool
	record  string // the path of haRecordFile

	mu sync.Mutex // serialises announcements, and guards removals
	// birth is set while an announcement asked for by Home Assistant's
	// birth waits to start.
	birth atomic.Bool
	// removals are the configs of earlier runs still to be removed.
	removals []homeassistant.Config

	// states are the ha_state messages not yet published, newest per
	// topic; kick wakes run.
	statesMu sync.Mutex
	states   map[string][]byte
	kick     chan struct{}
}

// newHomeAssistant returns the discovery of cfg and reads what earlier
// runs announced. A record that cannot be read is logged and taken as
// empty: at worst an entity removed from the config stays in Home
// Assistant, to be deleted there by hand.
func newHomeAssistant(cfg *config.Config, conn link, log *slog.Logger, version string) *homeAssistant {
	h := &homeAssistant{
		disc: homeassistant.Discovery{
			Prefix:      cfg.HomeAssistant.DiscoveryPrefix,
			NodeID:      strings.ReplaceAll(cfg.Prefix, "/", "_"),
			TopicPrefix: cfg.Prefix,
			Version:     version,
		},
		on: cfg.HomeAssistant.Discovery, conn: conn, log: log,
		record: filepath.Join(cfg.DataDir, haRecordFile),
		states: map[string][]byte{}, kick: make(chan struct{}, 1),
		index: map[string]int{},
	}
	breaker := map[string]bool{}
	for _, s := range cfg.Services {
		if s.Breaker.Enabled {
			breaker[s.Name] = true
			h.breakers = append(h.breakers, s.Name)
		}
	}
	var devs []devices.Device
	for _, c := range cfg.Devices {
		devs = append(devs, c.Device)
		h.index[c.ID] = len(h.devices)
		h.devices = append(h.devices, homeassistant.Device{Device: c.Device, Breaker: breaker[c.Service]})
	}
	h.view = h.disc.NewView(devs)
	h.current = map[string]bool{}
	if h.on {
		h.current = homeassistant.Topics(h.disc.Configs(h.breakers, h.devices))
	}
	prev, err := h.readRecord()
	if err != nil {
		log.Warn("home assistant discovery: the record of earlier announcements is unreadable; entities removed from the config may stay in Home Assistant", "file", h.record, "err", err)
	}
	// A sensor's entities are its readings, which its bridge describes
	// only once it runs: an earlier run's are kept until the bridge says
	// otherwise (see capabilities).
	if sensors := h.sensors(); h.on && len(sensors) > 0 {
		for _, topic := range prev {
			if slices.ContainsFunc(sensors, func(id string) bool { return h.disc.ReadingOf(topic, id) }) {
				h.current[topic] = true
			}
		}
	}
	h.removals = h.disc.Removals(prev, h.current)
	// Recorded before anything is published: a crash from here on still
	// knows what to remove.
	if err := h.writeRecord(); err != nil {
		log.Warn("home assistant discovery: announcements not recorded", "file", h.record, "err", err)
	}
	return h
}

// sensors returns the IDs of the configured sensors.
func (h *homeAssistant) sensors() []string {
	var out []string
	for _, dev := range h.devices {
		if dev.Class == devices.Sensor {
			out = append(out, dev.ID)
		}
	}
	return out
}

func (h *homeAssistant) readRecord() ([]string, error) {
	b, err := os.ReadFile(h.record)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r haRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", h.record, err)
	}
	return r.Announced, nil
}

// writeRecord records the current topics and the removals still to do.
// Called with h.mu held, or before h is shared.
func (h *homeAssistant) writeRecord() error {
	var r haRecord
	for topic := range h.current {
		r.Announced = append(r.Announced, topic)
	}
	for _, c := range h.removals {
		r.Announced = append(r.Announced, c.Topic)
	}
	slices.Sort(r.Announced)
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return config.WriteFileAtomic(h.record, append(b, '\n'), 0o644)
}

// announced returns how many configs this run announces.
func (h *homeAssistant) announced() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.current)
}

// subscribe subscribes to Home Assistant's birth message, when discovery
// is on.
func (h *homeAssistant) subscribe(ctx context.Context) error {
	if !h.on {
		return nil
	}
	return h.conn.Subscribe(ctx, h.disc.StatusTopic(), 1, func(m mqtt.Message) {
		// Births coalesce: one announcement waits at most, whatever
		// number of births (anyone with a principal's rights may
		// publish one) comes while another runs.
		if !m.Retained && homeassistant.IsBirth(m.Payload) && h.birth.CompareAndSwap(false, true) {
			h.log.Info("home assistant is online; announcing discovery again")
			go func() {
				h.mu.Lock() // after the announcement under way, if any
				h.birth.Store(false)
				h.mu.Unlock()
				h.announce(context.Background())
			}()
		}
	})
}

// announce removes the entities of earlier runs no longer configured, then
// publishes, retained, every config: each service's problem entity and
// each device's entities. It runs after every connect and whenever Home
// Assistant's birth message says it restarted.
func (h *homeAssistant) announce(ctx context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.removeStale(ctx) {
		return
	}
	if h.on && h.publish(ctx, h.disc.Configs(h.breakers, h.withAvailability())) {
		// What locks and covers show, again: one that could not be
		// published while the connection was down is not lost.
		h.statesMu.Lock() // the view decides under it: Shown is its newest
		for _, c := range h.view.Shown() {
			h.states[c.Topic] = c.Payload
		}
		h.statesMu.Unlock()
		h.wake()
	}
}

// removeStale publishes the removals still to do (entities of earlier
// runs no longer configured, a sensor's readings no longer described)
// and, once all went out, records that they are done. It reports whether
// none is left. Called with h.mu held.
func (h *homeAssistant) removeStale(ctx context.Context) bool {
	if len(h.removals) == 0 {
		return true
	}
	for _, c := range h.removals {
		h.log.Info("home assistant discovery: removing an entity no longer configured", "topic", c.Topic)
	}
	if !h.publish(ctx, h.removals) {
		return false
	}
	h.removals = nil
	if err := h.writeRecord(); err != nil {
		h.log.Warn("home assistant discovery: announcements not recorded", "file", h.record, "err", err)
	}
	return true
}

// announceDevice publishes device's configs again: its bridge was first
// heard reporting its availability, or described it anew.
func (h *homeAssistant) announceDevice(ctx context.Context, device string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.removeStale(ctx) // a sensor's reading no longer described
	if i, ok := h.index[device]; ok {
		h.publish(ctx, h.disc.DeviceConfigs(h.withAvailabilityOf(h.devices[i])))
	}
}

func (h *homeAssistant) withAvailability() []homeassistant.Device {
	out := make([]homeassistant.Device, len(h.devices))
	for i, dev := range h.devices {
		out[i] = h.withAvailabilityOf(dev)
	}
	return out
}

func (h *homeAssistant) withAvailabilityOf(dev homeassistant.Device) homeassistant.Device {
	dev.Availability = h.view.Available(dev.ID)
	return dev
}

// publish publishes configs, retained, and reports whether all went out.
func (h *homeAssistant) publish(ctx context.Context, configs []homeassistant.Config) bool {
	for _, c := range configs {
		if err := h.conn.Publish(ctx, c.Topic, 1, true, c.Payload); err != nil {
			h.log.Warn("home assistant discovery not published; it is sent again at the next connect", "topic", c.Topic, "err", err)
			return false
		}
	}
	return true
}

// result, state and availability take what the dispatcher publishes (its
// OnResult, OnState and OnAvailability hooks). They never block.
func (h *homeAssistant) result(r devices.Result) {
	if h.on {
		h.queue(func() *homeassistant.Config { return h.view.Result(r) })
	}
}

func (h *homeAssistant) state(device string, state map[string]any) {
	if h.on {
		h.queue(func() *homeassistant.Config { return h.view.State(device, state) })
	}
}

// capabilities takes the bridge's description of device: its entities
// are announced again with what it gives (homeassistant.BridgeOf), if
// that changed anything. Zigbee2MQTT describes every device at its start
// and again at each join or rename: the cost is one device's configs.
func (h *homeAssistant) capabilities(device string, caps *devices.Capabilities) {
	h.mu.Lock()
	i, ok := h.index[device]
	if !ok || !h.on {
		h.mu.Unlock()
		return
	}
	dev := &h.devices[i]
	bridge := homeassistant.BridgeOf(dev.Class, caps)
	if reflect.DeepEqual(bridge, dev.Bridge) {
		h.mu.Unlock()
		return
	}
	before := h.disc.DeviceConfigs(*dev)
	dev.Bridge = bridge
	if dev.Class == devices.Sensor {
		// A sensor's entities are its readings: the topics follow what
		// the bridge describes, and so does the record.
		for _, c := range before {
			delete(h.current, c.Topic)
		}
		for _, c := range h.disc.DeviceConfigs(*dev) {
			h.current[c.Topic] = true
		}
		h.removals = append(h.removals, h.disc.Removals(topicsOf(before), h.current)...) // a reading the bridge no longer lists
		if err := h.writeRecord(); err != nil {
			h.log.Warn("home assistant discovery: announcements not recorded", "file", h.record, "err", err)
		}
	}
	h.mu.Unlock()
	go h.announceDevice(context.Background(), device)
}

func topicsOf(configs []homeassistant.Config) []string {
	out := make([]string, len(configs))
	for i, c := range configs {
		out[i] = c.Topic
	}
	return out
}

func (h *homeAssistant) availability(device string, _ bool) {
	if h.on && h.view.Availability(device) {
		go h.announceDevice(context.Background(), device)
	}
}

// queue queues the ha_state that view returns, if any, for run to
// publish, replacing an older one of the same device not yet out. The
// view decides under statesMu, so the queue holds its decisions in the
// order it made them.
func (h *homeAssistant) queue(view func() *homeassistant.Config) {
	h.statesMu.Lock()
	c := view()
	if c != nil {
		h.states[c.Topic] = c.Payload
	}
	h.statesMu.Unlock()
	if c != nil {
		h.wake()
	}
}

// wake tells run that states are queued.
func (h *homeAssistant) wake() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// run publishes the queued ha_states, retained, until ctx ends. A publish
// that fails is logged; the next connect publishes it again (announce).
func (h *homeAssistant) run(ctx context.Context) {
	for {
		select {
		case <-h.kick:
		case <-ctx.Done():
			return
		}
		h.statesMu.Lock()
		batch := h.states
		h.states = map[string][]byte{}
		h.statesMu.Unlock()
		for topic, payload := range batch {
			if err := h.conn.Publish(ctx, topic, 1, true, payload); err != nil && ctx.Err() == nil {
				h.log.Warn("home assistant state not published", "topic", topic, "err", err)
			}
		}
	}
}
