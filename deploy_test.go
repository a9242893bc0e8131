package hearth_test

// The deployment as shipped: the Dockerfile, deploy/docker-compose.yml
// with its Mosquitto and Zigbee2MQTT files, and deploy/hearth.service. No
// container runs here; these tests read the files as Docker, Compose,
// Mosquitto, Zigbee2MQTT and systemd will, and check what deploy/README.md
// promises.

import (
	"bufio"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"gopkg.in/yaml.v3"

	"github.com/hearthd/hearth/config"
)

// composeFile is the part of the Compose file format the tests check.
type composeFile struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
	// The image and build hearth and hearth-init share, merged into both.
	HearthImage any `yaml:"x-hearth-image"`
}

type composeService struct {
	Image       string                       `yaml:"image"`
	Build       any                          `yaml:"build"`
	User        string                       `yaml:"user"`
	Entrypoint  []string                     `yaml:"entrypoint"`
	Command     []string                     `yaml:"command"`
	NetworkMode string                       `yaml:"network_mode"`
	Restart     string                       `yaml:"restart"`
	Environment []string                     `yaml:"environment"`
	Devices     []string                     `yaml:"devices"`
	DependsOn   map[string]map[string]string `yaml:"depends_on"`
	Ports       []string                     `yaml:"ports"`
	Volumes     []string                     `yaml:"volumes"`
	ReadOnly    bool                         `yaml:"read_only"`
	CapDrop     []string                     `yaml:"cap_drop"`
	SecurityOpt []string                     `yaml:"security_opt"`
}

// mount is one short-syntax volume, "source:target[:mode]".
type mount struct{ source, target, mode string }

func (s composeService) mounts(t *testing.T) []mount {
	t.Helper()
	var out []mount
	for _, v := range s.Volumes {
		p := strings.Split(v, ":")
		if len(p) < 2 || len(p) > 3 {
			t.Fatalf("volume %q: want source:target[:mode]", v)
		}
		m := mount{source: p[0], target: p[1]}
		if len(p) == 3 {
			m.mode = p[2]
		}
		out = append(out, m)
	}
	return out
}

// mountOf returns the mount of source in s, failing if there is none.
func (s composeService) mountOf(t *testing.T, name, source string) mount {
	t.Helper()
	for _, m := range s.mounts(t) {
		if m.source == source {
			return m
		}
	}
	t.Fatalf("service %s does not mount %s", name, source)
	return mount{}
}

func readCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile("deploy/docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("deploy/docker-compose.yml: %v", err)
	}
	return c
}

