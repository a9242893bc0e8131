package shelly

import (
	"context"
	"errors"
	"reflect"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/protocols/mqtt"
	"github.com/hearthd/hearth/retry"
)

func reply(id int64, src, body string) string {
	return `{"id":` + strconv.FormatInt(id, 10) + `,"src":"` + src + `","dst":"shelly/hearth/wifi",` + body + `}`
}

// A Switch.Set goes out as the documented request frame, and the response
// with its id and no error confirms the state asked for.
func TestSwitchSetConfirmedByTheResponseWithItsID(t *testing.T) {
	addr := startBroker(t)
	a, s := startAdapter(t, addr, Options{})
	dev := newDevice(t, addr, "shelly/plug-1/rpc")
	if err := send(t, a, "plug", devices.Target{"state": "ON"}); err != nil {
		t.Fatal(err)
	}
	r := dev.request(t)
	if r.Src != "shelly/hearth/wifi" || r.Method != "Switch.Set" || !reflect.DeepEqual(r.Params, map[string]any{"id": 0.0, "on": true}) {
		t.Fatalf("request = %+v, want Switch.Set {id:0,on:true} from shelly/hearth/wifi", r)
	}
	dev.publish(t, "shelly/hearth/wifi/rpc", reply(r.ID, "plug-1", `"result":{"was_on":false}`))
	c := s.next(t)
	if c.kind != "report" || c.name != "plug" || c.retained || !reflect.DeepEqual(c.state, map[string]any{"state": "ON"}) {
		t.Fatalf("got %+v, want a live report of plug {state:ON}", c)
	}
}

// A response to another id, to an earlier attempt or from another device
// confirms nothing. (A retained one is refused outright: TestRetainedResponseConfirmsNothing.)
func TestResponsesThatAreNotTheNewestRequestsConfirmNothing(t *testing.T) {
	addr := startBroker(t)
	a, s := startAdapter(t, addr, Options{})
	dev := newDevice(t, addr, "shelly/plug-1/rpc")
	if err := send(t, a, "plug", devices.Target{"state": "ON"}); err != nil {
		t.Fatal(err)
	}
	first := dev.request(t)
	if err := send(t, a, "plug", devices.Target{"state": "ON"}); err != nil {
		t.Fatal(err)
	}
	second := dev.request(t)
	if second.ID == first.ID {
		t.Fatalf("two requests share id %d", first.ID)
	}
	dev.publish(t, "shelly/hearth/wifi/rpc", reply(first.ID, "plug-1", `"result":{"was_on":false}`))    // stale
	dev.publish(t, "shelly/hearth/wifi/rpc", reply(second.ID+7, "plug-1", `"result":{"was_on":false}`)) // another id
	dev.publish(t, "shelly/hearth/wifi/rpc", reply(second.ID, "dimmer-1", `"result":{"was_on":false}`)) // another device
	s.nothingBefore(t, dev)
}

// An error response goes to SendFailed as an *RPCError: invalid argument
// is permanent for the retry policy, unavailable transient.
func TestErrorResponsesAreClassified(t *testing.T) {
	addr := startBroker(t)
	a, s := startAdapter(t, addr, Options{})
	dev := newDevice(t, addr, "shelly/plug-1/rpc")
	for _, tc := range []struct {
		code      int
		permanent bool
	}{{CodeInvalidArgument, true}, {CodeNotFound, true}, {CodeFailedPrecondition, true}, {CodeNoHandler, true}, {CodeUnavailable, false}, {CodeDeadlineExceeded, false}, {-1, false}} {
		if err := send(t, a, "plug", devices.Target{"state": "OFF"}); err != nil {
			t.Fatal(err)
		}
		r := dev.request(t)
		dev.publish(t, "shelly/hearth/wifi/rpc", reply(r.ID, "plug-1", `"error":{"code":`+strconv.Itoa(tc.code)+`,"message":"m"}`))
		c := s.next(t)
		var rpcErr *RPCError
		if c.kind != "failed" || c.name != "plug" || !errors.As(c.err, &rpcErr) || rpcErr.Code != tc.code {
			t.Fatalf("code %d: got %+v, want SendFailed(plug) with that code", tc.code, c)
		}
		if got := retry.Classify(c.err).Permanent(); got != tc.permanent {
			t.Errorf("code %d: retry.Classify(...).Permanent() = %v, want %v", tc.code, got, tc.permanent)
		}
	}
}

