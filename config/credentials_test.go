package config

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hearthd/hearth/devices"
)

// counting is a fake random source: byte i of the stream is i, so that
// every drawn secret is different and known.
type counting struct{ n byte }

func (c *counting) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = c.n
		c.n++
	}
	return len(p), nil
}

func TestCredentialsRoundTrip(t *testing.T) {
	cr := &Credentials{
		Services:        []ServiceCredentials{{"zigbee", "zigbee", "-starts-with-a-dash_0123456789ab"}, {"zwave", "zwave", "12345678901234567890123456789012"}},
		Principals:      []PrincipalCredentials{{"default", "default", "pw-of-the-default-principal", "token-of-the-default-principal"}},
		HearthdPassword: "hearthd-password-for-mosquitto",
	}
	data := cr.Marshal()
	if !bytes.HasPrefix(data, []byte("# "+CredentialsHeader+"\n")) {
		t.Errorf("the file does not start with its header comment:\n%s", data)
	}
	for _, want := range []string{"services:\n  zigbee: {mqtt_username: zigbee, mqtt_password: ", "principals:\n  default: {", "hearthd: {mqtt_password: hearthd-password-for-mosquitto}"} {
		if !bytes.Contains(data, []byte(want)) {
			t.Errorf("the file lacks %q:\n%s", want, data)
		}
	}
	got, err := ParseCredentials("credentials.yaml", data)
	if err != nil {
		t.Fatalf("ParseCredentials(Marshal()) error: %v\n%s", err, data)
	}
	if !reflect.DeepEqual(got, cr) {
		t.Errorf("round trip:\ngot  %+v\nwant %+v\n%s", got, cr, data)
	}
}

func TestCredentialsErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unknown key", "service:\n  zigbee: {}\n", `credentials.yaml:1: service: unknown key (did you mean services? known here: services, principals, hearthd)`},
		{"missing password", "services:\n  zigbee: {mqtt_username: zigbee}\n", `credentials.yaml:2: services.zigbee.mqtt_password: missing`},
		{"short password", "services:\n  zigbee: {mqtt_username: zigbee, mqtt_password: abc}\n", `credentials.yaml:2: services.zigbee.mqtt_password: must be at least 8 bytes long, got 3`},
		{"short token", "principals:\n  default:\n    mqtt_username: default\n    mqtt_password: 12345678\n    http_token: short\n", `credentials.yaml:5: principals.default.http_token: must be at least 16 bytes long, got 5`},
		{"not a mapping", "services: [zigbee]\n", `credentials.yaml:1: services: want a mapping, got a list`},
		{"a number for a password", "hearthd: {mqtt_password: [1]}\n", `credentials.yaml:1: hearthd.mqtt_password: want a string, got a list`},
		{"bad YAML", "services: {zigbee: \n", `credentials.yaml:1: invalid YAML: did not find expected node content`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCredentials("credentials.yaml", []byte(tc.yaml))
			if err == nil || err.Error() != tc.want {
				t.Errorf("error\n got  %v\n want %s", err, tc.want)
			}
		})
	}
}

func TestWriteCredentialsMode0600AndLoadRefusesAnExposedFile(t *testing.T) {
	dir := t.TempDir()
	path := CredentialsPath(dir)
	cr := &Credentials{Services: []ServiceCredentials{{"zigbee", "zigbee", "zigbee-password-0123"}}}
	if err := WriteCredentials(path, cr); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("mode %#o; want 0600", perm)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("the data directory holds %d entries; want only %s (no temporary file left)", len(entries), CredentialsFileName)
	}
	got, err := LoadCredentials(path)
	if err != nil || !reflect.DeepEqual(got, cr) {
		t.Fatalf("LoadCredentials = %+v, %v; want %+v", got, err, cr)
	}
	for _, perm := range []fs.FileMode{0o640, 0o604, 0o620} {
		os.Chmod(path, perm)
		_, err := LoadCredentials(path)
		if !errors.Is(err, ErrCredentialsExposed) || !strings.Contains(err.Error(), "chmod 600 "+path) {
			t.Errorf("mode %#o: LoadCredentials error %v; want ErrCredentialsExposed and the fix", perm, err)
		}
	}
	if _, err := LoadCredentials(filepath.Join(dir, "none.yaml")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v; want fs.ErrNotExist", err)
	}
}

