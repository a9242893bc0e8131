package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/simulator"
)

// A send the broker refuses for good (here: an ACL on the bridge's set
// topic, PUBACK 0x87) ends the command on the first failure, though the
// policy allows 2 attempts: a permanent error is never retried.
func TestPermanentSendErrorIsNotRetried(t *testing.T) {
	url := startMochi(t, &denyTopic{topic: "zigbee2mqtt/plug/set"})
	h := newHarness(t, harnessOptions{brokerURL: url})
	h.publish("plug", `{"state":"ON","op_id":"p1"}`)
	// No clock advance: a retry would wait on the backoff and never come.
	r := h.final("p1")
	if r.Status != devices.Failed || r.Reason != devices.ReasonPermanentError || r.Attempts != 1 {
		t.Fatalf("result %s/%s after %d attempts (%s); want failed/permanent_error after 1", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	if !strings.Contains(r.Detail, "unauthorized") {
		t.Errorf("detail %q does not name the class unauthorized", r.Detail)
	}
	h.noSetsYet()
}

// The service's policy from the config file drives the attempts: a fixed
// backoff without jitter waits exactly base between attempts, whatever the
// random source draws, and max_attempts 3 gives 3 sends.
func TestConfiguredPolicySpacesAttempts(t *testing.T) {
	cfg := strings.Replace(testConfig, `      max_attempts: 2
      attempt_timeout: 5s
      base: 1s
      multiplier: 2
      cap: 10s`, `      max_attempts: 3
      attempt_timeout: 5s
      backoff: fixed
      jitter: none
      base: 3s
      cap: 10s`, 1)
	if cfg == testConfig {
		t.Fatal("the retry section of testConfig changed; update this test")
	}
	h := newHarness(t, harnessOptions{config: cfg, rand: floorRand{}, faults: simulator.Faults{Silent: []string{"plug"}}})
	h.publish("plug", `{"state":"ON","op_id":"f1"}`)
	if r := h.result("f1"); r.Status != devices.Accepted {
		t.Fatalf("first result %s; want accepted", r.Status)
	}
	for attempt, want := range []time.Duration{0, 8 * time.Second, 16 * time.Second} {
		if attempt > 0 {
			h.advanceTimeout(5 * time.Second) // attempt timeout
			h.elapse(3*time.Second - 1)       // 1 ns short of the fixed backoff
			h.advance(1)                      // the backoff ends
		}
		h.nextSet()
		if got := h.clock.Since(t0); got != want {
			t.Errorf("attempt %d sent at +%v, want +%v", attempt+1, got, want)
		}
	}
	h.advance(5 * time.Second)
	r := h.await(func(r devices.Result) bool { return r.OpID == "f1" && r.Status.Terminal() }, "f1 final")
	if r.Status != devices.Failed || r.Reason != devices.ReasonTimeout || r.Attempts != 3 {
		t.Fatalf("result %s/%s after %d attempts; want failed/timeout after 3", r.Status, r.Reason, r.Attempts)
	}
}

// budgetConfig: a bridge of budgetDevices switches, 3 attempts, 1 s
// attempt timeout, fixed 500 ms backoff, and the default retry budget
// (20% of first attempts, at least 3 per 10 s).
func budgetConfig() string {
	var b strings.Builder
	b.WriteString(`
mqtt:
  listen: 127.0.0.1:0
http:
  listen: 127.0.0.1:0
services:
  zigbee:
    protocol: zigbee2mqtt
    retry:
      max_attempts: 3
      attempt_timeout: 1s
      backoff: fixed
      jitter: none
      base: 500ms
    # The retry budget alone is measured: the breaker would stop the
    # sends once it saw the failures.
    breaker: {enabled: false}
devices:
`)
	for i := range budgetDevices {
		fmt.Fprintf(&b, "  sw%03d: {class: switch}\n", i)
	}
	return b.String()
}

const budgetDevices = 400

// A failing bridge under 100 commands/s receives no more sends than the
// first attempts plus the retry budget. Every set is lost, so every
// command asks for 2 retries; 400 commands over 4 s (all within one 10 s
// budget window) may get only 0.2 × 400 = 80 retries between them, so
// the bridge sees exactly 480 sends instead of 1200.
func TestRetryBudgetCapsAFailingBridge(t *testing.T) {
	h := newHarness(t, harnessOptions{config: budgetConfig(), faults: simulator.Faults{DropRate: 1}})
	sets := 0
	sent := map[string]bool{} // devices whose first set arrived
	drainSets := func() {
		for {
			select {
			case e := <-h.sets:
				sets++
				sent[e.Device] = true
			default:
				return
			}
		}
	}
	published := 0 // commands sent to hearthd
	final := map[string]devices.Result{}
	drainResults := func() {
		for {
			select {
			case r := <-h.results:
				if r.Status.Terminal() {
					final[r.OpID] = r
				}
			default:
				return
			}
		}
	}
	// settle waits until every command not known to have ended waits on
	// the fake clock (an attempt timeout or a backoff), so that each tick
	// of the clock finds hearthd idle, as a real second would. A command
	// that ended leaves the count when its result arrives.
	settle := func(what string) {
		t.Helper()
		deadline := time.Now().Add(eventWait)
		for {
			drainResults()
			drainSets()
			inflight := published - len(final)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
			err := h.clock.BlockUntilContext(ctx, inflight)
			cancel()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: hearthd never settled (%d published, %d final)", what, published, len(final))
			}
		}
	}

	const perTick, tick = 10, 100 * time.Millisecond // 100 commands/s
	for n := 0; n < budgetDevices; n += perTick {
		for i := n; i < n+perTick; i++ {
			h.publish(fmt.Sprintf("sw%03d", i), fmt.Sprintf(`{"state":"ON","op_id":"b%03d"}`, i))
			published++
		}
		// Wait until this tick's first attempts are out.
		for i := n; i < n+perTick; i++ {
			for !sent[fmt.Sprintf("sw%03d", i)] {
				settle(fmt.Sprintf("tick %d", n/perTick))
			}
		}
		h.clock.Advance(tick)
	}
	for len(final) < budgetDevices {
		settle("after the last command")
		if h.clock.Since(t0) > time.Minute {
			t.Fatalf("only %d of %d commands ended after a minute", len(final), budgetDevices)
		}
		h.clock.Advance(tick)
	}
	drainSets()

	const firsts, budget = budgetDevices, budgetDevices / 5
	if sets != firsts+budget {
		t.Errorf("the bridge received %d sets; want %d first attempts + %d retries (the budget)", sets, firsts, budget)
	}
	retries, exhausted := 0, 0
	for _, r := range final {
		retries += r.Attempts - 1
		switch {
		case r.Status != devices.Failed:
			t.Errorf("%s: %s/%s; want failed", r.OpID, r.Status, r.Reason)
		case r.Reason == devices.ReasonRetryBudgetExhausted:
			exhausted++
		case r.Reason != devices.ReasonTimeout || r.Attempts != 3:
			t.Errorf("%s: %s/%s after %d attempts; want retry_budget_exhausted, or timeout after 3", r.OpID, r.Status, r.Reason, r.Attempts)
		}
	}
	if retries != budget {
		t.Errorf("results count %d retries; want %d", retries, budget)
	}
	if want := budgetDevices - budget/2; exhausted < want {
		t.Errorf("%d commands ended retry_budget_exhausted; want at least %d", exhausted, want)
	}
}

// A policy beyond 3 attempts needs allow_more_attempts, and hearthd warns
// at start that it is in use.
func TestMoreAttemptsWarnAtStart(t *testing.T) {
	cfg, err := config.Parse("test.yaml", []byte(strings.Replace(testConfig,
		"      max_attempts: 2\n", "      max_attempts: 5\n      allow_more_attempts: true\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = t.TempDir()
	var buf syncBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	d, err := start(cfg, deps{clock: clockwork.NewFakeClockAt(t0), rand: ceilingRand{}, connRand: ceilingRand{}, logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	d.stop()
	log := buf.String() // the broker's goroutines may still log
	var warned bool
	for _, line := range strings.Split(log, "\n") {
		var rec struct {
			Level       string `json:"level"`
			Service     string `json:"service"`
			MaxAttempts int    `json:"max_attempts"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Level == "WARN" && rec.Service == "zigbee" && rec.MaxAttempts == 5 {
			warned = true
		}
	}
	if !warned {
		t.Errorf("no warning naming service zigbee and max_attempts 5; log:\n%s", log)
	}
}

// syncBuffer is a log buffer the daemon's goroutines write to while the
// test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// Regression (issue 15): commands resumed after a restart with an attempt
// in flight were charged to the service's retry budget, so that of 50
// commands sent once to devices that never answer, 40 ended
// retry_budget_exhausted at the restart with nothing resent. Now each
// waits out the rest of its attempt window, then is resent once, free of
// the budget (the restart, not the service, left its outcome unknown),
// and ends failed/timeout after its 2 attempts.
func TestResumedCommandsAreResentWithoutSpendingTheRetryBudget(t *testing.T) {
	const n = 50
	dir := t.TempDir()
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	lose := simulator.Faults{DropRate: 1}
	h := newHarness(t, harnessOptions{dataDir: dir, faults: lose, brokerURL: b.URL(), config: manyDevices(n, "")})
	for i := range n {
		h.publish(fmt.Sprintf("sw%03d", i), fmt.Sprintf(`{"state":"ON","op_id":"r%03d"}`, i))
	}
	for i := range n {
		h.result(fmt.Sprintf("r%03d", i))
		h.nextSet()
	}
	clock := h.clock
	h.stopHearth()

	h2 := newHarness(t, harnessOptions{dataDir: dir, clock: clock, brokerURL: b.URL(), automation: h, faults: lose, config: manyDevices(n, "")})
	// The fake clock moves 500 ms at a time, 11 s in all: the windows of
	// the attempts in flight end at +5 s, the resends follow their 1 s
	// backoff (ceilingRand) and wait 5 s unconfirmed, to +11 s (where the
	// bridge answers the witness read Hearth sends for their silence, so
	// that the breaker stays closed and nothing is left to wait on the
	// clock). The sets reach the devices of either simulator (the first
	// one's session may still be subscribed).
	// The clock moves only once every command's worker waits on it (its
	// window, its backoff, its attempt's timeout): a worker still on its
	// way to its timer would set it a step late.
	resent := 0
	for clock.Since(t0) < 11*time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), eventWait)
		err := clock.BlockUntilContext(ctx, n)
		cancel()
		if err != nil {
			t.Fatalf("at +%v hearthd did not wait on the clock", clock.Since(t0))
		}
		clock.Advance(500 * time.Millisecond)
		for more := true; more; {
			select {
			case <-h.sets:
				resent++
			case <-h2.sets:
				resent++
			case <-time.After(20 * time.Millisecond):
				more = false
			}
		}
		if at := clock.Since(t0); at < 5*time.Second && resent > 0 {
			t.Fatalf("%d sets resent at +%v, within the window of the attempts in flight", resent, at)
		}
	}
	if resent != n {
		t.Errorf("%d sets resent after the restart; want %d, one per command", resent, n)
	}
	for range n {
		r := h2.await(func(r devices.Result) bool { return r.Status.Terminal() }, "a result after the restart")
		if r.Status != devices.Failed || r.Reason != devices.ReasonTimeout || r.Attempts != 2 {
			t.Errorf("%s: %s/%s after %d attempts; want failed/timeout after 2", r.OpID, r.Status, r.Reason, r.Attempts)
		}
	}
}

// A retry whose backoff ends past the policy's deadline (the hub was
// held up, and the clock jumped past it) is not sent: the command ends
// failed/deadline_exceeded after its one attempt.
func TestRetryWhoseBackoffEndsPastThePolicyDeadlineIsNotSent(t *testing.T) {
	h := newHarness(t, harnessOptions{config: withoutBreaker(deadlineConfig), faults: simulator.Faults{Silent: []string{"plug"}}})
	h.publish("plug", `{"state":"ON","op_id":"held-up"}`)
	h.result("held-up")
	h.nextSet()                      // attempt 1: the plug is silent
	h.advanceTimeout(time.Second)    // its 1 s passes unconfirmed; the retry's 1 s backoff begins
	h.clock.Advance(5 * time.Second) // the worker wakes at +6 s, past the policy deadline (+5 s)
	r := h.await(func(r devices.Result) bool { return r.OpID == "held-up" && r.Status.Terminal() }, "held-up's end")
	if r.Status != devices.Failed || r.Reason != devices.ReasonDeadlineExceeded || r.Attempts != 1 {
		t.Errorf("held-up: %s/%s after %d attempts (%s); want failed/deadline_exceeded after 1, the retry never sent", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	h.noSetsYet()
}

// Regression: a retry decided within the policy's deadline that then
// finds the connection down waits for it only until that deadline, and
// ends deadline_exceeded there, not whenever the broker comes back.
func TestRetryWaitingForTheConnectionEndsAtThePolicyDeadline(t *testing.T) {
	m := startRestartableMochi(t)
	// Without a breaker: the simulator's bridge leaves before the broker
	// does, and its offline would open the breaker, which fails the retry
	// fast (TestBridgeOfflineFailsCommandsFast).
	h := newHarness(t, harnessOptions{brokerURL: m.url(), config: withoutBreaker(deadlineConfig), faults: simulator.Faults{Silent: []string{"plug"}}})
	h.publish("plug", `{"state":"ON","op_id":"late"}`)
	h.result("late")
	h.nextSet()
	h.advance(time.Second) // attempt 1 unconfirmed; the retry waits 1 s
	h.stopSim()
	h.stopSim = nil
	h.stopAutomation()                 // before its broker goes: paho's reconnect would outlive the test
	m.stop()                           // the broker goes away during the backoff
	op := h.driveUntilEnded("late", 2) // the worker's wait and Hearth's reconnect
	if op.Status != devices.Failed || op.Reason != devices.ReasonDeadlineExceeded {
		t.Fatalf("late: %s/%s (%s); want failed/deadline_exceeded", op.Status, op.Reason, op.Detail)
	}
	if ended := op.UpdatedAt.Sub(t0); ended < 5*time.Second || ended > 5500*time.Millisecond {
		t.Errorf("late ended at +%v; want at the policy deadline, +5s (the TTL is 60 s)", ended)
	}
}
