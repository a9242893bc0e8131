package main

import (
	"os"
	"strings"
	"testing"

	"github.com/hearthd/hearth/config"
)

// writeCredentials writes a credentials file as hearthd does, into a temp
// data directory, and returns the directory.
func writeCredentials(t *testing.T, cr *config.Credentials) string {
	t.Helper()
	dir := t.TempDir()
	if err := config.WriteCredentials(config.CredentialsPath(dir), cr); err != nil {
		t.Fatal(err)
	}
	return dir
}

func sampleCredentials() *config.Credentials {
	return &config.Credentials{
		Services:   []config.ServiceCredentials{{Name: "zigbee", MQTTUsername: "zigbee", MQTTPassword: "zigbee-password-0123456789"}},
		Principals: []config.PrincipalCredentials{{Name: "default", MQTTUsername: "default", MQTTPassword: "default-password-0123456", HTTPToken: "default-token-0123456789abcdef"}},
	}
}

func TestCredentialsShowsEveryAccountAndWhatItIsFor(t *testing.T) {
	dir := writeCredentials(t, sampleCredentials())
	code, out, errOut := hearthctl("credentials", "-data-dir", dir)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		config.CredentialsPath(dir),
		"services.zigbee", "zigbee-password-0123456789", "the MQTT login of service zigbee itself",
		"principals.default", "default-password-0123456", "default-token-0123456789abcdef", "Authorization: Bearer",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = hearthctl("credentials", "token", "-data-dir", dir)
	if code != exitOK || out != "default-token-0123456789abcdef\n" {
		t.Errorf("credentials token: exit %d, %q; want the default principal's token alone", code, out)
	}
}

func TestCredentialsWithoutAFileSaysHearthdWritesIt(t *testing.T) {
	code, _, errOut := hearthctl("credentials", "-data-dir", t.TempDir())
	if code != exitError || !strings.Contains(errOut, "hearthd writes it at its first start") {
		t.Errorf("exit %d, %q; want 1 and where the file comes from", code, errOut)
	}
}

func TestCredentialsRefusesAFileOthersCanRead(t *testing.T) {
	dir := writeCredentials(t, sampleCredentials())
	os.Chmod(config.CredentialsPath(dir), 0o644)
	code, out, errOut := hearthctl("credentials", "-data-dir", dir)
	if code != exitError || !strings.Contains(errOut, "chmod 600") || strings.Contains(out, "zigbee-password") {
		t.Errorf("exit %d, stdout %q, stderr %q; want 1, the fix, and no secret shown", code, out, errOut)
	}
}

func TestCredentialsRotateReplacesOneAccountsSecrets(t *testing.T) {
	dir := writeCredentials(t, sampleCredentials())
	path := config.CredentialsPath(dir)
	code, out, errOut := hearthctl("credentials", "rotate", "zigbee", "-data-dir", dir)
	if code != exitOK {
		t.Fatalf("rotate zigbee: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "kill -HUP") || !strings.Contains(out, "services.zigbee") {
		t.Errorf("rotate output %q; want the account and how to reload hearthd (SIGHUP)", out)
	}
	cr, err := config.LoadCredentials(path) // also checks the mode is still 0600
	if err != nil {
		t.Fatal(err)
	}
	before := sampleCredentials()
	zigbee, _ := cr.Service("zigbee")
	if zigbee.MQTTPassword == before.Services[0].MQTTPassword || len(zigbee.MQTTPassword) != 32 || zigbee.MQTTUsername != "zigbee" {
		t.Errorf("zigbee after rotate: %+v; want a new 32-character password, same username", zigbee)
	}
	if p, _ := cr.Principal("default"); p != before.Principals[0] {
		t.Errorf("rotating zigbee changed the default principal: %+v", p)
	}

	code, _, errOut = hearthctl("credentials", "-data-dir", dir, "rotate", "principals.default")
	if code != exitOK {
		t.Fatalf("rotate principals.default: exit %d: %s", code, errOut)
	}
	cr, _ = config.LoadCredentials(path)
	p, _ := cr.Principal("default")
	if p.MQTTPassword == before.Principals[0].MQTTPassword || p.HTTPToken == before.Principals[0].HTTPToken || p.MQTTPassword == p.HTTPToken {
		t.Errorf("default after rotate: %+v; want a new password and a new token", p)
	}
	if z, _ := cr.Service("zigbee"); z != zigbee {
		t.Errorf("rotating default changed zigbee: %+v", z)
	}

	code, _, errOut = hearthctl("credentials", "-data-dir", dir, "rotate", "garage")
	if code != exitError || !strings.Contains(errOut, `no account "garage"`) || !strings.Contains(errOut, "services.zigbee, principals.default") {
		t.Errorf("rotate of an unknown account: exit %d, %q; want 1 and the accounts there are", code, errOut)
	}
	if code, _, _ := hearthctl("credentials", "-data-dir", dir, "rotate"); code != exitUsage {
		t.Errorf("rotate without a name: exit %d; want %d", code, exitUsage)
	}
}
