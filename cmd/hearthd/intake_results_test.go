package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/packets"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/simulator"
)

// denyTopic is a broker ACL that refuses writes to one topic.
type denyTopic struct {
	mochi.HookBase
	topic string
}

func (h *denyTopic) ID() string { return "deny-topic" }
func (h *denyTopic) Provides(b byte) bool {
	return bytes.Contains([]byte{mochi.OnACLCheck, mochi.OnConnectAuthenticate}, []byte{b})
}
func (h *denyTopic) OnConnectAuthenticate(*mochi.Client, packets.Packet) bool { return true }
func (h *denyTopic) OnACLCheck(_ *mochi.Client, topic string, write bool) bool {
	return !(write && topic == h.topic)
}

// startMochi runs a broker of the test's own with exactly these hooks
// (allow-all auth when none), and returns its URL.
func startMochi(t *testing.T, hooks ...mochi.Hook) string {
	t.Helper()
	if len(hooks) == 0 {
		hooks = []mochi.Hook{new(auth.AllowHook)}
	}
	return startMochiWith(t, hooks).url()
}

// A result the broker refuses (here: an ACL) is dropped with an error; it
// does not hold up the results of other commands.
func TestRefusedResultDoesNotStallLaterResults(t *testing.T) {
	url := startMochi(t, &denyTopic{topic: "hearth/front_door/result"})
	h := newHarness(t, harnessOptions{brokerURL: url})
	// An UNLOCK (the simulated lock starts locked): read, then sent.
	h.publish("front_door", `{"state":"UNLOCK","op_id":"denied"}`)
	h.nextSet() // the lock command runs; its results cannot be published
	for i, dev := range []string{"hall_light", "plug", "blinds"} {
		payload := `{"state":"ON","op_id":"after-` + dev + `"}`
		if dev == "blinds" {
			payload = `{"position":30,"op_id":"after-blinds"}`
		}
		h.publish(dev, payload)
		if r := h.final("after-" + dev); r.Status != devices.Succeeded {
			t.Errorf("command %d after the refused result: %s; want succeeded", i, r.Status)
		}
	}
	stored, _, _ := h.d.store.Lookup("denied")
	if stored.Status != devices.Succeeded {
		t.Errorf("the lock command itself: %s; want succeeded (only its results were refused)", stored.Status)
	}
}

// An op_id is the caller's name for one command on one device: sent again
// to another device it is rejected there with op_id_conflict, and the
// first device's result is not republished.
func TestOpIDReusedForAnotherDeviceIsAConflict(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.publish("hall_light", `{"state":"ON","op_id":"shared"}`)
	if r := h.final("shared"); r.Status != devices.Succeeded {
		t.Fatalf("first: %s", r.Status)
	}
	h.nextSet()
	h.publish("plug", `{"state":"ON","op_id":"shared"}`)
	r := h.result("shared")
	if r.Device != "plug" || r.Status != devices.Rejected || r.Reason != devices.ReasonOpIDConflict {
		t.Errorf("reuse on plug: %s %s/%s; want plug rejected/op_id_conflict", r.Device, r.Status, r.Reason)
	}
	// The same op_id with an invalid payload on its own device is still
	// answered with the stored result: one op, one terminal status.
	h.publish("hall_light", `{"state":"TOGGLE","op_id":"shared"}`)
	if r := h.result("shared"); r.Device != "hall_light" || r.Status != devices.Succeeded {
		t.Errorf("repeat with a bad payload: %s %s; want hall_light's stored succeeded", r.Device, r.Status)
	}
	h.noSetsYet()
}

// A command issued in the future (the sender's clock is wrong) is refused;
// a little skew is not.
func TestIssuedAtFromTheFutureIsRejected(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	future := t0.Add(time.Hour).Format(time.RFC3339)
	h.publish("plug", `{"state":"ON","op_id":"future","issued_at":"`+future+`"}`)
	if r := h.result("future"); r.Status != devices.Rejected || r.Reason != devices.ReasonInvalidIssuedAt {
		t.Errorf("issued an hour ahead: %s/%s; want rejected/invalid_issued_at", r.Status, r.Reason)
	}
	skew := t0.Add(time.Minute).Format(time.RFC3339)
	h.publish("plug", `{"state":"ON","op_id":"skew","issued_at":"`+skew+`"}`)
	if r := h.final("skew"); r.Status != devices.Succeeded {
		t.Errorf("issued a minute ahead: %s; want succeeded", r.Status)
	}
}

// Negative zero is sent as zero.
func TestNegativeZeroIsSentAsZero(t *testing.T) {
	cmd, err := devices.ParseCommand(devices.Light, []byte(`{"brightness":-0}`))
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := cmd.Target["brightness"].(float64); f != 0 || math.Signbit(f) {
		t.Errorf("brightness %v (sign bit %v); want +0", f, math.Signbit(f))
	}
	b, _ := json.Marshal(cmd.Target)
	if strings.Contains(string(b), "-0") {
		t.Errorf("encoded %s; want no -0", b)
	}
}

// The reserved key is op_id exactly: "OP_ID" is an attribute (unknown to a
// light), never a way to reach another command's stored result.
func TestOpIDKeyIsCaseSensitive(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	h.publish("hall_light", `{"state":"ON","op_id":"x1"}`)
	if r := h.final("x1"); r.Status != devices.Succeeded {
		t.Fatalf("x1: %s", r.Status)
	}
	h.publish("hall_light", `{"state":"OFF","OP_ID":"x1"}`)
	r := h.await(func(r devices.Result) bool { return r.Device == "hall_light" && r.OpID != "x1" }, "the OP_ID command's result")
	if r.Status != devices.Rejected || r.Reason != devices.ReasonUnknownAttribute {
		t.Errorf("OP_ID: %s/%s; want rejected/unknown_attribute", r.Status, r.Reason)
	}
}

// Once hearthd is stopping, a command handed to the intake is refused at
// once, however full the intake is: shutdown never waits on it.
func TestSubmitAfterStopReturns(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	disp := h.d.disp
	h.stop()
	done := make(chan error, 1)
	go func() {
		var err error
		for range 5000 { // more than the intake holds
			if err = disp.Submit(context.Background(), dispatcher.Request{Device: "plug", Payload: []byte("ON")}); err != nil {
				break
			}
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, dispatcher.ErrStopped) {
			t.Errorf("Submit after stop: %v; want ErrStopped", err)
		}
	case <-time.After(eventWait):
		t.Fatal("Submit blocks on a stopped dispatcher")
	}
}

// A command repeated after a newer one superseded it is answered with its
// final status, superseded, never a second "accepted" (whether the three
// messages share one intake batch or not).
func TestRepeatAfterSupersedeAnswersSuperseded(t *testing.T) {
	h := newHarness(t, harnessOptions{faults: simulator.Faults{Silent: []string{"plug"}}})
	h.publish("plug", `{"state":"ON","op_id":"a"}`)
	h.publish("plug", `{"state":"OFF","op_id":"b"}`)
	h.publish("plug", `{"state":"ON","op_id":"a"}`)
	var got []devices.Status
	for range 3 {
		got = append(got, h.result("a").Status)
	}
	if got[0] != devices.Accepted || got[1] != devices.Superseded || got[2] != devices.Superseded {
		t.Errorf("results of a: %v; want [accepted superseded superseded]", got)
	}
}
