package simulator

// The power-loss flood: many lightweight MQTT devices that all lose their
// connection at the same instant and reconnect, each on its own backoff,
// the way a street of smart plugs comes back after a power cut. The caller
// injects the dial function (this package never imports the broker), the
// backoff (the retry package's strategies, wrapped) and the clock.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
	"github.com/jonboulle/clockwork"
)

// Defaults of FloodOptions.
const (
	// DefaultFloodClientPrefix starts every flood device's client ID.
	DefaultFloodClientPrefix = "hearth-flood"
	// DefaultFloodKeepAlive is a flood device's MQTT keep-alive.
	DefaultFloodKeepAlive = 60 * time.Second
	// DefaultFloodConnectTimeout bounds one connection attempt, dial and
	// CONNECT/CONNACK handshake together.
	DefaultFloodConnectTimeout = 10 * time.Second
)

// floodStopTimeout bounds how long a stopping device waits for paho to
// report its dropped connection.
const floodStopTimeout = 2 * time.Second

// ErrPowerCut is the read and write error of a connection that Flood.Cut
// dropped: the device sees a lost connection, not a clean disconnect.
var ErrPowerCut = errors.New("simulator: connection cut (power loss)")

// Dial opens one network connection to the broker for one connection
// attempt of one device, such as a TCP dial or an in-memory pipe to an
// embedded broker. ctx ends when the flood stops. It is called from many
// goroutines at once.
type Dial func(ctx context.Context) (net.Conn, error)

// FloodOptions configure a Flood. Every zero value but Devices and Dial has
// a documented default.
type FloodOptions struct {
	// Devices is the number of devices, at least 1. Device i (counting from
	// 0) connects as client ID <ClientPrefix>-<i> and is named flood-<i>.
	Devices int
	// Dial opens each attempt's connection. Required.
	Dial Dial
	// Backoff spaces a device's connection attempts. n counts the attempts
	// since the device's last connection (or since it started): the first
	// reconnect after a lost connection waits Backoff(1, 0), the next
	// Backoff(2, previous delay), and so on; the very first connection at
	// start waits only for its share of Ramp. nil reconnects at once, every
	// time (no backoff).
	Backoff Backoff
	// StartBackoff, if not nil, replaces Backoff until the device has
	// connected for the first time: the start is not what a flood
	// measures, and a caller may want every strategy to start alike.
	StartBackoff Backoff
	// Ramp spreads the devices' first connections at start evenly: device
	// i makes its first attempt i·Ramp/Devices after Run starts, on Clock.
	// 0 starts them all at once.
	Ramp time.Duration
	// BaseTopic is the Zigbee2MQTT base topic of the availability topics;
	// "" means DefaultBaseTopic.
	BaseTopic string
	// ClientPrefix starts every client ID; "" means DefaultFloodClientPrefix.
	ClientPrefix string
	// Availability, if true, gives each device a retained QoS 1 will
	// {"state":"offline"} on <BaseTopic>/flood-<i>/availability and makes
	// it publish {"state":"online"} there, retained, after every connection
	// (without waiting for the broker's acknowledgement), as a Zigbee2MQTT
	// device's availability does. False sends no will and publishes nothing.
	Availability bool
	// KeepAlive is the MQTT keep-alive; 0 means DefaultFloodKeepAlive.
	KeepAlive time.Duration
	// ConnectTimeout bounds one attempt; 0 means DefaultFloodConnectTimeout.
	// It runs on the real clock (paho's own timer).
	ConnectTimeout time.Duration
	// Clock times the backoff waits and every time recorded; default the
	// real clock.
	Clock clockwork.Clock
	// Seed seeds the devices' random sources: device i draws its jitter
	// from PCG(Seed, i). 0 picks a random seed.
	Seed uint64
	// Logger receives one debug line per attempt and the flood's warnings;
	// default discards them.
	Logger *slog.Logger
	// OnAttempt, if not nil, is called after every connection attempt with
	// its outcome, from the device's goroutine (many at once); it must not
	// block.
	OnAttempt func(AttemptEvent)
}

// Outcome is how a connection attempt ended.
type Outcome uint8

