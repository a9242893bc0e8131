package simulator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/jonboulle/clockwork"
)

// ErrUnknownDevice is returned for a friendly name the sim does not play.
var ErrUnknownDevice = errors.New("simulator: unknown device")

// ErrUnknownBridge is returned for a base topic none of the sim's devices has.
var ErrUnknownBridge = errors.New("simulator: unknown bridge")

// ErrAlreadyRun is returned by a second call to [Sim.Run].
var ErrAlreadyRun = errors.New("simulator: Run called twice")

// DefaultReconnectDelay is the wait before every reconnect attempt of a
// Sim without Options.Reconnect.
const DefaultReconnectDelay = time.Second

const (
	// connectTimeout bounds one connection attempt (paho's own timer).
	connectTimeout = 5 * time.Second
	// writeTimeout bounds one write to the network (paho's own timer).
	writeTimeout = 5 * time.Second
	// stopTimeout bounds the bridge-offline publish and disconnect on stop.
	stopTimeout = 2 * time.Second
)

// Device is one simulated Zigbee2MQTT device.
type Device struct {
	// Name is the device's Z2M friendly_name. It may contain "/" but must be
	// unique within the sim, must not start with the level "bridge" nor end
	// with the level "set", "get" or "availability".
	Name string
	// Class is ClassLight, ClassSwitch, ClassLock, ClassCover or
	// ClassClimate.
	Class string
	// BaseTopic is the Z2M base topic; "" means DefaultBaseTopic. Devices
	// with the same base topic share one bridge and one MQTT connection.
	BaseTopic string
	// LinkQuality, if above 0, is reported as "linkquality" (0–255) with
	// every state, as Z2M does. 0 omits it.
	LinkQuality int
	// MinLevel, for a Zigbee2MQTT light, is its dimmer's lowest level
	// above off (its ZCL Level Control MinLevel): a set of a brightness
	// from 1 to MinLevel is reported as MinLevel, as bulbs whose dimmer
	// goes no lower report 2 or 3 for 1. 0 means 1 (none); at most 254.
	MinLevel int
	// Protocol is ProtocolZigbee2MQTT ("" means it), ProtocolZWaveJS or
	// ProtocolShelly (see shelly.go).
	// For a Z-Wave node, Name is its address in the gateway's topics,
	// "<node name>" or "<location>/<node name>", BaseTopic the gateway's
	// MQTT prefix ("" means DefaultZWavePrefix). ClassClimate is a
	// radiator valve (TRV) on Zigbee2MQTT, a thermostat on Z-Wave. See
	// zwave.go's documentation in the package doc.
	Protocol string
	// NodeID is a Z-Wave node's numeric ID (1–4000), unique per gateway;
	// required for a Z-Wave node, unused otherwise.
	NodeID int
	// GatewayName is the Z-Wave JS UI gateway's MQTT name; "" means
	// DefaultZWaveGatewayName. Nodes with the same prefix and gateway name
	// share one gateway and one MQTT connection.
	GatewayName string
	// WakeInterval, if above 0, makes the device sleepy: asleep from the
	// start, it wakes every WakeInterval (on Options.Clock) and stays
	// awake for AwakeWindow, which must be above 0 and below it.
	WakeInterval, AwakeWindow time.Duration
	// Endpoints, for a Z-Wave node, is how many Multi Channel endpoints it
	// has beyond its root (a double switch: 2): its class's values are on
	// endpoints 0 to Endpoints, each written and reported on its own
	// (<prefix>/<node>/37/2/currentValue). 0 (the default): the root only.
	Endpoints int
	// Relays, for a Tasmota device (ProtocolTasmota), is how many relays
	// (a switch) or shutters (a cover) it has, 1 to 8; 0 means 1.
	Relays int
	// PowerRetain, for a Tasmota device, publishes its stat/<topic>/POWER<n>
	// retained, as Tasmota's PowerRetain 1 does.
	PowerRetain bool
	// Fahrenheit, for a Z-Wave thermostat, keeps its setpoint in °F (68 at
	// start) and publishes it as the entire ValueId object, with its unit
	// "°F", as the gateway's payload type "ValueId object" does.
	Fahrenheit bool
}

// Faults are the misbehaviours the sim injects; the zero value injects none.
// See the package documentation for the order in which they apply.
type Faults struct {
	// DropFirst is how many sets each device silently ignores first.
	DropFirst int
	// DropRate is the fraction (0–1) of the remaining sets silently ignored,
	// decided by one Options.Rand draw per set.
	DropRate float64
	// Latency delays every answer to a set or get, on Options.Clock; the
	// initial state at start is not delayed.
	Latency time.Duration
	// Offline names the devices that start offline: their availability is
	// offline and they ignore sets and gets until SetOnline brings them back.
	Offline []string
	// Silent names the Zigbee2MQTT devices that ignore every set and get
	// and report nothing, while their availability stays online: a device
	// that died, or left radio range, before Zigbee2MQTT's availability
	// check noticed. It never reports, not even its state at the start
	// (unlike Dead). SetOnline(name, true) makes one answer again,
	// SetOnline(name, false) makes it offline.
	Silent []string
	// IgnoreGets names the devices that never answer a get (a lock whose
	// state cannot be read), while they still apply sets and report them.
	IgnoreGets []string
	// Jam names the locks whose bolt jams: a set moves nothing, and the
	// lock reports it as a Zigbee lock does: lock_state jammed, and state
	// UNLOCK (a bolt not thrown home is not locked), whatever was asked.
	Jam []string
	// EchoOnly names the devices that answer a set with an echo of the
	// attributes it asked for, as Zigbee2MQTT does for a device that does
	// not report (its optimistic echo), while the device itself does not
	// move: a get still reports the real state.
	EchoOnly []string
	// Dead names the Zigbee2MQTT devices that answer nothing, neither sets
	// nor gets, while their availability stays online: a bulb whose power
	// was cut, before Zigbee2MQTT's availability check notices (by default
	// after 10 minutes for a mains-powered device) and says it is offline.
	// Their sets and gets are reported with ReasonDead. Unlike Silent, a
	// dead device publishes its state at the start (it was alive: Hearth
	// knows it, and may take it as a witness) and SetOnline(name, true)
	// does not revive it.
	Dead []string
	// FailSets names the Zigbee2MQTT devices whose sets Zigbee2MQTT takes
	// but cannot deliver (no route, no ACK from the device): nothing
	// moves, no state is reported, and the bridge logs the failure on
	// <base>/bridge/logging as Zigbee2MQTT does (see publishFailure in
	// z2m.go), once per attribute, never the same payload twice in a row.
	// Gets are still answered. Their sets are reported with
	// ReasonSetFailed.
	FailSets []string
	// Unreported names the Zigbee2MQTT devices that apply a set but
	// report nothing after it, as a device that does not report behind
	// Zigbee2MQTT with optimistic: false; a get still reports the real,
	// new state. Its SetEvent is not Dropped: the set was applied.
	Unreported []string
	// ShellyErrorCode is the RPC error code a Shelly in FailSets answers
	// its sets with; 0 means -103 (invalid argument). -114 (unavailable)
	// is a busy device.
	ShellyErrorCode int
}

