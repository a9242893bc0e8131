package main

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hearthd/hearth/config"
)

// checkConfigIn runs the built hearthd -check-config with args in dir and
// returns its exit status and output.
func checkConfigIn(t *testing.T, dir string, args ...string) (int, string, string) {
	t.Helper()
	hearthd, _ := builtBinaries(t)
	cmd := exec.Command(hearthd, args...)
	cmd.Dir = dir
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

// entries lists dir's names.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

// The documented sample is valid: exit 0, one line, and nothing created
// (its data_dir, "data", is relative to the working directory). Its
// listen addresses are taken by this test first: a check that opened them
// would fail.
func TestCheckConfigOfTheSampleSaysOKAndOpensNothing(t *testing.T) {
	dir := t.TempDir()
	sample, err := os.ReadFile(filepath.Join("..", "..", "configs", "hearth.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hearth.yaml"), sample, 0o600); err != nil {
		t.Fatal(err)
	}
	mqttLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mqttLn.Close()
	httpLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer httpLn.Close()

	code, stdout, stderr := checkConfigIn(t, dir, "-check-config", "hearth.yaml",
		"-mqtt-listen", mqttLn.Addr().String(), "-http-listen", httpLn.Addr().String())
	// Counted from what the sample holds, so that it may grow.
	cfg, err := config.Parse("hearth.yaml", sample)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Services) == 0 || len(cfg.Devices) == 0 || len(cfg.Principals) != 0 || len(cfg.Automations) != 0 {
		t.Fatalf("the sample has %d services, %d devices, %d principals, %d automations; want some services and devices, no principals or automations",
			len(cfg.Services), len(cfg.Devices), len(cfg.Principals), len(cfg.Automations))
	}
	want := "hearth.yaml: ok (" + plural(len(cfg.Services), "service") + ", " + plural(len(cfg.Devices), "device") + ", 0 principals, 0 automations)\n"
	if code != 0 || stdout != want || stderr != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0, %q, no stderr", code, stdout, stderr, want)
	}
	if got := entries(t, dir); !slices.Equal(got, []string{"hearth.yaml"}) {
		t.Errorf("the directory holds %q after the check; want only hearth.yaml (no data directory)", got)
	}
}

// A broken file: every problem, one per line with its line and key, then
// how many; exit 1; nothing created.
func TestCheckConfigPrintsEveryProblem(t *testing.T) {
	dir := t.TempDir()
	broken := "" +
		"prefix: \"home/+\"\n" +
		"bogus: 1\n" +
		"services:\n" +
		"  zigbee:\n" +
		"    protocol: zigbee2mqtt\n" +
		"devices:\n" +
		"  hall:\n" +
		"    service: zigbee\n" +
		"    class: toaster\n" +
		"  porch:\n" +
		"    service: zwave\n" +
		"    class: light\n"
	if err := os.WriteFile(filepath.Join(dir, "broken.yaml"), []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := checkConfigIn(t, dir, "-check-config", "broken.yaml")
	want := "" +
		"broken.yaml:1: prefix: \"home/+\" contains '+', an MQTT wildcard\n" +
		"broken.yaml:2: bogus: unknown key (known here: prefix, data_dir, defaults, mqtt, http, homeassistant, services, devices, automations, principals)\n" +
		"broken.yaml:9: devices.hall.class: unknown class \"toaster\" (known: light, switch, lock, cover, climate, valve, alarm, sensor)\n" +
		"broken.yaml:11: devices.porch.service: no service \"zwave\" (services: zigbee)\n" +
		"broken.yaml: 4 problems\n"
	if code != 1 || stdout != want || stderr != "" {
		t.Errorf("exit %d, stderr %q, stdout\n%s\nwant exit 1, stdout\n%s", code, stderr, stdout, want)
	}
	if got := entries(t, dir); !slices.Equal(got, []string{"broken.yaml"}) {
		t.Errorf("the directory holds %q after the check; want only broken.yaml", got)
	}

	code, stdout, _ = checkConfigIn(t, dir, "-check-config", "missing.yaml")
	want = "missing.yaml: cannot read config file: no such file or directory (the working directory is " + dir + ")\nmissing.yaml: 1 problem\n"
	if code != 1 || stdout != want {
		t.Errorf("a missing file: exit %d, stdout %q; want 1, %q", code, stdout, want)
	}
}

// A certificate that a start could not load (here http.tls names files
// that do not exist) is a problem -check-config reports, naming the key
// and the file, as the start would refuse.
func TestCheckConfigReportsACertificateThatDoesNotLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "hearth.yaml")
	text := "data_dir: " + filepath.Join(dir, "data") + "\nhttp:\n  listen: 127.0.0.1:0\n  tls:\n    cert_file: " +
		filepath.Join(dir, "missing.pem") + "\n    key_file: " + filepath.Join(dir, "missing.key") + "\n"
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	err := checkConfig(options{configFile: path}, &out)
	if !errors.Is(err, errConfigInvalid) || !strings.Contains(out.String(), "http.tls") ||
		!strings.Contains(out.String(), filepath.Join(dir, "missing.pem")) || !strings.HasSuffix(out.String(), path+": 1 problem\n") {
		t.Errorf("-check-config with a missing http.tls certificate: %v\n%s\nwant the problem, naming http.tls and the file, and 1 problem", err, out.String())
	}
	if names := entries(t, dir); !slices.Equal(names, []string{"hearth.yaml"}) {
		t.Errorf("the check created %v", names)
	}
}