const (
	// AttemptAccepted: the broker answered CONNACK 0 (connection accepted).
	AttemptAccepted Outcome = iota
	// AttemptRefused: the broker answered a CONNACK refusal, such as 0x03
	// (server unavailable), which a broker's accept-rate guard sends to an
	// MQTT 3.1.1 client.
	AttemptRefused
	// AttemptFailed: no CONNACK; the dial failed, the handshake timed out
	// or the connection closed during it.
	AttemptFailed
)

var outcomeNames = [...]string{AttemptAccepted: "accepted", AttemptRefused: "refused", AttemptFailed: "failed"}

// String returns "accepted", "refused" or "failed".
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// AttemptEvent describes one connection attempt of one device.
type AttemptEvent struct {
	// Device is the device's index, 0 to Devices−1.
	Device int
	// N is the backoff's n for this attempt: 0 for the device's first
	// connection at start, then 1, 2, … counting the attempts since its
	// last connection.
	N int
	// Delay is what the device waited before the attempt:
	// Backoff(N, previous Delay), 0 for N = 0 and without backoff.
	Delay time.Duration
	// At is when the attempt started (after Delay), on the flood's clock.
	At time.Time
	// Outcome is how it ended; Code is the CONNACK return code (0 when
	// accepted or when no CONNACK came); Err is the error of a refused or
	// failed attempt.
	Outcome Outcome
	Code    byte
	Err     error
}

// DeviceResult is what one device did during a round.
type DeviceResult struct {
	// Attempts counts the connection attempts the device started in the
	// round, whatever their outcome.
	Attempts int
	// Refusals counts those the broker refused with a CONNACK code, and
	// LastCode is the code of the last refusal (0 if none).
	Refusals int
	LastCode byte
	// Failures counts those that ended without a CONNACK.
	Failures int
	// Back is when the device's first connection dialed in the round was
	// accepted, on the flood's clock; zero if it is not back.
	Back time.Time
}

// FloodResult is what the devices did during a round: since the last Cut
// or StartRound, or since Run began.
type FloodResult struct {
	// Start is when the round began.
	Start time.Time
	// Devices holds device i's result at index i.
	Devices []DeviceResult
}

// Flood is a crowd of lightweight MQTT devices for the power-loss
// scenario. Each device is one paho MQTT 3.1.1 client with a clean session
// and paho's auto-reconnect off, kept connected by one goroutine of the
// flood that reconnects with Options.Backoff. Create it with NewFlood,
// start it with Run; its other methods are safe for concurrent use.
//
// A flood measures in rounds. The first round starts with Run and ends
// when every device has connected (Ready). Cut drops every connection at
// once and starts a new round; StartRound starts one without touching the
// connections, for a cut the caller makes itself, such as restarting the
// broker. A device is back in a round once a connection it dialed during
// the round is accepted; Back is closed when every device is.
type Flood struct {
	n            int
	dial         Dial
	backoff      Backoff
	startBackoff Backoff
	ramp         time.Duration
	base         string
	prefix       string
	availability bool
	keepAlive    time.Duration
	timeout      time.Duration
	clock        clockwork.Clock
	seed         uint64
	log          *slog.Logger
	onAttempt    func(AttemptEvent)

	devices []floodDevice
	ran     atomic.Bool
	ready   chan struct{}
	stopped atomic.Bool // set once Run's ctx is done

	mu      sync.Mutex // serialises round changes and guards floodRound.start
	round   atomic.Pointer[floodRound]
	lastCut atomic.Int64 // the gen of the last round a Cut started; 0 before any
}

// floodRound is one round of measurement.
type floodRound struct {
	gen   int64 // 0 for the first round, +1 for each later one
	start time.Time
	left  atomic.Int64 // devices not back yet
	back  chan struct{}
}

// floodDevice is one device's state. Only its own goroutine writes the
// counters; Result reads them under mu.
type floodDevice struct {
	id int

	mu   sync.Mutex
	conn *cutConn // the connection of the device's latest attempt, nil before its first

	// Guarded by mu. The counters belong to round gen.
	gen                          int64
	attempts, refusals, failures int
	lastCode                     byte
	backGen                      int64 // the last round the device came back in; -1 before its first
	backAt                       time.Time
}

