package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hearthd/hearth/config"
)

// mosquittoACLConfig is a hub on an external Mosquitto: a Zigbee2MQTT
// bridge and the principal default, both with accounts generated into
// the credentials file, and Hearth's own account.
const mosquittoACLConfig = `data_dir: %q
mqtt:
  url: tcp://127.0.0.1:1883
  username: hearthd
  password: hearthd-password
services:
  zigbee:
    protocol: zigbee2mqtt
    client_id: zigbee2mqtt-bridge
devices:
  front_door: {class: lock, address: Front Door}
`

// printACL runs hearthd -print-mosquitto-acl on a config and returns the
// JSON (stdout), the mosquitto.conf lines (stderr) and the bridge's and
// the principal's generated passwords from the credentials file.
func printACL(t *testing.T) (dynsec []byte, conf string, bridgePassword, principalPassword string) {
	t.Helper()
	hearthd, _ := builtBinaries(t)
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "hearth.yaml")
	dataDir := filepath.Join(dir, "data")
	if err := os.WriteFile(cfgPath, fmt.Appendf(nil, mosquittoACLConfig, dataDir), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), interopWait)
	defer cancel()
	cmd := exec.CommandContext(ctx, hearthd, "-print-mosquitto-acl", "-config", cfgPath)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("hearthd -print-mosquitto-acl: %v\n%s", err, stderr.String())
	}
	cr, err := config.LoadCredentials(config.CredentialsPath(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	sc, ok := cr.Service("zigbee")
	if !ok || sc.MQTTPassword == "" {
		t.Fatalf("the credentials file has no password of service zigbee: %+v", cr)
	}
	pc, ok := cr.Principal(config.DefaultPrincipal)
	if !ok || pc.MQTTPassword == "" || pc.MQTTUsername != config.DefaultPrincipal {
		t.Fatalf("the credentials file has no MQTT account of the principal default: %+v", cr)
	}
	return out, stderr.String(), sc.MQTTPassword, pc.MQTTPassword
}

// The dynamic-security file is what Mosquitto 2's plugin reads: one
// client per account with a PBKDF2-SHA512 hash, a role per account whose
// publish ACLs fall in priority in rule order, and the conf lines that
// load it.
func TestPrintMosquittoACLWritesTheDynamicSecurityFile(t *testing.T) {
	dynsec, conf, _, _ := printACL(t)
	var f struct {
		DefaultACLAccess map[string]bool `json:"defaultACLAccess"`
		Clients          []struct {
			Username, Password, Salt string
			Iterations               int
			Roles                    []struct{ Rolename string }
		}
		Roles []struct {
			Rolename string
			ACLs     []struct {
				ACLType  string `json:"acltype"`
				Topic    string
				Priority int
				Allow    bool
			}
		}
	}
	if err := json.Unmarshal(dynsec, &f); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, dynsec)
	}
	if f.DefaultACLAccess["publishClientSend"] || !f.DefaultACLAccess["subscribe"] {
		t.Errorf("defaultACLAccess %v; want publishClientSend denied, subscribe allowed", f.DefaultACLAccess)
	}
	var users []string
	for _, c := range f.Clients {
		users = append(users, c.Username)
		if len(c.Salt) != 16 || len(c.Password) != 88 || c.Iterations < 101 {
			t.Errorf("client %s: salt %q, hash of %d base64 characters, %d iterations; want 12 bytes of salt, 64 of hash", c.Username, c.Salt, len(c.Password), c.Iterations)
		}
	}
	if got := strings.Join(users, " "); got != "hearthd zigbee default" {
		t.Errorf("clients %s; want hearthd zigbee default", got)
	}
	for _, want := range []string{"plugin /usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so", "plugin_opt_config_file ", "allow_anonymous false"} {
		if !strings.Contains(conf, want) {
			t.Errorf("stderr lacks %q:\n%s", want, conf)
		}
	}
}

