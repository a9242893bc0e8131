package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthd/hearth/config"
)

// What the embedded broker refuses is counted on /metrics: a CONNECT with
// a wrong password under reason credentials, and the default principal's
// publish straight to the lock's Zigbee2MQTT topic as a refused publish.
// Both are counted before the broker answers, so the counts are there
// once the CONNACK and the PUBACK are.
func TestBrokerRefusalsAreCounted(t *testing.T) {
	dataDir := t.TempDir()
	d := startSample(t, dataDir)
	path := filepath.Join(dataDir, "credentials.yaml")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cr, err := config.ParseCredentials(path, raw)
	if err != nil {
		t.Fatal(err)
	}
	def, _ := cr.Principal(config.DefaultPrincipal)

	if code, _ := connect(t, d.brokerURL, "guesser", login{"zigbee", "not-the-password"}); code != returnCodeBadLogin {
		t.Fatalf("CONNECT with a wrong password: return code %d; want %d", code, returnCodeBadLogin)
	}
	code, c := connect(t, d.brokerURL, "automation", login{def.MQTTUsername, def.MQTTPassword})
	if code != 0 {
		t.Fatalf("CONNECT as the default principal: return code %d", code)
	}
	mustToken(t, c.Publish("zigbee2mqtt/Front Door/set", 1, false, `{"state":"UNLOCK"}`))

	_, body := getAPI(t, d, "/metrics", "")
	for _, want := range []string{
		`hearth_broker_refused_connects_total{reason="credentials"} 1`,
		`hearth_broker_refused_publishes_total 1`,
		`hearth_broker_limit_closes_total{reason="connect_timeout"} 0`,
		`hearth_broker_unauthenticated_connections 0`,
		`hearth_broker_publishers_slowed_total 0`,
		`hearth_broker_commands_nacked_total 0`,
		`hearth_broker_messages_dropped_total 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
