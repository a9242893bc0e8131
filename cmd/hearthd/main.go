// Command hearthd is the Hearth daemon: it takes device commands over MQTT,
// delivers them through the device's bridge, and reports for each whether
// the device really reached the requested state.
//
// Usage:
//
//	hearthd [-config FILE] [-data-dir DIR] [-mqtt-listen ADDR] [-mqtt-url URL]
//	        [-http-listen ADDR] [-log-level LEVEL] [-demo]
//	hearthd -print-mosquitto-acl [-config FILE] [-data-dir DIR] [-mqtt-url URL]
//	hearthd -check-config FILE [-mqtt-listen ADDR] [-http-listen ADDR] ...
//	hearthd -version
//
// -check-config loads and validates FILE (with the other flags applied
// over it, as a start would) and prints every problem it finds, one per
// line as file:line: key: message, or "FILE: ok"; it exits 0 when the
// config is valid and 1 when not, and opens nothing: no data directory,
// no listener, no broker. -version prints the build's version, VCS
// revision and Go release (see scripts/build.sh) and exits.
//
// -print-mosquitto-acl prints, for a config with an external broker, the
// dynamic-security file that makes Mosquitto 2 enforce the accounts and
// topic ACLs the embedded broker would (see docs/SAFETY.md).
//
// Flags override the config file. With -demo and no -config, hearthd runs
// the built-in sample configuration with simulated devices in the same
// process and sends them a few commands; a demo runs without
// authentication, so it listens on loopback only.
//
// At its first start hearthd writes <data_dir>/credentials.yaml (mode
// 0600) with an account for every bridge and, when the config names no
// principals, the principal "default"; SIGHUP reloads the principals and
// the credentials file.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/hearthd/hearth/buildinfo"
	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/configs"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // -h: usage printed
		}
		if errors.Is(err, errConfigInvalid) {
			os.Exit(1) // -check-config printed the problems
		}
		fmt.Fprintln(os.Stderr, "hearthd:", err)
		os.Exit(1)
	}
}

// options are the command line.
type options struct {
	configFile string
	dataDir    string
	mqttListen string
	mqttURL    string
	httpListen string
	logLevel   string
	demo       bool
	// printMosquittoACL prints an external Mosquitto's dynamic-security
	// file for the config and exits.
	printMosquittoACL bool
	// checkConfig is -check-config's file: validate it and exit.
	checkConfig string
	// printVersion prints the build's version and exits.
	printVersion bool
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("hearthd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.configFile, "config", "", "configuration file (YAML); default: built-in defaults, or the built-in sample with -demo")
	fs.StringVar(&o.dataDir, "data-dir", "", "data directory of the command store (overrides data_dir; default with -demo: "+demoDataDir+")")
	fs.StringVar(&o.mqttListen, "mqtt-listen", "", "embedded broker listen address, host:port (overrides mqtt.listen)")
	fs.StringVar(&o.mqttURL, "mqtt-url", "", "external broker URL such as tcp://host:1883; no embedded broker runs (overrides mqtt.url)")
	fs.StringVar(&o.httpListen, "http-listen", "", "HTTP listen address, host:port (overrides http.listen)")
	fs.StringVar(&o.logLevel, "log-level", "", "log level: debug, info, warn or error (default info; warn with -demo)")
	fs.BoolVar(&o.printMosquittoACL, "print-mosquitto-acl", false, "print Mosquitto 2's dynamic-security JSON (accounts, hashed passwords, ACLs) for the config's external broker on stdout, the mosquitto.conf lines on stderr, and exit")
	fs.StringVar(&o.checkConfig, "check-config", "", "validate this configuration `file` (with the other flags applied), print every problem, exit 0 if valid and 1 if not; opens nothing")
	fs.BoolVar(&o.printVersion, "version", false, "print the version, the VCS revision and the Go release, and exit")
	fs.BoolVar(&o.demo, "demo", false, "run simulated devices in the same process and send them a few commands (anonymous, on loopback only)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q (flags start with -)", fs.Arg(0))
	}
	if o.checkConfig != "" {
		if o.configFile != "" && o.configFile != o.checkConfig {
			return o, fmt.Errorf("-check-config %s and -config %s: give the file to check once", o.checkConfig, o.configFile)
		}
		if o.demo {
			return o, errors.New("-check-config checks a file; -demo runs one: give one of them")
		}
		o.configFile = o.checkConfig
	}
	return o, nil
}

