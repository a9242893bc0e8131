package config

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/hearthd/hearth/devices"
)

// Principal is someone who may command devices: a wall tablet, Home
// Assistant, a phone app. The embedded broker authenticates it by its MQTT
// username and password, the HTTP API by its bearer token; what it may
// command is Allow. Commands from anyone else are rejected with reason
// unauthorized unless mqtt.allow_anonymous or http.allow_anonymous, and the
// embedded broker refuses clients without a known username and password
// (see Service.MQTTUsername for bridges, MQTT.Users for other clients).
// Without principals in the file, ApplyCredentials adds DefaultPrincipal.
type Principal struct {
	// Name is the principal's name, the key under principals: it appears
	// in results' audit trail and notifications.
	Name string
	// MQTTUsername and MQTTPassword are the credentials the principal's
	// MQTT client connects to the embedded broker with. Given together;
	// only with the embedded broker (an external broker does not tell
	// Hearth who published a message).
	MQTTUsername string
	MQTTPassword string
	// HTTPToken is the bearer token the principal sends to the HTTP API
	// (Authorization: Bearer <token>): at least MinTokenLength bytes.
	HTTPToken string
	// MQTTPublish are MQTT topic filters the principal may publish on
	// beyond <prefix>/+/set (commands) and <discovery_prefix>/status
	// (Home Assistant's birth message): none may overlap <prefix>/#, a
	// bridge's base topic or a status topic. Default none.
	MQTTPublish []string
	// Allow is what the principal may command: device ID or "*" →
	// actions (lock, unlock, open, close, stop, on, off, arm, disarm, set,
	// or "*"). A device's own entry replaces the "*" entry for it.
	Allow devices.Grants
}

// MinTokenLength is the shortest HTTP bearer token a principal may have:
// 16 bytes, so that a token cannot be guessed in a few tries.
const MinTokenLength = 16

// MinPasswordLength is the shortest MQTT password of a principal or
// broker user.
const MinPasswordLength = 8

// BrokerUser is a client of the embedded broker that commands nothing
// through Hearth and is not a configured service: the broker lets it
// connect with this password, and it may subscribe to anything but publish
// only on Publish.
type BrokerUser struct {
	Username string
	Password string
	// Publish are the MQTT topic filters the user may publish on; none may
	// overlap <prefix>/#, a bridge's base topic or a status topic. Default
	// none: the user may only subscribe.
	Publish []string
}

// actionNames lists the words a grant may use, sorted.
var actionNames = []string{
	devices.ActionAny, devices.ActionArm, devices.ActionClose, devices.ActionDisarm,
	devices.ActionLock, devices.ActionOff, devices.ActionOn, devices.ActionOpen,
	devices.ActionSet, devices.ActionStop, devices.ActionUnlock,
}

// Principal returns the principal with that name.
func (c *Config) Principal(name string) (Principal, bool) {
	for _, p := range c.Principals {
		if p.Name == name {
			return p, true
		}
	}
	return Principal{}, false
}

// Authentication reports whether principals are configured (the generated
// DefaultPrincipal counts once ApplyCredentials added it): then commands
// are authorized by principal unless a listener is anonymous.
func (c *Config) Authentication() bool { return len(c.Principals) > 0 }

// walkPrincipal walks one entry of principals.
func walkPrincipal(w *walker, name string, n *yaml.Node, key string) Principal {
	p := Principal{Name: name}
	if err := devices.ValidID(name); err != nil {
		w.report(w.lines[key], key, err)
	} else if name == AutomationPrincipal {
		w.reportf(w.lines[key], key, "the name %q is the principal of local automations", name)
	}
	w.mapping(n, key,
		value("mqtt_username", &p.MQTTUsername, notEmpty),
		value("mqtt_password", &p.MQTTPassword, minLength(MinPasswordLength)),
		value("http_token", &p.HTTPToken, minLength(MinTokenLength)),
		listOf("mqtt_publish", topicFilters, &p.MQTTPublish, publishFilter),
		field{"allow", func(w *walker, n *yaml.Node, key string) { p.Allow = walkGrants(w, n, key) }},
	)
	return p
}

// walkGrants walks a principal's allow: device → list of actions.
func walkGrants(w *walker, n *yaml.Node, key string) devices.Grants {
	g := devices.Grants{}
	w.entries(n, key, func(device string, v *yaml.Node, k string) {
		line := v.Line
		v = resolve(v)
		if v.Kind != yaml.SequenceNode {
			w.reportf(line, k, "want a list of actions, such as [lock], got %s", describe(v))
			return
		}
		actions := []string{}
		for _, item := range v.Content {
			item = resolve(item)
			if item.Kind != yaml.ScalarNode || !slices.Contains(actionNames, item.Value) {
				w.reportf(item.Line, k, "unknown action %s (known: %s)", describe(item), strings.Join(actionNames, ", "))
				continue
			}
			actions = append(actions, item.Value)
		}
		g[device] = actions
	})
	return g
}