// Status notifications report each configured component's state;
// brightness maps from Shelly's percent, to the brightness Hearth wrote.
func TestNotifyStatusReportsComponents(t *testing.T) {
	addr := startBroker(t)
	a, s := startAdapter(t, addr, Options{})
	dev := newDevice(t, addr, "shelly/dimmer-1/rpc")
	if err := send(t, a, "lamp", devices.Target{"brightness": 128.0}); err != nil {
		t.Fatal(err)
	}
	r := dev.request(t)
	if r.Method != "Light.Set" || !reflect.DeepEqual(r.Params, map[string]any{"id": 0.0, "on": true, "brightness": 50.0}) {
		t.Fatalf("request = %+v, want Light.Set {id:0,on:true,brightness:50}", r)
	}
	for _, tc := range []struct {
		topic, payload string
		device         string
		want           map[string]any
	}{
		{"shelly/dimmer-1/events/rpc", `{"src":"dimmer-1","method":"NotifyStatus","params":{"ts":1,"light:0":{"id":0,"output":true,"brightness":50}}}`, "lamp", map[string]any{"state": "ON", "brightness": 128.0}},
		{"shelly/dimmer-1/events/rpc", `{"src":"dimmer-1","method":"NotifyStatus","params":{"ts":1,"light:0":{"id":0,"brightness":100}}}`, "lamp", map[string]any{"brightness": 254.0}},
		{"shelly/pro2pm-1/events/rpc", `{"src":"pro2pm-1","method":"NotifyStatus","params":{"ts":1,"cover:0":{"id":0,"state":"opening","current_pos":12}}}`, "blind", map[string]any{"moving": "UP", "position": 12.0, "state": "OPEN"}},
		{"shelly/pro2pm-1/status/cover:0", `{"id":0,"state":"stopped","current_pos":40}`, "blind", map[string]any{"moving": "STOP", "position": 40.0, "state": "OPEN"}},
		{"shelly/plus1-1/events/rpc", `{"src":"plus1-1","method":"NotifyFullStatus","params":{"ts":1,"switch:0":{"id":0,"output":false},"input:1":{"id":1,"state":true}}}`, "garage", map[string]any{"state": "CLOSE", "position": 0.0}},
	} {
		dev.publish(t, tc.topic, tc.payload)
		c := s.next(t)
		if c.kind != "report" || c.name != tc.device || !reflect.DeepEqual(c.state, tc.want) {
			t.Errorf("%s %s: got %+v, want report of %s %v", tc.topic, tc.payload, c, tc.device, tc.want)
		}
	}
	// NotifyEvent, another component, an unknown device: nothing.
	dev.publish(t, "shelly/dimmer-1/events/rpc", `{"src":"dimmer-1","method":"NotifyEvent","params":{"ts":1,"events":[{"component":"input:0","event":"single_push"}]}}`)
	dev.publish(t, "shelly/dimmer-1/events/rpc", `{"src":"dimmer-1","method":"NotifyStatus","params":{"ts":1,"wifi":{"rssi":-60}}}`)
	dev.publish(t, "shelly/other-1/events/rpc", `{"src":"other-1","method":"NotifyStatus","params":{"ts":1,"switch:0":{"output":true}}}`)
	s.nothingBefore(t, dev)
}

// A retained notification is passed on as retained (old news, which the
// dispatcher never takes as a confirmation).
func TestRetainedStatusIsPassedOnRetained(t *testing.T) {
	addr := startBroker(t)
	dev := newDevice(t, addr, "")
	dev.publishRetained(t, "shelly/plug-1/status/switch:0", `{"id":0,"output":true}`)
	t.Cleanup(func() { dev.publishRetained(t, "shelly/plug-1/status/switch:0", "") })
	_, s := startAdapter(t, addr, Options{})
	c := s.next(t)
	if c.kind != "report" || c.name != "plug" || !c.retained || c.state["state"] != "ON" {
		t.Fatalf("got %+v, want plug's retained report {state:ON}", c)
	}
}

// online false marks the Shelly's devices offline, and the service once
// every Shelly said so; true brings both back.
func TestOnlineIsAvailabilityAndTheServicesState(t *testing.T) {
	addr := startBroker(t)
	_, s := startAdapter(t, addr, Options{Devices: testDevices[:2]})
	dev := newDevice(t, addr, "")
	want := func(kind, name string, online bool) {
		t.Helper()
		c := s.next(t)
		if c.kind != kind || c.name != name || c.online != online {
			t.Fatalf("got %+v, want %s %s online=%v", c, kind, name, online)
		}
	}
	dev.publish(t, "shelly/plug-1/online", "false")
	want("availability", "plug", false)
	dev.publish(t, "shelly/dimmer-1/online", "true")
	want("bridge", "wifi", true)
	want("availability", "lamp", true)
	dev.publish(t, "shelly/dimmer-1/online", "false")
	want("bridge", "wifi", false)
	want("availability", "lamp", false)
}