// loadConfig reads the config file, or the built-in sample for a demo, or
// the built-in defaults, and applies the flags over it.
func loadConfig(o options) (*config.Config, error) {
	var cfg *config.Config
	var err error
	switch {
	case o.configFile != "":
		cfg, err = config.Load(o.configFile)
	case o.demo:
		cfg, err = config.Parse(configs.SampleName, configs.Sample)
	default:
		cfg = config.Default()
	}
	if err != nil {
		return nil, err
	}
	if o.dataDir != "" {
		cfg.DataDir = o.dataDir
	} else if o.demo && o.configFile == "" {
		// The demo's commands must never answer a real daemon's op_ids.
		cfg.DataDir = demoDataDir
	}
	if o.mqttListen != "" {
		cfg.MQTT.Listen = o.mqttListen
	}
	if o.mqttURL != "" {
		cfg.MQTT.URL = o.mqttURL
	}
	if o.httpListen != "" {
		cfg.HTTP.Listen = o.httpListen
	}
	if o.demo {
		if err := demoAnonymous(cfg); err != nil {
			return nil, err
		}
	}
	name := o.configFile
	if name == "" {
		name = "built-in configuration"
	}
	// The flags may have moved a listener off loopback.
	if err := cfg.CheckAnonymous(name); err != nil {
		return nil, fmt.Errorf("%w (after the command line's flags)", err)
	}
	return cfg, nil
}

// demoAnonymous makes a demo's configuration anonymous, on loopback only:
// the embedded broker and the HTTP API admit everyone, so they listen on
// 127.0.0.1 whatever the file or the flags say (the port is kept). A
// configuration with principals cannot run as a demo.
func demoAnonymous(cfg *config.Config) error {
	if len(cfg.Principals) > 0 {
		return errors.New("-demo runs without authentication, but the configuration names principals; run it without -demo")
	}
	if cfg.MQTT.URL == "" {
		cfg.MQTT.AllowAnonymous, cfg.MQTT.AllowAnonymousBeyondLoopback = true, false
		cfg.MQTT.Listen = loopbackOnly(cfg.MQTT.Listen)
	}
	cfg.HTTP.AllowAnonymous, cfg.HTTP.AllowAnonymousBeyondLoopback = true, false
	cfg.HTTP.Listen = loopbackOnly(cfg.HTTP.Listen)
	return nil
}

// loopbackOnly returns addr, or addr on 127.0.0.1 with the same port when
// its host is not loopback.
func loopbackOnly(addr string) string {
	if config.Loopback(addr) {
		return addr
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr // config checked it; leave the error to listen
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// demoDataDir is the data directory of -demo without -config or -data-dir.
const demoDataDir = "data-demo"

func parseLevel(s string, demo bool) (slog.Level, error) {
	if s == "" {
		if demo {
			return slog.LevelWarn, nil // the demo's own output tells the story
		}
		return slog.LevelInfo, nil
	}
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToUpper(s))); err != nil {
		return 0, fmt.Errorf("-log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

// run is hearthd's whole life: parse, start, wait for ctx, stop.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	if o.printVersion {
		_, err := fmt.Fprintln(stdout, buildinfo.Resolve(version, revision).Line("hearthd"))
		return err
	}
	if o.checkConfig != "" {
		return checkConfig(o, stdout)
	}
	level, err := parseLevel(o.logLevel, o.demo)
	if err != nil {
		return err
	}
	cfg, err := loadConfig(o)
	if err != nil {
		return err
	}
	if o.printMosquittoACL {
		return printMosquittoACL(cfg, cryptoRand, stdout, stderr)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	if o.configFile == "" && !o.demo {
		log.Warn("no -config given: running on built-in defaults, with no services and no devices")
	}
	d, err := start(cfg, deps{logger: log})
	if err != nil {
		return err
	}
	defer d.stop()
	if o.demo {
		if err := runDemo(ctx, d, stdout, log); err != nil {
			return err
		}
	}
	// SIGHUP reloads the principals (and the embedded broker's users)
	// from the configuration file, and the credentials file: a revoked
	// permission or a rotated password applies at once, even to commands
	// already accepted.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	// Under systemd (Type=notify): READY=1, the watchdog, reloads and
	// STOPPING=1; see sdnotify.go.
	sd := newSystemdNotifier(nil, log)
	defer sd.watch(ctx, d.conn.Up(), d.health)()
	for {
		select {
		case <-hup:
			if o.configFile == "" && !o.demo {
				// The built-in defaults do not change, but the
				// credentials file may have.
				log.Info("SIGHUP: reloading the credentials file")
				d.reloadFrom(func() (*config.Config, error) { return loadConfig(o) }, log)
				continue
			}
			if o.configFile == "" {
				log.Warn("SIGHUP ignored: the demo has no -config file to reload")
				continue
			}
			log.Info("SIGHUP: reloading principals", "config", o.configFile)
			sd.reload(func() { d.reloadFrom(func() (*config.Config, error) { return loadConfig(o) }, log) })
		case err := <-d.failed:
			sd.stopping()
			return fmt.Errorf("dispatcher: %w", err)
		case <-ctx.Done():
			log.Info("shutting down", "cause", context.Cause(ctx))
			sd.stopping()
			return nil
		}
	}
}