func TestComposeRunsHearthMosquittoAndZigbee2MQTTAfterTheirAccountsExist(t *testing.T) {
	c := readCompose(t)
	var names []string
	for n := range c.Services {
		names = append(names, n)
	}
	slices.Sort(names)
	if want := []string{"hearth", "hearth-init", "mosquitto", "zigbee2mqtt"}; !slices.Equal(names, want) {
		t.Fatalf("services %v, want %v", names, want)
	}
	images := map[string]string{"hearth": "hearth:", "hearth-init": "hearth:", "mosquitto": "eclipse-mosquitto:2", "zigbee2mqtt": "koenkk/zigbee2mqtt:"}
	for n, prefix := range images {
		if !strings.HasPrefix(c.Services[n].Image, prefix) {
			t.Errorf("%s: image %q, want %s…", n, c.Services[n].Image, prefix)
		}
	}
	for _, n := range []string{"hearth", "mosquitto", "zigbee2mqtt"} {
		if got := c.Services[n].DependsOn["hearth-init"]["condition"]; got != "service_completed_successfully" {
			t.Errorf("%s: depends on hearth-init with condition %q, want service_completed_successfully (its accounts exist first)", n, got)
		}
	}
	for _, n := range []string{"hearth", "zigbee2mqtt"} {
		if _, ok := c.Services[n].DependsOn["mosquitto"]; !ok {
			t.Errorf("%s does not depend on mosquitto", n)
		}
	}

	for n, s := range c.Services {
		want := "unless-stopped"
		if n == "hearth-init" {
			want = "no"
		}
		if s.Restart != want {
			t.Errorf("%s: restart %q, want %q", n, s.Restart, want)
		}
	}

	// Every named volume is declared, every bind mount's file exists.
	var volumes []string
	for v := range c.Volumes {
		volumes = append(volumes, v)
	}
	slices.Sort(volumes)
	if want := []string{"hearth-data", "mosquitto-data", "zigbee2mqtt-data"}; !slices.Equal(volumes, want) {
		t.Errorf("volumes %v, want %v", volumes, want)
	}
	for n, s := range c.Services {
		for _, m := range s.mounts(t) {
			if strings.HasPrefix(m.source, "./") {
				if _, err := os.Stat(filepath.Join("deploy", m.source)); err != nil {
					t.Errorf("%s mounts %s: %v", n, m.source, err)
				}
			} else if !strings.HasPrefix(m.source, "/") && !slices.Contains(volumes, m.source) {
				t.Errorf("%s mounts volume %s, which is not declared", n, m.source)
			}
		}
	}

	// hearth-init writes where the others read.
	init := c.Services["hearth-init"]
	if init.NetworkMode != "none" {
		t.Errorf("hearth-init: network_mode %q, want none", init.NetworkMode)
	}
	script := readFile(t, "deploy/hearth-init.sh")
	if got := init.mountOf(t, "hearth-init", "./hearth-init.sh").target; !slices.Contains(init.Entrypoint, got) {
		t.Errorf("hearth-init runs %v, not the script it mounts at %s", init.Entrypoint, got)
	}
	for _, v := range []struct{ volume, initDefault, service, target string }{
		{"hearth-data", "DATA_DIR:-", "hearth", "/var/lib/hearth"},
		{"mosquitto-data", "MOSQUITTO_DATA:-", "mosquitto", "/mosquitto/data"},
		{"zigbee2mqtt-data", "ZIGBEE2MQTT_DATA:-", "zigbee2mqtt", "/app/data"},
	} {
		at := init.mountOf(t, "hearth-init", v.volume).target
		if !strings.Contains(script, v.initDefault+at+"}") {
			t.Errorf("hearth-init mounts %s at %s, but hearth-init.sh does not write there (${%s…})", v.volume, at, v.initDefault)
		}
		if got := c.Services[v.service].mountOf(t, v.service, v.volume).target; got != v.target {
			t.Errorf("%s mounts %s at %s, want %s", v.service, v.volume, got, v.target)
		}
	}
	for _, f := range []string{"./credential.awk", "./zigbee2mqtt/configuration.yaml"} {
		if at := init.mountOf(t, "hearth-init", f).target; !strings.Contains(script, at) {
			t.Errorf("hearth-init mounts %s at %s, which hearth-init.sh does not read", f, at)
		}
	}
	if got := c.Services["mosquitto"].mountOf(t, "mosquitto", "./mosquitto/mosquitto.conf").target; got != "/mosquitto/config/mosquitto.conf" {
		t.Errorf("mosquitto.conf mounted at %s, want /mosquitto/config/mosquitto.conf (the image's)", got)
	}

	// Hearth: not root, read-only, no capabilities; its API and
	// Zigbee2MQTT's frontend on the host's loopback only.
	h := c.Services["hearth"]
	if h.User != "" {
		t.Errorf("hearth: user %q, want the image's (10001)", h.User)
	}
	if !h.ReadOnly || !slices.Equal(h.CapDrop, []string{"ALL"}) || !slices.Contains(h.SecurityOpt, "no-new-privileges:true") {
		t.Errorf("hearth: read_only %v, cap_drop %v, security_opt %v; want true, [ALL], no-new-privileges", h.ReadOnly, h.CapDrop, h.SecurityOpt)
	}
	if !slices.Contains(h.Command, "/etc/hearth/hearth.yaml") || slices.Contains(h.Command, "-mqtt-listen") {
		t.Errorf("hearth: command %v, want the compose config and no embedded broker", h.Command)
	}
	for _, n := range []string{"hearth", "zigbee2mqtt"} {
		for _, p := range c.Services[n].Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("%s publishes %s beyond the host's loopback", n, p)
			}
		}
	}
}

