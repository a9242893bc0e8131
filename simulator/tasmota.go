package simulator

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	mqtt "github.com/eclipse/paho.mqtt.golang"
)

// ProtocolTasmota is a Tasmota device: its own MQTT client, played from
// Tasmota's documentation (https://tasmota.github.io/docs/MQTT/ and
// Commands), not from Hearth's adapter.
//
// For a Tasmota device, Device.Name is its Topic (%topic%), BaseTopic its
// FullTopic ("" means DefaultTasmotaFullTopic; %prefix% and %topic% are
// substituted, other levels kept), Relays its relays (a switch) or
// shutters (a cover), 1 by default, and PowerRetain publishes
// stat/<topic>/POWER<n> retained, as Tasmota's PowerRetain 1 does. Its
// will is tele/<topic>/LWT Offline, retained; on connect it subscribes
// to cmnd/<topic>/#, publishes tele/<topic>/LWT Online, retained, and
// publishes its tele/<topic>/STATE (and tele/<topic>/SENSOR for
// shutters). It takes, case-insensitively:
//
//	POWER[<n>] ON|OFF|1|0|TOGGLE|(empty: query)  → stat/RESULT {"POWER<n>":"ON"}, stat/POWER<n> ON
//	Dimmer 0..100|(empty)                        → stat/RESULT {"POWER":…,"Dimmer":…,"CT":…} (Dimmer > 0 turns it on, 0 off)
//	CT 153..500|(empty)                          → the same
//	ShutterPosition<n> 0..100|OPEN|CLOSE|(empty) → stat/RESULT {"ShutterPosition<n>":P}, then the shutter is there:
//	                                               stat/RESULT {"Shutter<n>":{"Position":P,"Direction":0,"Target":P}}, stat/SHUTTER<n> P
//	State                                        → stat/RESULT with the STATE payload
//	Status 10 | Status 11                        → stat/STATUS10 {"StatusSNS":…} | stat/STATUS11 {"StatusSTS":…}
//	anything else                                → stat/RESULT {"Command":"Unknown"}
//
// A single relay reports as POWER, several as POWER1..n (SetOption26 off).
// A command with a parameter is a set (OnSet); a query a get (OnGet).
// Faults: DropFirst and DropRate drop sets (nothing happens, nothing is
// said); Silent ignores everything while its LWT stays Online; EchoOnly
// republishes each command as it came, on its cmnd topic (a broker loop
// or a bridged broker's echo), and acknowledges a shutter's position
// ({"ShutterPosition1":50}) without moving; Offline (and SetOnline false)
// publishes the LWT Offline, as the broker does with the will of a device
// that dropped off Wi-Fi, and ignores everything until it is back.
// Latency, IgnoreGets, Jam, Dead, FailSets and Unreported do not apply.
const ProtocolTasmota = "tasmota"

// DefaultTasmotaFullTopic is Tasmota's default FullTopic.
const DefaultTasmotaFullTopic = "%prefix%/%topic%/"

// tasmota is one simulated Tasmota device.
type tasmota struct {
	Device
	full     string
	clientID string

	connMu sync.RWMutex
	client mqtt.Client

	// Guarded by Sim.mu.
	power   []bool // by relay, from 0
	dimmer  int
	ct      int
	shutter []int // positions, by shutter from 0
	faulty
	sets, delivered int
	echoes          map[string]int // own echoes still to come back, by topic and payload
}

func (s *Sim) newTasmota(i int, d Device) error {
	switch d.Class {
	case ClassSwitch, ClassLight, ClassCover:
	default:
		return fmt.Errorf("simulator: Devices[%d] %q: a Tasmota device is a switch, light or cover, not %q", i, d.Name, d.Class)
	}
	if d.Name == "" || strings.ContainsAny(d.Name, "/+#") {
		return fmt.Errorf("simulator: Devices[%d] %q: a Tasmota Topic is one topic level", i, d.Name)
	}
	if _, dup := s.tasmotas[d.Name]; dup {
		return fmt.Errorf("simulator: Devices[%d]: Tasmota Topic %q is used twice", i, d.Name)
	}
	if d.Relays == 0 {
		d.Relays = 1
	}
	if d.Relays < 0 || d.Relays > 8 || (d.Class == ClassLight && d.Relays != 1) {
		return fmt.Errorf("simulator: Devices[%d] %q: Relays %d: a switch or cover has 1 to 8, a light 1", i, d.Name, d.Relays)
	}
	full := d.BaseTopic
	if full == "" {
		full = DefaultTasmotaFullTopic
	}
	if !strings.Contains(full, "%prefix%") || !strings.Contains(full, "%topic%") {
		return fmt.Errorf("simulator: Devices[%d] %q: FullTopic %q needs %%prefix%% and %%topic%%", i, d.Name, full)
	}
	t := &tasmota{Device: d, full: full, faulty: faulty{online: true}, dimmer: 100, ct: 300, echoes: map[string]int{}}
	t.power = make([]bool, d.Relays)
	if d.Class == ClassCover {
		t.shutter = make([]int, d.Relays)
	}
	s.tasmotas[d.Name] = t
	s.tasmotaOrder = append(s.tasmotaOrder, t)
	return nil
}