// NewFlood validates opts and returns a Flood ready to Run.
func NewFlood(opts FloodOptions) (*Flood, error) {
	switch {
	case opts.Devices < 1:
		return nil, fmt.Errorf("simulator: FloodOptions.Devices %d: want at least 1", opts.Devices)
	case opts.Dial == nil:
		return nil, errors.New("simulator: FloodOptions.Dial is required")
	case opts.KeepAlive < 0 || opts.ConnectTimeout < 0 || opts.Ramp < 0:
		return nil, errors.New("simulator: FloodOptions.KeepAlive, ConnectTimeout and Ramp must not be negative")
	}
	f := &Flood{
		n:            opts.Devices,
		dial:         opts.Dial,
		backoff:      opts.Backoff,
		startBackoff: opts.StartBackoff,
		ramp:         opts.Ramp,
		base:         opts.BaseTopic,
		prefix:       opts.ClientPrefix,
		availability: opts.Availability,
		keepAlive:    opts.KeepAlive,
		timeout:      opts.ConnectTimeout,
		clock:        opts.Clock,
		seed:         opts.Seed,
		log:          opts.Logger,
		onAttempt:    opts.OnAttempt,
		devices:      make([]floodDevice, opts.Devices),
	}
	if f.base == "" {
		f.base = DefaultBaseTopic
	}
	if err := checkTopicName(f.base); err != nil {
		return nil, fmt.Errorf("simulator: FloodOptions.BaseTopic %q %w", f.base, err)
	}
	if f.prefix == "" {
		f.prefix = DefaultFloodClientPrefix
	}
	if f.keepAlive == 0 {
		f.keepAlive = DefaultFloodKeepAlive
	}
	if f.timeout == 0 {
		f.timeout = DefaultFloodConnectTimeout
	}
	if f.clock == nil {
		f.clock = clockwork.NewRealClock()
	}
	if f.seed == 0 {
		f.seed = rand.Uint64()
	}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	for i := range f.devices {
		f.devices[i] = floodDevice{id: i, backGen: -1}
	}
	first := &floodRound{back: make(chan struct{})}
	first.left.Store(int64(f.n))
	f.round.Store(first)
	f.ready = first.back
	return f, nil
}

// ClientID returns device i's MQTT client ID, <ClientPrefix>-<i>.
func (f *Flood) ClientID(i int) string { return f.prefix + "-" + strconv.Itoa(i) }

// AvailabilityTopic returns device i's availability topic,
// <BaseTopic>/flood-<i>/availability.
func (f *Flood) AvailabilityTopic(i int) string {
	return f.base + "/flood-" + strconv.Itoa(i) + "/availability"
}

// Ready returns a channel closed once every device has connected for the
// first time: the first round's Back.
func (f *Flood) Ready() <-chan struct{} { return f.ready }

// Back returns a channel closed once every device is back in the current
// round.
func (f *Flood) Back() <-chan struct{} { return f.round.Load().back }

// Run connects every device and keeps it connected, each in its own
// goroutine, until ctx is done. Then every device drops its connection
// without a DISCONNECT, as a device losing power does (the broker sends
// its will), and Run returns nil once all have stopped. It returns
// ErrAlreadyRun if called again.
func (f *Flood) Run(ctx context.Context) error {
	if !f.ran.CompareAndSwap(false, true) {
		return ErrAlreadyRun
	}
	start := f.clock.Now()
	f.mu.Lock()
	f.round.Load().start = start
	f.mu.Unlock()
	var wg sync.WaitGroup
	for i := range f.devices {
		wg.Go(func() { f.serve(ctx, &f.devices[i]) })
	}
	<-ctx.Done()
	f.stopped.Store(true)
	for i := range f.devices {
		f.devices[i].drop(func(*cutConn) bool { return true })
	}
	wg.Wait()
	return nil
}

// StartRound starts a new round at the current time, which it returns,
// without touching the connections.
func (f *Flood) StartRound() time.Time {
	return f.startRound(false).start
}

