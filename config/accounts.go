package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"unicode"

	"github.com/hearthd/hearth/topic"
)

// DefaultPrincipal is the principal hearthd generates, with MQTT
// credentials and an HTTP token in the credentials file, when the config
// names no principals: it may command everything (allow "*": ["*"]). No
// service or broker user may take its name as a username then.
const DefaultPrincipal = "default"

// topicFilters is what the publish lists of accounts hold, for the error
// of a value that is no list.
const topicFilters = `MQTT topic filters, such as ["dashboard/#"]`

// publishFilter checks a filter an account may publish on: a topic
// filter (topicFilter) without empty levels, not starting with '$'.
func publishFilter(s string) error {
	if err := topicFilter(s); err != nil {
		return err
	}
	if strings.HasPrefix(s, "$") {
		return fmt.Errorf("%q starts with '$', which brokers keep for their own topics", s)
	}
	if slices.Contains(strings.Split(s, "/"), "") {
		return fmt.Errorf("%q has an empty topic level; separate levels with one '/' and put none at either end", s)
	}
	return nil
}

// mqttName checks an MQTT username or client ID: no control characters,
// no spaces at either end.
func mqttName(s string) error {
	if strings.ContainsFunc(s, unicode.IsControl) {
		return errors.New("contains a control character")
	}
	if strings.TrimSpace(s) != s {
		return fmt.Errorf("%q has spaces at one end", s)
	}
	return nil
}

// reservedTopics are the filters no principal or broker user may publish
// on, each with the key that owns it: Hearth's whole prefix, Home
// Assistant's discovery prefix (a principal may still publish its birth,
// <discovery_prefix>/status, without naming it), every bridge's base topic
// and every status topic.
func (c *Config) reservedTopics() [][2]string {
	out := [][2]string{{c.Prefix + "/#", "prefix"}}
	if p := c.HomeAssistant.DiscoveryPrefix; p != "" {
		// Whoever writes a discovery config can make Home Assistant
		// command a device through its own principal.
		out = append(out, [2]string{p + "/#", "homeassistant.discovery_prefix"})
	}
	for _, s := range c.Services {
		if s.BaseTopic != "" && s.Commands() {
			out = append(out, [2]string{s.BaseTopic + "/#", join(join("services", s.Name), "base_topic")})
		}
		if s.Protocol == ProtocolTasmota {
			for _, f := range tasmotaFilters(s.FullTopic) {
				out = append(out, [2]string{f, join(join("services", s.Name), "full_topic")})
			}
		}
		if s.StatusTopic != "" {
			out = append(out, [2]string{s.StatusTopic, join(join("services", s.Name), "status_topic")})
		}
	}
	return out
}

// checkAccounts reports what does not fit together in the services' MQTT
// accounts: a username or client ID taken twice, or taken from Hearth; and
// publish filters of mqtt.users and principals that overlap Hearth's or a
// bridge's topics.
func (c *Config) checkAccounts(w *walker) {
	usernames := map[string]string{InternalUsername: "Hearth itself"}
	if len(c.Principals) == 0 {
		usernames[DefaultPrincipal] = "the generated principal " + DefaultPrincipal
	}
	for _, u := range c.MQTT.Users {
		if _, ok := usernames[u.Username]; !ok {
			usernames[u.Username] = join("mqtt.users", u.Username)
		}
	}
	for _, p := range c.Principals {
		if _, ok := usernames[p.MQTTUsername]; !ok && p.MQTTUsername != "" {
			usernames[p.MQTTUsername] = join("principals", p.Name)
		}
	}
	if len(c.Principals) == 0 {
		for _, u := range c.MQTT.Users {
			if key := join("mqtt.users", u.Username); u.Username == DefaultPrincipal && !w.reported[key] {
				w.reportf(w.lines[key], key, "the username %q is the generated principal's when principals names none", DefaultPrincipal)
			}
		}
	}
	clientIDs := map[string]string{}
	if c.MQTT.ClientID != "" {
		clientIDs[c.MQTT.ClientID] = "mqtt.client_id"
	}
	for _, s := range c.Services {
		if !s.UsesMQTT() {
			continue
		}
		skey := join("services", s.Name)
		if w.reported[skey] {
			continue
		}
		ukey := join(skey, "mqtt_username")
		_, line := w.at(ukey, skey)
		if other, taken := usernames[s.MQTTUsername]; taken && !w.reported[ukey] {
			what := "username"
			if w.lines[ukey] == 0 {
				what = "default username (the service's name)"
			}
			w.reportf(line, ukey, "%s %q is already the username of %s; every service needs an account of its own", what, s.MQTTUsername, other)
		} else {
			usernames[s.MQTTUsername] = skey
		}
		ckey := join(skey, "client_id")
		if s.ClientID == "" || w.reported[ckey] || w.reported[join(skey, "base_topic")] {
			continue
		}
		_, line = w.at(ckey, skey)
		if other, taken := clientIDs[s.ClientID]; taken {
			w.reportf(line, ckey, "%q is already the client ID of %s; a client ID is bound to one account", s.ClientID, other)
			continue
		}
		clientIDs[s.ClientID] = ckey
	}
	reserved := c.reservedTopics()
	checkFilters := func(key string, list []string) {
		if w.reported[key] {
			return
		}
		for _, f := range list {
			for _, r := range reserved {
				if topic.Overlap(f, r[0]) {
					w.reportf(w.lines[key], key, "%q overlaps %s (%q): only Hearth and the bridge that owns a topic may publish there", f, r[1], r[0])
					break
				}
			}
		}
	}
	for _, u := range c.MQTT.Users {
		checkFilters(join(join("mqtt.users", u.Username), "publish"), u.Publish)
	}
	for _, p := range c.Principals {
		checkFilters(join(join("principals", p.Name), "mqtt_publish"), p.MQTTPublish)
	}
}