// No file of the deployment opens anything without credentials.
func TestDeploymentSetsNoAllowAnonymous(t *testing.T) {
	files, err := filepath.Glob("deploy/*/*")
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob("deploy/*.*")
	files = append(append(files, more...), "Dockerfile")
	for _, f := range files {
		if strings.HasSuffix(f, ".md") {
			continue // the docs may name the key
		}
		for i, line := range strings.Split(readFile(t, f), "\n") {
			if strings.Contains(line, "allow_anonymous") && !regexp.MustCompile(`^\s*allow_anonymous\s+false\s*$|^\s*#|Nothing here sets allow_anonymous`).MatchString(line) {
				t.Errorf("%s:%d: %s", f, i+1, line)
			}
		}
	}
}

// Mosquitto admits only accounts, from the dynamic-security JSON that
// hearth-init writes.
func TestMosquittoConfLoadsTheDynamicSecurityPluginAndNoAnonymous(t *testing.T) {
	conf := mosquittoConf(t)
	for key, want := range map[string]string{
		"allow_anonymous":        "false",
		"plugin":                 "/usr/lib/mosquitto_dynamic_security.so",
		"plugin_opt_config_file": "/mosquitto/data/dynamic-security.json",
		"persistence":            "true",
	} {
		if got := conf[key]; !slices.Equal(got, []string{want}) {
			t.Errorf("mosquitto.conf: %s %v, want %s", key, got, want)
		}
	}
	if !strings.Contains(readFile(t, "deploy/hearth-init.sh"), `dynsec="$MOSQUITTO_DATA/dynamic-security.json"`) {
		t.Error("hearth-init.sh does not write the file plugin_opt_config_file names")
	}
	for _, l := range []string{"password_file", "acl_file"} {
		if _, ok := conf[l]; ok {
			t.Errorf("mosquitto.conf has %s: the accounts and ACL are the plugin's", l)
		}
	}
}

// mosquittoConf returns the settings of deploy/mosquitto/mosquitto.conf:
// each key's values, in file order.
func mosquittoConf(t *testing.T) map[string][]string {
	t.Helper()
	conf := map[string][]string{}
	for _, line := range strings.Split(readFile(t, "deploy/mosquitto/mosquitto.conf"), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		conf[f[0]] = append(conf[f[0]], strings.Join(f[1:], " "))
	}
	return conf
}

// Mosquitto keeps Hearth's session and the commands waiting in it, across
// its own restarts, with room for a backlog, and never cuts the session
// short behind Hearth's back (README, "Commands sent while Hearth is
// away").
func TestMosquittoConfKeepsHearthsSession(t *testing.T) {
	conf := mosquittoConf(t)
	for key, want := range map[string]string{
		"persistence":           "true",
		"persistence_location":  "/mosquitto/data/",
		"autosave_interval":     "60",
		"max_queued_messages":   "10000",
		"max_inflight_messages": "100",
		"queue_qos0_messages":   "false",
	} {
		if got := conf[key]; !slices.Equal(got, []string{want}) {
			t.Errorf("mosquitto.conf: %s %v, want %s", key, got, want)
		}
	}
	if got, ok := conf["persistent_client_expiration"]; ok {
		t.Errorf("mosquitto.conf has persistent_client_expiration %v: Mosquitto would cut Hearth's session to it without telling Hearth", got)
	}
}

