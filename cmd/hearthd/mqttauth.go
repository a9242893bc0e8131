package main

import (
	crand "crypto/rand"
	"encoding/base64"

	"github.com/hearthd/hearth/acl"
	"github.com/hearthd/hearth/config"
)

// usernameProperty is the MQTT 5 user property in which the embedded
// broker tells subscribers the username that published a message
// (broker.Options.StampUsernameProperty): the bridge adapters trust a
// report only with their bridge's account in it. (Commands need no stamp:
// the broker hands them to the intake with the publisher's username,
// broker.Command.Username.)
const usernameProperty = "hearth-username"

// mqttAuth is who is who on the embedded broker, rebuilt from the
// configuration at start and at every reload (setPrincipals).
type mqttAuth struct {
	// principals maps a principal's MQTT username to its name. A broker
	// user (mqtt.users) or Hearth itself is not in it.
	principals map[string]string
	// table is who may publish where (package acl): with the embedded
	// broker, the broker asks it for every publish of an authenticated
	// client.
	table *acl.Table
	// external is the principal of every command that arrives through an
	// external broker: the generated DefaultPrincipal when the file names
	// no principals, else "" (no principal: an external broker's stamp
	// can be forged).
	external string
}

// newMQTTAuth builds the table of cfg for Hearth's account hearthUsername
// with client ID clientID. It fails only on what config refuses already
// (a username shared by two accounts, a client ID reserved twice).
func newMQTTAuth(cfg *config.Config, hearthUsername, clientID string) (*mqttAuth, error) {
	if hearthUsername == "" {
		// An external broker without credentials: the table is the
		// embedded broker's, unused there.
		hearthUsername = config.InternalUsername
	}
	table, err := acl.New(aclSpec(cfg, hearthUsername, clientID))
	if err != nil {
		return nil, err
	}
	a := &mqttAuth{principals: map[string]string{}, table: table}
	for _, p := range cfg.Principals {
		if p.MQTTUsername != "" {
			a.principals[p.MQTTUsername] = p.Name
		}
	}
	if cfg.MQTT.URL != "" && cfg.GeneratedPrincipal {
		a.external = config.DefaultPrincipal
	}
	return a, nil
}

// denies reports whether username may not publish on topic
// (broker.Options.DenyPublish): the table's answer.
func (a *mqttAuth) denies(username, topic string) bool {
	return !a.table.MayPublish(username, topic)
}

// principalOf returns the name of the principal whose MQTT username the
// embedded broker verified (broker.Command.Username); "" for anyone else:
// a broker user, an anonymous client (""), Hearth itself.
func (a *mqttAuth) principalOf(username string) string {
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
	return accountPasswords(cfg, config.InternalUsername, internalPassword)
}

// accountPasswords maps every MQTT account of cfg to its password: Hearth's
// own (username, password), each MQTT service's that has a password (a
// service without one has not been through the credentials file yet), each
// principal's with MQTT credentials, and every mqtt.users entry. The
// embedded broker's user table and the Mosquitto file are both made of it.
func accountPasswords(cfg *config.Config, username, password string) map[string]string {
	users := map[string]string{username: password}
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
	a, err := newMQTTAuth(cfg, d.hearthUsername, d.clientID)
	if err != nil {
		d.log.Error("principals not reloaded; the running ACL stays", "err", err)
		return
	}
	d.mqttAuth.Store(a)
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
