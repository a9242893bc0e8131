package automations

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// The event queue bounds the bytes of the MQTT messages waiting as well
// as their number: a flood of large payloads (1 MiB each, the embedded
// broker's largest packet) would otherwise hold EventQueue of them, 10
// GiB. Past the bound messages are dropped and counted; states still
// queue.
func TestEventQueueBoundsTheBytesOfMessages(t *testing.T) {
	rec := &recorder{}
	e, err := New(Options{Clock: clockwork.NewFakeClockAt(friday), Location: cet, Notifier: rec, Logger: slog.New(slog.DiscardHandler),
		EventQueue: 100, EventBytes: 100, QueueLimit: 100, Rules: []Rule{{
			Name:     "count",
			Triggers: []Trigger{{MQTT: &MQTTTrigger{Topic: "n/#"}}, {State: &StateTrigger{Device: "counter", Attribute: "n"}}},
			Actions:  []Action{notify("n")},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("x"), 40)
	for i := range 5 {
		e.Message(fmt.Sprintf("n/%d", i), payload, false) // 2 queued (80 bytes), 3 dropped
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
	if got, dropped := len(rec.Notes()), e.EventsDropped(); got != 2+4 || dropped != 3 {
		t.Errorf("%d runs, %d messages dropped; want 6 (2 messages, 4 changes) and 3", got, dropped)
	}
	// Once the loop took them, their bytes are free again.
	e.Message("n/again", payload, false)
	if err := e.sync(wait); err != nil {
		t.Fatal(err)
	}
	if got, dropped := len(rec.Notes()), e.EventsDropped(); got != 7 || dropped != 3 {
		t.Errorf("%d runs, %d messages dropped after the queue emptied; want 7 and 3", got, dropped)
	}
}
