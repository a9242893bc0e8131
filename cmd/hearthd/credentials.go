package main

import (
	crand "crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"

	"github.com/hearthd/hearth/config"
)

// credentials reads <data_dir>/credentials.yaml, adds an account with
// fresh secrets from random (crypto/rand) for every account of cfg without
// a password, writes the file back (atomically, mode 0600) only if it
// added one, and fills cfg from it (config.ApplyCredentials). It returns
// the file's path and what it added. An existing file that group or
// others may read, or that does not parse, is an error: hearthd refuses
// to start rather than replace it.
func credentials(cfg *config.Config, random io.Reader) (path string, added []string, err error) {
	path = config.CredentialsPath(cfg.DataDir)
	cr, err := config.LoadCredentials(path)
	if errors.Is(err, fs.ErrNotExist) {
		cr, err = &config.Credentials{}, nil
	}
	if err != nil {
		return path, nil, err
	}
	added, err = cfg.EnsureCredentials(cr, random)
	if err != nil {
		return path, nil, err
	}
	if len(added) > 0 {
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return path, nil, fmt.Errorf("credentials: %w", err)
		}
		if err := config.WriteCredentials(path, cr); err != nil {
			return path, nil, err
		}
	}
	cfg.ApplyCredentials(cr)
	return path, added, nil
}

// logAccounts tells, once credentials were generated, where they are and
// which account each client must use; never the secrets themselves
// (hearthctl credentials shows them).
func logAccounts(log *slog.Logger, cfg *config.Config, path string, added []string) {
	if len(added) == 0 {
		return
	}
	if cfg.MQTT.AllowAnonymous && cfg.HTTP.AllowAnonymous {
		// Nobody needs them yet (a demo, a test bench).
		log.Info("generated credentials", "file", path, "accounts", added)
		return
	}
	log.Warn("generated credentials; show them with: hearthctl credentials -data-dir "+cfg.DataDir, "file", path, "accounts", added)
	if cfg.MQTT.URL == "" && !cfg.MQTT.AllowAnonymous {
		for _, s := range cfg.Services {
			if !s.UsesMQTT() {
				continue
			}
			log.Warn("the "+bridgeName(s.Protocol)+" of service "+s.Name+" must connect to the embedded broker with its own account",
				"service", s.Name, "mqtt_username", s.MQTTUsername, "where", bridgeSettings(s.Protocol))
		}
	}
	if p, ok := cfg.Principal(config.DefaultPrincipal); ok && cfg.GeneratedPrincipal {
		log.Warn("automations command as principal "+config.DefaultPrincipal+": its MQTT account and HTTP bearer token are in the credentials file",
			"mqtt_username", p.MQTTUsername, "http", "Authorization: Bearer <http_token>")
	}
}

// bridgeName names what runs behind a service of protocol.
func bridgeName(protocol string) string {
	switch protocol {
	case config.ProtocolZigbee2MQTT:
		return "Zigbee2MQTT bridge"
	case config.ProtocolZWaveJS:
		return "Z-Wave JS UI gateway"
	case config.ProtocolShelly:
		return "Shelly devices"
	case config.ProtocolTasmota:
		return "Tasmota devices"
	case config.ProtocolHomie:
		return "Homie devices"
	case config.ProtocolESPHome:
		return "ESPHome nodes"
	}
	return "publisher of the status topic"
}

// bridgeSettings says where a bridge of protocol takes its MQTT account.
func bridgeSettings(protocol string) string {
	switch protocol {
	case config.ProtocolZigbee2MQTT:
		return "mqtt.user and mqtt.password in Zigbee2MQTT's configuration.yaml"
	case config.ProtocolZWaveJS:
		return "Username and Password in Z-Wave JS UI's MQTT settings"
	case config.ProtocolShelly:
		return "each Shelly's Settings → MQTT: Username and Password (docs/SHELLY.md)"
	case config.ProtocolTasmota:
		return "MqttUser and MqttPassword of every Tasmota device of the service (Configuration → Configure MQTT)"
	case config.ProtocolHomie:
		return "the MQTT username and password of every Homie device of the service (its firmware's MQTT settings; docs/HOMIE.md)"
	case config.ProtocolESPHome:
		return "each node's mqtt: username and password (docs/ESPHOME.md)"
	}
	return "the MQTT username and password of whatever publishes the status topic"
}

// cryptoRand is crypto/rand's reader: the source of every generated secret.
var cryptoRand io.Reader = crand.Reader