// walkBrokerUser walks one entry of mqtt.users.
func walkBrokerUser(w *walker, name string, n *yaml.Node, key string) BrokerUser {
	u := BrokerUser{Username: name}
	w.mapping(n, key,
		value("password", &u.Password, minLength(MinPasswordLength)),
		listOf("publish", topicFilters, &u.Publish, publishFilter),
	)
	if k := join(key, "password"); u.Password == "" && !w.reported[k] && !w.reported[key] {
		w.reportf(w.lines[key], k, "missing")
	}
	return u
}

func minLength(n int) func(string) error {
	return func(s string) error {
		if len(s) < n {
			return fmt.Errorf("must be at least %d bytes long, got %d", n, len(s))
		}
		return nil
	}
}

// checkPrincipals reports what does not fit together in principals and
// mqtt.users: credentials given by halves, MQTT credentials with an
// external broker, a username or token used twice, a grant naming a device
// that does not exist. checkAccounts checks the services' accounts and
// every publish filter.
func (c *Config) checkPrincipals(w *walker) {
	embedded := c.MQTT.URL == ""
	if len(c.MQTT.Users) > 0 && !embedded {
		w.reportf(w.lines["mqtt.users"], "mqtt.users", "only for the embedded broker: with mqtt.url, configure users in the external broker")
	}
	usernames := map[string]string{} // username → key that took it
	for _, u := range c.MQTT.Users {
		key := join("mqtt.users", u.Username)
		if u.Username == InternalUsername {
			w.reportf(w.lines[key], key, "the username %q is Hearth's own", InternalUsername)
		}
		usernames[u.Username] = key
	}
	tokens := map[string]string{}
	ids := make([]string, 0, len(c.Devices))
	for _, d := range c.Devices {
		ids = append(ids, d.ID)
	}
	for _, p := range c.Principals {
		key := join("principals", p.Name)
		if w.reported[key] {
			continue
		}
		ukey, pkey := join(key, "mqtt_username"), join(key, "mqtt_password")
		switch {
		case p.MQTTUsername != "" && p.MQTTPassword == "" && !w.reported[pkey]:
			w.reportf(w.lines[ukey], pkey, "missing: mqtt_username needs mqtt_password")
		case p.MQTTPassword != "" && p.MQTTUsername == "" && !w.reported[ukey]:
			w.reportf(w.lines[pkey], ukey, "missing: mqtt_password needs mqtt_username")
		}
		if p.MQTTUsername != "" && !embedded {
			w.reportf(w.lines[ukey], ukey, "only with the embedded broker: an external broker (mqtt.url) does not tell Hearth who published a command; give the principal an http_token instead")
		}
		if p.MQTTUsername == InternalUsername {
			w.reportf(w.lines[ukey], ukey, "the username %q is Hearth's own", InternalUsername)
		} else if other, taken := usernames[p.MQTTUsername]; taken && p.MQTTUsername != "" {
			w.reportf(w.lines[ukey], ukey, "%q is already the username of %s", p.MQTTUsername, other)
		} else if p.MQTTUsername != "" {
			usernames[p.MQTTUsername] = key
		}
		tkey := join(key, "http_token")
		if other, taken := tokens[p.HTTPToken]; taken && p.HTTPToken != "" {
			w.reportf(w.lines[tkey], tkey, "is already the token of %s; every principal needs its own", other)
		} else if p.HTTPToken != "" {
			tokens[p.HTTPToken] = key
		}
		if p.MQTTUsername == "" && p.HTTPToken == "" && !w.reported[ukey] && !w.reported[pkey] && !w.reported[tkey] {
			w.reportf(w.lines[key], key, "names no way to authenticate: give mqtt_username and mqtt_password, http_token, or both")
		}
		if w.lines[join(key, "allow")] == 0 {
			w.reportf(w.lines[key], join(key, "allow"), "missing: list what the principal may command, e.g. allow: {front_door: [lock]}")
		}
		devs := make([]string, 0, len(p.Allow))
		for dev := range p.Allow {
			devs = append(devs, dev)
		}
		sort.Strings(devs)
		for _, dev := range devs {
			if dev != devices.ActionAny && !slices.Contains(ids, dev) {
				k := join(join(key, "allow"), dev)
				hint := ""
				if s := closest(dev, ids); s != "" {
					hint = fmt.Sprintf("did you mean %s? ", s)
				}
				w.reportf(w.lines[k], k, "no device %q (%sor \"*\" for every device)", dev, hint)
			}
		}
	}
}

// AutomationPrincipal is the principal of the commands of local
// automations; no configured principal may take the name.
const AutomationPrincipal = "automation"

// InternalUsername is the embedded broker username Hearth itself connects
// with when principals turn authentication on; its password is drawn
// afresh at every start. No principal or broker user may take it.
const InternalUsername = "hearthd"