// Login is one bridge's MQTT account: its username and password, and the
// client ID reserved to it ("" for the sim's own).
type Login struct {
	Username, Password, ClientID string
}

// Options configure a Sim. Every zero value has a documented default.
type Options struct {
	// Broker is the MQTT broker URL, e.g. "tcp://127.0.0.1:1883". Required.
	Broker string
	// ClientID is the MQTT client ID; default "hearth-sim-<random hex>".
	// With several base topics, each bridge connects as ClientID-<n>, n
	// counting from 0 in order of first appearance in Devices.
	ClientID string
	// Username and Password authenticate to the broker if not empty.
	Username, Password string
	// Logins are the accounts of single bridges, by base topic (a
	// Zigbee2MQTT bridge's base topic, a Z-Wave JS UI gateway's prefix),
	// as a broker with an account per bridge wants them; a bridge without
	// an entry logs in with Username and Password. Default none.
	Logins map[string]Login
	// Devices are the simulated devices; at least one.
	Devices []Device
	// Faults are the faults to inject; the zero value injects none.
	Faults Faults
	// Reconnect spaces a bridge's reconnect attempts: n counts the failed
	// attempts since the last connection (1 before the first reconnect),
	// prev is the previous delay. nil waits DefaultReconnectDelay every
	// time, without jitter: callers that model real devices pass a
	// jittered backoff, as hearth-sim and hearthd -demo pass the retry
	// package's full jitter.
	Reconnect Backoff
	// Clock times latency and reconnect backoff; default the real clock.
	Clock clockwork.Clock
	// Rand draws DropRate decisions and reconnect jitter; default randomly
	// seeded. The sim serialises its use.
	Rand *rand.Rand
	// Logger receives the sim's logs; default discards them.
	Logger *slog.Logger
	// OnSet, if not nil, is called for every set received for a known
	// device, after it was applied or dropped. It is called from the MQTT
	// receive path, one call at a time per base topic, and must not block.
	OnSet func(SetEvent)
	// OnGet, if not nil, is called for every get received for a known
	// device, after it was answered or ignored, under the same rules as
	// OnSet.
	OnGet func(GetEvent)
}

// Reasons a set is dropped, in SetEvent.Reason.
const (
	ReasonMalformed        = "malformed"          // neither a JSON object nor a plain string
	ReasonBridgeOffline    = "bridge_offline"     // the device's bridge is in an outage (SetBridgeOnline)
	ReasonOffline          = "offline"            // the device is offline
	ReasonSilent           = "silent"             // the device is silent (Faults.Silent), its availability online
	ReasonDead             = "dead"               // the device is in Faults.Dead: it answers nothing, still shown online
	ReasonDropFirst        = "drop_first"         // one of the device's first Faults.DropFirst sets
	ReasonDropRate         = "drop_rate"          // lost to Faults.DropRate
	ReasonNoValidAttribute = "no_valid_attribute" // no attribute the class knows with a valid value
	ReasonSetFailed        = "set_failed"         // the device is in Faults.FailSets: the bridge logged the failure
)

// SetEvent describes one set message received for a known device.
type SetEvent struct {
	// Device is the friendly name.
	Device string
	// Topic and Payload are the message as received.
	Topic   string
	Payload []byte
	// Retained is true if the broker delivered a retained message, which a
	// well-behaved controller never publishes as a command.
	Retained bool
	// Attrs are the decoded attributes; nil if the payload was malformed.
	Attrs map[string]any
	// Dropped is true if no state report follows this set; Reason says why.
	Dropped bool
	Reason  string
	// Queued is true for a write to a sleeping Z-Wave node: the gateway
	// holds it in its wake-up queue and applies it at the node's next wake.
	Queued bool
	// At is when the set was received, on Options.Clock.
	At time.Time
}

// Reasons a get is not answered, in GetEvent.Reason; ReasonMalformed,
// ReasonBridgeOffline and ReasonOffline apply too.
const (
	ReasonIgnoreGets = "ignore_gets" // the device is in Faults.IgnoreGets
)

// GetEvent describes one get message received for a known device.
type GetEvent struct {
	// Device is the friendly name.
	Device string
	// Topic and Payload are the message as received.
	Topic   string
	Payload []byte
	// Ignored is true if no state report answers this get; Reason says why.
	Ignored bool
	Reason  string
	// At is when the get was received, on Options.Clock.
	At time.Time
}

// Sim is a running Zigbee2MQTT bridge with its devices. Create it with New,
// start it with Run; its other methods are safe for concurrent use.
type Sim struct {
	broker             string
	username, password string
	logins             map[string]Login
	faults             Faults
	clock              clockwork.Clock
	log                *slog.Logger
	onSet              func(SetEvent)
	onGet              func(GetEvent)
	reconnect          Backoff
	bridges            []*bridge
	devices            map[string]*device  // by friendly name
	gateways           []*gateway          // Z-Wave JS UI gateways
	nodes              map[string]*node    // Z-Wave nodes by address
	tasmotas           map[string]*tasmota // Tasmota devices by Topic
	tasmotaOrder       []*tasmota

	shellies []*shellyBox           // Shelly devices (shelly.go)
	comps    map[string]*shellyComp // their simulated components by name

	homies    []*homieBox           // Homie devices (homie.go)
	homieDevs map[string]*homieDev  // their simulated nodes by name
	esphomes  []*espNode            // ESPHome nodes (esphome.go)
	ents      map[string]*espEntity // their entities by name

	ran   atomic.Bool
	ready chan struct{}

	mu        sync.Mutex // guards rand, readyLeft, every device's mutable fields and bridge.initialQueued
	rand      *rand.Rand
	readyLeft int
}

