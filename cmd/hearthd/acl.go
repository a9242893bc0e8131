package main

import (
	"github.com/hearthd/hearth/acl"
	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/protocols/zigbee2mqtt"
	"github.com/hearthd/hearth/protocols/zwavejs"
)

// aclSpec is the access table of cfg (see package acl): Hearth's account
// (hearthUsername, with its client ID reserved), every bridge's account
// with its protocol's command filters and its client_id (Z-Wave JS UI's
// default ZWAVE_GATEWAY-<gateway_name> included), every status_topic
// service's, every principal with an MQTT account and every mqtt.users
// account. The same table drives the embedded broker and
// -print-mosquitto-acl.
func aclSpec(cfg *config.Config, hearthUsername, hearthClientID string) acl.Spec {
	spec := acl.Spec{
		Prefix:          cfg.Prefix,
		DiscoveryPrefix: cfg.HomeAssistant.DiscoveryPrefix,
		Hearth:          acl.Account{Username: hearthUsername, ClientIDs: []string{hearthClientID}},
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
