package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
)

// startSample starts hearthd on the sample configuration, configs/hearth.yaml
// as shipped, with dataDir and free loopback ports: authentication as a
// fresh install has it.
func startSample(t *testing.T, dataDir string) *daemon {
	t.Helper()
	cfg, err := config.Load("../../configs/hearth.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir, cfg.MQTT.Listen, cfg.HTTP.Listen = dataDir, "127.0.0.1:0", "127.0.0.1:0"
	d, err := start(cfg, deps{logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.stop)
	waitClosed(t, d.conn.Up(), "hearthd connected to its own broker")
	return d
}

// connect CONNECTs to url as MQTT 3.1.1 with username and password ("" for
// none), without retrying, and returns the CONNACK's return code and the
// client (to disconnect) when it was accepted.
func connect(t *testing.T, url, clientID string, l login) (byte, paho.Client) {
	t.Helper()
	opts := paho.NewClientOptions().AddBroker(url).SetClientID(clientID).
		SetProtocolVersion(4).SetAutoReconnect(false).SetConnectRetry(false)
	if l.username != "" {
		opts.SetUsername(l.username).SetPassword(l.password)
	}
	c := paho.NewClient(opts)
	tok := c.Connect()
	if !tok.WaitTimeout(eventWait) {
		t.Fatalf("%s: CONNECT got no CONNACK", clientID)
	}
	code := tok.(*paho.ConnectToken).ReturnCode()
	if code == 0 {
		t.Cleanup(func() { c.Disconnect(0) })
	}
	return code, c
}

// returnCodeBadLogin is MQTT 3.1.1's CONNACK return code 4, "bad user name
// or password".
const returnCodeBadLogin = 0x04

// getAPI GETs path from d's HTTP API with token ("" for none).
func getAPI(t *testing.T, d *daemon, path, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://"+d.httpAddr()+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	client := &http.Client{Timeout: eventWait}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A fresh install on the sample config is closed: the embedded broker
// refuses an anonymous CONNECT and the API an unauthenticated request;
// credentials.yaml (mode 0600) holds the bridge's account and the default
// principal, which get in and may command; a second start keeps them.
func TestFreshStartOnTheSampleIsClosed(t *testing.T) {
	dataDir := t.TempDir()
	d := startSample(t, dataDir)

	if code, _ := connect(t, d.brokerURL, "anonymous", login{}); code != returnCodeBadLogin {
		t.Errorf("anonymous CONNECT: return code %d; want %d (bad user name or password)", code, returnCodeBadLogin)
	}
	if code, _ := connect(t, d.brokerURL, "guesser", login{"zigbee", "not-the-password"}); code != returnCodeBadLogin {
		t.Errorf("CONNECT with a wrong password: return code %d; want %d", code, returnCodeBadLogin)
	}
	if status, body := getAPI(t, d, "/api/v1/breakers", ""); status != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/breakers without a token: %d %s; want 401", status, body)
	}
	if status, _ := getAPI(t, d, "/readyz", ""); status != http.StatusOK {
		t.Errorf("GET /readyz without a token: %d; want 200 (health stays open)", status)
	}

	path := filepath.Join(dataDir, "credentials.yaml")
	info, err := os.Stat(path)
	if err != nil {
		t.Fatalf("no credentials file after the first start: %v", err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("credentials.yaml mode %#o; want 0600", perm)
	}
	first, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cr, err := config.ParseCredentials(path, first)
	if err != nil {
		t.Fatal(err)
	}
	zigbee, ok := cr.Service("zigbee")
	if !ok || zigbee.MQTTUsername != "zigbee" || len(zigbee.MQTTPassword) < 32 {
		t.Fatalf("credentials.yaml's zigbee account: %+v, %v; want username zigbee and a generated password", zigbee, ok)
	}
	def, ok := cr.Principal(config.DefaultPrincipal)
	if !ok || def.MQTTPassword == "" || def.HTTPToken == "" {
		t.Fatalf("credentials.yaml's default principal: %+v, %v; want MQTT credentials and an HTTP token", def, ok)
	}

	if code, _ := connect(t, d.brokerURL, "zigbee2mqtt", login{zigbee.MQTTUsername, zigbee.MQTTPassword}); code != 0 {
		t.Errorf("CONNECT as the zigbee account: return code %d; want 0 (accepted)", code)
	}
	if status, body := getAPI(t, d, "/api/v1/breakers", def.HTTPToken); status != http.StatusOK {
		t.Errorf("GET /api/v1/breakers with the default principal's token: %d %s; want 200", status, body)
	}
	// The default principal may command: its command is accepted as its.
	code, automation := connect(t, d.brokerURL, "automation", login{def.MQTTUsername, def.MQTTPassword})
	if code != 0 {
		t.Fatalf("CONNECT as the default principal: return code %d; want 0", code)
	}
	results := make(chan devices.Result, 16)
	mustToken(t, automation.Subscribe("hearth/+/result", 1, func(_ paho.Client, m paho.Message) {
		var r devices.Result
		if json.Unmarshal(m.Payload(), &r) == nil {
			results <- r
		}
	}))
	mustToken(t, automation.Publish("hearth/hall_light/set", 1, false, `{"state":"ON","op_id":"as-default"}`))
	select {
	case r := <-results:
		if r.OpID != "as-default" || r.Status != devices.Accepted {
			t.Errorf("the default principal's command: %+v; want accepted", r)
		}
	case <-time.After(eventWait):
		t.Fatal("no result for the default principal's command")
	}
	if op, _, _ := d.store.Lookup("as-default"); op.Principal != config.DefaultPrincipal {
		t.Errorf("the command's principal is %q; want %q", op.Principal, config.DefaultPrincipal)
	}
	automation.Disconnect(0)
	d.stop()

	d2 := startSample(t, dataDir)
	again, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(first) {
		t.Errorf("a second start rewrote credentials.yaml:\nbefore %s\nafter  %s", first, again)
	}
	if code, _ := connect(t, d2.brokerURL, "zigbee2mqtt-2", login{zigbee.MQTTUsername, zigbee.MQTTPassword}); code != 0 {
		t.Errorf("after a restart, CONNECT with the same zigbee password: return code %d; want 0", code)
	}
}

// A credentials file that others may read is refused at start, before
// anything listens, naming the file and the fix; it is not replaced.
func TestStartRefusesACredentialsFileOthersCanRead(t *testing.T) {
	dataDir := t.TempDir()
	d := startSample(t, dataDir)
	d.stop()
	path := filepath.Join(dataDir, "credentials.yaml")
	before, _ := os.ReadFile(path)
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, _ := config.Load("../../configs/hearth.yaml")
	cfg.DataDir, cfg.MQTT.Listen, cfg.HTTP.Listen = dataDir, "127.0.0.1:0", "127.0.0.1:0"
	_, err := start(cfg, deps{logger: testLogger(t)})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("start with credentials.yaml at 0644: %v; want a refusal naming the file and chmod 600", err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Error("the exposed credentials file was rewritten")
	}
}

// Anonymous clients on a non-loopback listen address are refused at start
// with the key named, whether the file or a flag puts the listener there.
func TestAnonymousBeyondLoopbackRefusedAtStart(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"mqtt in the file", []string{"-config", write("mqtt.yaml", "data_dir: "+filepath.Join(dir, "d1")+"\nmqtt:\n  listen: 0.0.0.0:0\n  allow_anonymous: true\n")},
			"mqtt.yaml:4: mqtt.allow_anonymous: is true and mqtt.listen \"0.0.0.0:0\" is not a loopback address"},
		{"http by a flag", []string{"-config", write("http.yaml", "data_dir: "+filepath.Join(dir, "d2")+"\nmqtt: {listen: '127.0.0.1:0'}\nhttp:\n  allow_anonymous: true\n"), "-http-listen", "0.0.0.0:0"},
			"http.yaml: http.allow_anonymous: is true and http.listen \"0.0.0.0:0\" is not a loopback address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), eventWait)
			defer cancel()
			err := run(ctx, tc.args, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("run %q: %v; want an error with %q", tc.args, err, tc.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "d1")); !os.IsNotExist(err) {
		t.Errorf("the data directory exists (%v): hearthd started before refusing", err)
	}
}

// hearthctl credentials rotate writes a new password; SIGHUP makes the
// running hearthd apply it: the old password is refused from then on, the
// client logged in with it is disconnected, and the new one is admitted.
// Real binaries, a real signal.
func TestRotateThenSIGHUPRefusesTheOldPassword(t *testing.T) {
	checkLeaks(t)
	hearthdBin, _ := builtBinaries(t)
	hearthctlBin := builtHearthctl(t)
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	cfgPath := filepath.Join(dir, "hearth.yaml")
	sample, err := os.ReadFile("../../configs/hearth.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(sample), "data_dir: data\n", fmt.Sprintf("data_dir: %q\n", dataDir), 1)
	text = strings.Replace(text, "  listen: 127.0.0.1:1883\n", "  listen: 127.0.0.1:0\n", 1)
	text = strings.Replace(text, "  listen: 127.0.0.1:8080\n", "  listen: 127.0.0.1:0\n", 1)
	if err := os.WriteFile(cfgPath, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	hd := startProc(t, "hearthd", hearthdBin, "-config", cfgPath)
	i := hd.mustLine("embedded broker listening", 0)
	lines, _ := hd.out.since(i)
	addr := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(lines[0])
	if addr == nil {
		t.Fatalf("no address in %q", lines[0])
	}
	url := "tcp://" + addr[1]
	hd.mustLine(`msg="hearthd started"`, i)
	// At the first start hearthd says where the credentials are and which
	// account the bridge must use.
	hd.mustLine("credentials.yaml", 0)
	hd.mustLine(`mqtt_username=zigbee where="mqtt.user and mqtt.password in Zigbee2MQTT's configuration.yaml"`, 0)

	cr, err := config.LoadCredentials(config.CredentialsPath(dataDir))
	if err != nil {
		t.Fatal(err)
	}
	old, _ := cr.Service("zigbee")
	lost := make(chan struct{})
	bridge := paho.NewClient(paho.NewClientOptions().AddBroker(url).SetClientID("zigbee2mqtt").
		SetUsername(old.MQTTUsername).SetPassword(old.MQTTPassword).SetAutoReconnect(false).
		SetConnectionLostHandler(func(paho.Client, error) { close(lost) }))
	mustToken(t, bridge.Connect())
	defer bridge.Disconnect(0)

	out, err := exec.Command(hearthctlBin, "credentials", "-data-dir", dataDir, "rotate", "zigbee").CombinedOutput()
	if err != nil {
		t.Fatalf("hearthctl credentials rotate zigbee: %v\n%s", err, out)
	}
	cr, _ = config.LoadCredentials(config.CredentialsPath(dataDir))
	rotated, _ := cr.Service("zigbee")
	if rotated.MQTTPassword == old.MQTTPassword {
		t.Fatal("rotate left the password as it was")
	}

	if err := hd.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	hd.mustLine("principals and credentials reloaded", i)
	waitClosed(t, lost, "the bridge logged in with the old password to be disconnected")
	if code, _ := connect(t, url, "zigbee2mqtt-old", login{old.MQTTUsername, old.MQTTPassword}); code != returnCodeBadLogin {
		t.Errorf("after SIGHUP, CONNECT with the old password: return code %d; want %d", code, returnCodeBadLogin)
	}
	if code, _ := connect(t, url, "zigbee2mqtt-new", login{rotated.MQTTUsername, rotated.MQTTPassword}); code != 0 {
		t.Errorf("after SIGHUP, CONNECT with the new password: return code %d; want 0", code)
	}
}

// With only mqtt.allow_anonymous, the broker admits anyone and an
// anonymous command is carried out, while the HTTP API still needs the
// generated principal's token.
func TestAnonymousMQTTWithAnAuthenticatedAPI(t *testing.T) {
	text := strings.Replace(testConfig, "mqtt:\n  listen: 127.0.0.1:0\n", "mqtt:\n  listen: 127.0.0.1:0\n  allow_anonymous: true\n", 1)
	cfg, err := config.Parse("test.yaml", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = t.TempDir()
	d, err := start(cfg, deps{logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer d.stop()
	waitClosed(t, d.conn.Up(), "hearthd connected")
	code, c := connect(t, d.brokerURL, "anonymous", login{})
	if code != 0 {
		t.Fatalf("anonymous CONNECT with mqtt.allow_anonymous: return code %d; want 0", code)
	}
	results := make(chan devices.Result, 16)
	mustToken(t, c.Subscribe("hearth/+/result", 1, func(_ paho.Client, m paho.Message) {
		var r devices.Result
		if json.Unmarshal(m.Payload(), &r) == nil {
			results <- r
		}
	}))
	mustToken(t, c.Publish("hearth/plug/set", 1, false, `{"state":"ON","op_id":"anon-mqtt"}`))
	select {
	case r := <-results:
		if r.Status != devices.Accepted {
			t.Errorf("an anonymous MQTT command with mqtt.allow_anonymous: %s (%s: %s); want accepted", r.Status, r.Reason, r.Detail)
		}
	case <-time.After(eventWait):
		t.Fatal("no result for the anonymous command")
	}
	if status, _ := getAPI(t, d, "/api/v1/breakers", ""); status != http.StatusUnauthorized {
		t.Errorf("GET /api/ without a token: %d; want 401, since http.allow_anonymous is false", status)
	}
	cr, err := config.LoadCredentials(config.CredentialsPath(cfg.DataDir))
	if err != nil {
		t.Fatal(err)
	}
	def, _ := cr.Principal(config.DefaultPrincipal)
	if status, body := getAPI(t, d, "/api/v1/breakers", def.HTTPToken); status != http.StatusOK {
		t.Errorf("GET /api/ with the default principal's token: %d %s; want 200", status, body)
	}
}
