package automations

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/hearthd/hearth/devices"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// cet is the engine's location in the tests: not UTC, so that a rule read
// in UTC by mistake fails.
var cet = time.FixedZone("CET", 3600)

// friday is 2026-11-27, a Friday, 12:00 CET.
var friday = time.Date(2026, 11, 27, 12, 0, 0, 0, cet)

// command is one call to recorder.Command.
type command struct {
	Device  string
	Payload map[string]any
}

// message is one call to recorder.Publish.
type message struct {
	Topic   string
	Payload string
	Retain  bool
}

// recorder is a Commander, Publisher and Notifier that records every
// call. A non-nil fail makes Command fail.
type recorder struct {
	mu       sync.Mutex
	fail     error
	commands []command
	messages []message
	notes    []Notification
}

func (r *recorder) Command(_ context.Context, device string, payload []byte) error {
	var p map[string]any
	if err := json.Unmarshal(payload, &p); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.commands = append(r.commands, command{device, p})
	return r.fail
}

func (r *recorder) Publish(_ context.Context, topic string, payload []byte, retained bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.messages = append(r.messages, message{topic, string(payload), retained})
	return nil
}

func (r *recorder) Notify(_ context.Context, n Notification) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.notes = append(r.notes, n)
	return nil
}

func (r *recorder) Commands() []command {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]command(nil), r.commands...)
}

func (r *recorder) Messages() []message {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]message(nil), r.messages...)
}

func (r *recorder) Notes() []Notification {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Notification(nil), r.notes...)
}

// harness is a running engine on a fake clock.
type harness struct {
	t     *testing.T
	e     *Engine
	clock *clockwork.FakeClock
	rec   *recorder
	logs  *syncBuffer
	ctx   context.Context
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// start runs an engine for rules on a fake clock at now, and stops it when
// the test ends, checking that Run returned the context's error.
func start(t *testing.T, now time.Time, rules ...Rule) *harness {
	t.Helper()
	return startWith(t, now, Options{}, rules...)
}

// startWith is start with o's NeedsLive, Confirmed and QueueLimit.
func startWith(t *testing.T, now time.Time, o Options, rules ...Rule) *harness {
	t.Helper()
	h := &harness{t: t, clock: clockwork.NewFakeClockAt(now), rec: &recorder{}, logs: &syncBuffer{}}
	e, err := New(Options{
		Rules: rules, Commander: h.rec, Publisher: h.rec, Notifier: h.rec,
		Clock: h.clock, Location: cet,
		Logger:    slog.New(slog.NewTextHandler(h.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		NeedsLive: o.NeedsLive, Confirmed: o.Confirmed, QueueLimit: o.QueueLimit,
	})
	if err != nil {
		t.Fatalf("New() error: %v", err)
	}
	h.e = e
	ctx, cancel := context.WithCancel(context.Background())
	deadline, stop := context.WithTimeout(context.Background(), 10*time.Second)
	h.ctx = deadline
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Errorf("Run() = %v, want context.Canceled", err)
			}
		case <-deadline.Done():
			t.Errorf("Run() did not return after its context was canceled")
		}
		stop()
	})
	return h
}

// sync waits until the engine has handled every event sent so far.
func (h *harness) sync() {
	h.t.Helper()
	if err := h.e.sync(h.ctx); err != nil {
		h.t.Fatalf("engine did not handle its events: %v", err)
	}
}

// advance moves the clock by d once the engine has armed its schedule
// timer, and waits until the engine has armed the next one.
func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	if err := h.clock.BlockUntilContext(h.ctx, 1); err != nil {
		h.t.Fatalf("no schedule timer: %v", err)
	}
	h.clock.Advance(d)
	if err := h.clock.BlockUntilContext(h.ctx, 1); err != nil {
		h.t.Fatalf("no schedule timer after the advance: %v", err)
	}
	h.sync() // the runs the move fired have run
}

// event sends an MQTT message as a new event: once the engine has handled
// what came before, a repeat window later, so that it is no repeat.
func (h *harness) event(topic string, payload []byte) {
	h.t.Helper()
	h.sync()
	h.clock.Advance(DefaultRepeatWindow)
	h.e.Message(topic, payload, false)
}

func (h *harness) status(name string) RuleStatus {
	h.t.Helper()
	for _, s := range h.e.Status() {
		if s.Name == name {
			return s
		}
	}
	h.t.Fatalf("no rule %s in Status()", name)
	return RuleStatus{}
}

func ptr[T any](v T) *T { return &v }

func notify(title string) Action { return Action{Notify: &NotifyAction{Title: title}} }

// sortedTitles is titles, sorted: the rules one event triggers run each
// on its own worker, in no order among themselves.
func sortedTitles(notes []Notification) []string {
	return slices.Sorted(slices.Values(titles(notes)))
}

func titles(notes []Notification) []string {
	out := []string{}
	for _, n := range notes {
		out = append(out, n.Title)
	}
	return out
}