// Loopback reports whether the host of the listen address addr
// (host:port) is a loopback address: in 127.0.0.0/8, ::1, or "localhost".
// An empty host, which listens on every interface, is not.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// anonymousProblem is one problem of the anonymous switches: its key and
// what is wrong.
type anonymousProblem struct{ key, message string }

// anonymousProblems lists what is wrong with mqtt.allow_anonymous and
// http.allow_anonymous in c: together with principals, with an external
// broker, on a listen address beyond loopback without its
// _beyond_loopback switch, or a _beyond_loopback switch without
// allow_anonymous.
func (c *Config) anonymousProblems() []anonymousProblem {
	var out []anonymousProblem
	add := func(key, format string, args ...any) {
		out = append(out, anonymousProblem{key, fmt.Sprintf(format, args...)})
	}
	type side struct {
		name, listen   string
		allow, beyond  bool
		embeddedBroker bool
		listenKey      string // default name.listen
	}
	sides := []side{
		{"mqtt", c.MQTT.Listen, c.MQTT.AllowAnonymous, c.MQTT.AllowAnonymousBeyondLoopback, c.MQTT.URL == "", ""},
		{"http", c.HTTP.Listen, c.HTTP.AllowAnonymous, c.HTTP.AllowAnonymousBeyondLoopback, true, ""},
	}
	if l := c.MQTT.MQTTS.Listen; l != "" && c.MQTT.URL == "" && c.MQTT.AllowAnonymous && Loopback(c.MQTT.Listen) && (len(c.Principals) == 0 || c.GeneratedPrincipal) {
		// An mqtts listener beyond loopback opens the broker as mqtt.listen
		// would; the checks above already speak for a mqtt.listen beyond.
		sides = append(sides, side{"mqtt", l, true, c.MQTT.AllowAnonymousBeyondLoopback, true, "mqtt.mqtts.listen"})
	}
	for _, s := range sides {
		if s.listenKey == "" {
			s.listenKey = s.name + ".listen"
		}
		key := s.name + ".allow_anonymous"
		switch {
		case !s.allow && s.beyond:
			add(key+"_beyond_loopback", "has no effect without %s: true", key)
		case !s.allow:
		case len(c.Principals) > 0 && !c.GeneratedPrincipal:
			add(key, "cannot be true with principals: they need the %s to authenticate every client (remove allow_anonymous, or give every client a principal)", map[string]string{"mqtt": "broker", "http": "HTTP API"}[s.name])
		case !s.embeddedBroker:
			add(key, "only for the embedded broker; with mqtt.url, the external broker decides who may connect")
		case !Loopback(s.listen) && !s.beyond:
			add(key, "is true and %s %q is not a loopback address, so anyone who can reach it could connect unauthenticated; listen on 127.0.0.1, drop allow_anonymous and use the generated credentials, or set %s_beyond_loopback: true if this is wanted", s.listenKey, s.listen, key)
		}
	}
	return out
}

// checkAnonymous reports anonymousProblems at their keys' lines.
func (c *Config) checkAnonymous(w *walker) {
	for _, p := range c.anonymousProblems() {
		if w.reported[p.key] {
			continue
		}
		_, line := w.at(p.key, strings.TrimSuffix(p.key, "_beyond_loopback"))
		w.reportf(line, p.key, "%s", p.message)
	}
}

// CheckAnonymous returns the problems of the anonymous switches of c as
// anonymousProblems, for a config changed after Parse (hearthd's flags
// override listen addresses): an *Error whose problems name file and key
// but no line, or nil.
func (c *Config) CheckAnonymous(file string) error {
	w := newWalker(file)
	for _, p := range c.anonymousProblems() {
		w.reportf(0, p.key, "%s", p.message)
	}
	return w.result()
}