// startRound starts a new round; cut says it is a Cut's.
func (f *Flood) startRound(cut bool) *floodRound {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := &floodRound{gen: f.round.Load().gen + 1, start: f.clock.Now(), back: make(chan struct{})}
	r.left.Store(int64(f.n))
	f.round.Store(r)
	if cut {
		f.lastCut.Store(r.gen)
	}
	return r
}

// Cut starts a new round and drops every device's connection at once, from
// below MQTT: each device's reads and writes fail with ErrPowerCut, so it
// sees a lost connection (no DISCONNECT is sent; the broker sends its
// will) and starts reconnecting with its backoff. It returns the round's
// start, taken before the first connection is dropped.
func (f *Flood) Cut() time.Time {
	r := f.startRound(true)
	for i := range f.devices {
		f.devices[i].drop(func(c *cutConn) bool { return c.gen < r.gen })
	}
	return r.start
}

// Result returns what every device did in the current round so far.
func (f *Flood) Result() FloodResult {
	f.mu.Lock()
	r := f.round.Load()
	res := FloodResult{Start: r.start, Devices: make([]DeviceResult, f.n)}
	f.mu.Unlock()
	for i := range f.devices {
		d := &f.devices[i]
		d.mu.Lock()
		if d.gen == r.gen {
			res.Devices[i] = DeviceResult{Attempts: d.attempts, Refusals: d.refusals, LastCode: d.lastCode, Failures: d.failures}
		}
		if d.backGen == r.gen {
			res.Devices[i].Back = d.backAt
		}
		d.mu.Unlock()
	}
	return res
}

