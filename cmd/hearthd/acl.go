package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/hearthd/hearth/acl"
	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/protocols/esphome"
	"github.com/hearthd/hearth/protocols/homie"
	"github.com/hearthd/hearth/protocols/shelly"
	"github.com/hearthd/hearth/protocols/zigbee2mqtt"
	"github.com/hearthd/hearth/protocols/zwavejs"
)

// aclSpec is the access table of cfg (see package acl): Hearth's account
// (hearthUsername, with its client ID reserved), every bridge's account
// with its protocol's command filters and its client_id (Z-Wave JS UI's
// default ZWAVE_GATEWAY-<gateway_name> included), every status_topic
// service's, every principal with an MQTT account and every mqtt.users
// account. The same table drives the embedded broker and
// -print-mosquitto-acl; an empty hearthClientID reserves none.
func aclSpec(cfg *config.Config, hearthUsername, hearthClientID string) acl.Spec {
	spec := acl.Spec{
		Prefix:          cfg.Prefix,
		DiscoveryPrefix: cfg.HomeAssistant.DiscoveryPrefix,
		Hearth:          acl.Account{Username: hearthUsername},
	}
	if hearthClientID != "" {
		spec.Hearth.ClientIDs = []string{hearthClientID}
	}
	for _, s := range cfg.Services {
		account := acl.Account{Username: s.MQTTUsername}
		if s.ClientID != "" {
			account.ClientIDs = []string{s.ClientID}
		}
		switch s.Protocol {
		case config.ProtocolZigbee2MQTT:
			spec.Bridges = append(spec.Bridges, acl.Bridge{Name: s.Name, Account: account, BaseTopic: s.BaseTopic,
				Commands: zigbee2mqtt.CommandFilters(s.BaseTopic)})
		case config.ProtocolZWaveJS:
			spec.Bridges = append(spec.Bridges, acl.Bridge{Name: s.Name, Account: account, BaseTopic: s.BaseTopic,
				Commands: zwavejs.CommandFilters(s.BaseTopic, s.GatewayName)})
		case config.ProtocolShelly:
			spec.Bridges = append(spec.Bridges, acl.Bridge{Name: s.Name, Account: account, BaseTopic: s.BaseTopic,
				Commands: shelly.CommandFilters(s.BaseTopic)})
		case config.ProtocolTasmota:
			spec.Bridges = append(spec.Bridges, tasmotaACL(s, account))
		case config.ProtocolHomie:
			spec.Bridges = append(spec.Bridges, acl.Bridge{Name: s.Name, Account: account, BaseTopic: s.BaseTopic,
				Commands: homie.CommandFilters(s.BaseTopic)})
		case config.ProtocolESPHome:
			spec.Bridges = append(spec.Bridges, acl.Bridge{Name: s.Name, Account: account, BaseTopic: s.BaseTopic,
				Commands: esphome.CommandFilters(s.BaseTopic)})
		case config.ProtocolStatusTopic:
			spec.StatusServices = append(spec.StatusServices, acl.StatusService{Name: s.Name, Account: account, StatusTopic: s.StatusTopic})
		}
	}
	for _, p := range cfg.Principals {
		if p.MQTTUsername != "" {
			spec.Principals = append(spec.Principals, acl.Principal{Name: p.Name, Account: acl.Account{Username: p.MQTTUsername}, Publish: p.MQTTPublish})
		}
	}
	for _, u := range cfg.MQTT.Users {
		spec.Users = append(spec.Users, acl.User{Account: acl.Account{Username: u.Username}, Publish: u.Publish})
	}
	return spec
}

// hearthClientID is the client ID Hearth connects with: mqtt.client_id,
// else defaultClientID of the data directory.
func hearthClientID(cfg *config.Config) string {
	if cfg.MQTT.ClientID != "" {
		return cfg.MQTT.ClientID
	}
	return defaultClientID(cfg.DataDir)
}

// trustedPublisher returns the username whose reports on bridge s's topics
// count, and the user property that names a message's publisher: with the
// embedded broker authenticating clients, s's account and the broker's
// stamp, so that a report forged by anyone else confirms nothing; with an
// external broker, or an embedded one that admits anyone, "" (the topic
// is trusted, and only the broker's ACL keeps others off it).
func (d *daemon) trustedPublisher(s config.Service) (publisher, stampProperty string) {
	if d.broker == nil || d.cfg.MQTT.AllowAnonymous {
		return "", ""
	}
	return s.MQTTUsername, usernameProperty
}

// countUntrusted exports a bridge adapter's count of dropped reports as
// hearth_untrusted_reports_total{service}.
func (d *daemon) countUntrusted(service string, count func() uint64) {
	d.metrics.Registry().MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name:        "hearth_untrusted_reports_total",
		Help:        "Messages on a bridge's topics that the bridge's account did not publish (by the embedded broker's stamp): dropped, they confirm nothing.",
		ConstLabels: prometheus.Labels{"service": service},
	}, func() float64 { return float64(count()) }))
}

// printMosquittoACL writes to stdout the configuration file of Mosquitto
// 2's dynamic-security plugin for cfg's table (acl.Table.DynamicSecurity)
// and to stderr the mosquitto.conf lines that load it. cfg must name an
// external broker (mqtt.url): its credentials, as the credentials file
// completes them (credentials writes every missing account into it, as
// the first start does), are the clients' passwords. Hearth's client ID is
// bound to its account only when mqtt.client_id names it: the default
// depends on the host and data directory hearthd runs with.
func printMosquittoACL(cfg *config.Config, random io.Reader, stdout, stderr io.Writer) error {
	if cfg.MQTT.URL == "" {
		return errors.New("-print-mosquitto-acl writes an external broker's ACL: set mqtt.url (or -mqtt-url) to the Mosquitto that Hearth and the bridges share")
	}
	path, _, err := credentials(cfg, random)
	if err != nil {
		return err
	}
	if cfg.MQTT.Username == "" {
		return errors.New("-print-mosquitto-acl: mqtt.password is set but mqtt.username is not: name Hearth's account on the broker (mqtt.username), or leave both empty for a generated one")
	}
	table, err := acl.New(aclSpec(cfg, cfg.MQTT.Username, cfg.MQTT.ClientID))
	if err != nil {
		return err
	}
	out, err := table.DynamicSecurity(accountPasswords(cfg, cfg.MQTT.Username, cfg.MQTT.Password), random)
	if err != nil {
		return fmt.Errorf("%w (passwords come from the config and %s)", err, path)
	}
	if _, err := stdout.Write(out); err != nil {
		return err
	}
	fmt.Fprintf(stderr, `# Save the JSON above where Mosquitto may write it (the plugin rewrites it on
# changes), e.g. /var/lib/mosquitto/dynamic-security.json, owned by the
# mosquitto user and mode 0600, and add to mosquitto.conf (Mosquitto 2.0):
per_listener_settings false
allow_anonymous false
plugin %s
plugin_opt_config_file /var/lib/mosquitto/dynamic-security.json
# Passwords are those of the config and %s.
`, mosquittoPluginPath, path)
	return nil
}

// mosquittoPluginPath is where Debian's and Ubuntu's mosquitto package
// installs the dynamic-security plugin (the eclipse-mosquitto image has it
// at /usr/lib/mosquitto_dynamic_security.so).
const mosquittoPluginPath = "/usr/lib/x86_64-linux-gnu/mosquitto_dynamic_security.so"
