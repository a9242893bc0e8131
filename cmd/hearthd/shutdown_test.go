package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/store"
)

// holdFirstSet is a broker hook that holds the first set message a client
// publishes until released, so that hearthd's send of it is still waiting
// for its PUBACK; it counts every set message.
type holdFirstSet struct {
	mochi.HookBase
	mu      sync.Mutex
	sets    int
	held    chan struct{} // closed when the first set is being held
	release chan struct{}
}

func (h *holdFirstSet) ID() string { return "hold-first-set" }

func (h *holdFirstSet) Provides(b byte) bool {
	return bytes.Contains([]byte{mochi.OnPublish}, []byte{b})
}

func (h *holdFirstSet) OnPublish(_ *mochi.Client, pk packets.Packet) (packets.Packet, error) {
	if !strings.HasSuffix(pk.TopicName, "/set") || !strings.HasPrefix(pk.TopicName, "zigbee2mqtt/") {
		return pk, nil
	}
	h.mu.Lock()
	h.sets++
	first := h.sets == 1
	h.mu.Unlock()
	if first {
		close(h.held)
		<-h.release
	}
	return pk, nil
}

func (h *holdFirstSet) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sets
}

// Shutting down while an attempt's send still waits for the broker starts
// no further attempt: the command stays pending with the one attempt it
// had, to resume at the next start.
func TestShutdownDuringSendStartsNoFurtherAttempt(t *testing.T) {
	hook := &holdFirstSet{held: make(chan struct{}), release: make(chan struct{})}
	url := startMochi(t, new(auth.AllowHook), hook)
	released := false
	defer func() {
		if !released {
			close(hook.release)
		}
	}()

	// No backoff (floorRand): with the fault, a second attempt would
	// follow at once.
	h := newHarness(t, harnessOptions{brokerURL: url, rand: floorRand{}})
	h.publish("hall_light", `{"state":"ON","op_id":"s1"}`)
	// Not waiting for "accepted": it may be queued behind the held set on
	// hearthd's one connection.
	waitClosed(t, hook.held, "the first set held at the broker")

	h.stopAutomation()
	d := h.d
	stopped := make(chan struct{})
	go func() { defer close(stopped); h.stopHearth() }()
	// The dispatcher ends while the send is still held at the broker.
	waitClosed(t, d.dispDone, "the dispatcher to stop")
	close(hook.release)
	released = true
	select {
	case <-stopped:
	case <-time.After(eventWait):
		t.Fatal("hearthd did not stop")
	}

	if n := hook.count(); n != 1 {
		t.Errorf("the broker received %d sets; want 1: no attempt may start after shutdown began", n)
	}
	st, err := store.Open(h.cfg.DataDir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	op, ok, err := st.Lookup("s1")
	if err != nil || !ok {
		t.Fatalf("s1 not stored: %v", err)
	}
	if op.Status != devices.Accepted || op.Attempts != 1 {
		t.Errorf("stored s1: %s after %d attempts; want still accepted after 1, to resume", op.Status, op.Attempts)
	}
}