// serve keeps one device connected until ctx is done.
func (f *Flood) serve(ctx context.Context, d *floodDevice) {
	r := rand.New(rand.NewPCG(f.seed, uint64(d.id)))
	if wait := time.Duration(int64(f.ramp) * int64(d.id) / int64(f.n)); wait > 0 && !f.wait(ctx, wait) {
		return
	}
	backoff := f.backoff
	if f.startBackoff != nil {
		backoff = f.startBackoff
	}
	var n int
	var delay time.Duration
	for {
		if n > 0 {
			prev := delay
			delay = 0
			if backoff != nil {
				delay = max(backoff(n, prev, r), 0)
			}
			if delay > 0 && !f.wait(ctx, delay) {
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
		client, lost := f.attempt(ctx, d, n, delay)
		if client == nil {
			n++
			continue
		}
		backoff = f.backoff
		select {
		case <-lost:
			n, delay = 1, 0
		case <-ctx.Done():
			// Run drops the connection; wait for paho to let go of it.
			select {
			case <-lost:
			case <-time.After(floodStopTimeout):
				client.Disconnect(0)
			}
			return
		}
	}
}

// attempt makes one connection attempt of d and reports it. It returns the
// connected client and a channel closed when its connection is lost, or a
// nil client if the attempt was refused or failed.
func (f *Flood) attempt(ctx context.Context, d *floodDevice, n int, delay time.Duration) (mqtt.Client, <-chan struct{}) {
	gen := f.round.Load().gen
	ev := AttemptEvent{Device: d.id, N: n, Delay: delay, At: f.clock.Now()}
	lost := make(chan struct{})
	var once sync.Once
	o := mqtt.NewClientOptions().
		AddBroker("tcp://flood"). // paho wants a server; the dial ignores it
		SetClientID(f.ClientID(d.id)).
		SetProtocolVersion(4). // explicit, or paho retries a refused CONNECT as MQTT 3.1
		SetCleanSession(true).
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetKeepAlive(f.keepAlive).
		SetConnectTimeout(f.timeout).
		SetWriteTimeout(f.timeout).
		SetCustomOpenConnectionFn(func(*url.URL, mqtt.ClientOptions) (net.Conn, error) {
			dctx, cancel := context.WithTimeout(ctx, f.timeout)
			defer cancel()
			c, err := f.dial(dctx)
			if err != nil {
				return nil, err
			}
			return d.attach(&cutConn{Conn: c, gen: f.round.Load().gen}, f), nil
		}).
		SetConnectionLostHandler(func(mqtt.Client, error) { once.Do(func() { close(lost) }) })
	if f.availability {
		o.SetBinaryWill(f.AvailabilityTopic(d.id), availabilityPayload(false), 1, true)
	}
	client := mqtt.NewClient(o)
	tok := client.Connect()
	<-tok.Done() // bounded by the connect timeout; Run's stop drops the connection at once
	ev.Err = tok.Error()
	ev.Code = tok.(*mqtt.ConnectToken).ReturnCode()
	switch {
	case ev.Code == 0 && ev.Err == nil:
		ev.Outcome = AttemptAccepted
	case ev.Code > 0 && ev.Code < 0x80:
		// paho reports the 3.1.1 return codes 1–5 as refusals; an unknown
		// code yields no error, but is a refusal all the same.
		ev.Outcome = AttemptRefused
		if ev.Err == nil {
			ev.Err = fmt.Errorf("connection refused: CONNACK return code %#02x", ev.Code)
			client.Disconnect(0)
		}
	default:
		ev.Outcome = AttemptFailed
		ev.Code = 0
	}
	d.record(f, gen, ev)
	if f.onAttempt != nil {
		f.onAttempt(ev)
	}
	f.log.Debug("connection attempt", "client_id", f.ClientID(d.id), "n", n, "delay", delay, "outcome", ev.Outcome, "code", ev.Code, "err", ev.Err)
	if ev.Outcome != AttemptAccepted {
		return nil, nil
	}
	if f.availability {
		client.Publish(f.AvailabilityTopic(d.id), 1, true, availabilityPayload(true)) // not awaited
	}
	return client, lost
}

// record counts an attempt started in round gen and, if it was accepted on
// a connection dialed in the current round, marks d back.
func (d *floodDevice) record(f *Flood, gen int64, ev AttemptEvent) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if gen > d.gen {
		d.gen, d.attempts, d.refusals, d.failures, d.lastCode = gen, 0, 0, 0, 0
	}
	if gen == d.gen {
		d.attempts++
		switch ev.Outcome {
		case AttemptRefused:
			d.refusals++
			d.lastCode = ev.Code
		case AttemptFailed:
			d.failures++
		}
	}
	if ev.Outcome != AttemptAccepted || d.conn == nil {
		return
	}
	r := f.round.Load()
	if d.conn.gen == r.gen && d.backGen < r.gen {
		d.backGen, d.backAt = r.gen, f.clock.Now()
		if r.left.Add(-1) == 0 {
			close(r.back)
		}
	}
}

// attach makes c d's current connection. A connection dialed in a round
// that a Cut has since ended, or after the flood stopped, is dropped at
// once: the Cut may have looked at d before c was attached.
func (d *floodDevice) attach(c *cutConn, f *Flood) *cutConn {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.conn = c
	if c.gen < f.lastCut.Load() || f.stopped.Load() {
		c.drop()
	}
	return c
}

// drop drops d's current connection if cut says so.
func (d *floodDevice) drop(cut func(*cutConn) bool) {
	d.mu.Lock()
	c := d.conn
	d.mu.Unlock()
	if c != nil && cut(c) {
		c.drop()
	}
}

// wait waits d on the flood's clock; false if ctx ended first.
func (f *Flood) wait(ctx context.Context, d time.Duration) bool { return sleep(ctx, f.clock, d) }

// cutConn is a device's connection that the flood can drop from below
// MQTT. Once dropped, its reads and writes fail with ErrPowerCut, which
// paho takes for a lost connection (it takes a plain "use of closed
// network connection" for its own close and would stay silent).
type cutConn struct {
	net.Conn
	gen int64 // the round it was dialed in
	cut atomic.Bool
}

func (c *cutConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && c.cut.Load() {
		err = ErrPowerCut
	}
	return n, err
}

func (c *cutConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil && c.cut.Load() {
		err = ErrPowerCut
	}
	return n, err
}

// drop closes the connection abruptly, once.
func (c *cutConn) drop() {
	if c.cut.CompareAndSwap(false, true) {
		c.Conn.Close()
	}
}