// bridge is one base topic: one Z2M instance, one MQTT connection.
type bridge struct {
	base     string
	clientID string
	devices  map[string]*device // by friendly name
	order    []*device          // in Options.Devices order
	// connMu guards client. Publishers hold it for reading while they hand
	// a message to paho, and the client is only detached under the write
	// lock, so no publish can race a disconnect (paho's Publish would then
	// block for its write timeout).
	connMu sync.RWMutex
	client mqtt.Client // the connected client, nil while disconnected

	initialQueued bool   // the devices' initial states were queued; guarded by Sim.mu
	lastLog       string // the last bridge/logging payload, which Zigbee2MQTT never repeats; guarded by Sim.mu
	// down is true during an outage of the bridge, announced if it said so
	// on its bridge/state topic; guarded by Sim.mu.
	down, announced bool

	// availMu serialises availability publishes of this bridge, so the last
	// one published is the last state set. Taken before connMu and Sim.mu.
	availMu sync.Mutex
}

// device is one simulated device.
type device struct {
	Device
	bridge     *bridge
	stateTopic string
	availTopic string
	out        outbox

	// Guarded by Sim.mu.
	state map[string]any
	faulty
	sets      int  // sets received, dropped included
	delivered int  // sets that reached the DropFirst stage
	asleep    bool // a sleepy end device between its wakes

	kick chan struct{} // Wake; nil for a device that does not sleep
}

// faulty is what Faults and SetOnline change of a device or node. Guarded
// by Sim.mu.
type faulty struct {
	online   bool
	silent   bool // ignores sets and gets, reports nothing (Faults.Silent)
	deaf     bool // ignores gets (Faults.IgnoreGets)
	jammed   bool // its bolt jams (Faults.Jam)
	echoOnly bool // echoes sets without moving (Faults.EchoOnly)
	dead     bool // answers nothing, shown online (Faults.Dead)
	failSets bool // its sets fail, logged on bridge/logging (Faults.FailSets)
	quiet    bool // applies sets without reporting them (Faults.Unreported)
}

