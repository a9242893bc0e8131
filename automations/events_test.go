package automations

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"log/slog"
)

// sceneRule runs on Z-Wave JS UI's central scene value of one button.
func sceneRule(m *MQTTTrigger) Rule {
	return Rule{
		Name:     "scene",
		Triggers: []Trigger{{MQTT: m}},
		Actions:  []Action{{Command: &CommandAction{Device: "garage", Target: map[string]any{"state": "CLOSE"}}}},
	}
}

const sceneTopic = "zwave/hall_button/central_scene/endpoint_0/scene/001"

// A scene notification delivered 4 times within a second (a weak link
// re-sending it, each copy stamped with its own receive time) runs the
// rule once and sends one command.
func TestRepeatedSceneNotificationRunsOnce(t *testing.T) {
	h := start(t, friday, sceneRule(&MQTTTrigger{Topic: sceneTopic}))
	for i := range 4 {
		h.e.Message(sceneTopic, fmt.Appendf(nil, `{"time":%d,"value":0,"sequence":7}`, friday.UnixMilli()+int64(i)*250), false)
		h.sync()
		h.clock.Advance(250 * time.Millisecond)
	}
	h.sync()
	if got := len(h.rec.Commands()); got != 1 {
		t.Fatalf("%d commands; want 1 for one scene notification re-sent 4 times", got)
	}
	if s := h.status("scene"); s.Runs != 1 || s.Repeats != 3 {
		t.Errorf("status %+v; want 1 run and 3 repeats", s)
	}
	if !strings.Contains(h.logs.String(), "repeat of an event ignored") {
		t.Errorf("no log line for the repeats:\n%s", h.logs)
	}
}

// The same notification with the bridge's sequence number changing is 4
// events: the rule runs 4 times, with 4 op_ids.
func TestSceneNotificationsWithNewSequenceNumbersRunEachTime(t *testing.T) {
	h := start(t, friday, sceneRule(&MQTTTrigger{Topic: sceneTopic}))
	for i := range 4 {
		h.e.Message(sceneTopic, fmt.Appendf(nil, `{"time":%d,"value":0,"sequence":%d}`, friday.UnixMilli()+int64(i)*250, 7+i), false)
		h.sync()
		h.clock.Advance(250 * time.Millisecond)
	}
	h.sync()
	ids := map[any]bool{}
	for _, c := range h.rec.Commands() {
		ids[c.Payload["op_id"]] = true
	}
	if got := len(h.rec.Commands()); got != 4 || len(ids) != 4 {
		t.Fatalf("%d commands with %d op_ids; want 4 and 4", got, len(ids))
	}
}

// The window slides: copies each within it of the one before are one
// event however long the burst; a copy a whole window after the last is
// a new event.
func TestRepeatWindowSlidesFromTheLastCopy(t *testing.T) {
	h := start(t, friday, sceneRule(&MQTTTrigger{Topic: "button/x", RepeatWindow: time.Second}))
	for range 5 {
		h.e.Message("button/x", []byte(`{"action":"single","linkquality":80}`), false)
		h.sync()
		h.clock.Advance(900 * time.Millisecond)
	}
	if got := len(h.rec.Commands()); got != 1 {
		t.Fatalf("%d commands after a 3.6 s burst of copies 0.9 s apart; want 1", got)
	}
	h.clock.Advance(100 * time.Millisecond) // a second after the last copy
	h.e.Message("button/x", []byte(`{"action":"single","linkquality":91}`), false)
	h.sync()
	if got := len(h.rec.Commands()); got != 2 {
		t.Fatalf("%d commands after a press a window after the burst; want 2", got)
	}
}

// EventID names what identifies an event: equal there, different
// elsewhere, two messages are one event.
func TestEventIDFieldsIdentifyTheEvent(t *testing.T) {
	h := start(t, friday, sceneRule(&MQTTTrigger{Topic: "button/x", EventID: []string{"action", "action_transaction"}}))
	h.e.Message("button/x", []byte(`{"action":"single","action_transaction":12,"battery":90}`), false)
	h.e.Message("button/x", []byte(`{"action":"single","action_transaction":12,"battery":89}`), false)
	h.e.Message("button/x", []byte(`{"action":"single","action_transaction":13,"battery":89}`), false)
	h.sync()
	if got := len(h.rec.Commands()); got != 2 {
		t.Fatalf("%d commands; want 2 (transactions 12 and 13)", got)
	}
}

// Fields match a JSON payload's fields whatever else it carries.
func TestFieldsMatchAJSONPayload(t *testing.T) {
	h := start(t, friday, sceneRule(&MQTTTrigger{Topic: "zigbee2mqtt/button", Fields: map[string]any{"action": "single"}}))
	h.e.Message("zigbee2mqtt/button", []byte(`{"action":"double","linkquality":80}`), false)
	h.e.Message("zigbee2mqtt/button", []byte(`not json`), false)
	h.e.Message("zigbee2mqtt/button", []byte(`{"action":"single","linkquality":80}`), false)
	h.sync()
	if got := len(h.rec.Commands()); got != 1 {
		t.Fatalf("%d commands; want 1, for the single press only", got)
	}
}