// Through Debian's Mosquitto with the generated file: a principal's set
// to a bridge's device, the bridge account's set to its own device and a
// principal's forged report never arrive; a principal's command to Hearth
// does. Each publish is acknowledged (3.1.1 cannot refuse one), so a
// message published after it by an account that may is the barrier.
func TestMosquittoWithTheGeneratedACLStopsTheAttacks(t *testing.T) {
	checkLeaks(t)
	bin := mosquittoTools(t)
	if _, err := os.Stat(mosquittoPluginPath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("Mosquitto's dynamic-security plugin is missing: %v", err)
		}
		t.Skipf("Mosquitto's dynamic-security plugin is missing: %v", err)
	}
	dynsec, _, bridgePassword, principalPassword := printACL(t)
	dir := t.TempDir()
	dynsecPath := filepath.Join(dir, "dynamic-security.json")
	if err := os.WriteFile(dynsecPath, dynsec, 0o600); err != nil {
		t.Fatal(err)
	}
	extra := fmt.Sprintf("allow_anonymous false\nplugin %s\nplugin_opt_config_file %s\n", mosquittoPluginPath, dynsecPath)
	if os.Geteuid() == 0 {
		// Started as root, Mosquitto runs as the user mosquitto, which
		// cannot read the test's temporary directory.
		extra += "user root\n"
	}
	b := startMosquittoConf(t, bin, extra)
	b.creds = []string{"-u", "hearthd", "-P", "hearthd-password"}
	phone := []string{"-u", config.DefaultPrincipal, "-P", principalPassword}
	bridge := []string{"-u", "zigbee", "-P", bridgePassword, "-i", "zigbee2mqtt-bridge"}

	s := b.subscribe(0, "zigbee2mqtt/#", "hearth/#")
	pubAs := func(who []string, topic, payload string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), interopWait)
		defer cancel()
		args := append(append([]string{"-h", "127.0.0.1", "-p", b.port, "-V", "mqttv311", "-q", "1"}, who...), "-t", topic, "-m", payload)
		if out, err := exec.CommandContext(ctx, "mosquitto_pub", args...).CombinedOutput(); err != nil {
			t.Fatalf("mosquitto_pub %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// Sanity: the accounts log in and may publish where the ACL says.
	pubAs(bridge, "zigbee2mqtt/Front Door", `{"state":"LOCK","from":"bridge"}`)
	if m := s.next(); m.topic != "zigbee2mqtt/Front Door" || !strings.Contains(m.payload, `"from":"bridge"`) {
		t.Fatalf("the bridge's own report: got %s; want it delivered", m)
	}

	pubAs(phone, "zigbee2mqtt/Front Door/set", `{"state":"UNLOCK","attack":"principal set"}`)
	pubAs(bridge, "zigbee2mqtt/Front Door/set", `{"state":"UNLOCK","attack":"bridge set"}`)
	pubAs(phone, "zigbee2mqtt/Front Door", `{"state":"LOCK","attack":"forged report"}`)
	pubAs(phone, "hearth/bridge/state", `offline`)
	pubAs(phone, "hearth/front_door/result", `{"status":"succeeded"}`)
	pubAs(phone, "hearth/front_door/set", `{"state":"LOCK","op_id":"through-hearth"}`)
	m := s.next()
	if m.topic != "hearth/front_door/set" || !strings.Contains(m.payload, "through-hearth") {
		t.Errorf("first message after the attacks: %s; want the principal's command to Hearth: every attack before it reached the subscriber", m)
	}
	for _, got := range s.sync(b) {
		t.Errorf("after the command: %s; want nothing", got)
	}
}

// What Mosquitto 2.0.11 does with client IDs under the generated file:
// the dynamic-security plugin's clientid binding refuses the bridge's
// account under any other client ID, but it does not keep another
// account off the bridge's client ID: Mosquitto lets that CONNECT take the
// session over and closes the bridge's connection (its handle_connect
// checks no username). The embedded broker refuses such a CONNECT; with
// Mosquitto, docs/SAFETY.md says so.
func TestMosquittoClientIDBindingDoesNotStopATakeover(t *testing.T) {
	checkLeaks(t)
	bin := mosquittoTools(t)
	if _, err := os.Stat(mosquittoPluginPath); err != nil {
		t.Skipf("Mosquitto's dynamic-security plugin is missing: %v", err)
	}
	dynsec, _, bridgePassword, principalPassword := printACL(t)
	dynsecPath := filepath.Join(t.TempDir(), "dynamic-security.json")
	if err := os.WriteFile(dynsecPath, dynsec, 0o600); err != nil {
		t.Fatal(err)
	}
	extra := fmt.Sprintf("allow_anonymous false\nplugin %s\nplugin_opt_config_file %s\n", mosquittoPluginPath, dynsecPath)
	if os.Geteuid() == 0 {
		extra += "user root\n"
	}
	b := startMosquittoConf(t, bin, extra)
	base := []string{"-h", "127.0.0.1", "-p", b.port, "-V", "mqttv311", "-q", "1", "-t", "x", "-m", "x"}
	run := func(args ...string) error {
		ctx, cancel := context.WithTimeout(context.Background(), interopWait)
		defer cancel()
		return exec.CommandContext(ctx, "mosquitto_pub", append(append([]string{}, base...), args...)...).Run()
	}
	if err := run("-u", "zigbee", "-P", bridgePassword, "-i", "somebody-else"); err == nil {
		t.Error("the bridge's account under another client ID was admitted; want refused by the clientid binding")
	}
	startProc(t, "mosquitto_sub as the bridge", "mosquitto_sub", "-h", "127.0.0.1", "-p", b.port, "-V", "mqttv311",
		"-u", "zigbee", "-P", bridgePassword, "-i", "zigbee2mqtt-bridge", "-t", "zigbee2mqtt/#")
	from := b.proc.mustLine(" as zigbee2mqtt-bridge (", 0)
	if err := run("-u", config.DefaultPrincipal, "-P", principalPassword, "-i", "zigbee2mqtt-bridge"); err != nil {
		t.Fatalf("the principal with the bridge's client ID: %v; want admitted (Mosquitto checks no username)", err)
	}
	b.proc.mustLine("Client zigbee2mqtt-bridge already connected, closing old connection.", from)
}

// startMosquittoConf starts Mosquitto on a free loopback port with extra
// lines in its configuration and waits until it runs.
func startMosquittoConf(t *testing.T, bin, extra string) *mosquitto {
	t.Helper()
	dir := t.TempDir()
	for try := 1; ; try++ {
		port := freePort(t)
		conf := filepath.Join(dir, fmt.Sprintf("mosquitto-%d.conf", try))
		content := fmt.Sprintf("per_listener_settings false\nlistener %s 127.0.0.1\npersistence false\nlog_dest stderr\n%s", port, extra)
		if err := os.WriteFile(conf, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		p := startProc(t, "mosquitto", bin, "-c", conf)
		if _, ok := p.awaitLine(" running", 0); ok {
			return &mosquitto{t: t, port: port, proc: p}
		}
		if try == 3 {
			t.Fatalf("mosquitto did not start after %d tries (last: %v)", try, p.stop())
		}
	}
}