func TestStateTriggerFiresOnChangeNotOnBaseline(t *testing.T) {
	h := start(t, friday, Rule{
		Name:     "motion",
		Triggers: []Trigger{{State: &StateTrigger{Device: "hall_motion", Attribute: "occupancy", To: true}}},
		Actions:  []Action{notify("motion")},
	})
	h.e.DeviceState("hall_motion", map[string]any{"occupancy": true, "battery": 90}, false) // baseline only
	h.e.DeviceState("hall_motion", map[string]any{"occupancy": true}, false)                // no change
	h.e.DeviceState("hall_motion", map[string]any{"battery": 89}, false)                    // another attribute
	h.e.DeviceState("hall_motion", map[string]any{"occupancy": false}, false)               // changes, not to true
	h.e.DeviceState("hall_motion", map[string]any{"occupancy": true}, false)                // fires
	h.e.DeviceState("other_motion", map[string]any{"occupancy": false}, false)
	h.e.DeviceState("other_motion", map[string]any{"occupancy": true}, false) // another device
	h.sync()
	if got := len(h.rec.Notes()); got != 1 {
		t.Errorf("rule ran %d times, want 1", got)
	}
	if got := h.status("motion"); got.Runs != 1 || got.Skipped != 0 || !got.LastRun.Equal(friday) {
		t.Errorf("Status() = %+v, want 1 run at %v, 0 skipped", got, friday)
	}
}

// A retained report is the broker's replay: it moves the baseline, so
// conditions see it, but it never fires a trigger (no actuation from
// replay), even when it differs from the state last seen.
func TestRetainedStateSetsTheBaselineWithoutFiring(t *testing.T) {
	h := start(t, friday, Rule{
		Name:     "motion",
		Triggers: []Trigger{{State: &StateTrigger{Device: "hall_motion", Attribute: "occupancy", To: true}}},
		Actions:  []Action{notify("motion")},
	})
	h.e.DeviceState("hall_motion", map[string]any{"occupancy": false}, false) // baseline
	h.e.DeviceState("hall_motion", map[string]any{"occupancy": true}, true)   // replayed after a reconnect
	h.e.DeviceState("hall_motion", map[string]any{"occupancy": true}, false)  // no change from the replay
	h.sync()
	if got := len(h.rec.Notes()); got != 0 {
		t.Fatalf("rule ran %d times on a replay, want 0", got)
	}
	h.e.DeviceState("hall_motion", map[string]any{"occupancy": false}, false)
	h.e.DeviceState("hall_motion", map[string]any{"occupancy": true}, false) // a live change fires
	h.sync()
	if got := len(h.rec.Notes()); got != 1 {
		t.Errorf("rule ran %d times after a live change, want 1", got)
	}
}

func TestStateTriggerFromAndNumbers(t *testing.T) {
	h := start(t, friday,
		Rule{
			Name:     "off_from_on",
			Triggers: []Trigger{{State: &StateTrigger{Device: "lamp", Attribute: "state", From: "ON"}}},
			Actions:  []Action{notify("off_from_on")},
		},
		Rule{
			Name:     "to_21",
			Triggers: []Trigger{{State: &StateTrigger{Device: "thermo", Attribute: "temperature", To: 21}}},
			Actions:  []Action{notify("to_21")},
		},
	)
	h.e.DeviceState("lamp", map[string]any{"state": "OFF"}, false)
	h.e.DeviceState("lamp", map[string]any{"state": "ON"}, false)  // from OFF: no
	h.e.DeviceState("lamp", map[string]any{"state": "OFF"}, false) // from ON: yes
	h.e.DeviceState("thermo", map[string]any{"temperature": json.Number("20.5")}, false)
	h.e.DeviceState("thermo", map[string]any{"temperature": float64(21)}, false)       // yes: 21 == 21.0
	h.e.DeviceState("thermo", map[string]any{"temperature": json.Number("21")}, false) // same value: no change
	h.sync()
	if got, want := sortedTitles(h.rec.Notes()), []string{"off_from_on", "to_21"}; !reflect.DeepEqual(got, want) {
		t.Errorf("runs = %v, want %v", got, want)
	}
}

func TestMQTTTriggerIgnoresRetainedMessages(t *testing.T) {
	h := start(t, friday, Rule{
		Name:     "armed_away",
		Triggers: []Trigger{{MQTT: &MQTTTrigger{Topic: "alarm/+/armed", Payload: ptr("away")}}},
		Actions:  []Action{notify("armed")},
	})
	h.e.Message("alarm/house/armed", []byte("away"), true)    // a replay
	h.e.Message("alarm/house/armed", []byte("home"), false)   // another payload
	h.e.Message("alarm/house/armed/x", []byte("away"), false) // another topic
	h.e.Message("alarm/house/armed", []byte("away"), false)   // fires
	h.sync()
	if got := len(h.rec.Notes()); got != 1 {
		t.Errorf("rule ran %d times, want 1 (once, for the message that is not retained)", got)
	}
	if got := h.status("armed_away").Skipped; got != 0 {
		t.Errorf("Skipped = %d, want 0: a retained message is no trigger at all", got)
	}
}