// New validates opts and returns a Sim ready to Run.
func New(opts Options) (*Sim, error) {
	if opts.Broker == "" {
		return nil, errors.New("simulator: Options.Broker is required")
	}
	if u, err := url.Parse(opts.Broker); err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("simulator: Options.Broker %q is not a URL like tcp://host:port", opts.Broker)
	}
	if len(opts.Devices) == 0 {
		return nil, errors.New("simulator: Options.Devices is empty")
	}
	f := opts.Faults
	switch {
	case f.DropFirst < 0:
		return nil, fmt.Errorf("simulator: Faults.DropFirst %d is negative", f.DropFirst)
	case !(f.DropRate >= 0 && f.DropRate <= 1):
		return nil, fmt.Errorf("simulator: Faults.DropRate %v is not within 0–1", f.DropRate)
	case f.Latency < 0:
		return nil, fmt.Errorf("simulator: Faults.Latency %v is negative", f.Latency)
	}

	s := &Sim{
		broker:    opts.Broker,
		username:  opts.Username,
		password:  opts.Password,
		logins:    opts.Logins,
		faults:    f,
		clock:     opts.Clock,
		log:       opts.Logger,
		onSet:     opts.OnSet,
		onGet:     opts.OnGet,
		rand:      opts.Rand,
		reconnect: opts.Reconnect,
		devices:   make(map[string]*device, len(opts.Devices)),
		nodes:     map[string]*node{},
		comps:     map[string]*shellyComp{},
		tasmotas:  map[string]*tasmota{},
		homieDevs: map[string]*homieDev{},
		ents:      map[string]*espEntity{},
		ready:     make(chan struct{}),
	}
	if s.clock == nil {
		s.clock = clockwork.NewRealClock()
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.rand == nil {
		s.rand = rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64()))
	}
	clientID := opts.ClientID
	if clientID == "" {
		clientID = "hearth-sim-" + strconv.FormatUint(uint64(rand.Uint32()), 16)
	}

	byBase := map[string]*bridge{}
	byGateway := map[string]*gateway{}
	byShelly := map[string]*shellyBox{}
	byHomie := map[string]*homieBox{}
	byESPHome := map[string]*espNode{}
	for i, d := range opts.Devices {
		if d.WakeInterval < 0 || (d.WakeInterval > 0 && (d.AwakeWindow <= 0 || d.AwakeWindow >= d.WakeInterval)) {
			return nil, fmt.Errorf("simulator: Devices[%d] %q: AwakeWindow %v must be above 0 and below WakeInterval %v", i, d.Name, d.AwakeWindow, d.WakeInterval)
		}
		switch d.Protocol {
		case ProtocolZWaveJS:
			if err := s.newNode(i, d, byGateway); err != nil {
				return nil, err
			}
			continue
		case ProtocolShelly:
			if err := s.newShelly(i, d, byShelly); err != nil {
				return nil, err
			}
			continue
		case ProtocolTasmota:
			if err := s.newTasmota(i, d); err != nil {
				return nil, err
			}
			continue
		case ProtocolHomie:
			if err := s.newHomie(i, d, byHomie); err != nil {
				return nil, err
			}
			continue
		case ProtocolESPHome:
			if err := s.newESPHome(i, d, byESPHome); err != nil {
				return nil, err
			}
			continue
		case "", ProtocolZigbee2MQTT:
		default:
			return nil, fmt.Errorf("simulator: Devices[%d] %q: unknown protocol %q (want %s, %s, %s, %s or %s)", i, d.Name, d.Protocol, ProtocolZigbee2MQTT, ProtocolZWaveJS, ProtocolShelly, ProtocolTasmota, ProtocolHomie)
		}
		if _, dup := s.nodes[d.Name]; dup {
			return nil, fmt.Errorf("simulator: Devices[%d]: friendly name %q is used twice", i, d.Name)
		}
		if err := checkFriendlyName(d.Name); err != nil {
			return nil, fmt.Errorf("simulator: Devices[%d]: friendly name %q %w", i, d.Name, err)
		}
		if _, dup := s.devices[d.Name]; dup {
			return nil, fmt.Errorf("simulator: Devices[%d]: friendly name %q is used twice", i, d.Name)
		}
		if !knownClass(d.Class) {
			return nil, fmt.Errorf("simulator: Devices[%d] %q: unknown class %q (want light, switch, lock, cover or climate)", i, d.Name, d.Class)
		}
		if d.MinLevel < 0 || d.MinLevel > maxBrightness || (d.MinLevel > 0 && d.Class != ClassLight) {
			return nil, fmt.Errorf("simulator: Devices[%d] %q: MinLevel %d is for a light, within 0–%d", i, d.Name, d.MinLevel, maxBrightness)
		}
		if d.LinkQuality < 0 || d.LinkQuality > 255 {
			return nil, fmt.Errorf("simulator: Devices[%d] %q: LinkQuality %d is not within 0–255", i, d.Name, d.LinkQuality)
		}
		if d.BaseTopic == "" {
			d.BaseTopic = DefaultBaseTopic
		}
		if err := checkTopicName(d.BaseTopic); err != nil {
			return nil, fmt.Errorf("simulator: Devices[%d] %q: base topic %q %w", i, d.Name, d.BaseTopic, err)
		}
		b := byBase[d.BaseTopic]
		if b == nil {
			b = &bridge{base: d.BaseTopic, devices: map[string]*device{}}
			byBase[d.BaseTopic] = b
			s.bridges = append(s.bridges, b)
		}
		dev := &device{
			Device:     d,
			bridge:     b,
			stateTopic: d.BaseTopic + "/" + d.Name,
			availTopic: d.BaseTopic + "/" + d.Name + "/availability",
			state:      initialState(d.Class),
			faulty:     faulty{online: true},
			asleep:     d.WakeInterval > 0,
		}
		if d.WakeInterval > 0 {
			dev.kick = make(chan struct{}, 1)
		}
		dev.out.init()
		s.devices[d.Name] = dev
		b.devices[d.Name] = dev
		b.order = append(b.order, dev)
	}
	// Each fault names devices of either bridge: a Zigbee2MQTT device or
	// a Z-Wave node.
	faults := []struct {
		field     string
		names     []string
		locksOnly bool
		set       func(*faulty)
	}{
		{"Offline", f.Offline, false, func(x *faulty) { x.online = false }},
		{"Silent", f.Silent, false, func(x *faulty) { x.silent = true }},
		{"IgnoreGets", f.IgnoreGets, false, func(x *faulty) { x.deaf = true }},
		{"Jam", f.Jam, true, func(x *faulty) { x.jammed = true }},
		{"EchoOnly", f.EchoOnly, false, func(x *faulty) { x.echoOnly = true }},
		{"Dead", f.Dead, false, func(x *faulty) { x.dead = true }},
		{"FailSets", f.FailSets, false, func(x *faulty) { x.failSets = true }},
		{"Unreported", f.Unreported, false, func(x *faulty) { x.quiet = true }},
	}
	for _, fault := range faults {
		for _, name := range fault.names {
			var x *faulty
			var class string
			if tm := s.tasmotas[name]; tm != nil {
				x, class = &tm.faulty, tm.Class
			} else if n := s.nodes[name]; n != nil {
				if fault.field == "Silent" {
					return nil, fmt.Errorf("simulator: Faults.Silent names %q, a Z-Wave node; only Zigbee2MQTT devices fall silent", name)
				}
				if fault.field == "FailSets" || fault.field == "Unreported" {
					return nil, fmt.Errorf("simulator: Faults.%s names %q, a Z-Wave node; only Zigbee2MQTT devices take it", fault.field, name)
				}
				if fault.field == "Dead" {
					return nil, fmt.Errorf("simulator: Faults.Dead names %q, a Z-Wave node; a dead node is one SetOnline takes offline", name)
				}
				x, class = &n.faulty, n.Class
			} else if d := s.devices[name]; d != nil {
				x, class = &d.faulty, d.Class
			} else if c := s.comps[name]; c != nil {
				if fault.field == "Dead" || fault.field == "Jam" {
					return nil, fmt.Errorf("simulator: Faults.%s names %q, a Shelly; a Shelly takes Offline, Silent, IgnoreGets, EchoOnly, FailSets and Unreported", fault.field, name)
				}
				x, class = &c.faulty, c.Class
			} else if h := s.homieDevs[name]; h != nil {
				if fault.field == "Dead" || fault.field == "Jam" || fault.field == "FailSets" || fault.field == "IgnoreGets" {
					return nil, fmt.Errorf("simulator: Faults.%s names %q, a Homie device; a Homie device takes Offline, Silent, EchoOnly and Unreported (Homie has no error answer and no get)", fault.field, name)
				}
				x, class = &h.faulty, h.Class
			} else if e := s.ents[name]; e != nil {
				if fault.field == "Dead" || fault.field == "IgnoreGets" {
					return nil, fmt.Errorf("simulator: Faults.%s names %q, an ESPHome entity; ESPHome has no get, and a dead node is one SetOnline takes offline", fault.field, name)
				}
				x, class = &e.faulty, e.Class
			} else {
				return nil, fmt.Errorf("simulator: Faults.%s names %q, which is not in Devices", fault.field, name)
			}
			if fault.locksOnly && class != ClassLock {
				return nil, fmt.Errorf("simulator: Faults.%s names %q, a %s; only locks jam", fault.field, name, class)
			}
			fault.set(x)
		}
	}
	for i, b := range s.bridges {
		b.clientID = clientID
		if len(s.bridges)+len(s.gateways) > 1 {
			b.clientID = clientID + "-" + strconv.Itoa(i)
		}
	}
	for i, gw := range s.gateways {
		gw.clientID = clientID
		if len(s.bridges)+len(s.gateways) > 1 {
			gw.clientID = clientID + "-" + strconv.Itoa(len(s.bridges)+i)
		}
	}
	for i, b := range s.shellies {
		b.clientID = clientID + "-shelly-" + strconv.Itoa(i)
	}
	for _, t := range s.tasmotaOrder {
		t.clientID = clientID + "-" + t.Name
	}
	for i, b := range s.homies {
		b.clientID = clientID + "-homie-" + strconv.Itoa(i)
	}
	for i, n := range s.esphomes {
		n.clientID = clientID + "-esphome-" + strconv.Itoa(i)
	}
	s.readyLeft = len(s.bridges) + len(s.gateways) + len(s.shellies) + len(s.tasmotaOrder) + len(s.homies) + len(s.esphomes)
	return s, nil
}