// The same event handed to a new engine (Hearth restarted, the broker
// redelivered it) gives the same op_ids, which the intake refuses the
// second time; the same kind of event at another time gives others.
func TestOpIDsDerivedFromTheEvent(t *testing.T) {
	payload := fmt.Appendf(nil, `{"time":%d,"value":0}`, friday.UnixMilli())
	var ids []any
	for range 2 {
		h := start(t, friday.Add(time.Duration(len(ids))*time.Minute), sceneRule(&MQTTTrigger{Topic: sceneTopic}))
		h.e.Message(sceneTopic, payload, false)
		h.sync()
		cmds := h.rec.Commands()
		if len(cmds) != 1 {
			t.Fatalf("%d commands; want 1", len(cmds))
		}
		ids = append(ids, cmds[0].Payload["op_id"])
	}
	if ids[0] != ids[1] {
		t.Errorf("op_ids %v and %v for one event handed over twice; want equal", ids[0], ids[1])
	}
	h := start(t, friday, sceneRule(&MQTTTrigger{Topic: sceneTopic}))
	h.e.Message(sceneTopic, fmt.Appendf(nil, `{"time":%d,"value":0}`, friday.Add(time.Hour).UnixMilli()), false)
	h.sync()
	if got := h.rec.Commands()[0].Payload["op_id"]; got == ids[0] {
		t.Errorf("op_id %v for a press an hour later; want a new one", got)
	}
}

// A schedule's op_ids come from its time: fired again for the same time
// (after a restart), the command is the same one.
func TestScheduleOpIDsComeFromTheScheduledTime(t *testing.T) {
	rule := Rule{
		Name:     "night",
		Triggers: []Trigger{{Schedule: &ScheduleTrigger{Cron: "0 23 * * *"}}},
		Actions:  []Action{{Command: &CommandAction{Device: "porch", Target: map[string]any{"state": "OFF"}}}},
	}
	var ids []any
	for _, from := range []time.Duration{30 * time.Minute, 50 * time.Minute} {
		h := start(t, time.Date(2026, 11, 27, 22, 0, 0, 0, cet).Add(from), rule)
		h.advance(time.Hour)
		cmds := h.rec.Commands()
		if len(cmds) != 1 {
			t.Fatalf("%d commands; want 1", len(cmds))
		}
		ids = append(ids, cmds[0].Payload["op_id"])
	}
	if ids[0] != ids[1] {
		t.Errorf("op_ids %v and %v for the 23:00 run; want equal", ids[0], ids[1])
	}
}

// A toggle is resolved once, against the confirmed state, into an
// absolute target; while that state is unknown nothing is sent.
func TestToggleResolvedAgainstTheConfirmedState(t *testing.T) {
	var mu sync.Mutex
	confirmed := map[string]any{}
	o := Options{Confirmed: func(device string) map[string]any {
		mu.Lock()
		defer mu.Unlock()
		if device != "lamp" || len(confirmed) == 0 {
			return nil
		}
		return map[string]any{"state": confirmed["state"]}
	}}
	h := startWith(t, friday, o, Rule{
		Name:     "button",
		Triggers: []Trigger{{MQTT: &MQTTTrigger{Topic: "zigbee2mqtt/button", Fields: map[string]any{"action": "toggle"}}}},
		Actions:  []Action{{Command: &CommandAction{Device: "lamp", Toggle: "state"}}},
	})
	h.event("zigbee2mqtt/button", []byte(`{"action":"toggle"}`))
	h.sync()
	if got := h.rec.Commands(); len(got) != 0 {
		t.Fatalf("commands %v with the lamp's state unknown; want none", got)
	}
	if !strings.Contains(h.logs.String(), "confirmed state is unknown") {
		t.Errorf("no log line for the unresolved toggle:\n%s", h.logs)
	}
	for _, c := range []struct{ from, want string }{{"ON", "OFF"}, {"OFF", "ON"}} {
		mu.Lock()
		confirmed["state"] = c.from
		mu.Unlock()
		h.event("zigbee2mqtt/button", []byte(`{"action":"toggle"}`))
		h.sync()
		cmds := h.rec.Commands()
		if len(cmds) == 0 {
			t.Fatalf("toggle from %s sent nothing:\n%s", c.from, h.logs)
		}
		last := cmds[len(cmds)-1]
		if last.Payload["state"] != c.want || len(last.Payload) != 2 {
			t.Errorf("toggle from %s sent %v; want state %s and its op_id only", c.from, last.Payload, c.want)
		}
	}
}

