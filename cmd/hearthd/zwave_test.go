package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/zigbee2mqtt"
	"github.com/hearthd/hearth/protocols/zwavejs"
	"github.com/hearthd/hearth/simulator"
)

// zwaveConfig is a Z-Wave JS UI service with a lock and a switch, its
// retry policy that of testConfig.
const zwaveConfig = `
mqtt:
  listen: 127.0.0.1:0
  reconnect: {base: 10ms, cap: 100ms}
http:
  listen: 127.0.0.1:0
defaults:
  ttl: 60s
services:
  zwave:
    protocol: zwavejs
    retry:
      max_attempts: 2
      attempt_timeout: 5s
      base: 1s
      multiplier: 2
      cap: 10s
devices:
  back_door:
    service: zwave
    class: lock
    address: hall/back_door
  porch:
    service: zwave
    class: switch
`

// The read is a pollValue of the lock's currentMode (node 101, learnt from
// its status), the write a targetMode of 0.
const (
	pollBackDoor  = `get hall/back_door {"args":[{"commandClass":98,"endpoint":0,"nodeId":101,"property":"currentMode"}]}`
	unlockWritten = `set hall/back_door {"value":0}`
	// witnessPorch is the read of the porch switch that Hearth asks for
	// when an attempt times out with nothing heard from the gateway since
	// its send: its answer shows the gateway passing reports on.
	witnessPorch = `get porch {"args":[{"commandClass":37,"endpoint":0,"nodeId":102,"property":"currentValue"}]}`
)

// Each protocol's default max_attempts is what its adapter's transport
// declaration says (issue 4 item 5): 2 where the radio retries.
func TestDefaultAttemptsFollowTheTransport(t *testing.T) {
	for _, tc := range []struct {
		protocol  string
		transport devices.Transport
	}{
		{config.ProtocolZigbee2MQTT, zigbee2mqtt.Transport},
		{config.ProtocolZWaveJS, zwavejs.Transport},
	} {
		cfg, err := config.Parse("t.yaml", []byte("services:\n  s:\n    protocol: "+tc.protocol+"\n"))
		if err != nil {
			t.Fatal(err)
		}
		s, _ := cfg.Service("s")
		if got, want := s.Retry.MaxAttempts, tc.transport.DefaultAttempts(); got != want || got != 2 {
			t.Errorf("%s: default max_attempts %d, transport's DefaultAttempts %d; want both 2", tc.protocol, got, want)
		}
	}
}

// A Z-Wave lock's UNLOCK: a fresh read (pollValue) shows it secured, the
// targetMode write goes out once, the gateway echoes targetMode 0 at once
// and the lock then reports currentMode 0: succeeded after 1 attempt.
func TestZWaveLockUnlockReadThenWrite(t *testing.T) {
	h := newHarness(t, harnessOptions{config: zwaveConfig})
	h.settle("back_door", "porch")

	h.publish("back_door", `{"state":"UNLOCK","op_id":"zw-unlock"}`)
	r := h.final("zw-unlock")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["lock_state"] != "unlocked" || r.State["state"] != "UNLOCK" {
		t.Errorf("zw-unlock: %s/%s after %d attempts, state %v (%s); want succeeded after 1 with lock_state unlocked", r.Status, r.Reason, r.Attempts, r.State, r.Detail)
	}
	h.wantTraffic(pollBackDoor, unlockWritten)
	if got := h.sim.State("hall/back_door")["98/0/currentMode"]; got != 0 {
		t.Errorf("currentMode %v; want 0", got)
	}
}