// Ready returns a channel closed once every bridge has connected for the
// first time, published its devices' availability, queued each online
// device's initial state (ahead of any report), subscribed to its commands
// and published its online state. On every later connection too, a bridge
// publishes its online state only once it hears commands.
func (s *Sim) Ready() <-chan struct{} { return s.ready }

// Run connects every bridge to the broker (retrying with full-jitter backoff
// until ctx is done), serves sets and gets, and reconnects when a connection
// is lost. Once ctx is cancelled it publishes each bridge's offline state,
// disconnects and returns nil. It returns ErrAlreadyRun if called again.
func (s *Sim) Run(ctx context.Context) error {
	if !s.ran.CompareAndSwap(false, true) {
		return ErrAlreadyRun
	}
	var wg sync.WaitGroup
	for _, d := range s.devices {
		wg.Go(func() { s.deliver(ctx, d) })
	}
	for _, b := range s.bridges {
		wg.Go(func() {
			l := s.login(b.base, b.clientID)
			s.serve(ctx, bridgeEndpoint{s, b}, l, s.log.With("base_topic", b.base, "client_id", l.ClientID))
		})
	}
	for _, n := range s.nodes {
		wg.Go(func() { s.deliverNode(ctx, n) })
		if n.WakeInterval > 0 {
			wg.Go(func() {
				s.sleepCycle(ctx, n.WakeInterval, n.AwakeWindow, n.kick, func() { s.wakeNode(n) }, func() { s.sleepNode(n) })
			})
		}
	}
	for _, d := range s.devices {
		if d.WakeInterval > 0 {
			wg.Go(func() {
				s.sleepCycle(ctx, d.WakeInterval, d.AwakeWindow, d.kick, func() { s.checkIn(d) }, func() { s.doze(d) })
			})
		}
	}
	for _, b := range s.shellies {
		wg.Go(func() {
			l := s.login(b.base, b.clientID)
			s.serve(ctx, shellyEndpoint{s, b}, l, s.log.With("shelly", b.id, "client_id", l.ClientID))
		})
	}
	for _, t := range s.tasmotaOrder {
		wg.Go(func() {
			l := s.login(t.full, t.clientID)
			s.serve(ctx, tasmotaEndpoint{s, t}, l, s.log.With("tasmota", t.Name, "client_id", l.ClientID))
		})
	}
	for _, b := range s.homies {
		wg.Go(func() {
			l := s.login(b.root, b.clientID)
			s.serve(ctx, homieEndpoint{s, b}, l, s.log.With("homie", b.id, "client_id", l.ClientID))
		})
		if b.kick != nil {
			wg.Go(func() {
				s.sleepCycle(ctx, b.wakeInterval, b.awakeWindow, b.kick, func() { s.wakeHomie(b) }, func() { s.sleepHomie(b) })
			})
		}
	}
	for _, n := range s.esphomes {
		wg.Go(func() {
			l := s.login(n.base, n.clientID)
			s.serve(ctx, espEndpoint{s, n}, l, s.log.With("esphome", n.name, "client_id", l.ClientID))
		})
	}
	for _, gw := range s.gateways {
		wg.Go(func() {
			l := s.login(gw.prefix, gw.clientID)
			s.serve(ctx, gatewayEndpoint{s, gw}, l, s.log.With("gateway", gw.client, "client_id", l.ClientID))
		})
	}
	wg.Wait()
	return nil
}

// SetOnline marks a device reachable or not and republishes its retained
// availability if its bridge is connected. An offline device ignores sets
// and gets, and reports still waiting on Faults.Latency are lost.
func (s *Sim) SetOnline(name string, online bool) error {
	if c := s.comps[name]; c != nil {
		s.setShellyOnline(c, online)
		return nil
	}
	if t := s.tasmotas[name]; t != nil {
		s.setTasmotaOnline(t, online)
		return nil
	}
	if h := s.homieDevs[name]; h != nil {
		s.setHomieOnline(h, online)
		return nil
	}
	if e := s.ents[name]; e != nil {
		s.setESPOnline(e, online)
		return nil
	}
	if n := s.nodes[name]; n != nil {
		s.mu.Lock()
		n.online = online
		s.mu.Unlock()
		s.publishStatus(n) // Dead, or back Alive (Asleep, Awake)
		return nil
	}
	d := s.devices[name]
	if d == nil {
		return fmt.Errorf("%w: %q", ErrUnknownDevice, name)
	}
	b := d.bridge
	b.availMu.Lock()
	defer b.availMu.Unlock()
	s.mu.Lock()
	d.online = online
	if online {
		d.silent = false // Faults.Silent ends: it answers again
	}
	s.mu.Unlock()
	// Not awaited: the caller may be on the MQTT receive path. If the bridge
	// is disconnected, it publishes availability when it reconnects.
	b.publish(d.availTopic, true, availabilityPayload(online))
	s.log.Info("availability changed", "device", name, "online", online)
	return nil
}

