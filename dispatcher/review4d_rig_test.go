package dispatcher

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
)

// r4dConfig tunes startR4D: the bridge and journal wrap the rig's own
// (nil keeps them), and sleepy=false makes the radiator always listening.
type r4dConfig struct {
	bridge  func(*r4Bridge) Bridge
	journal func(*r4Journal) Journal
	awake   bool // not sleepy
}

// startR4D is startR4 with the bridge, the journal or the device's
// sleepiness replaced.
func startR4D(t *testing.T, c r4dConfig) *r4Rig {
	t.Helper()
	clock := clockwork.NewFakeClockAt(time.Date(2026, 11, 29, 19, 0, 0, 0, time.UTC))
	r := &r4Rig{
		t: t, clock: clock,
		bridge:  &r4Bridge{clock: clock, msgs: make(chan r4Msg, 64)},
		journal: &r4Journal{ops: map[string]devices.Op{}},
		dead:    &r4Dead{},
		results: make(chan devices.Result, 256),
	}
	var b Bridge = r.bridge
	if c.bridge != nil {
		b = c.bridge(r.bridge)
	}
	var j Journal = r.journal
	if c.journal != nil {
		j = c.journal(r.journal)
	}
	sleep := devices.Sleep{Sleepy: true, WakeInterval: time.Hour, AwakeWindow: 10 * time.Second}
	if c.awake {
		sleep = devices.Sleep{}
	}
	d, err := New(Options{
		Services: []Service{{
			Name: "zw", Bridge: b,
			Policy: retry.Policy{MaxAttempts: 2, AttemptTimeout: 5 * time.Second, Backoff: retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 10 * time.Second}},
		}},
		Devices: []Device{{Device: devices.Device{ID: "radiator", Service: "zw", Class: devices.Climate,
			Sleep: sleep}, TTL: time.Hour}},
		Journal:     j,
		Publisher:   nopPublisher{},
		DeadLetters: r.dead,
		Clock:       clock,
		OnResult:    func(res devices.Result) { r.results <- res },
	})
	if err != nil {
		t.Fatal(err)
	}
	r.d = d
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	d.BridgeState("zw", true, false)
	return r
}