// topic is the device's topic of command (or report) cmd under prefix.
func (t *tasmota) topic(prefix, cmd string) string {
	f := strings.ReplaceAll(strings.ReplaceAll(t.full, "%prefix%", prefix), "%topic%", t.Name)
	if !strings.HasSuffix(f, "/") {
		f += "/"
	}
	return f + cmd
}

// tasmotaEndpoint is a Tasmota device as an endpoint the sim keeps
// connected: its will is its LWT Offline.
type tasmotaEndpoint struct {
	s *Sim
	t *tasmota
}

func (e tasmotaEndpoint) will() (string, []byte) { return e.t.topic("tele", "LWT"), []byte("Offline") }

func (e tasmotaEndpoint) attach(c mqtt.Client) {
	e.t.connMu.Lock()
	e.t.client = c
	e.t.connMu.Unlock()
}

func (e tasmotaEndpoint) announce(ctx context.Context, c mqtt.Client) error {
	e.attach(c)
	s, t := e.s, e.t
	s.mu.Lock()
	online := t.online
	s.mu.Unlock()
	lwt := "Offline"
	if online {
		lwt = "Online"
	}
	// Subscribed before the LWT says Online, so that Online means
	// listening (a real Tasmota publishes its LWT first: a command sent
	// the instant it says Online may be lost, see docs/TASMOTA.md).
	if err := await(ctx, c.Subscribe(t.topic("cmnd", "#"), 1, s.tasmotaHandler(t))); err != nil {
		return fmt.Errorf("subscribe cmnd: %w", err)
	}
	if err := await(ctx, c.Publish(t.topic("tele", "LWT"), 1, true, lwt)); err != nil {
		return fmt.Errorf("publish LWT: %w", err)
	}
	if online {
		s.tasmotaTelemetry(t)
	}
	return nil
}

// publish hands a message to the device's client, if connected; not
// awaited (it runs on the receive path).
func (t *tasmota) publish(topic string, retained bool, payload []byte) {
	t.connMu.RLock()
	defer t.connMu.RUnlock()
	if t.client != nil {
		t.client.Publish(topic, 1, retained, payload)
	}
}

// tasmotaTelemetry publishes tele/STATE, and tele/SENSOR for shutters.
func (s *Sim) tasmotaTelemetry(t *tasmota) {
	s.mu.Lock()
	st := t.stateJSON(s.clock.Now())
	var sns []byte
	if t.Class == ClassCover {
		sns = t.sensorJSON(s.clock.Now())
	}
	s.mu.Unlock()
	t.publish(t.topic("tele", "STATE"), false, st)
	if sns != nil {
		t.publish(t.topic("tele", "SENSOR"), false, sns)
	}
}

func onWord(on bool) string {
	if on {
		return "ON"
	}
	return "OFF"
}

// powerKey is the POWER key of relay i (from 0): POWER for a single relay.
func (t *tasmota) powerKey(i int) string {
	if len(t.power) == 1 {
		return "POWER"
	}
	return "POWER" + strconv.Itoa(i+1)
}

// stateFields are the STATE payload's device fields. Under Sim.mu.
func (t *tasmota) stateFields(m map[string]any) {
	for i, on := range t.power {
		m[t.powerKey(i)] = onWord(on)
	}
	if t.Class == ClassLight {
		m["Dimmer"] = t.dimmer
		m["CT"] = t.ct
	}
}