// SetBridgeOnline starts (online false) or ends (online true) an outage of
// the bridge of base topic base ("" means DefaultBaseTopic): the Zigbee
// coordinator is gone, so the bridge stays connected to the broker but
// ignores every set and get of its devices (sets are reported with
// ReasonBridgeOffline), and reports still waiting on Faults.Latency are
// lost. The devices' availability does not change.
//
// With announce, the bridge says so as Zigbee2MQTT does when it stops and
// starts again: it publishes its retained <base>/bridge/state
// {"state":"offline"} at the start of the outage and {"state":"online"} at
// its end, and a reconnect during the outage publishes offline. Without
// announce the outage is silent, a hung coordinator: the bridge state stays
// online, and only the silence of the devices tells. Ending an outage
// publishes online either way (as Z2M does when it starts). Calling it with
// the bridge's current state only republishes, if announce. It returns
// ErrUnknownBridge for a base topic of no device.
func (s *Sim) SetBridgeOnline(base string, online, announce bool) error {
	if base == "" {
		base = DefaultBaseTopic
	}
	if j := slices.IndexFunc(s.gateways, func(gw *gateway) bool { return gw.prefix == base }); j >= 0 {
		gw := s.gateways[j]
		s.mu.Lock()
		gw.down = !online
		gw.announced = !online && announce
		now := s.clock.Now()
		s.mu.Unlock()
		if online || announce {
			gw.publish(gw.client+"/status", true, timeValue(now, online))
		}
		return nil
	}
	i := slices.IndexFunc(s.bridges, func(b *bridge) bool { return b.base == base })
	if i < 0 {
		return fmt.Errorf("%w: base topic %q", ErrUnknownBridge, base)
	}
	b := s.bridges[i]
	b.availMu.Lock()
	defer b.availMu.Unlock()
	s.mu.Lock()
	b.down = !online
	b.announced = !online && announce
	s.mu.Unlock()
	if online || announce {
		// Not awaited, as SetOnline: if the bridge is disconnected, it
		// publishes its state when it reconnects.
		b.publish(b.base+"/bridge/state", true, availabilityPayload(online))
	}
	s.log.Info("bridge state changed", "base_topic", base, "online", online, "announced", announce)
	return nil
}

// State returns a copy of a device's current state (without linkquality),
// or nil for an unknown name.
func (s *Sim) State(name string) map[string]any {
	if c := s.comps[name]; c != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		return c.state()
	}
	if t := s.tasmotas[name]; t != nil {
		return s.tasmotaState(t)
	}
	if h := s.homieDevs[name]; h != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		return h.state()
	}
	if e := s.ents[name]; e != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		return e.espState()
	}
	if n := s.nodes[name]; n != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		st := maps.Clone(n.values)
		for k := range st {
			if strings.HasPrefix(k, "last_level") {
				delete(st, k)
			}
		}
		return st
	}
	d := s.devices[name]
	if d == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(d.state)
}

// Sets returns how many sets a device has received, dropped ones included.
func (s *Sim) Sets(name string) int {
	if c := s.comps[name]; c != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		return c.sets
	}
	if t := s.tasmotas[name]; t != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		return t.sets
	}
	if h := s.homieDevs[name]; h != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		return h.sets
	}
	if e := s.ents[name]; e != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		return e.sets
	}
	if n := s.nodes[name]; n != nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		return n.sets
	}
	d := s.devices[name]
	if d == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return d.sets
}

// endpoint is one MQTT client the sim keeps connected: a Zigbee2MQTT
// bridge or a Z-Wave JS UI gateway.
type endpoint interface {
	// will is the endpoint's offline status, published retained as its
	// will and before a clean stop.
	will() (topic string, payload []byte)
	// announce publishes what the endpoint says on every connect and
	// subscribes to what it takes.
	announce(ctx context.Context, c mqtt.Client) error
	// attach makes c the client the endpoint publishes through; nil while
	// it is not connected.
	attach(c mqtt.Client)
}

// serve keeps e connected until ctx is done: it connects, announces, and
// after a lost connection reconnects with the sim's backoff on its clock;
// when ctx is done it publishes its offline status (a clean disconnect
// discards the will) and disconnects. The first connection of each
// endpoint counts towards Ready.
func (s *Sim) serve(ctx context.Context, e endpoint, l Login, log *slog.Logger) {
	first := true
	var delay time.Duration
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			delay = s.backoff(attempt, delay)
			log.Info("connecting after backoff", "attempt", attempt, "delay", delay)
			if !s.wait(ctx, delay) {
				return
			}
		}
		lost := make(chan struct{})
		client := mqtt.NewClient(s.clientOptions(e, l, lost, log))
		tok := client.Connect()
		if err := await(ctx, tok); err != nil {
			if ctx.Err() != nil {
				<-tok.Done() // bounded by connectTimeout
				if tok.Error() == nil {
					client.Disconnect(0)
				}
				return
			}
			log.Warn("connect failed", "attempt", attempt, "err", err)
			continue
		}
		if err := e.announce(ctx, client); err != nil {
			e.attach(nil)
			client.Disconnect(0)
			if ctx.Err() != nil {
				return
			}
			log.Warn("announce failed", "err", err)
			continue
		}
		log.Info("online")
		if first {
			first = false
			s.mu.Lock()
			s.readyLeft--
			if s.readyLeft == 0 {
				close(s.ready)
			}
			s.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			e.attach(nil)
			topic, payload := e.will()
			tok := client.Publish(topic, 1, true, payload)
			if !tok.WaitTimeout(stopTimeout) || tok.Error() != nil {
				// A clean disconnect discards the will: the retained state stays online.
				log.Warn("offline state not published", "err", tok.Error())
			}
			client.Disconnect(uint(stopTimeout / time.Millisecond))
			log.Info("stopped")
			return
		case <-lost:
			e.attach(nil)
			attempt, delay = 0, 0 // the loop's increment makes the next attempt 1
		}
	}
}

// clientOptions configures one connection of an endpoint: no paho
// reconnect (the sim reconnects with its own jitter on its own clock), a
// clean session, and the endpoint's offline status as retained will.
func (s *Sim) clientOptions(e endpoint, l Login, lost chan struct{}, log *slog.Logger) *mqtt.ClientOptions {
	var once sync.Once
	topic, payload := e.will()
	o := mqtt.NewClientOptions().
		AddBroker(s.broker).
		SetClientID(l.ClientID).
		SetCleanSession(true).
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetConnectTimeout(connectTimeout).
		SetWriteTimeout(writeTimeout).
		SetBinaryWill(topic, payload, 1, true).
		SetConnectionLostHandler(func(_ mqtt.Client, err error) {
			log.Warn("connection lost", "err", err)
			once.Do(func() { close(lost) })
		})
	if l.Username != "" {
		o.SetUsername(l.Username)
	}
	if l.Password != "" {
		o.SetPassword(l.Password)
	}
	return o
}

// login returns the account the bridge under base logs in with: its entry
// of Options.Logins, else Options.Username and Password; the client ID is
// the entry's, else clientID.
func (s *Sim) login(base, clientID string) Login {
	l, ok := s.logins[base]
	if !ok {
		l = Login{Username: s.username, Password: s.password}
	}
	if l.ClientID == "" {
		l.ClientID = clientID
	}
	return l
}