// Zigbee2MQTT takes its account from the secret.yaml hearth-init writes,
// on the base topic Hearth's config gives the service.
func TestZigbee2MQTTUsesTheAccountHearthGenerated(t *testing.T) {
	var z struct {
		MQTT struct {
			BaseTopic string `yaml:"base_topic"`
			Server    string `yaml:"server"`
			User      string `yaml:"user"`
			Password  string `yaml:"password"`
			ClientID  string `yaml:"client_id"`
		} `yaml:"mqtt"`
	}
	if err := yaml.Unmarshal([]byte(readFile(t, "deploy/zigbee2mqtt/configuration.yaml")), &z); err != nil {
		t.Fatalf("deploy/zigbee2mqtt/configuration.yaml: %v", err)
	}
	// Zigbee2MQTT's "!secret KEY" reads KEY of secret.yaml in its data
	// directory (lib/util/settings.ts, parseValueRef).
	if z.MQTT.User != "!secret mqtt_user" || z.MQTT.Password != "!secret mqtt_password" {
		t.Errorf("mqtt.user %q, mqtt.password %q; want !secret mqtt_user and !secret mqtt_password", z.MQTT.User, z.MQTT.Password)
	}
	script := readFile(t, "deploy/hearth-init.sh")
	for _, key := range []string{`\nmqtt_user: `, `\nmqtt_password: `} {
		if !strings.Contains(script, key) {
			t.Errorf("hearth-init.sh does not write %q into secret.yaml", key)
		}
	}
	if z.MQTT.Server != "mqtt://mosquitto:1883" {
		t.Errorf("mqtt.server %q, want mqtt://mosquitto:1883", z.MQTT.Server)
	}

	cfg, err := config.Load("deploy/hearth/hearth.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MQTT.URL != "tcp://mosquitto:1883" || cfg.DataDir != "/var/lib/hearth" {
		t.Errorf("hearth.yaml: mqtt.url %q, data_dir %q; want tcp://mosquitto:1883 and /var/lib/hearth", cfg.MQTT.URL, cfg.DataDir)
	}
	var zigbee *config.Service
	for i, s := range cfg.Services {
		if s.Name == "zigbee" {
			zigbee = &cfg.Services[i]
		}
	}
	if zigbee == nil || zigbee.Protocol != config.ProtocolZigbee2MQTT {
		t.Fatalf("hearth.yaml has no zigbee2mqtt service named zigbee (hearth-init.sh's ZIGBEE_SERVICE): %+v", cfg.Services)
	}
	if zigbee.BaseTopic != z.MQTT.BaseTopic {
		t.Errorf("Hearth's base_topic %q, Zigbee2MQTT's %q: want the same", zigbee.BaseTopic, z.MQTT.BaseTopic)
	}
}

// credential.awk finds a value of credentials.yaml in the block style
// yaml.v3 writes (the shape of the plan: services, principals, hearthd)
// and in flow style, and exits 1 for a path that is not there.
func TestCredentialAWKReadsTheCredentialsFile(t *testing.T) {
	awk, err := exec.LookPath("awk")
	if err != nil {
		t.Fatal("no awk: hearth-init.sh needs one (Debian's mawk)")
	}
	type account struct {
		MQTTUsername string `yaml:"mqtt_username,omitempty"`
		MQTTPassword string `yaml:"mqtt_password"`
		HTTPToken    string `yaml:"http_token,omitempty"`
	}
	written, err := yaml.Marshal(map[string]any{
		"services": map[string]account{
			"zwave":  {MQTTUsername: "zwave", MQTTPassword: "zw-AAAA"},
			"zigbee": {MQTTUsername: "zigbee", MQTTPassword: "-Zb_9xQ"},
		},
		"principals": map[string]account{"default": {MQTTUsername: "default", MQTTPassword: "pr", HTTPToken: "tok"}},
		"hearthd":    account{MQTTPassword: "hd"},
	})
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"yaml.v3": "# Written by hearthd. Show: hearthctl credentials.\n" + string(written),
		"flow": `# Written by hearthd.
services:
  zwave: {mqtt_username: zwave, mqtt_password: zw-AAAA}
  zigbee: {mqtt_username: "zigbee", mqtt_password: '-Zb_9xQ'}   # the bridge
principals:
  default: {mqtt_username: default, mqtt_password: pr, http_token: tok}
hearthd: {mqtt_password: hd}
`,
	}
	for style, content := range files {
		path := filepath.Join(t.TempDir(), "credentials.yaml")
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		for want, value := range map[string]string{
			"services.zigbee.mqtt_username": "zigbee",
			"services.zigbee.mqtt_password": "-Zb_9xQ",
			"services.zwave.mqtt_password":  "zw-AAAA",
			"principals.default.http_token": "tok",
			"hearthd.mqtt_password":         "hd",
		} {
			out, err := exec.Command(awk, "-v", "want="+want, "-f", "deploy/credential.awk", path).Output()
			if err != nil || string(out) != value+"\n" {
				t.Errorf("%s: %s = %q (%v), want %q\n%s", style, want, out, err, value, content)
			}
		}
		out, err := exec.Command(awk, "-v", "want=services.nope.mqtt_password", "-f", "deploy/credential.awk", path).Output()
		if err == nil || len(out) != 0 {
			t.Errorf("%s: a missing path printed %q and exited %v, want nothing and status 1", style, out, err)
		}
	}
}