// A lock that only echoes (the gateway publishes targetMode, the bolt never
// reports a new currentMode): the echo confirms nothing, the UNLOCK fails
// after its 2 attempts and the lock still reads locked. The echo is the
// gateway's, not the node's, so when attempt 1 times out Hearth asks the
// porch switch for its value (a witness), whose answer shows the gateway
// talking: the silence is the lock's. The witness read goes out at the
// timeout, before the retry's fresh read.
func TestZWaveTargetModeEchoDoesNotConfirm(t *testing.T) {
	h := newHarness(t, harnessOptions{config: zwaveConfig, faults: simulator.Faults{EchoOnly: []string{"hall/back_door"}}})
	h.settle("back_door", "porch")

	h.publish("back_door", `{"state":"UNLOCK","op_id":"zw-echo"}`)
	h.wantTraffic(pollBackDoor, unlockWritten)
	// Attempt 1 unconfirmed: the witness read goes out at the timeout, and
	// the backoff before attempt 2 is set once the porch switch answers
	// it; advanceTimeout waits for both (moving the clock before that could
	// find only the witness's timer).
	h.advanceTimeout(5 * time.Second)
	if got := h.nextTraffic(); got != witnessPorch {
		t.Fatalf("after attempt 1's timeout: %s; want the witness read %s", got, witnessPorch)
	}
	h.advance(time.Second) // the backoff before attempt 2
	h.wantTraffic(pollBackDoor, unlockWritten)
	h.advance(5 * time.Second) // attempt 2 unconfirmed
	r := h.final("zw-echo")
	if r.Status != devices.Failed || r.Reason != devices.ReasonTimeout || r.Attempts != 2 {
		t.Errorf("zw-echo: %s/%s after %d attempts (%s); want failed/timeout after 2", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	if got := h.sim.State("hall/back_door"); got["98/0/targetMode"] != 0.0 || got["98/0/currentMode"] != 255 {
		t.Errorf("lock values %v; want targetMode 0 echoed and currentMode still 255", got)
	}
}

// A Z-Wave switch's ON: targetValue true out, currentValue true back.
func TestZWaveSwitchOn(t *testing.T) {
	h := newHarness(t, harnessOptions{config: zwaveConfig})
	h.settle("back_door", "porch")

	h.publish("porch", `{"state":"ON","op_id":"zw-on"}`)
	r := h.final("zw-on")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["state"] != "ON" {
		t.Errorf("zw-on: %s/%s after %d attempts, state %v (%s); want succeeded after 1 with state ON", r.Status, r.Reason, r.Attempts, r.State, r.Detail)
	}
	h.wantTraffic(`set porch {"value":true}`)
}

// A lock reporting Door Lock mode 0xFE (unknown): the fresh read before the
// UNLOCK reads unknown, which is never unlocked: failed state_unknown,
// nothing written.
func TestZWaveUnknownLockModeFailsStateUnknown(t *testing.T) {
	h := newHarness(t, harnessOptions{config: zwaveConfig})
	h.settle("back_door", "porch")
	mirror := h.watch("hearth/back_door")
	if err := h.sim.SetLockMode("hall/back_door", simulator.LockModeUnknown); err != nil {
		t.Fatal(err)
	}
	for seen := false; !seen; {
		select {
		case m := <-mirror:
			var st map[string]any
			seen = json.Unmarshal(m.Payload(), &st) == nil && st["lock_state"] == "unknown"
		case <-time.After(eventWait):
			t.Fatal("hearthd never mirrored the unknown lock mode")
		}
	}

	h.publish("back_door", `{"state":"UNLOCK","op_id":"zw-fe"}`)
	r := h.final("zw-fe")
	if r.Status != devices.Failed || r.Reason != devices.ReasonStateUnknown || r.Attempts != 0 || r.State["lock_state"] != "unknown" {
		t.Errorf("zw-fe: %s/%s after %d attempts, state %v (%s); want failed/state_unknown after 0 with lock_state unknown", r.Status, r.Reason, r.Attempts, r.State, r.Detail)
	}
	h.wantTraffic(pollBackDoor)
	h.noSetsYet()
}

// The gateway going offline (its _CLIENTS status false) opens the
// service's breaker, as Zigbee2MQTT's bridge/state does: a command then
// fails fast with breaker_open and nothing is written.
func TestZWaveGatewayOfflineOpensTheBreaker(t *testing.T) {
	h := newHarness(t, harnessOptions{config: zwaveConfig})
	h.settle("back_door", "porch")
	states := h.watch("hearth/services/zwave/state")
	if err := h.sim.SetBridgeOnline("zwave", false, true); err != nil {
		t.Fatal(err)
	}
	nextState(t, states, "open")

	h.publish("porch", `{"state":"ON","op_id":"zw-down"}`)
	r := h.final("zw-down")
	if r.Status != devices.Failed || r.Reason != devices.ReasonBreakerOpen || r.Attempts != 0 {
		t.Errorf("zw-down: %s/%s after %d attempts (%s); want failed/breaker_open after 0", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	h.noSetsYet()
}

// sleepyZWaveConfig is zwaveConfig with a battery thermostat that wakes
// every 5 minutes and listens 10 s.
const sleepyZWaveConfig = zwaveConfig + `  thermostat:
    service: zwave
    class: climate
    sleepy: true
    wake_interval: 5m
    awake_window: 10s
`

// A Z-Wave node the gateway reports Asleep receives no application retry:
// the command waits queued while the node sleeps — nothing is written, on
// any timer — and is written once when the node wakes, and confirmed from
// its currentValue.
func TestZWaveAsleepNodeGetsNoApplicationRetry(t *testing.T) {
	h := newHarness(t, harnessOptions{config: sleepyZWaveConfig, simOnFakeClock: true})
	h.settle("porch")
	h.publish("thermostat", `{"current_heating_setpoint":21,"op_id":"heat","ttl":"10m"}`)
	if r := h.result("heat"); r.Status != devices.Accepted {
		t.Fatalf("heat: %s/%s; want accepted", r.Status, r.Reason)
	}
	if r := h.result("heat"); r.Status != devices.Queued || r.Reason != devices.ReasonAsleep {
		t.Fatalf("heat: %s/%s; want queued/asleep", r.Status, r.Reason)
	}
	// Four minutes and more of sleep, in steps: nothing is written.
	for range 29 {
		h.clock.Advance(10 * time.Second)
		h.noSetsYet()
	}
	h.clock.Advance(5*time.Minute - 290*time.Second) // the wake
	if e := h.nextSet(); e.Device != "thermostat" || e.Queued {
		t.Errorf("at the wake: a write to %s (queued %v); want one write to the awake thermostat", e.Device, e.Queued)
	}
	r := h.await(func(r devices.Result) bool { return r.OpID == "heat" && r.Status.Terminal() }, "heat's end")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["current_heating_setpoint"] != 21.0 {
		t.Errorf("heat: %s/%s after %d attempts, state %v; want succeeded after 1 at 21", r.Status, r.Reason, r.Attempts, r.State)
	}
	h.noSetsYet()
}

// The Z-Wave driver going away while the gateway's MQTT client stays
// connected (driver/status false, the _CLIENTS status still true) opens
// the service's breaker: a command fails fast with breaker_open and
// nothing is written. The driver back (driver/status true), the breaker
// goes half-open and the next command is its probe and succeeds.
func TestZWaveDriverGoneOpensTheBreaker(t *testing.T) {
	h := newHarness(t, harnessOptions{config: zwaveConfig})
	h.settle("back_door", "porch")
	states := h.watch("hearth/services/zwave/state")
	if err := h.sim.SetDriverReady("zwave", false); err != nil {
		t.Fatal(err)
	}
	nextState(t, states, "open")

	h.publish("porch", `{"state":"ON","op_id":"zw-nodriver"}`)
	r := h.final("zw-nodriver")
	if r.Status != devices.Failed || r.Reason != devices.ReasonBreakerOpen || r.Attempts != 0 {
		t.Errorf("zw-nodriver: %s/%s after %d attempts (%s); want failed/breaker_open after 0", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	h.noSetsYet()

	if err := h.sim.SetDriverReady("zwave", true); err != nil {
		t.Fatal(err)
	}
	nextState(t, states, "half_open")
	h.publish("porch", `{"state":"ON","op_id":"zw-driverback"}`)
	if r := h.final("zw-driverback"); r.Status != devices.Succeeded || r.Attempts != 1 {
		t.Errorf("zw-driverback: %s/%s after %d attempts (%s); want succeeded after 1", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	h.wantTraffic(`set porch {"value":true}`)
}

// endpointZWaveConfig is a gateway that names its nodes, with a double
// switch whose two relays are endpoints 1 and 2 of one node, and a lamp
// given by its raw name with spaces.
const endpointZWaveConfig = `
mqtt:
  listen: 127.0.0.1:0
  reconnect: {base: 10ms, cap: 100ms}
http:
  listen: 127.0.0.1:0
defaults:
  ttl: 60s
services:
  zwave:
    protocol: zwavejs
    node_names: true
    retry:
      max_attempts: 2
      attempt_timeout: 5s
      base: 1s
      multiplier: 2
      cap: 10s
devices:
  left_relay:
    class: switch
    address: kitchen_double/1
  right_relay:
    class: switch
    address: kitchen_double/2
  ceiling:
    class: light
    address: Living Room/Ceiling Lamp
`

// A double switch's relay 2 (endpoint 2) takes its ON on 37/2/targetValue
// and is confirmed by endpoint 2's currentValue; relay 1 stays off, and
// its own OFF→ON goes to endpoint 1.
func TestZWaveEndpointTwoOfADoubleSwitch(t *testing.T) {
	h := newHarness(t, harnessOptions{config: endpointZWaveConfig})
	h.settle("left_relay", "right_relay", "ceiling")

	h.publish("right_relay", `{"state":"ON","op_id":"ep2-on"}`)
	r := h.final("ep2-on")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["state"] != "ON" {
		t.Errorf("ep2-on: %s/%s after %d attempts, state %v (%s); want succeeded after 1 with state ON", r.Status, r.Reason, r.Attempts, r.State, r.Detail)
	}
	if e := h.nextSet(); e.Topic != "zwave/kitchen_double/37/2/targetValue/set" {
		t.Errorf("the ON went to %s; want zwave/kitchen_double/37/2/targetValue/set", e.Topic)
	}
	st := h.sim.State("kitchen_double")
	if st["37/2/currentValue"] != true || st["37/1/currentValue"] != false || st["37/0/currentValue"] != false {
		t.Errorf("double switch values %v; want endpoint 2 on, endpoints 0 and 1 off", st)
	}
	if got := mirrored(t, h, "left_relay"); got["state"] != "OFF" {
		t.Errorf("left_relay's state %v; want OFF (endpoint 2's ON is not endpoint 1's)", got)
	}
}

// A node named with spaces in the config ("Living Room/Ceiling Lamp") is
// reached at the topics the gateway writes for it, Living_Room/Ceiling_Lamp.
func TestZWaveRawNodeNameIsSanitised(t *testing.T) {
	h := newHarness(t, harnessOptions{config: endpointZWaveConfig})
	h.settle("left_relay", "right_relay", "ceiling")

	h.publish("ceiling", `{"state":"ON","brightness":128,"op_id":"raw-name"}`)
	r := h.final("raw-name")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["brightness"] != 128.0 {
		t.Errorf("raw-name: %s/%s after %d attempts, state %v (%s); want succeeded after 1 at brightness 128", r.Status, r.Reason, r.Attempts, r.State, r.Detail)
	}
	if e := h.nextSet(); e.Topic != "zwave/Living_Room/Ceiling_Lamp/38/0/targetValue/set" {
		t.Errorf("the write went to %s; want zwave/Living_Room/Ceiling_Lamp/38/0/targetValue/set", e.Topic)
	}
}

// A thermostat whose setpoint is in °F (its value's unit "°F"): Hearth's
// target of 21 °C is written as 70 °F (round(21·9/5+32) = round(69.8)),
// and the device's 70 °F confirms 21 °C, the state Hearth reports.
func TestZWaveFahrenheitSetpointStaysCelsius(t *testing.T) {
	h := newHarness(t, harnessOptions{config: sleepyZWaveConfig, simDevice: func(d *simulator.Device) {
		if d.Name == "thermostat" {
			d.Fahrenheit, d.WakeInterval, d.AwakeWindow = true, 0, 0
		}
	}})
	h.settle("porch", "thermostat")
	if got := mirrored(t, h, "thermostat"); got["current_heating_setpoint"] != 20.0 {
		t.Fatalf("thermostat at start: %v; want 68 °F read as 20 °C", got)
	}
	h.publish("thermostat", `{"current_heating_setpoint":21,"op_id":"heat-f"}`)
	r := h.await(func(r devices.Result) bool { return r.OpID == "heat-f" && r.Status.Terminal() }, "heat-f's end")
	if r.Status != devices.Succeeded || r.Attempts != 1 || r.State["current_heating_setpoint"] != 21.0 {
		t.Errorf("heat-f: %s/%s after %d attempts, state %v (%s); want succeeded after 1 at 21 °C", r.Status, r.Reason, r.Attempts, r.State, r.Detail)
	}
	if e := h.nextSet(); string(e.Payload) != `{"value":70}` {
		t.Errorf("setpoint written %s; want {\"value\":70} (°F)", e.Payload)
	}
	if got := h.sim.State("thermostat")["67/0/setpoint/1"]; got != 70.0 {
		t.Errorf("thermostat setpoint %v; want 70 (°F)", got)
	}
}

// mirrored returns the state hearthd mirrors (retained) on hearth/<device>.
func mirrored(t *testing.T, h *harness, device string) map[string]any {
	t.Helper()
	select {
	case m := <-h.watch("hearth/" + device):
		var st map[string]any
		if err := json.Unmarshal(m.Payload(), &st); err != nil {
			t.Fatalf("hearth/%s: not JSON: %s", device, m.Payload())
		}
		return st
	case <-time.After(eventWait):
		t.Fatalf("hearth/%s: nothing mirrored", device)
		return nil
	}
}
