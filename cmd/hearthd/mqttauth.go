package main

import (
	crand "crypto/rand"
	"encoding/base64"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/protocols/mqtt"
)

// usernameProperty is the MQTT 5 user property in which the embedded
// broker tells subscribers the username that published a message
// (broker.Options.StampUsernameProperty): the intake maps it to the
// principal that sent a command.
const usernameProperty = "hearth-username"

// mqttAuth is who is who on the embedded broker, rebuilt from the
// configuration at start and at every reload (setPrincipals).
type mqttAuth struct {
	// principals maps a principal's MQTT username to its name. A broker
	// user (mqtt.users) or Hearth itself is not in it.
	principals map[string]string
	// commands is the one filter under the prefix that principals may
	// publish on: <prefix>/+/set.
	commands string
	// denied are the filters principals may not publish on otherwise:
	// <prefix>/#, and each bridge's base topic and each watched
	// service's status topic, so that a principal cannot command a device
	// past Hearth nor speak for a bridge.
	denied []string
	// external is the principal of every command that arrives through an
	// external broker: the generated DefaultPrincipal when the file names
	// no principals, else "" (no principal: an external broker's stamp
	// can be forged).
	external string
}

func newMQTTAuth(cfg *config.Config) *mqttAuth {
	a := &mqttAuth{principals: map[string]string{}, commands: cfg.Prefix + "/+/set", denied: []string{cfg.Prefix + "/#"}}
	for _, p := range cfg.Principals {
		if p.MQTTUsername != "" {
			a.principals[p.MQTTUsername] = p.Name
		}
	}
	if cfg.MQTT.URL != "" && cfg.GeneratedPrincipal {
		a.external = config.DefaultPrincipal
	}
	for _, s := range cfg.Services {
		if s.BaseTopic != "" {
			a.denied = append(a.denied, s.BaseTopic+"/#")
		}
		if s.StatusTopic != "" {
			a.denied = append(a.denied, s.StatusTopic)
		}
	}
	return a
}

// denies reports whether username, a principal's, may not publish on
// topic (broker.Options.DenyPublish).
func (a *mqttAuth) denies(username, topic string) bool {
	if _, ok := a.principals[username]; !ok {
		return false
	}
	if mqtt.Match(a.commands, topic) {
		return false
	}
	for _, f := range a.denied {
		if mqtt.Match(f, topic) {
			return true
		}
	}
	return false
}

// principal returns the name of the principal that published m, by the
// embedded broker's stamp; "" for anyone else: a broker user, an
// anonymous client, Hearth itself.
func (a *mqttAuth) principal(m mqtt.Message) string {
	username, ok := m.UserProperty(usernameProperty)
	if !ok {
		return ""
	}
	return a.principals[username]
}

// brokerUsers is the embedded broker's user table for cfg: nil with
// mqtt.allow_anonymous (everyone is admitted), else Hearth's own account,
// every MQTT service's account, every principal's MQTT credentials (the
// generated principal's included) and every mqtt.users entry.
func brokerUsers(cfg *config.Config, internalPassword string) map[string]string {
	if cfg.MQTT.AllowAnonymous {
		return nil
	}
	users := map[string]string{config.InternalUsername: internalPassword}
	for _, s := range cfg.Services {
		if s.UsesMQTT() && s.MQTTPassword != "" {
			users[s.MQTTUsername] = s.MQTTPassword
		}
	}
	for _, p := range cfg.Principals {
		if p.MQTTUsername != "" {
			users[p.MQTTUsername] = p.MQTTPassword
		}
	}
	for _, u := range cfg.MQTT.Users {
		users[u.Username] = u.Password
	}
	return users
}

// setPrincipals applies the principals and broker users of cfg, as at
// start: the intake maps usernames to principals by them, and the embedded
// broker admits exactly them (plus Hearth itself), disconnecting every
// client it no longer admits. It changes nothing else of the daemon. For
// the reload on SIGHUP; safe for concurrent use with running commands.
func (d *daemon) setPrincipals(cfg *config.Config) {
	d.mqttAuth.Store(newMQTTAuth(cfg))
	if d.broker != nil {
		d.broker.SetUsers(brokerUsers(cfg, d.internalPassword))
	}
}

// newInternalPassword draws the password Hearth connects to its embedded
// broker with: 32 random bytes, base64url, new at every start.
func newInternalPassword() string {
	b := make([]byte, 32)
	crand.Read(b) // never fails: it crashes the program instead
	return base64.RawURLEncoding.EncodeToString(b)
}