func TestTopicsDeduplicated(t *testing.T) {
	mqtt := func(topic string) Trigger { return Trigger{MQTT: &MQTTTrigger{Topic: topic}} }
	e, err := New(Options{Notifier: &recorder{}, Rules: []Rule{
		{Name: "a", Triggers: []Trigger{mqtt("x/#"), mqtt("y/+"), {Schedule: &ScheduleTrigger{Cron: "@hourly"}}}, Actions: []Action{notify("a")}},
		{Name: "b", Triggers: []Trigger{mqtt("y/+"), mqtt("z")}, Actions: []Action{notify("b")}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := e.Topics(), []string{"x/#", "y/+", "z"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Topics() = %v, want %v", got, want)
	}
}

func TestScheduleFiresAtCronTimesInLocation(t *testing.T) {
	start22 := time.Date(2026, 11, 27, 22, 30, 0, 0, cet)
	h := start(t, start22, Rule{
		Name:     "night",
		Triggers: []Trigger{{Schedule: &ScheduleTrigger{Cron: "0 23 * * *"}}},
		Actions:  []Action{notify("night")},
	})
	h.advance(29 * time.Minute) // 22:59 CET (21:59 UTC: a rule read in UTC would fire)
	if got := len(h.rec.Notes()); got != 0 {
		t.Fatalf("fired %d times by 22:59, want 0", got)
	}
	h.advance(time.Minute) // 23:00 CET
	want := []time.Time{time.Date(2026, 11, 27, 23, 0, 0, 0, cet)}
	h.advance(24 * time.Hour) // 23:00 the next day
	want = append(want, time.Date(2026, 11, 28, 23, 0, 0, 0, cet))
	var got []time.Time
	for _, n := range h.rec.Notes() {
		got = append(got, n.At)
	}
	if !sameTimes(got, want) {
		t.Errorf("fired at %v, want %v", got, want)
	}
}

func sameTimes(a, b []time.Time) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Equal(b[i]) {
			return false
		}
	}
	return true
}

// TestScheduleFiresOnceAfterAClockJump: a jump over several fire times
// fires once, at the jump, and the next fire is the next cron time after
// it.
func TestScheduleFiresOnceAfterAClockJump(t *testing.T) {
	h := start(t, friday, Rule{
		Name:     "hourly",
		Triggers: []Trigger{{Schedule: &ScheduleTrigger{Cron: "@hourly"}}},
		Actions:  []Action{notify("hourly")},
	})
	h.advance(5*time.Hour + 30*time.Minute) // past 13:00 … 17:00: to 17:30
	if got := len(h.rec.Notes()); got != 1 {
		t.Fatalf("fired %d times over a 5-hour jump, want 1", got)
	}
	h.advance(29 * time.Minute) // 17:59
	if got := len(h.rec.Notes()); got != 1 {
		t.Fatalf("fired %d times by 17:59, want still 1", got)
	}
	h.advance(time.Minute) // 18:00
	notes := h.rec.Notes()
	want := []time.Time{friday.Add(5*time.Hour + 30*time.Minute), friday.Add(6 * time.Hour)}
	if len(notes) != 2 || !notes[0].At.Equal(want[0]) || !notes[1].At.Equal(want[1]) {
		t.Errorf("fired at %v, want %v", titlesAt(notes), want)
	}
}

func titlesAt(notes []Notification) []time.Time {
	var out []time.Time
	for _, n := range notes {
		out = append(out, n.At)
	}
	return out
}

// TestBreakerTriggerSeesItsOwnTransitionInTheGate: fallback_for x with a
// trigger "breaker x to open" runs when x opens.
func TestBreakerTriggerSeesItsOwnTransitionInTheGate(t *testing.T) {
	h := start(t, friday, Rule{
		Name:        "cloud_down",
		FallbackFor: "cloud",
		Triggers:    []Trigger{{Breaker: &BreakerTrigger{Service: "cloud", To: Open}}},
		Actions:     []Action{notify("down")},
	}, Rule{
		Name:     "any_change",
		Triggers: []Trigger{{Breaker: &BreakerTrigger{Service: "cloud"}}},
		Actions:  []Action{notify("change")},
	})
	if got := h.status("cloud_down").Active; got {
		t.Errorf("Active before any report = true, want false: an unreported service is closed")
	}
	h.e.BreakerState("cloud", Closed, false)   // no change from the assumed closed
	h.e.BreakerState("cloud", Open, false)     // both
	h.e.BreakerState("cloud", Open, false)     // no change
	h.e.BreakerState("cloud", HalfOpen, false) // any_change
	h.e.BreakerState("other", Open, false)     // another service
	h.e.BreakerState("cloud", "broken", false) // unknown: ignored
	h.sync()
	if got, want := sortedTitles(h.rec.Notes()), []string{"change", "change", "down"}; !reflect.DeepEqual(got, want) {
		t.Errorf("runs = %v, want %v", got, want)
	}
	if got := h.status("cloud_down"); !got.Active || got.Runs != 1 {
		t.Errorf("Status(cloud_down) = %+v, want active with 1 run", got)
	}
}

// A replayed breaker state (a retained status from before Hearth
// started) sets the gates but fires no trigger: a restart moves nothing.
func TestReplayedBreakerStateGatesWithoutTriggering(t *testing.T) {
	h := start(t, friday, Rule{
		Name:        "cloud_down",
		FallbackFor: "cloud",
		Triggers:    []Trigger{{Breaker: &BreakerTrigger{Service: "cloud", To: Open}}},
		Actions:     []Action{notify("down")},
	})
	h.e.BreakerState("cloud", Open, true)
	h.sync()
	if got := h.status("cloud_down"); !got.Active || got.Runs != 0 {
		t.Errorf("after a replayed open: %+v, want active with 0 runs", got)
	}
	h.e.BreakerState("cloud", Closed, false)
	h.e.BreakerState("cloud", Open, false) // a live trip fires
	h.sync()
	if got := h.status("cloud_down"); got.Runs != 1 {
		t.Errorf("after a live open: %d runs, want 1", got.Runs)
	}
}

func TestFallbackForRunsOnlyWhileBreakerIsNotClosed(t *testing.T) {
	h := start(t, friday, Rule{
		Name:        "hall_light_from_motion",
		FallbackFor: "cloud_presence",
		Triggers:    []Trigger{{State: &StateTrigger{Device: "hall_motion", Attribute: "occupancy", To: true}}},
		Actions:     []Action{{Command: &CommandAction{Device: "hall_light", Target: map[string]any{"state": "ON"}}}},
	})
	motion := func() {
		h.e.DeviceState("hall_motion", map[string]any{"occupancy": false}, false)
		h.e.DeviceState("hall_motion", map[string]any{"occupancy": true}, false)
	}
	steps := []struct {
		breaker     string // "" = no report
		active      bool
		runs, skips int
	}{
		{"", false, 0, 1},
		{Open, true, 1, 1},
		{HalfOpen, true, 2, 1},
		{Closed, false, 2, 2},
	}
	for i, s := range steps {
		if s.breaker != "" {
			h.e.BreakerState("cloud_presence", s.breaker, false)
		}
		motion()
		h.sync()
		got := h.status("hall_light_from_motion")
		if got.Active != s.active || got.Runs != s.runs || got.Skipped != s.skips {
			t.Errorf("step %d (breaker %q): Status = %+v, want active %v, %d runs, %d skipped", i, s.breaker, got, s.active, s.runs, s.skips)
		}
	}
	if got := len(h.rec.Commands()); got != 2 {
		t.Errorf("%d commands sent, want 2", got)
	}
	if logs := h.logs.String(); !strings.Contains(logs, `msg="automations: rule skipped" rule=hall_light_from_motion`) ||
		!strings.Contains(logs, `reason="paused: cloud_presence is closed (fallback_for)"`) {
		t.Errorf("logs do not show the skip and its reason:\n%s", logs)
	}
}

func TestRequiresPausesWhileOpenAndResumesWhenClosed(t *testing.T) {
	h := start(t, friday, Rule{
		Name:     "hall_light_off",
		Requires: []string{"cloud_presence", "zigbee"},
		Triggers: []Trigger{{MQTT: &MQTTTrigger{Topic: "alarm/armed"}}},
		Actions:  []Action{{Publish: &PublishAction{Topic: "x/y", Payload: "z"}}},
	})
	arm := func() { h.event("alarm/armed", []byte("away")) }
	steps := []struct {
		service, breaker string
		active           bool
		runs, skips      int
	}{
		{"", "", true, 1, 0},
		{"cloud_presence", Open, false, 1, 1},
		{"zigbee", HalfOpen, false, 1, 2},
		{"cloud_presence", Closed, false, 1, 3}, // zigbee is still half-open
		{"zigbee", Closed, true, 2, 3},
	}
	for i, s := range steps {
		if s.service != "" {
			h.e.BreakerState(s.service, s.breaker, false)
		}
		arm()
		h.sync()
		got := h.status("hall_light_off")
		if got.Active != s.active || got.Runs != s.runs || got.Skipped != s.skips {
			t.Errorf("step %d (%s %s): Status = %+v, want active %v, %d runs, %d skipped", i, s.service, s.breaker, got, s.active, s.runs, s.skips)
		}
	}
	want := []message{{"x/y", "z", false}, {"x/y", "z", false}}
	if got := h.rec.Messages(); !reflect.DeepEqual(got, want) {
		t.Errorf("published %v, want %v", got, want)
	}
}

func TestStateConditionUsesLastSeenState(t *testing.T) {
	cond := func(op string, v any) Rule {
		return Rule{
			Name:       "if_" + op,
			Triggers:   []Trigger{{MQTT: &MQTTTrigger{Topic: "go"}}},
			Conditions: []Condition{{State: &StateCondition{Device: "thermo", Attribute: "temperature", Op: op, Value: v}}},
			Actions:    []Action{notify(op)},
		}
	}
	h := start(t, friday, cond(OpLt, 21), cond(OpGe, 20.5), cond(OpEq, 20.5), cond(OpNe, 20.5), cond(OpGt, 20.5), cond(OpLe, 20))
	h.event("go", nil) // state unknown: no condition holds, not even ne
	h.sync()
	if got := titles(h.rec.Notes()); len(got) != 0 {
		t.Fatalf("with unknown state, ran %v, want none", got)
	}
	h.e.DeviceState("thermo", map[string]any{"temperature": json.Number("20.5")}, false)
	h.event("go", nil)
	h.sync()
	if got, want := sortedTitles(h.rec.Notes()), []string{"eq", "ge", "lt"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ran %v, want %v", got, want)
	}
	if got := h.status("if_gt").Skipped; got != 2 {
		t.Errorf("if_gt Skipped = %d, want 2", got)
	}
}

func TestCompare(t *testing.T) {
	tests := []struct {
		op        string
		got, want any
		ok        bool
	}{
		{OpEq, "ON", "ON", true},
		{OpEq, "ON", "on", false},
		{OpNe, "ON", "OFF", true},
		{OpEq, true, true, true},
		{OpEq, true, "true", false},
		{OpEq, 102, 102.0, true},
		{OpEq, json.Number("102"), 102, true},
		{OpLt, 5, 10, true},
		{OpLt, 10, 10, false},
		{OpLe, 10, 10, true},
		{OpGt, 10.5, 10, true},
		{OpGe, 9, 10, false},
		{OpLt, "5", 10, false}, // a string is never ordered against a number
		{OpNe, "5", 5, true},
	}
	for _, tt := range tests {
		if got := compare(tt.op, tt.got, tt.want); got != tt.ok {
			t.Errorf("compare(%s, %#v, %#v) = %v, want %v", tt.op, tt.got, tt.want, got, tt.ok)
		}
	}
}

func TestTimeConditionWindows(t *testing.T) {
	at := func(day, h, m int) time.Time { return time.Date(2026, 11, day, h, m, 0, 0, cet) } // the 27th is a Friday
	night := TimeCondition{After: 22 * 60, Before: 7 * 60}
	evening := TimeCondition{After: 17 * 60}                                       // to the end of the day
	morning := TimeCondition{Before: 9 * 60}                                       // from midnight
	weekend := TimeCondition{Weekdays: []time.Weekday{time.Saturday, time.Sunday}} // all day
	tests := []struct {
		name string
		c    TimeCondition
		now  time.Time
		want bool
	}{
		{"night, 23:00", night, at(27, 23, 0), true},
		{"night, 03:00 after midnight", night, at(28, 3, 0), true},
		{"night, at after", night, at(27, 22, 0), true},
		{"night, at before (excluded)", night, at(28, 7, 0), false},
		{"night, noon", night, at(27, 12, 0), false},
		{"night, 21:59", night, at(27, 21, 59), false},
		{"evening, 23:59", evening, at(27, 23, 59), true},
		{"evening, 16:59", evening, at(27, 16, 59), false},
		{"morning, 00:00", morning, at(27, 0, 0), true},
		{"morning, 09:00", morning, at(27, 9, 0), false},
		{"weekend, Friday", weekend, at(27, 12, 0), false},
		{"weekend, Saturday", weekend, at(28, 12, 0), true},
		{"whole day", TimeCondition{}, at(27, 0, 0), true},
		{"Friday nights, Saturday 03:00 (the day of now counts)", TimeCondition{After: 22 * 60, Before: 7 * 60, Weekdays: []time.Weekday{time.Friday}}, at(28, 3, 0), false},
	}
	for _, tt := range tests {
		if got := tt.c.holds(tt.now); got != tt.want {
			t.Errorf("%s: holds(%v) = %v, want %v", tt.name, tt.now, got, tt.want)
		}
	}
}

// TestTimeConditionReadInLocation: 17:30 CET is 16:30 UTC; a window from
// 17:00 holds only when read in the engine's location.
func TestTimeConditionReadInLocation(t *testing.T) {
	h := start(t, time.Date(2026, 11, 27, 16, 30, 0, 0, time.UTC), Rule{
		Name:       "evening",
		Triggers:   []Trigger{{MQTT: &MQTTTrigger{Topic: "go"}}},
		Conditions: []Condition{{Time: &TimeCondition{After: 17 * 60, Before: 7 * 60}}},
		Actions:    []Action{notify("evening")},
	})
	h.e.Message("go", nil, false)
	h.sync()
	if got := h.status("evening"); got.Runs != 1 {
		t.Errorf("Status = %+v, want 1 run: 16:30 UTC is 17:30 CET", got)
	}
}

func TestCommandActionPayload(t *testing.T) {
	h := start(t, friday, Rule{
		Name:     "light",
		Triggers: []Trigger{{MQTT: &MQTTTrigger{Topic: "go"}}},
		Actions: []Action{
			{Command: &CommandAction{Device: "hall_light", Target: map[string]any{"state": "ON", "brightness": 102}, TTL: 30 * time.Second}},
			{Command: &CommandAction{Device: "hall_light", Target: map[string]any{"state": "OFF"}}},
		},
	})
	for range 3 {
		h.event("go", nil)
	}
	h.sync()
	cmds := h.rec.Commands()
	if len(cmds) != 6 {
		t.Fatalf("%d commands, want 6", len(cmds))
	}
	ids := map[string]bool{}
	for i, c := range cmds {
		id, _ := c.Payload["op_id"].(string)
		if err := devices.ValidOpID(id); err != nil || !strings.HasPrefix(id, "auto-") || len(id) != len("auto-")+26 {
			t.Errorf("command %d op_id %q: want auto-<ULID>, a valid op_id (%v)", i, id, err)
		}
		if ids[id] {
			t.Errorf("command %d op_id %q used twice", i, id)
		}
		ids[id] = true
		delete(c.Payload, "op_id")
	}
	want0 := command{"hall_light", map[string]any{"state": "ON", "brightness": 102.0, "ttl": "30s"}}
	want1 := command{"hall_light", map[string]any{"state": "OFF"}}
	if !reflect.DeepEqual(cmds[0], want0) || !reflect.DeepEqual(cmds[1], want1) {
		t.Errorf("commands = %+v, %+v; want %+v, %+v", cmds[0], cmds[1], want0, want1)
	}
	// The intake must accept the payload as it is.
	for _, c := range cmds[:2] {
		body, _ := json.Marshal(c.Payload)
		if _, err := devices.ParseCommand(devices.Light, body); err != nil {
			t.Errorf("ParseCommand(%s) error: %v", body, err)
		}
	}
}

func TestFailedActionDoesNotStopTheRest(t *testing.T) {
	h := start(t, friday, Rule{
		Name:     "all",
		Triggers: []Trigger{{MQTT: &MQTTTrigger{Topic: "go"}}},
		Actions: []Action{
			{Command: &CommandAction{Device: "hall_light", Target: map[string]any{"state": "ON"}}},
			{Publish: &PublishAction{Topic: "a/b", Payload: "c", Retain: true}},
			{Notify: &NotifyAction{Title: "t", Message: "m", Severity: SeverityWarning}},
		},
	})
	h.rec.mu.Lock()
	h.rec.fail = errors.New("intake closed")
	h.rec.mu.Unlock()
	h.e.Message("go", nil, false)
	h.sync()
	if got := len(h.rec.Commands()); got != 1 {
		t.Errorf("%d commands tried, want 1", got)
	}
	if got, want := h.rec.Messages(), []message{{"a/b", "c", true}}; !reflect.DeepEqual(got, want) {
		t.Errorf("published %v, want %v", got, want)
	}
	want := []Notification{{Title: "t", Message: "m", Severity: SeverityWarning, Source: "automation:all", At: friday}}
	if got := h.rec.Notes(); len(got) != 1 || got[0].Title != want[0].Title || got[0].Message != want[0].Message ||
		got[0].Severity != want[0].Severity || got[0].Source != want[0].Source || !got[0].At.Equal(want[0].At) {
		t.Errorf("notified %+v, want %+v", got, want)
	}
	if logs := h.logs.String(); !strings.Contains(logs, `msg="automations: action failed" rule=all action=1 err="command to hall_light: intake closed"`) {
		t.Errorf("logs do not show the failed action:\n%s", logs)
	}
}

func TestNotifySeverityDefaultsToInfo(t *testing.T) {
	h := start(t, friday, Rule{Name: "n", Triggers: []Trigger{{MQTT: &MQTTTrigger{Topic: "go"}}}, Actions: []Action{notify("x")}})
	h.e.Message("go", nil, false)
	h.sync()
	if got := h.rec.Notes(); len(got) != 1 || got[0].Severity != SeverityInfo {
		t.Errorf("notified %+v, want one of severity info", got)
	}
}

// TestEventsAreQueuedNotDropped: events sent before Run starts, many more
// than any channel would buffer, are all handled, in order (the rule's
// own queue is made as long, so that it drops none of the runs).
func TestEventsAreQueuedNotDropped(t *testing.T) {
	rec := &recorder{}
	clock := clockwork.NewFakeClockAt(friday)
	const n = 5000
	e, err := New(Options{Clock: clock, Location: cet, Notifier: rec, Logger: slog.New(slog.DiscardHandler), QueueLimit: n, Rules: []Rule{{
		Name:     "count",
		Triggers: []Trigger{{State: &StateTrigger{Device: "counter", Attribute: "n"}}},
		Actions:  []Action{notify("n")},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n + 1 {
		e.DeviceState("counter", map[string]any{"n": i}, false)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	wait, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	if err := e.sync(wait); err != nil {
		t.Fatal(err)
	}
	cancel()
	<-done
	if got := len(rec.Notes()); got != n {
		t.Errorf("rule ran %d times, want %d (one per change after the baseline)", got, n)
	}
	if err := e.Run(context.Background()); err == nil {
		t.Errorf("second Run() = nil, want an error")
	}
}

func TestNewRejectsInvalidRules(t *testing.T) {
	ok := Trigger{MQTT: &MQTTTrigger{Topic: "go"}}
	act := notify("x")
	tests := []struct {
		name string
		rule Rule
		want string
	}{
		{"bad name", Rule{Name: "Hall Light", Triggers: []Trigger{ok}, Actions: []Action{act}}, `rule Hall Light: invalid rule name: use lower-case letters, digits, '_' and '-'`},
		{"no triggers or actions", Rule{Name: "r"}, "rule r: no triggers\nrule r: no actions"},
		{"two trigger kinds", Rule{Name: "r", Triggers: []Trigger{{MQTT: ok.MQTT, Schedule: &ScheduleTrigger{Cron: "@daily"}}}, Actions: []Action{act}}, "rule r: trigger 1: want exactly one of state, mqtt, schedule, breaker, got 2"},
		{"empty trigger", Rule{Name: "r", Triggers: []Trigger{{}}, Actions: []Action{act}}, "rule r: trigger 1: want exactly one of state, mqtt, schedule, breaker, got 0"},
		{"bad cron", Rule{Name: "r", Triggers: []Trigger{{Schedule: &ScheduleTrigger{Cron: "0 25 * * *"}}}, Actions: []Action{act}}, `rule r: trigger 1: cron "0 25 * * *": end of range (25) above maximum (23): 25`},
		{"six-field cron", Rule{Name: "r", Triggers: []Trigger{{Schedule: &ScheduleTrigger{Cron: "0 0 23 * * *"}}}, Actions: []Action{act}}, `rule r: trigger 1: cron "0 0 23 * * *": expected exactly 5 fields, found 6: [0 0 23 * * *]`},
		{"bad filter", Rule{Name: "r", Triggers: []Trigger{{MQTT: &MQTTTrigger{Topic: "a/#/b"}}}, Actions: []Action{act}}, `rule r: trigger 1: topic filter "a/#/b": '#' must be the whole last topic level`},
		{"bad breaker state", Rule{Name: "r", Triggers: []Trigger{{Breaker: &BreakerTrigger{Service: "s", To: "tripped"}}}, Actions: []Action{act}}, `rule r: trigger 1: breaker trigger: unknown state "tripped" (known: closed, open, half_open)`},
		{"state trigger device", Rule{Name: "r", Triggers: []Trigger{{State: &StateTrigger{Device: "a/b", Attribute: "x"}}}, Actions: []Action{act}}, `rule r: trigger 1: device id "a/b" contains '/', which cannot stand in one MQTT topic level`},
		{"unknown op", Rule{Name: "r", Triggers: []Trigger{ok}, Conditions: []Condition{{State: &StateCondition{Device: "d", Attribute: "a", Op: "gte", Value: 1}}}, Actions: []Action{act}}, `rule r: condition 1: unknown op "gte" (known: eq, ne, lt, le, gt, ge)`},
		{"ordered string", Rule{Name: "r", Triggers: []Trigger{ok}, Conditions: []Condition{{State: &StateCondition{Device: "d", Attribute: "a", Op: OpLt, Value: "ON"}}}, Actions: []Action{act}}, `rule r: condition 1: op lt compares numbers; a string compares only with eq or ne`},
		{"empty window", Rule{Name: "r", Triggers: []Trigger{ok}, Conditions: []Condition{{Time: &TimeCondition{After: 60, Before: 60}}}, Actions: []Action{act}}, `rule r: condition 1: time condition: after and before are both 01:00, an empty window`},
		{"time of day out of range", Rule{Name: "r", Triggers: []Trigger{ok}, Conditions: []Condition{{Time: &TimeCondition{After: 1440}}}, Actions: []Action{act}}, `rule r: condition 1: time condition: 1440 minutes is not a time of day (0 to 1439)`},
		{"reserved key in target", Rule{Name: "r", Triggers: []Trigger{ok}, Actions: []Action{{Command: &CommandAction{Device: "d", Target: map[string]any{"state": "ON", "op_id": "x"}}}}}, `rule r: action 1: command action: target holds the reserved key op_id`},
		{"empty target", Rule{Name: "r", Triggers: []Trigger{ok}, Actions: []Action{{Command: &CommandAction{Device: "d"}}}}, `rule r: action 1: command action: empty target`},
		{"unknown severity", Rule{Name: "r", Triggers: []Trigger{ok}, Actions: []Action{{Notify: &NotifyAction{Title: "t", Severity: "fatal"}}}}, `rule r: action 1: notify action: unknown severity "fatal" (known: info, warning, critical)`},
		{"publish to a wildcard", Rule{Name: "r", Triggers: []Trigger{ok}, Actions: []Action{{Publish: &PublishAction{Topic: "a/+"}}}}, `rule r: action 1: topic "a/+": contains '+', an MQTT wildcard`},
		{"fallback_for and requires the same", Rule{Name: "r", FallbackFor: "s", Requires: []string{"s"}, Triggers: []Trigger{ok}, Actions: []Action{act}}, `rule r: fallback_for s and requires s contradict each other: the rule could never run`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(Options{Rules: []Rule{tt.rule}, Commander: &recorder{}, Publisher: &recorder{}, Notifier: &recorder{}})
			if err == nil || err.Error() != tt.want {
				t.Errorf("New() error:\ngot  %v\nwant %s", err, tt.want)
			}
		})
	}
}

func TestNewRejectsDuplicateNamesAndMissingCarriers(t *testing.T) {
	trig := []Trigger{{MQTT: &MQTTTrigger{Topic: "go"}}}
	_, err := New(Options{Rules: []Rule{
		{Name: "a", Triggers: trig, Actions: []Action{{Command: &CommandAction{Device: "d", Target: map[string]any{"state": "ON"}}}}},
		{Name: "a", Triggers: trig, Actions: []Action{notify("x")}},
		{Name: "b", Triggers: trig, Actions: []Action{{Publish: &PublishAction{Topic: "t"}}, notify("x")}},
	}})
	want := "rule a: action 1: a command action needs Options.Commander\n" +
		"rule a: name used twice\n" +
		"rule b: action 1: a publish action needs Options.Publisher\n" +
		"rule b: action 2: a notify action needs Options.Notifier"
	if err == nil || err.Error() != want {
		t.Errorf("New() error:\ngot  %v\nwant %s", err, want)
	}
}

// A condition on a device whose state must be live (NeedsLive: a
// safety-critical device) does not hold on a retained value, a replay
// from before the start, until a live report confirms it; a later replay
// of the same value keeps it confirmed, one of another value does not. A
// device that needs no live state is judged on its retained value, as
// before.
func TestConditionOnASafetyCriticalDeviceNeedsALiveReport(t *testing.T) {
	rule := func(device string) Rule {
		return Rule{
			Name:       "alarm_" + device,
			Triggers:   []Trigger{{MQTT: &MQTTTrigger{Topic: "go"}}},
			Conditions: []Condition{{State: &StateCondition{Device: device, Attribute: "lock_state", Op: OpEq, Value: "unlocked"}}},
			Actions:    []Action{notify(device)},
		}
	}
	h := startWith(t, friday, Options{NeedsLive: func(d string) bool { return d == "front_door" }}, rule("front_door"), rule("shed"))
	h.e.DeviceState("front_door", map[string]any{"lock_state": "unlocked"}, true)
	h.e.DeviceState("shed", map[string]any{"lock_state": "unlocked"}, true)
	h.event("go", nil)
	h.sync()
	if got, want := titles(h.rec.Notes()), []string{"shed"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("on retained states ran %v; want %v: front_door's replay is not confirmed", got, want)
	}
	h.e.DeviceState("front_door", map[string]any{"lock_state": "unlocked"}, false) // the fresh read's answer
	h.e.DeviceState("front_door", map[string]any{"lock_state": "unlocked"}, true)  // a replay of the same, after a reconnect
	h.event("go", nil)
	h.sync()
	if got, want := sortedTitles(h.rec.Notes()), []string{"front_door", "shed", "shed"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("after a live report ran %v; want %v", got, want)
	}
	h.e.DeviceState("front_door", map[string]any{"lock_state": "locked"}, true)
	h.e.DeviceState("front_door", map[string]any{"lock_state": "unlocked"}, true)
	h.event("go", nil)
	h.sync()
	if got, want := sortedTitles(h.rec.Notes()), []string{"front_door", "shed", "shed", "shed"}; !reflect.DeepEqual(got, want) {
		t.Errorf("after replays of other values ran %v; want %v: front_door unconfirmed again", got, want)
	}
}

// An unknown value (null: a lock that lost its state) satisfies no
// condition, not even ne.
func TestNullStateSatisfiesNoCondition(t *testing.T) {
	h := start(t, friday, Rule{
		Name:       "not_locked",
		Triggers:   []Trigger{{MQTT: &MQTTTrigger{Topic: "go"}}},
		Conditions: []Condition{{State: &StateCondition{Device: "front_door", Attribute: "lock_state", Op: OpNe, Value: "locked"}}},
		Actions:    []Action{notify("not locked")},
	})
	h.e.DeviceState("front_door", map[string]any{"lock_state": nil}, false)
	h.e.Message("go", nil, false)
	h.sync()
	if got := titles(h.rec.Notes()); len(got) != 0 {
		t.Errorf("with lock_state null ran %v; want none", got)
	}
}