// blockingCommander holds every command to one device until released.
type blockingCommander struct {
	*recorder
	device  string
	entered chan struct{}
	release chan struct{}
}

func (b *blockingCommander) Command(ctx context.Context, device string, payload []byte) error {
	if device == b.device {
		select {
		case b.entered <- struct{}{}:
		default: // a later run: only the first is awaited
		}
		select {
		case <-b.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return b.recorder.Command(ctx, device, payload)
}

// A rule whose action blocks holds back only itself: another rule on the
// same events still runs. Its own queue holds QueueLimit runs; past that
// the oldest waiting one is dropped and counted, and the newest run.
func TestSlowRuleHoldsBackOnlyItselfAndItsQueueIsBounded(t *testing.T) {
	rec := &recorder{}
	bc := &blockingCommander{recorder: rec, device: "slow", entered: make(chan struct{}, 1), release: make(chan struct{})}
	clock := clockwork.NewFakeClockAt(friday)
	logs := &syncBuffer{}
	const limit = 3
	e, err := New(Options{
		Clock: clock, Location: cet, Commander: bc, Notifier: rec, QueueLimit: limit,
		Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Rules: []Rule{{
			Name:     "slow",
			Triggers: []Trigger{{State: &StateTrigger{Device: "counter", Attribute: "n"}}},
			Actions:  []Action{{Command: &CommandAction{Device: "slow", Target: map[string]any{"state": "ON"}}}},
		}, {
			Name:     "fast",
			Triggers: []Trigger{{State: &StateTrigger{Device: "counter", Attribute: "n"}}},
			Actions:  []Action{notify("fast")},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() { cancel(); <-done }()
	wait, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()

	e.DeviceState("counter", map[string]any{"n": 0}, false) // the baseline
	e.DeviceState("counter", map[string]any{"n": 1}, false)
	select {
	case <-bc.entered: // run 1 is in its action, blocked
	case <-wait.Done():
		t.Fatal("the slow rule never ran")
	}
	const more = 6 // runs 2 to 7: 3 wait, 3 are dropped
	for i := range more {
		e.DeviceState("counter", map[string]any{"n": 2 + i}, false)
		// The fast rule runs for every change while the slow one is
		// blocked (each awaited, so that its own queue drops none).
		for len(rec.Notes()) < 2+i {
			select {
			case <-wait.Done():
				t.Fatalf("the fast rule ran %d times while the slow one was blocked; want %d", len(rec.Notes()), 2+i)
			case <-time.After(time.Millisecond):
			}
		}
	}
	var slow RuleStatus
	for slow.Dropped != more-limit {
		select {
		case <-wait.Done():
			t.Fatalf("slow rule status %+v; want %d dropped", slow, more-limit)
		case <-time.After(time.Millisecond):
		}
		slow = e.Status()[0]
	}
	if slow.Queued != limit || slow.Runs != 1 {
		t.Errorf("slow rule status %+v; want %d queued, 1 run", slow, limit)
	}
	close(bc.release)
	if err := e.sync(wait); err != nil {
		t.Fatal(err)
	}
	if got := e.Status()[0]; got.Runs != 1+limit || got.Queued != 0 || got.Dropped != more-limit {
		t.Errorf("slow rule status %+v after the release; want %d runs, 0 queued, %d dropped", got, 1+limit, more-limit)
	}
	if !strings.Contains(logs.String(), "run dropped: the rule's queue is full") {
		t.Errorf("no log line for the dropped runs:\n%s", logs)
	}
}

// Past EventQueue, MQTT messages are dropped and counted before the loop
// runs; device states are queued whatever the bound.
func TestEventQueueDropsMessagesPastItsBoundNeverStates(t *testing.T) {
	rec := &recorder{}
	e, err := New(Options{Clock: clockwork.NewFakeClockAt(friday), Location: cet, Notifier: rec, Logger: slog.New(slog.DiscardHandler),
		EventQueue: 3, QueueLimit: 100, Rules: []Rule{{
			Name:     "count",
			Triggers: []Trigger{{MQTT: &MQTTTrigger{Topic: "n/#"}}, {State: &StateTrigger{Device: "counter", Attribute: "n"}}},
			Actions:  []Action{notify("n")},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		e.Message(fmt.Sprintf("n/%d", i), nil, false) // 3 queued, 2 dropped
	}
	for i := range 5 {
		e.DeviceState("counter", map[string]any{"n": i}, false) // a baseline and 4 changes
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() { cancel(); <-done }()
	wait, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if err := e.sync(wait); err != nil {
		t.Fatal(err)
	}
	if got, dropped := len(rec.Notes()), e.EventsDropped(); got != 3+4 || dropped != 2 {
		t.Errorf("%d runs, %d messages dropped; want 7 (3 messages, 4 changes) and 2", got, dropped)
	}
}