func (t *tasmota) stateJSON(now time.Time) []byte {
	m := map[string]any{"Time": now.UTC().Format("2006-01-02T15:04:05"), "Uptime": "0T00:00:10", "UptimeSec": 10, "MqttCount": 1,
		"Wifi": map[string]any{"AP": 1, "SSId": "sim", "RSSI": 80, "Signal": -60}}
	t.stateFields(m)
	b, _ := json.Marshal(m)
	return b
}

func (t *tasmota) shutters(m map[string]any) {
	for i, p := range t.shutter {
		m["Shutter"+strconv.Itoa(i+1)] = map[string]any{"Position": p, "Direction": 0, "Target": p, "Tilt": 0}
	}
}

func (t *tasmota) sensorJSON(now time.Time) []byte {
	m := map[string]any{"Time": now.UTC().Format("2006-01-02T15:04:05")}
	t.shutters(m)
	b, _ := json.Marshal(m)
	return b
}

type tasmotaOut struct {
	topic    string
	retained bool
	payload  []byte
}

// tasmotaHandler takes the device's commands. It never blocks: replies are
// handed to paho unawaited.
func (s *Sim) tasmotaHandler(t *tasmota) mqtt.MessageHandler {
	return func(_ mqtt.Client, m mqtt.Message) {
		cmd := m.Topic()[strings.LastIndexByte(m.Topic(), '/')+1:]
		payload := strings.TrimSpace(string(m.Payload()))
		now := s.clock.Now()
		s.mu.Lock()
		key := m.Topic() + "\x00" + string(m.Payload())
		if t.echoes[key] > 0 {
			t.echoes[key]--
			s.mu.Unlock()
			return // its own echo, come back
		}
		word, n := splitIndex(strings.ToUpper(cmd))
		query := payload == "" || payload == "?" || word == "STATE" || word == "STATUS"
		var out []tasmotaOut
		var reason string
		dropped := false
		switch {
		case !t.online:
			reason, dropped = ReasonOffline, true
		case t.silent:
			reason, dropped = ReasonSilent, true
		}
		if !query && !dropped {
			t.sets++
			t.delivered++
			switch {
			case t.delivered <= s.faults.DropFirst:
				reason, dropped = ReasonDropFirst, true
			case s.faults.DropRate > 0 && s.rand.Float64() < s.faults.DropRate:
				reason, dropped = ReasonDropRate, true
			}
		} else if !query {
			t.sets++
		}
		if !dropped {
			if t.echoOnly && !query {
				t.echoes[key]++
				out = append(out, tasmotaOut{m.Topic(), false, m.Payload()})
				if word == "SHUTTERPOSITION" {
					if p, ok := shutterTarget(payload); ok {
						out = append(out, t.result(map[string]any{"ShutterPosition" + strconv.Itoa(max(n, 1)): p}))
					}
				}
			} else {
				out = t.apply(word, n, payload, now)
			}
		}
		echoed := t.echoOnly
		s.mu.Unlock()
		if query {
			if s.onGet != nil {
				s.onGet(GetEvent{Device: t.Name, Topic: m.Topic(), Payload: m.Payload(), Ignored: dropped, Reason: reason, At: now})
			}
		} else if s.onSet != nil {
			s.onSet(SetEvent{Device: t.Name, Topic: m.Topic(), Payload: m.Payload(), Retained: m.Retained(),
				Attrs: map[string]any{cmd: payload}, Dropped: dropped || echoed, Reason: reason, At: now})
		}
		for _, o := range out {
			t.publish(o.topic, o.retained, o.payload)
		}
	}
}

// splitIndex splits "POWER2" into "POWER" and 2; "POWER" gives 0.
func splitIndex(cmd string) (string, int) {
	i := len(cmd)
	for i > 0 && cmd[i-1] >= '0' && cmd[i-1] <= '9' {
		i--
	}
	n, _ := strconv.Atoi(cmd[i:])
	return cmd[:i], n
}

func (t *tasmota) result(m map[string]any) tasmotaOut {
	b, _ := json.Marshal(m)
	return tasmotaOut{t.topic("stat", "RESULT"), false, b}
}

func shutterTarget(p string) (int, bool) {
	switch strings.ToUpper(p) {
	case "OPEN", "UP":
		return 100, true
	case "CLOSE", "DOWN":
		return 0, true
	}
	v, err := strconv.Atoi(p)
	return v, err == nil && v >= 0 && v <= 100
}

