package main

import (
	"context"
	"strings"
	"testing"
)

// The README's first command: hearthd -demo runs on the built-in sample
// with simulated devices and shows each promise at work, the breaker
// included. run returns when ctx ends, which the demo's last line
// triggers.
func TestDemoShowsEachStep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, log syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-demo", "-data-dir", t.TempDir(), "-mqtt-listen", "127.0.0.1:0", "-http-listen", "127.0.0.1:0"}, &outUntil{w: &out, marker: "Try one yourself", cancel: cancel}, &log)
	}()
	if err := <-done; err != nil {
		t.Fatalf("demo: %v\n%s\n%s", err, out.String(), log.String())
	}
	got := out.String()
	for _, want := range []string{
		"succeeded  attempts=1  state={\"brightness\":128",
		"reason=relative_command",
		"hall_light received 1 set message(s).",
		"hearth/services/zigbee/state: circuit breaker open",
		"failed     attempts=0  reason=breaker_open",
		"hearth/services/zigbee/state: circuit breaker half_open",
		"hearth/services/zigbee/state: circuit breaker closed",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, got)
		}
	}
}

// outUntil writes to w and cancels once marker has been written.
type outUntil struct {
	w      *syncBuffer
	marker string
	cancel context.CancelFunc
}

func (o *outUntil) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	if strings.Contains(o.w.String(), o.marker) {
		o.cancel()
	}
	return n, err
}