// unitFile is a systemd unit: section → key → values, in order.
type unitFile map[string]map[string][]string

func readUnit(t *testing.T, path string) unitFile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unitFile{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			key, value, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: %q is not key=value in a section", path, n, line)
			}
			u[section][key] = append(u[section][key], value)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestSystemdUnitIsHardenedAndNotifies(t *testing.T) {
	u := readUnit(t, "deploy/hearth.service")
	s := u["Service"]
	for key, want := range map[string]string{
		"Type":                    "notify",
		"WatchdogSec":             "30s",
		"ExecReload":              "/bin/kill -HUP $MAINPID",
		"Restart":                 "on-failure",
		"DynamicUser":             "yes",
		"StateDirectory":          "hearth",
		"ConfigurationDirectory":  "hearth",
		"ProtectSystem":           "strict",
		"ProtectHome":             "yes",
		"PrivateTmp":              "yes",
		"NoNewPrivileges":         "yes",
		"CapabilityBoundingSet":   "",
		"RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6", // AF_UNIX: NOTIFY_SOCKET
	} {
		if got := s[key]; !slices.Equal(got, []string{want}) {
			t.Errorf("[Service] %s=%q, want %q", key, got, want)
		}
	}
	exec := strings.Join(s["ExecStart"], " ")
	for _, want := range []string{"hearthd ", "-config ${CONFIGURATION_DIRECTORY}/hearth.yaml", "-data-dir ${STATE_DIRECTORY}"} {
		if !strings.Contains(exec, want) {
			t.Errorf("ExecStart=%s lacks %q", exec, want)
		}
	}
	if got := u["Install"]["WantedBy"]; !slices.Equal(got, []string{"multi-user.target"}) {
		t.Errorf("[Install] WantedBy=%v, want multi-user.target", got)
	}
}

// systemd itself reads the unit without a complaint, where systemd-analyze
// is installed (Debian's systemd package).
func TestSystemdAnalyzeVerifiesTheUnit(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The unit names /usr/local/bin/hearthd, which verify wants to find:
	// any executable stands in for it.
	unit := strings.ReplaceAll(readFile(t, "deploy/hearth.service"), "/usr/local/bin/hearthd", self)
	path := filepath.Join(t.TempDir(), "hearth.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || strings.Contains(string(out), path) {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// dockerInstructions are the Dockerfile's instructions of its last stage,
// continuation lines joined and comments dropped: "USER 10001:10001".
func dockerInstructions(t *testing.T) []string {
	t.Helper()
	var all []string
	cur := ""
	for _, line := range strings.Split(readFile(t, "Dockerfile"), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur == "") {
			continue
		}
		if body, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur += body + " "
			continue
		}
		all = append(all, strings.Join(strings.Fields(cur+trimmed), " "))
		cur = ""
	}
	last := 0
	for i, in := range all {
		if strings.HasPrefix(in, "FROM ") {
			last = i
		}
	}
	return all[last:]
}