// apply carries out one command and returns what the device publishes.
// Under Sim.mu.
func (t *tasmota) apply(word string, n int, p string, now time.Time) []tasmotaOut {
	unknown := []tasmotaOut{t.result(map[string]any{"Command": "Unknown"})}
	switch word {
	case "POWER":
		i := max(n, 1) - 1
		if i >= len(t.power) {
			return unknown
		}
		switch strings.ToUpper(p) {
		case "", "?":
		case "ON", "1", "TRUE":
			t.power[i] = true
		case "OFF", "0", "FALSE":
			t.power[i] = false
		case "TOGGLE", "2":
			t.power[i] = !t.power[i]
		default:
			return unknown
		}
		k := t.powerKey(i)
		return []tasmotaOut{
			t.result(map[string]any{k: onWord(t.power[i])}),
			{t.topic("stat", k), t.PowerRetain, []byte(onWord(t.power[i]))},
		}
	case "DIMMER", "CT":
		if t.Class != ClassLight || n != 0 {
			return unknown
		}
		if p != "" && p != "?" {
			v, err := strconv.Atoi(p)
			switch {
			case err != nil:
				return unknown
			case word == "DIMMER" && v >= 0 && v <= 100:
				t.dimmer, t.power[0] = v, v > 0
			case word == "CT" && v >= 153 && v <= 500:
				t.ct, t.power[0] = v, true
			default:
				return unknown
			}
		}
		return []tasmotaOut{t.result(map[string]any{"POWER": onWord(t.power[0]), "Dimmer": t.dimmer, "CT": t.ct})}
	case "SHUTTERPOSITION":
		i := max(n, 1) - 1
		if t.Class != ClassCover || i >= len(t.shutter) {
			return unknown
		}
		k := strconv.Itoa(i + 1)
		if p != "" && p != "?" {
			v, ok := shutterTarget(p)
			if !ok {
				return unknown
			}
			t.shutter[i] = v
			sh := map[string]any{"Position": v, "Direction": 0, "Target": v}
			return []tasmotaOut{
				t.result(map[string]any{"ShutterPosition" + k: v}),
				t.result(map[string]any{"Shutter" + k: sh}),
				{t.topic("stat", "SHUTTER"+k), false, []byte(strconv.Itoa(v))},
			}
		}
		return []tasmotaOut{t.result(map[string]any{"ShutterPosition" + k: t.shutter[i]})}
	case "STATE":
		var m map[string]any
		_ = json.Unmarshal(t.stateJSON(now), &m)
		return []tasmotaOut{t.result(m)}
	case "STATUS":
		switch p {
		case "10", "8":
			m := map[string]any{"Time": now.UTC().Format("2006-01-02T15:04:05")}
			t.shutters(m)
			b, _ := json.Marshal(map[string]any{"StatusSNS": m})
			return []tasmotaOut{{t.topic("stat", "STATUS"+p), false, b}}
		case "11":
			var m map[string]any
			_ = json.Unmarshal(t.stateJSON(now), &m)
			b, _ := json.Marshal(map[string]any{"StatusSTS": m})
			return []tasmotaOut{{t.topic("stat", "STATUS11"), false, b}}
		}
	}
	return unknown
}

// setTasmotaOnline is SetOnline of a Tasmota device: offline publishes
// its LWT Offline (as the broker publishes the will of a device that
// dropped off), and the device ignores everything until it is back, when
// it says Online and publishes its STATE.
func (s *Sim) setTasmotaOnline(t *tasmota, online bool) {
	s.mu.Lock()
	t.online = online
	if online {
		t.silent = false
	}
	s.mu.Unlock()
	lwt := "Offline"
	if online {
		lwt = "Online"
	}
	t.publish(t.topic("tele", "LWT"), true, []byte(lwt))
	if online {
		s.tasmotaTelemetry(t)
	}
	s.log.Info("availability changed", "tasmota", t.Name, "online", online)
}

// tasmotaState is State of a Tasmota device: its STATE fields, and
// Shutter<n> positions. Under no lock.
func (s *Sim) tasmotaState(t *tasmota) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[string]any{}
	t.stateFields(m)
	for i, p := range t.shutter {
		m["Shutter"+strconv.Itoa(i+1)] = p
	}
	return m
}
