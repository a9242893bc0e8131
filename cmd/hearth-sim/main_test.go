package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/config"
)

// lineWatch is the sim's log, closing ready once a line holds marker.
type lineWatch struct {
	mu     sync.Mutex
	buf    strings.Builder
	marker string
	ready  chan struct{}
	once   sync.Once
}

func (w *lineWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.marker) {
		w.once.Do(func() { close(w.ready) })
	}
	return len(p), nil
}

func (w *lineWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// With -credentials, each simulated bridge logs in as its service's
// account from hearthd's credentials file: a broker that admits only that
// account lets the sim's Zigbee2MQTT bridge in. Without the flag it is
// refused and never ready.
func TestSimLogsInWithTheServicesAccount(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "hearth.yaml")
	if err := os.WriteFile(cfgPath, []byte("services:\n  zigbee: {protocol: zigbee2mqtt}\ndevices:\n  hall_light: {class: light}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	credPath := config.CredentialsPath(dir)
	if err := config.WriteCredentials(credPath, &config.Credentials{
		Services: []config.ServiceCredentials{{Name: "zigbee", MQTTUsername: "zigbee", MQTTPassword: "the-zigbee-password"}},
	}); err != nil {
		t.Fatal(err)
	}
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0", Users: map[string]string{"zigbee": "the-zigbee-password"}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	// sim runs hearth-sim until its log says marker (or a deadline
	// passes), and reports whether it did.
	sim := func(marker string, extra ...string) (bool, string) {
		ctx, cancel := context.WithCancel(context.Background())
		log := &lineWatch{marker: marker, ready: make(chan struct{})}
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, append([]string{"-broker", b.URL(), "-config", cfgPath}, extra...), log)
		}()
		ready := false
		select {
		case <-log.ready:
			ready = true
		case <-time.After(10 * time.Second):
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("hearth-sim %q: %v", extra, err)
		}
		return ready, log.String()
	}
	if ready, log := sim("hearth-sim ready", "-credentials", credPath); !ready {
		t.Fatalf("with -credentials the sim's bridge never got in:\n%s", log)
	}
	// The refusal is logged by the sim itself: wait for that.
	if refused, log := sim("connect failed", "-username", "zigbee", "-password", "a-wrong-password"); !refused || strings.Contains(log, "hearth-sim ready") {
		t.Errorf("with a wrong password: refused %v; want refused and never ready:\n%s", refused, log)
	}
}