// bridgeEndpoint is a Zigbee2MQTT bridge as an endpoint the sim keeps
// connected: its will is the bridge state offline.
type bridgeEndpoint struct {
	s *Sim
	b *bridge
}

func (e bridgeEndpoint) will() (string, []byte) { return e.b.base + "/bridge/state", payloadOffline }

func (e bridgeEndpoint) announce(ctx context.Context, c mqtt.Client) error {
	return e.s.announce(ctx, e.b, c)
}

func (e bridgeEndpoint) attach(c mqtt.Client) { e.b.attach(c) }

// announce runs once per connection, in an order that makes the bridge's
// birth mean "listening": availability, then the devices' initial states the
// first time (so that no report can overtake them), then the subscription,
// then the bridge's online state.
func (s *Sim) announce(ctx context.Context, b *bridge, client mqtt.Client) error {
	b.attach(client)

	b.availMu.Lock()
	toks := make([]mqtt.Token, 0, len(b.order))
	for _, d := range b.order {
		s.mu.Lock()
		online := d.online
		s.mu.Unlock()
		toks = append(toks, client.Publish(d.availTopic, 1, true, availabilityPayload(online)))
	}
	b.availMu.Unlock()
	for _, t := range toks {
		if err := await(ctx, t); err != nil {
			return fmt.Errorf("publish availability: %w", err)
		}
	}

	s.mu.Lock()
	if !b.initialQueued {
		b.initialQueued = true
		now := s.clock.Now()
		for _, d := range b.order {
			if d.online && !d.silent {
				d.out.push(report{payload: d.report(), due: now})
			}
		}
	}
	s.mu.Unlock()

	if err := await(ctx, client.Subscribe(b.base+"/#", 1, s.handler(b))); err != nil {
		return fmt.Errorf("subscribe %s/#: %w", b.base, err)
	}
	if err := await(ctx, client.Publish(b.base+"/bridge/devices", 1, true, bridgeDevices(b.order))); err != nil {
		return fmt.Errorf("publish bridge/devices: %w", err)
	}
	s.mu.Lock()
	state := availabilityPayload(!b.announced)
	s.mu.Unlock()
	if err := await(ctx, client.Publish(b.base+"/bridge/state", 1, true, state)); err != nil {
		return fmt.Errorf("publish bridge state: %w", err)
	}
	return nil
}

// handler routes the messages of one bridge's subscription. It runs on
// paho's receive path and never blocks: reports go through device outboxes.
func (s *Sim) handler(b *bridge) mqtt.MessageHandler {
	return func(_ mqtt.Client, m mqtt.Message) {
		name, verb, ok := commandTopic(b.base, m.Topic())
		if !ok {
			return // states, availability, bridge topics: ours or someone else's
		}
		d := b.devices[name]
		if d == nil {
			s.log.Debug("command for an unknown device ignored", "topic", m.Topic())
			return
		}
		if verb == "get" {
			s.get(d, m.Topic(), m.Payload())
			return
		}
		s.set(d, m.Topic(), m.Payload(), m.Retained())
	}
}

// set applies one set message to d, through the fault stages.
func (s *Sim) set(d *device, topic string, payload []byte, retained bool) {
	ev := SetEvent{Device: d.Name, Topic: topic, Payload: slices.Clone(payload), Retained: retained}
	attrs, perr := parsePayload(payload)
	ev.Attrs = attrs
	var problems []string

	s.mu.Lock()
	ev.At = s.clock.Now()
	d.sets++
	switch {
	case perr != nil:
		ev.Reason = ReasonMalformed
	case d.bridge.down:
		ev.Reason = ReasonBridgeOffline
	case !d.online:
		ev.Reason = ReasonOffline
	case d.silent:
		ev.Reason = ReasonSilent
	case d.dead:
		ev.Reason = ReasonDead
	case d.asleep:
		ev.Reason = ReasonAsleep // a parent buffers for seconds only: lost
	case d.failSets && perr == nil:
		ev.Reason = ReasonSetFailed
		for _, k := range slices.Sorted(maps.Keys(attrs)) {
			p := publishFailure("set", k, d.Name, "Error: Delivery failed for '"+d.Name+"'")
			if string(p) == d.bridge.lastLog {
				continue // Zigbee2MQTT does not publish a log payload twice in a row
			}
			d.bridge.lastLog = string(p)
			d.out.push(report{topic: d.bridge.base + "/" + loggingTopic, payload: p, due: ev.At.Add(s.faults.Latency)})
		}
	default:
		d.delivered++
		if d.delivered <= s.faults.DropFirst {
			ev.Reason = ReasonDropFirst
			break
		}
		if s.faults.DropRate > 0 && s.rand.Float64() < s.faults.DropRate {
			ev.Reason = ReasonDropRate
			break
		}
		st := d.state
		if d.jammed || d.echoOnly {
			st = maps.Clone(d.state) // the device does not move
		}
		var valid int
		valid, problems = applyWith(d.Class, d.MinLevel, st, attrs)
		if valid == 0 {
			ev.Reason = ReasonNoValidAttribute
			break
		}
		payload := d.report()
		switch {
		case d.jammed:
			d.state["state"], d.state["lock_state"] = "UNLOCK", "jammed"
			payload = d.report()
		case d.echoOnly:
			payload, _ = json.Marshal(attrs)
		}
		if d.quiet {
			break // applied, never reported: a get shows it
		}
		d.out.push(report{payload: payload, due: ev.At.Add(s.faults.Latency)})
	}
	s.mu.Unlock()
	ev.Dropped = ev.Reason != ""

	for _, p := range problems {
		s.log.Error("set: "+p, "device", d.Name)
	}
	switch {
	case perr != nil:
		s.log.Warn("set ignored", "device", d.Name, "reason", ev.Reason, "err", perr)
	case ev.Dropped:
		s.log.Info("set dropped", "device", d.Name, "reason", ev.Reason, "payload", string(payload))
	default:
		s.log.Debug("set applied", "device", d.Name, "payload", string(payload))
	}
	if retained {
		s.log.Warn("set arrived retained", "device", d.Name)
	}
	if s.onSet != nil {
		s.onSet(ev)
	}
}

