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
		"The demo runs without authentication (mqtt.allow_anonymous and http.allow_anonymous), so it listens on loopback only",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, got)
		}
	}

	// The Wi-Fi step: the Tasmota plug gets POWER ON and its own
	// stat/…/RESULT confirms it, on the first attempt, in that order.
	_, plug, ok := strings.Cut(got, "\n# switch on a Wi-Fi plug (Tasmota)")
	plug, _, _ = strings.Cut(plug, "\n\n")
	if !ok {
		t.Fatalf("the demo's output has no Wi-Fi step:\n%s", got)
	}
	at := 0
	for _, want := range []string{
		"\n→ hearth/porch_plug/set  {\"state\":\"ON\",\"op_id\":\"demo-",
		"\n  Hearth → cmnd/porch_plug/POWER  ON\n",
		"\n  device → stat/porch_plug/RESULT  {\"POWER\":\"ON\"}\n",
		"\n  succeeded  attempts=1  state={\"state\":\"ON\"}",
	} {
		i := strings.Index(plug[at:], want)
		if i < 0 {
			t.Fatalf("the Wi-Fi step lacks %q after %q:\n%s", want, plug[:at], plug)
		}
		at += i + len(want) - 1
	}
	if n := strings.Count(plug, "\n  Hearth → "); n != 1 {
		t.Errorf("the Wi-Fi step shows %d commands to the plug; want 1:\n%s", n, plug)
	}
	if !strings.Contains(got, "7 simulated devices (Zigbee2MQTT, Tasmota)") {
		t.Errorf("the demo's headline does not name the simulated devices and their protocols:\n%s", got)
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

// The demo is anonymous, so it listens on loopback whatever the flags say
// (the port kept), and a configuration with principals cannot run as one.
func TestDemoIsAnonymousOnLoopbackOnly(t *testing.T) {
	cfg, err := loadConfig(options{demo: true, mqttListen: "0.0.0.0:11883", httpListen: ":18080"})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.MQTT.AllowAnonymous || !cfg.HTTP.AllowAnonymous {
		t.Errorf("demo: allow_anonymous mqtt %v, http %v; want both", cfg.MQTT.AllowAnonymous, cfg.HTTP.AllowAnonymous)
	}
	if cfg.MQTT.Listen != "127.0.0.1:11883" || cfg.HTTP.Listen != "127.0.0.1:18080" {
		t.Errorf("demo listens on %s and %s; want 127.0.0.1:11883 and 127.0.0.1:18080", cfg.MQTT.Listen, cfg.HTTP.Listen)
	}
	if cfg, err := loadConfig(options{mqttListen: "0.0.0.0:11883"}); err != nil || cfg.MQTT.AllowAnonymous || cfg.MQTT.Listen != "0.0.0.0:11883" {
		t.Errorf("without -demo: %+v, %v; want authentication on, on the address given", cfg.MQTT, err)
	}
}
