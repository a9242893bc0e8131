package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/hearthd/hearth/config"
)

// errConfigInvalid is -check-config's answer to a config with problems,
// which it has printed: exit status 1, nothing more to say.
var errConfigInvalid = errors.New("the configuration is not valid")

// checkConfig is -check-config: it loads o.configFile with the flags
// applied over it, as a start would (loadConfig, which reads the file and
// nothing else), and prints every problem config finds, one per line
// (file:line: key: message), then how many; or "<file>: ok" and what the
// config holds. It returns errConfigInvalid when there is a problem. It
// opens no data directory, listener, broker or credentials file; it
// reads the TLS certificates and keys of http.tls and mqtt.mqtts, which
// a start would refuse to run without.
func checkConfig(o options, stdout io.Writer) error {
	cfg, err := loadConfig(o)
	if err != nil {
		var cerr *config.Error
		n := 1
		if errors.As(err, &cerr) {
			// Every problem config collected; a wrapping (the flags'
			// CheckAnonymous) adds its words to the last line only.
			n = len(cerr.Problems)
		}
		fmt.Fprintln(stdout, err)
		fmt.Fprintf(stdout, "%s: %s\n", o.configFile, plural(n, "problem"))
		return errConfigInvalid
	}
	// The certificates a start loads (it refuses to start without them):
	// read, not served.
	var bad []string
	for _, c := range []struct {
		key   string
		files config.ServerCert
	}{{"http.tls", cfg.HTTP.TLS}, {"mqtt.mqtts", cfg.MQTT.MQTTS.Cert}} {
		if c.files.CertFile == "" {
			continue
		}
		if _, err := loadServerCert(c.key, c.files); err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", o.configFile, err))
		}
	}
	if len(bad) > 0 {
		for _, line := range bad {
			fmt.Fprintln(stdout, line)
		}
		fmt.Fprintf(stdout, "%s: %s\n", o.configFile, plural(len(bad), "problem"))
		return errConfigInvalid
	}
	_, err = fmt.Fprintf(stdout, "%s: ok (%s, %s, %s, %s)\n", o.configFile,
		plural(len(cfg.Services), "service"), plural(len(cfg.Devices), "device"),
		plural(len(cfg.Principals), "principal"), plural(len(cfg.Automations), "automation"))
	return err
}

// plural is "1 device", "2 devices".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