func TestEnsureCredentialsAddsOnlyWhatIsMissing(t *testing.T) {
	c, err := Parse("hearth.yaml", []byte(`services:
  zigbee: {protocol: zigbee2mqtt}
  upstairs: {protocol: zigbee2mqtt, base_topic: up, mqtt_password: written-in-config}
  cloud: {protocol: status_topic, status_topic: cloud/status}
  ntfy: {protocol: webhook, url: "https://ntfy.sh/x"}
`))
	if err != nil {
		t.Fatal(err)
	}
	cr := &Credentials{}
	changed, err := c.EnsureCredentials(cr, &counting{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"services.zigbee", "services.cloud", "principals.default"}; !reflect.DeepEqual(changed, want) {
		t.Errorf("changed %q; want %q (not upstairs, whose password is in the config, nor the webhook)", changed, want)
	}
	zigbee, _ := cr.Service("zigbee")
	if len(zigbee.MQTTPassword) != 32 || zigbee.MQTTUsername != "zigbee" {
		t.Errorf("zigbee's account %+v; want username zigbee and 24 random bytes as 32 base64url characters", zigbee)
	}
	def, _ := cr.Principal(DefaultPrincipal)
	if def.MQTTPassword == def.HTTPToken || def.MQTTPassword == zigbee.MQTTPassword || len(def.HTTPToken) != 32 {
		t.Errorf("default principal %+v: secrets must be drawn apart", def)
	}
	before := *cr
	if changed, _ := c.EnsureCredentials(cr, &counting{n: 7}); len(changed) != 0 || !reflect.DeepEqual(*cr, before) {
		t.Errorf("second EnsureCredentials changed %q; want nothing: an existing account is never overwritten", changed)
	}

	c.ApplyCredentials(cr)
	if s, _ := c.Service("zigbee"); s.MQTTPassword != zigbee.MQTTPassword {
		t.Errorf("zigbee password after ApplyCredentials = %q; want the file's", s.MQTTPassword)
	}
	if s, _ := c.Service("upstairs"); s.MQTTPassword != "written-in-config" {
		t.Errorf("upstairs password = %q; want the config's, which wins", s.MQTTPassword)
	}
	p, ok := c.Principal(DefaultPrincipal)
	if !ok || !c.GeneratedPrincipal || p.HTTPToken != def.HTTPToken || !p.Allow.Allows("anything", devices.ActionUnlock) {
		t.Errorf("default principal after ApplyCredentials = %+v (generated %v); want everything allowed with the file's token", p, c.GeneratedPrincipal)
	}
	c.ApplyCredentials(cr)
	if len(c.Principals) != 1 {
		t.Errorf("a second ApplyCredentials left %d principals; want 1", len(c.Principals))
	}
}

func TestEnsureCredentialsWithPrincipalsOrAnonymousOrAnExternalBroker(t *testing.T) {
	named, err := Parse("hearth.yaml", []byte(principalsBase+"principals:\n  t:\n    http_token: 0123456789abcdef\n    allow: {front_door: [lock]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	cr := &Credentials{}
	named.EnsureCredentials(cr, &counting{})
	if _, ok := cr.Principal(DefaultPrincipal); ok {
		t.Error("a default principal was generated although the config names principals")
	}
	open, _ := Parse("hearth.yaml", []byte("mqtt: {allow_anonymous: true}\nhttp: {allow_anonymous: true}\n"))
	cr = &Credentials{}
	open.EnsureCredentials(cr, &counting{})
	if _, ok := cr.Principal(DefaultPrincipal); ok {
		t.Error("a default principal was generated although MQTT and HTTP are both anonymous")
	}
	halfOpen, _ := Parse("hearth.yaml", []byte("mqtt: {allow_anonymous: true}\n"))
	cr = &Credentials{}
	halfOpen.EnsureCredentials(cr, &counting{})
	halfOpen.ApplyCredentials(cr)
	if err := halfOpen.CheckAnonymous("hearth.yaml"); err != nil {
		t.Errorf("the generated principal beside mqtt.allow_anonymous: %v; want no problem", err)
	}
	external, _ := Parse("hearth.yaml", []byte("mqtt: {url: 'tcp://nas:1883'}\n"))
	cr = &Credentials{}
	external.EnsureCredentials(cr, &counting{})
	external.ApplyCredentials(cr)
	if cr.HearthdPassword == "" || external.MQTT.Password != cr.HearthdPassword || external.MQTT.Username != InternalUsername {
		t.Errorf("external broker: Hearth connects as %q/%q, file %q; want hearthd with the generated password", external.MQTT.Username, external.MQTT.Password, cr.HearthdPassword)
	}
	withPassword, _ := Parse("hearth.yaml", []byte("mqtt: {url: 'tcp://nas:1883', username: hub, password: from-config}\n"))
	cr = &Credentials{}
	withPassword.EnsureCredentials(cr, &counting{})
	if cr.HearthdPassword != "" {
		t.Error("a hearthd password was generated although mqtt.password is set")
	}
}

// FuzzParseCredentials feeds ParseCredentials arbitrary files: it must
// never panic, refuse with an *Error naming the file, and what it accepts
// must survive Marshal and parse again unchanged.
func FuzzParseCredentials(f *testing.F) {
	f.Add((&Credentials{
		Services:        []ServiceCredentials{{"zigbee", "zigbee", "0123456789abcdef"}},
		Principals:      []PrincipalCredentials{{"default", "default", "0123456789abcdef", "0123456789abcdef0123"}},
		HearthdPassword: "0123456789abcdef",
	}).Marshal())
	f.Add([]byte("services:\n  z: {mqtt_username: '', mqtt_password: x}\n"))
	f.Add([]byte("hearthd: &a {mqtt_password: *a}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cr, err := ParseCredentials("credentials.yaml", data)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || len(e.Problems) == 0 || e.Problems[0].File != "credentials.yaml" {
				t.Fatalf("error %v is not an *Error naming the file", err)
			}
			return
		}
		again, err := ParseCredentials("credentials.yaml", cr.Marshal())
		if err != nil || !reflect.DeepEqual(again, cr) {
			t.Fatalf("Marshal of an accepted file does not parse back: %v\n%s", err, cr.Marshal())
		}
	})
}