// A garage door already at the target gets no pulse: Send reads the
// contact, reports it, and sends nothing more.
func TestGarageDoorAtTargetIsNotPulsed(t *testing.T) {
	addr := startBroker(t)
	a, s := startAdapter(t, addr, Options{})
	dev := newDevice(t, addr, "shelly/plus1-1/rpc")
	done := make(chan error, 1)
	go func() { done <- send(t, a, "garage", devices.Target{"state": "CLOSE"}) }()
	r := dev.request(t)
	if r.Method != "Input.GetStatus" || !reflect.DeepEqual(r.Params, map[string]any{"id": 1.0}) {
		t.Fatalf("first request = %+v, want Input.GetStatus {id:1}", r)
	}
	dev.publish(t, "shelly/hearth/wifi/rpc", reply(r.ID, "plus1-1", `"result":{"id":1,"state":true}`))
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if c := s.next(t); c.kind != "report" || !reflect.DeepEqual(c.state, map[string]any{"state": "CLOSE", "position": 0.0}) {
		t.Fatalf("got %+v, want the contact's reading CLOSE", c)
	}
	select {
	case r := <-dev.reqs:
		t.Fatalf("a request after the read of a closed door: %+v", r)
	default:
	}
}

// A garage door not at the target is pulsed once with toggle_after; a
// second attempt while it travels (the relay answered the pulse) is not
// pulsed again.
func TestGarageDoorPulsedOnceWithToggleAfter(t *testing.T) {
	addr := startBroker(t)
	a, s := startAdapter(t, addr, Options{})
	dev := newDevice(t, addr, "shelly/plus1-1/rpc")
	for attempt := 1; attempt <= 2; attempt++ {
		done := make(chan error, 1)
		go func() { done <- send(t, a, "garage", devices.Target{"state": "OPEN"}) }()
		r := dev.request(t)
		dev.publish(t, "shelly/hearth/wifi/rpc", reply(r.ID, "plus1-1", `"result":{"id":1,"state":true}`))
		if c := s.next(t); c.state["state"] != "CLOSE" {
			t.Fatalf("attempt %d: got %+v, want the contact's reading CLOSE", attempt, c)
		}
		if attempt == 1 {
			p := dev.request(t)
			if p.Method != "Switch.Set" || !reflect.DeepEqual(p.Params, map[string]any{"id": 0.0, "on": true, "toggle_after": 1.0}) {
				t.Fatalf("pulse = %+v, want Switch.Set {id:0,on:true,toggle_after:1}", p)
			}
			dev.publish(t, "shelly/hearth/wifi/rpc", reply(p.ID, "plus1-1", `"result":{"was_on":false}`))
			s.nothingBefore(t, dev) // the pulse's answer is handled: it confirms nothing of the door
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	select {
	case r := <-dev.reqs:
		t.Fatalf("a second pulse while the door travels: %+v", r)
	default:
	}
}

// A pulse the relay never answered may be sent again: it was lost, and
// the door did not move.
func TestGarageDoorUnansweredPulseIsSentAgain(t *testing.T) {
	addr := startBroker(t)
	a, s := startAdapter(t, addr, Options{})
	dev := newDevice(t, addr, "shelly/plus1-1/rpc")
	for attempt := 1; attempt <= 2; attempt++ {
		done := make(chan error, 1)
		go func() { done <- send(t, a, "garage", devices.Target{"state": "OPEN"}) }()
		r := dev.request(t)
		dev.publish(t, "shelly/hearth/wifi/rpc", reply(r.ID, "plus1-1", `"result":{"id":1,"state":true}`))
		s.next(t) // the reading
		if p := dev.request(t); p.Method != "Switch.Set" {
			t.Fatalf("attempt %d: %+v, want a pulse", attempt, p)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// A contact that does not answer leaves the door alone: a transient
// error, nothing pulsed.
func TestGarageDoorUnreadIsNotPulsed(t *testing.T) {
	addr := startBroker(t)
	a, _ := startAdapter(t, addr, Options{ReadTimeout: 50 * time.Millisecond})
	dev := newDevice(t, addr, "shelly/plus1-1/rpc")
	err := send(t, a, "garage", devices.Target{"state": "OPEN"})
	if !errors.Is(err, ErrNoAnswer) || retry.Classify(err).Permanent() {
		t.Fatalf("Send = %v, want a transient ErrNoAnswer", err)
	}
	if r := dev.request(t); r.Method != "Input.GetStatus" {
		t.Fatalf("request = %+v, want only the read", r)
	}
	select {
	case r := <-dev.reqs:
		t.Fatalf("pulsed on an unknown state: %+v", r)
	default:
	}
}

// With a Publisher, a message stamped by no one confirms nothing.
func TestUnstampedMessagesAreDropped(t *testing.T) {
	addr := startBroker(t)
	a, s := startAdapter(t, addr, Options{Publisher: "wifi", StampProperty: "hearth-username"})
	dev := newDevice(t, addr, "")
	dev.publish(t, "shelly/plug-1/online", "false")
	dev.publish(t, "shelly/plug-1/events/rpc", `{"src":"plug-1","method":"NotifyStatus","params":{"switch:0":{"output":true}}}`)
	waitFor(t, func() bool { return a.Untrusted() == 2 })
	select {
	case c := <-s.calls:
		t.Fatalf("an untrusted message reached the sink: %+v", c)
	default:
	}
}

// waitFor polls cond until deadline.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	end := time.Now().Add(deadline)
	for !cond() {
		if time.Now().After(end) {
			t.Fatal("condition not met within the deadline")
		}
		runtime.Gosched()
	}
}

// A response the broker replays retained on subscribe confirms nothing,
// even with the id of the request in flight.
func TestRetainedResponseConfirmsNothing(t *testing.T) {
	addr := startBroker(t)
	a, s := startAdapter(t, addr, Options{})
	dev := newDevice(t, addr, "shelly/plug-1/rpc")
	if err := send(t, a, "plug", devices.Target{"state": "ON"}); err != nil {
		t.Fatal(err)
	}
	r := dev.request(t)
	a.response(mqtt.Message{Topic: "shelly/hearth/wifi/rpc", Payload: []byte(reply(r.ID, "plug-1", `"result":{"was_on":false}`)), Retained: true})
	s.nothingBefore(t, dev)
	// The same answer live confirms: the id was still pending.
	dev.publish(t, "shelly/hearth/wifi/rpc", reply(r.ID, "plug-1", `"result":{"was_on":false}`))
	if c := s.next(t); c.kind != "report" || c.state["state"] != "ON" {
		t.Fatalf("got %+v, want the live answer's report", c)
	}
}

// Unwritable targets fail permanently with nothing sent.
func TestUnsupportedTargetsArePermanent(t *testing.T) {
	for _, tc := range []struct {
		addr  string
		class devices.Class
		t     devices.Target
	}{
		{"p", devices.Switch, devices.Target{"state": "ON", "brightness": 3.0}},
		{"p/switch:0", devices.Light, devices.Target{"brightness": 3.0}},
		{"p", devices.Light, devices.Target{"color_temp": 300.0}},
		{"p", devices.Cover, devices.Target{"tilt": 3.0}},
	} {
		addr, err := ParseAddress(tc.addr, tc.class)
		if err != nil {
			t.Fatal(err)
		}
		_, _, _, _, err = encode(addr, tc.class, tc.t)
		if err == nil || !retry.Classify(err).Permanent() {
			t.Errorf("%s %s %v: err = %v, want permanent", tc.addr, tc.class, tc.t, err)
		}
	}
	if _, err := doorTarget(devices.Target{"position": 40.0}); err == nil || !retry.Classify(err).Permanent() {
		t.Errorf("garage position 40: err = %v, want permanent", err)
	}
}

// answerSink is a sink with AnswerFailed, as the dispatcher is.
type answerSink struct {
	*sink
	answers chan error
}

func (s answerSink) AnswerFailed(_ string, err error) { s.answers <- err }

// A sink with AnswerFailed gets the error answer there, not in SendFailed.
func TestErrorResponseGoesToAnswerFailed(t *testing.T) {
	addr := startBroker(t)
	conn := mqtt.New(mqtt.Options{URL: "tcp://" + addr, ClientID: "hearth-answer"})
	a := New(conn, Options{Service: "wifi", Devices: testDevices})
	s := answerSink{sink: newSink(), answers: make(chan error, 4)}
	if err := a.Start(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- conn.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-conn.Up()
	dev := newDevice(t, addr, "shelly/plug-1/rpc")
	if err := send(t, a, "plug", devices.Target{"state": "ON"}); err != nil {
		t.Fatal(err)
	}
	r := dev.request(t)
	dev.publish(t, "shelly/hearth/wifi/rpc", reply(r.ID, "plug-1", `"error":{"code":-103,"message":"m"}`))
	select {
	case err := <-s.answers:
		var rpcErr *RPCError
		if !errors.As(err, &rpcErr) || rpcErr.Code != -103 || rpcErr.Method != "Switch.Set" {
			t.Fatalf("AnswerFailed(%v); want Switch.Set's -103", err)
		}
	case c := <-s.calls:
		t.Fatalf("got %+v; want AnswerFailed", c)
	case <-time.After(deadline):
		t.Fatal("no AnswerFailed")
	}
}