func TestDockerImageRunsAsAPinnedUserWithHealthCheckAndVolumes(t *testing.T) {
	in := dockerInstructions(t)
	find := func(keyword string) []string {
		var out []string
		for _, i := range in {
			if rest, ok := strings.CutPrefix(i, keyword+" "); ok {
				out = append(out, rest)
			}
		}
		return out
	}
	if got := find("USER"); !slices.Equal(got, []string{"10001:10001"}) {
		t.Errorf("USER %v, want 10001:10001 (numeric, not root)", got)
	}
	run := strings.Join(find("RUN"), " ; ")
	for _, want := range []string{"ca-certificates", "--uid 10001", "--gid 10001"} {
		if !strings.Contains(run, want) {
			t.Errorf("the image's RUN lacks %q: %s", want, run)
		}
	}
	hc := find("HEALTHCHECK")
	if len(hc) != 1 || !strings.Contains(hc[0], `"hearthctl"`) || !strings.Contains(hc[0], `"ready"`) || !strings.Contains(hc[0], "127.0.0.1:8080") {
		t.Errorf("HEALTHCHECK %v, want hearthctl ready on 127.0.0.1:8080", hc)
	}
	vol := strings.Join(find("VOLUME"), " ")
	for _, want := range []string{`"/etc/hearth"`, `"/var/lib/hearth"`} {
		if !strings.Contains(vol, want) {
			t.Errorf("VOLUME %s lacks %s", vol, want)
		}
	}
	if got := find("ENTRYPOINT"); !slices.Equal(got, []string{`["hearthd"]`}) {
		t.Errorf("ENTRYPOINT %v, want [\"hearthd\"] (compose passes its own flags)", got)
	}
	cmd := strings.Join(find("CMD"), " ")
	for _, want := range []string{`"-config", "/etc/hearth/hearth.yaml"`, `"-data-dir", "/var/lib/hearth"`, `"-http-listen", "0.0.0.0:8080"`} {
		if !strings.Contains(cmd, want) {
			t.Errorf("CMD %s lacks %s", cmd, want)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Debian's Mosquitto 2 runs deploy/mosquitto/mosquitto.conf (its paths
// moved into a temp dir): a client without an account is refused, one of
// the dynamic-security file is admitted.
func TestMosquittoWithTheShippedConfAdmitsOnlyAccounts(t *testing.T) {
	broker, err := exec.LookPath("mosquitto")
	if err != nil {
		broker = "/usr/sbin/mosquitto"
	}
	plugin, _ := filepath.Glob("/usr/lib/*/mosquitto_dynamic_security.so")
	ctrl, ctrlErr := exec.LookPath("mosquitto_ctrl")
	if _, err := os.Stat(broker); err != nil || len(plugin) == 0 || ctrlErr != nil {
		msg := "Mosquitto 2 with its dynamic-security plugin and mosquitto_ctrl is not installed (Debian: mosquitto, mosquitto-clients)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	// Mosquitto started as root runs as the user mosquitto: its files are
	// in a directory that user may enter and write (t.TempDir's parent is
	// root's alone).
	dir, err := os.MkdirTemp("", "mosquitto")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	dynsec := filepath.Join(dir, "dynamic-security.json")
	if out, err := exec.Command(ctrl, "dynsec", "init", dynsec, "hearthd", "s3cret-Pa55").CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_ctrl dynsec init: %v\n%s", err, out)
	}
	if err := os.Chmod(dynsec, 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	conf := readFile(t, "deploy/mosquitto/mosquitto.conf")
	for old, repl := range map[string]string{
		"\nlistener 1883\n":                                            "\nlistener " + port + " 127.0.0.1\n",
		"/usr/lib/mosquitto_dynamic_security.so":                       plugin[0],
		"plugin_opt_config_file /mosquitto/data/dynamic-security.json": "plugin_opt_config_file " + dynsec,
		"persistence_location /mosquitto/data/":                        "persistence_location " + dir + "/",
		"log_dest stdout":                                              "log_dest stderr\nlog_type all", // "running" is information
	} {
		if !strings.Contains(conf, old) {
			t.Fatalf("mosquitto.conf has no %q", old)
		}
		conf = strings.Replace(conf, old, repl, 1)
	}
	path := filepath.Join(dir, "mosquitto.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(broker, "-c", path)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	running := make(chan string, 1)
	go func() {
		var log strings.Builder
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), " running") {
				running <- ""
			}
		}
		running <- log.String()
	}()
	select {
	case log := <-running:
		if log != "" {
			t.Fatalf("mosquitto exited:\n%s", log)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("mosquitto did not say it is running within 10 s")
	}

	connect := func(username, password string) error {
		o := paho.NewClientOptions().AddBroker("tcp://127.0.0.1:" + port).SetClientID("deploy-test-" + username).
			SetUsername(username).SetPassword(password).SetAutoReconnect(false).SetConnectRetry(false)
		c := paho.NewClient(o)
		tok := c.Connect()
		if !tok.WaitTimeout(10 * time.Second) {
			return errors.New("no CONNACK within 10 s")
		}
		if tok.Error() == nil {
			c.Disconnect(0)
		}
		return tok.Error()
	}
	if err := connect("", ""); err == nil {
		t.Error("a client without an account was admitted")
	}
	if err := connect("hearthd", "wrong"); err == nil {
		t.Error("a wrong password was admitted")
	}
	if err := connect("hearthd", "s3cret-Pa55"); err != nil {
		t.Errorf("the dynamic-security account was refused: %v", err)
	}
}
