// Command hearth-sim plays the devices of a Hearth configuration on the
// device side of their bridges' MQTT conventions (Zigbee2MQTT, and Z-Wave
// JS UI's gateway), sleepy ones asleep between their wakes as the config
// says, with faults to inject, so that hearthd can be exercised without
// hardware.
//
// Usage:
//
//	hearth-sim [-broker URL] [-config FILE] [-credentials FILE]
//	           [-username U -password P] [-drop-first N] [-drop-rate F]
//	           [-latency D] [-offline dev1,dev2] [-seed N]
//	hearth-sim contention [-base D] [-cap D] [-min N] [-max N] [-step N]
//	           [-runs N] [-seed N] [-plot FILE]
//	hearth-sim power-loss [-devices N] [-strategy S | -compare] [-base D]
//	           [-cap D] [-cut clients|broker] [-transport pipe|tcp]
//	           [-broker URL] [-max-connect-rate R] [-timeout D] [-plot FILE]
//	hearth-sim outage [-hearthd PATH] [-before D] [-outage D] [-after D]
//	           [-announce] [-rate R] [-failure-threshold N]
//	           [-attempt-timeout D] [-open-for D] [-max-open-for D]
//	           [-probe-timeout D] [-summary-every D] [-hearthd-log FILE]
//	hearth-sim sleepy [-devices N] [-duration D] [-wake D] [-window D]
//	           [-rate R] [-seed N] [-v]
//	hearth-sim -version
//
// -version prints the build's version, VCS revision and Go release.
//
// The scenarios that run for tens of seconds (power-loss, outage, sleepy)
// say which phase they are in on stderr when it is a terminal, and
// nothing more when it is not (see progress.go).
//
// Device names in -offline are Hearth device IDs from the config.
//
// The contention subcommand runs no devices: it is the retry contention
// study of docs/RETRY.md, a simulation in virtual time that prints a table
// and writes an SVG plot.
//
// The power-loss subcommand is the reconnect flood of docs/RECONNECT.md:
// N lightweight devices connected to an embedded (or external) broker are
// cut all at once and reconnect with a backoff strategy, while the broker's
// accepts are timed; it prints a table and, with -compare, writes a plot.
//
// The outage subcommand runs a hearthd child process (by default the
// hearthd next to hearth-sim, else in PATH: go build -o bin/ ./cmd/...)
// against an embedded broker and simulated Zigbee2MQTT bridges, takes one
// bridge offline for -outage under traffic (-pattern steady, burst or
// supersede), and prints the timeline of hearthd's circuit breaker: its
// opening, the fast failures, the probes, the fallback automation and its
// closing after the recovery. It
// exits non-zero if any of those did not happen as they should. It runs in
// real time: the defaults take about 6.5 minutes.
//
// The sleepy subcommand is issue 4's fleet: in one process, on a fake
// clock, the embedded broker, a store, the zwavejs adapter and the
// dispatcher (wired as hearthd wires them) serve a simulated Z-Wave JS UI
// gateway with -devices sleepy thermostats for a simulated day of seeded
// commands; it prints how many were fresh at a wake and delivered exactly
// once there, superseded or expired, and exits non-zero if any was
// delivered twice, late, to a sleeping node, or missed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hearthd/hearth/buildinfo"
	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/configs"
	"github.com/hearthd/hearth/retry"
	"github.com/hearthd/hearth/simulator"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	args := os.Args[1:]
	switch {
	case len(args) == 1 && (args[0] == "-version" || args[0] == "--version"):
		fmt.Println(buildinfo.Resolve(version, revision).Line("hearth-sim"))
	case len(args) > 0 && args[0] == "contention":
		err = runContention(ctx, args[1:], os.Stdout, os.Stderr)
	case len(args) > 0 && args[0] == "power-loss":
		err = runPowerLoss(ctx, args[1:], os.Stdout, os.Stderr)
	case len(args) > 0 && args[0] == "outage":
		err = runOutage(ctx, args[1:], os.Stdout, os.Stderr)
	case len(args) > 0 && args[0] == "sleepy":
		err = runSleepy(ctx, args[1:], os.Stdout, os.Stderr)
	default:
		err = run(ctx, args, os.Stderr)
	}
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return // -h: usage printed
		}
		fmt.Fprintln(os.Stderr, "hearth-sim:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("hearth-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), "usage: hearth-sim [flags]             play the devices of a configuration (Zigbee2MQTT, Z-Wave JS UI, Shelly, loopback HTTP services; sleepy ones wake as configured)\n"+
			"       hearth-sim contention [flags]  the retry contention study (see hearth-sim contention -h)\n"+
			"       hearth-sim power-loss [flags]  the reconnect flood after a power loss (see hearth-sim power-loss -h)\n"+
			"       hearth-sim outage [flags]      a bridge outage against a hearthd: its circuit breaker (see hearth-sim outage -h)\n"+
			"       hearth-sim sleepy [flags]      a fleet of sleepy Z-Wave thermostats over a simulated day (see hearth-sim sleepy -h)\n"+
			"       hearth-sim -version            the version, VCS revision and Go release of this build\n\nflags:\n")
		fs.PrintDefaults()
	}
	brokerURL := fs.String("broker", "tcp://127.0.0.1:1883", "MQTT broker URL")
	username := fs.String("username", "", "MQTT username of every simulated bridge without an account in -credentials")
	password := fs.String("password", "", "MQTT password, with -username")
	credentials := fs.String("credentials", "", "hearthd's credentials `file` (<data_dir>/credentials.yaml): each simulated bridge logs in as its service's account, as the real bridge would")
	configFile := fs.String("config", "", "Hearth configuration whose devices to play; default: the built-in sample")
	dropFirst := fs.Int("drop-first", 0, "every device ignores its first N sets")
	dropRate := fs.Float64("drop-rate", 0, "fraction of all sets ignored, 0 to 1")
	latency := fs.Duration("latency", 0, "delay before a device reports its new state")
	offline := fs.String("offline", "", "comma-separated device IDs that start offline")
	seed := fs.Uint64("seed", 0, "random seed for -drop-rate; 0 picks one")
	var httpFaults simulator.HTTPFaults
	httpFlags(fs, &httpFaults)
	logLevel := fs.String("log-level", "info", "log level: debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (flags start with -)", fs.Arg(0))
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(strings.ToUpper(*logLevel))); err != nil {
		return fmt.Errorf("-log-level %q: want debug, info, warn or error", *logLevel)
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))

	var cfg *config.Config
	var err error
	if *configFile != "" {
		cfg, err = config.Load(*configFile)
	} else {
		cfg, err = config.Parse(configs.SampleName, configs.Sample)
	}
	if err != nil {
		return err
	}
	var logins map[string]simulator.Login
	if *credentials != "" {
		cr, err := config.LoadCredentials(*credentials)
		if err != nil {
			return err
		}
		logins = bridgeLogins(cfg, cr)
	}
	var devs []simulator.Device
	names := map[string]string{} // device ID → friendly_name
	nodeIDs := map[string]int{}  // per zwavejs service: the last node ID given
	for _, dev := range cfg.Devices {
		svc, ok := cfg.Service(dev.Service)
		if ok && svc.Protocol == config.ProtocolTasmota {
			devs = tasmotaDevice(devs, svc, dev.Device, names)
			continue
		}
		if !ok || (svc.Protocol != config.ProtocolZigbee2MQTT && svc.Protocol != config.ProtocolZWaveJS && svc.Protocol != config.ProtocolShelly && svc.Protocol != config.ProtocolHomie && svc.Protocol != config.ProtocolESPHome) {
			continue
		}
		name := dev.Address
		if name == "" {
			name = dev.ID
		}
		names[dev.ID] = name
		sd := simulator.Device{Name: name, Class: string(dev.Class), BaseTopic: svc.BaseTopic}
		if svc.Protocol == config.ProtocolShelly {
			sd.Protocol = simulator.ProtocolShelly
		}
		if svc.Protocol == config.ProtocolHomie {
			sd.Protocol = simulator.ProtocolHomie
		}
		if svc.Protocol == config.ProtocolESPHome {
			sd.Protocol = simulator.ProtocolESPHome
		}
		if svc.Protocol == config.ProtocolZWaveJS {
			sd.Protocol, sd.GatewayName = simulator.ProtocolZWaveJS, svc.GatewayName
			sd.NodeID = zwaveNodeID(name, nodeIDs, svc.Name)
		}
		if dev.Sleep.Sleepy {
			// Asleep from the start; awake every wake_interval for
			// awake_window, as the config says of it.
			sd.WakeInterval, sd.AwakeWindow = dev.Sleep.WakeInterval, dev.Sleep.AwakeWindow
		}
		devs = append(devs, sd)
	}
	var off []string
	for _, id := range strings.Split(*offline, ",") {
		if id = strings.TrimSpace(id); id == "" {
			continue
		}
		name, ok := names[id]
		if !ok {
			return fmt.Errorf("-offline: no Zigbee2MQTT device %q in the configuration", id)
		}
		off = append(off, name)
	}
	if *seed == 0 {
		*seed = rand.Uint64()
	}
	httpFaults.DropFirst = *dropFirst
	stopHTTP, err := playHTTPDevices(cfg, httpFaults, log)
	if err != nil {
		return err
	}
	defer stopHTTP()
	sim, err := simulator.New(simulator.Options{
		Broker:   *brokerURL,
		Username: *username,
		Password: *password,
		Logins:   logins,
		Devices:  devs,
		Faults: simulator.Faults{
			DropFirst: *dropFirst,
			DropRate:  *dropRate,
			Latency:   *latency,
			Offline:   off,
		},
		Rand:      rand.New(rand.NewPCG(*seed, *seed)),
		Reconnect: simReconnect,
		Logger:    log,
	})
	if err != nil {
		return err
	}
	log.Info("hearth-sim starting", "broker", *brokerURL, "devices", len(devs), "seed", *seed)
	go func() {
		select {
		case <-sim.Ready():
			log.Info("hearth-sim ready: devices online")
		case <-ctx.Done():
		}
	}()
	return sim.Run(ctx)
}