// get makes an online device report its state, unless it ignores gets.
func (s *Sim) get(d *device, topic string, payload []byte) {
	ev := GetEvent{Device: d.Name, Topic: topic, Payload: slices.Clone(payload)}
	_, perr := parsePayload(payload)
	s.mu.Lock()
	ev.At = s.clock.Now()
	switch {
	case perr != nil:
		ev.Reason = ReasonMalformed
	case d.bridge.down:
		ev.Reason = ReasonBridgeOffline
	case !d.online:
		ev.Reason = ReasonOffline
	case d.silent:
		ev.Reason = ReasonSilent
	case d.dead:
		ev.Reason = ReasonDead
	case d.asleep:
		ev.Reason = ReasonAsleep
	case d.deaf:
		ev.Reason = ReasonIgnoreGets
	default:
		d.out.push(report{payload: d.report(), due: ev.At.Add(s.faults.Latency)})
	}
	s.mu.Unlock()
	ev.Ignored = ev.Reason != ""
	switch {
	case perr != nil:
		s.log.Warn("get ignored", "device", d.Name, "err", perr)
	case ev.Ignored:
		s.log.Info("get ignored", "device", d.Name, "reason", ev.Reason)
	}
	if s.onGet != nil {
		s.onGet(ev)
	}
}

// report encodes d's full state as Z2M publishes it. Call with Sim.mu held.
func (d *device) report() []byte {
	st := d.state
	if d.LinkQuality > 0 {
		st = maps.Clone(st)
		st["linkquality"] = d.LinkQuality
	}
	p, err := json.Marshal(st) // keys sorted: reports are reproducible
	if err != nil {
		panic("simulator: state does not encode: " + err.Error()) // strings and ints only
	}
	return p
}

// deliver publishes d's reports in order, each at its due time, until ctx is
// done.
func (s *Sim) deliver(ctx context.Context, d *device) {
	for {
		r, ok := d.out.pop(ctx)
		if !ok {
			return
		}
		if wait := r.due.Sub(s.clock.Now()); wait > 0 && !s.wait(ctx, wait) {
			return
		}
		s.mu.Lock()
		online, bridgeDown := d.online, d.bridge.down
		s.mu.Unlock()
		if !online {
			s.log.Info("report lost: device went offline", "device", d.Name)
			continue
		}
		if bridgeDown {
			s.log.Info("report lost: bridge offline", "device", d.Name)
			continue
		}
		topic := d.stateTopic
		if r.topic != "" {
			topic = r.topic // a bridge/logging line
		}
		tok := d.bridge.publish(topic, false, r.payload)
		if tok == nil {
			s.log.Warn("report lost: bridge disconnected", "device", d.Name)
			continue
		}
		if err := await(ctx, tok); err != nil && ctx.Err() == nil {
			s.log.Warn("report not published", "device", d.Name, "err", err)
		}
	}
}

// backoff returns the delay before reconnect attempt n ≥ 1 from
// Options.Reconnect, drawing on the sim's random source.
func (s *Sim) backoff(n int, prev time.Duration) time.Duration {
	if s.reconnect == nil {
		return DefaultReconnectDelay
	}
	return max(s.reconnect(n, prev, lockedRand{s}), 0)
}

// lockedRand draws from the sim's random source under its lock.
type lockedRand struct{ s *Sim }

func (l lockedRand) Int64N(n int64) int64 {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.s.rand.Int64N(n)
}

func (l lockedRand) NormFloat64() float64 {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	return l.s.rand.NormFloat64()
}

// attach makes c the bridge's connection; nil detaches it.
func (b *bridge) attach(c mqtt.Client) {
	b.connMu.Lock()
	b.client = c
	b.connMu.Unlock()
}

// publish hands a QoS 1 message to the bridge's connection, or returns nil
// if the bridge is disconnected.
func (b *bridge) publish(topic string, retained bool, payload []byte) mqtt.Token {
	b.connMu.RLock()
	defer b.connMu.RUnlock()
	if b.client == nil {
		return nil
	}
	return b.client.Publish(topic, 1, retained, payload)
}

// wait waits d on the sim's clock; false if ctx ended first.
func (s *Sim) wait(ctx context.Context, d time.Duration) bool { return sleep(ctx, s.clock, d) }

// sleep waits d on clock; false if ctx ended first.
func sleep(ctx context.Context, clock clockwork.Clock, d time.Duration) bool {
	t := clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.Chan():
		return true
	case <-ctx.Done():
		return false
	}
}

// await waits for a paho token or ctx.
func await(ctx context.Context, t mqtt.Token) error {
	select {
	case <-t.Done():
		return t.Error()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// report is one state report waiting in a device's outbox.
type report struct {
	topic   string // a Z-Wave value's topic; for Zigbee2MQTT, "" (the state topic) or bridge/logging's
	payload []byte
	due     time.Time
}

// checkIn wakes a sleepy Zigbee2MQTT device: it checks in with its full
// state, and applies sets until it dozes off again.
func (s *Sim) checkIn(d *device) {
	s.mu.Lock()
	d.asleep = false
	if d.online && !d.silent {
		d.out.push(report{payload: d.report(), due: s.clock.Now()})
	}
	s.mu.Unlock()
	s.log.Info("device checked in", "device", d.Name)
}

func (s *Sim) doze(d *device) {
	s.mu.Lock()
	d.asleep = true
	s.mu.Unlock()
	s.log.Info("device asleep", "device", d.Name)
}

// outbox is a device's unbounded FIFO of reports, drained by one deliver
// loop, so that pushing never blocks the MQTT receive path.
type outbox struct {
	mu    sync.Mutex
	items []report
	wake  chan struct{}
}

func (o *outbox) init() { o.wake = make(chan struct{}, 1) }

func (o *outbox) push(r report) {
	o.mu.Lock()
	o.items = append(o.items, r)
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

func (o *outbox) pop(ctx context.Context) (report, bool) {
	for {
		o.mu.Lock()
		if len(o.items) > 0 {
			r := o.items[0]
			o.items[0] = report{}
			o.items = o.items[1:]
			o.mu.Unlock()
			return r, true
		}
		o.mu.Unlock()
		select {
		case <-o.wake:
		case <-ctx.Done():
			return report{}, false
		}
	}
}