// bridgeLogins are the accounts of cfg's bridges, by base topic, as
// hearthd gives them: each service's mqtt_username, its mqtt_password from
// the config or else from cr, and its client_id.
func bridgeLogins(cfg *config.Config, cr *config.Credentials) map[string]simulator.Login {
	cfg.ApplyCredentials(cr)
	logins := map[string]simulator.Login{}
	for _, s := range cfg.Services {
		if s.Protocol == config.ProtocolZigbee2MQTT || s.Protocol == config.ProtocolZWaveJS || s.Protocol == config.ProtocolShelly || s.Protocol == config.ProtocolHomie || s.Protocol == config.ProtocolESPHome {
			logins[s.BaseTopic] = simulator.Login{Username: s.MQTTUsername, Password: s.MQTTPassword, ClientID: s.ClientID}
		}
		if s.Protocol == config.ProtocolTasmota {
			logins[s.FullTopic] = simulator.Login{Username: s.MQTTUsername, Password: s.MQTTPassword} // keyed by FullTopic, as the simulator looks Tasmotas up
		}
	}
	return logins
}

// simReconnect spaces the simulated bridges' reconnects as real firmware
// should: exponential backoff with full jitter, base 250 ms, cap 30 s.
func simReconnect(n int, prev time.Duration, r simulator.Rand) time.Duration {
	return retry.Backoff{Base: 250 * time.Millisecond, Multiplier: 2, Cap: 30 * time.Second}.Delay(n, prev, r)
}

// zwaveNodeID is the node ID of a simulated Z-Wave node: the node level of
// its address when that is a number (the gateway's topics without node
// names), else the next free ID of its service from 100 up, above those a
// config names by number.
func zwaveNodeID(address string, last map[string]int, service string) int {
	node := address[strings.LastIndexByte(address, '/')+1:]
	if n, err := strconv.Atoi(node); err == nil && n > 0 {
		return n
	}
	if last[service] < 100 {
		last[service] = 100
	}
	last[service]++
	return last[service]
}
