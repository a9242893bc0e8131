package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
	"github.com/hearthd/hearth/topic"
)

// Load reads the config file at path and parses it as Parse does, naming
// the file by path in every problem.
//
// A file that cannot be read is an error that names the path and wraps the
// cause, so that errors.Is(err, fs.ErrNotExist) holds for a missing file.
// A file that is read but wrong is an *Error.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err // the path is in our message already
		}
		if errors.Is(err, fs.ErrNotExist) && !filepath.IsAbs(path) {
			if wd, werr := os.Getwd(); werr == nil {
				return nil, fmt.Errorf("%s: cannot read config file: %w (the working directory is %s)", path, err, wd)
			}
		}
		return nil, fmt.Errorf("%s: cannot read config file: %w", path, err)
	}
	return Parse(path, data)
}

// Parse parses data, the text of the config file called name, and returns
// the validated config with every default filled in. An empty file (or
// one of comments only) gives Default().
//
// When anything is wrong Parse returns a nil *Config and an *Error that
// holds every problem found, each naming name, the line and the dotted key.
func Parse(name string, data []byte) (*Config, error) {
	w := newWalker(name)
	c := Default()
	if root := w.document(data); root != nil {
		w.mapping(root, "", c.schema()...)
	}
	c.check(w)
	if err := w.result(); err != nil {
		return nil, err
	}
	return c, nil
}

// schema lists the keys of the file and where each value goes.
func (c *Config) schema() []field {
	m := &c.MQTT
	return []field{
		value("prefix", &c.Prefix, topicRoot),
		value("data_dir", &c.DataDir, notEmpty),
		section("defaults",
			value("ttl", &c.Defaults.TTL, ttl),
		),
		section("mqtt",
			value("listen", &m.Listen, listenAddress),
			value("url", &m.URL, brokerURL),
			value("username", &m.Username),
			value("password", &m.Password),
			value("client_id", &m.ClientID),
			value("keepalive", &m.KeepAlive, keepAlive),
			value("session_expiry", &m.SessionExpiry, sessionExpiry),
			section("tls",
				value("ca_file", &m.TLS.CAFile),
				value("cert_file", &m.TLS.CertFile),
				value("key_file", &m.TLS.KeyFile),
				value("insecure_skip_verify", &m.TLS.InsecureSkipVerify),
			),
			section("mqtts",
				value("listen", &m.MQTTS.Listen, optionalListenAddress),
				value("cert_file", &m.MQTTS.Cert.CertFile),
				value("key_file", &m.MQTTS.Cert.KeyFile),
			),
			section("reconnect", backoff(&m.Reconnect)...),
			value("republish_rate", &m.RepublishRate, atLeast(1)),
			value("max_connect_rate", &m.MaxConnectRate, positiveNumber),
			value("connect_burst", &m.ConnectBurst, atLeast(1)),
			value("max_connections", &m.MaxConnections, atLeast(1)),
			value("max_inflight", &m.MaxInflight, between(1, MaxInflight)),
			value("connect_timeout", &m.ConnectTimeout, positive),
			value("max_unauthenticated", &m.MaxUnauthenticated, atLeast(1)),
			value("max_keepalive", &m.MaxClientKeepAlive, keepAlive),
			value("login_failures_per_minute", &m.LoginFailuresPerMinute, positiveNumber),
			value("allow_anonymous", &m.AllowAnonymous),
			value("allow_anonymous_beyond_loopback", &m.AllowAnonymousBeyondLoopback),
			field{"users", func(w *walker, n *yaml.Node, key string) {
				w.entries(n, key, func(name string, v *yaml.Node, k string) {
					m.Users = append(m.Users, walkBrokerUser(w, name, v, k))
				})
			}},
		),
		section("http",
			value("listen", &c.HTTP.Listen, listenAddress),
			value("allow_anonymous", &c.HTTP.AllowAnonymous),
			value("allow_anonymous_beyond_loopback", &c.HTTP.AllowAnonymousBeyondLoopback),
			section("tls",
				value("cert_file", &c.HTTP.TLS.CertFile),
				value("key_file", &c.HTTP.TLS.KeyFile),
			),
		),
		section("homeassistant",
			value("discovery", &c.HomeAssistant.Discovery),
			value("discovery_prefix", &c.HomeAssistant.DiscoveryPrefix, topicRoot),
		),
		{"services", func(w *walker, n *yaml.Node, key string) {
			w.entries(n, key, func(name string, v *yaml.Node, k string) {
				c.Services = append(c.Services, walkService(w, name, v, k))
			})
		}},
		{"devices", func(w *walker, n *yaml.Node, key string) {
			w.entries(n, key, func(id string, v *yaml.Node, k string) {
				c.Devices = append(c.Devices, walkDevice(w, id, v, k))
			})
		}},
		{"automations", func(w *walker, n *yaml.Node, key string) {
			w.entries(n, key, func(name string, v *yaml.Node, k string) {
				c.Automations = append(c.Automations, walkAutomation(w, name, v, k))
			})
		}},
		{"principals", func(w *walker, n *yaml.Node, key string) {
			w.entries(n, key, func(name string, v *yaml.Node, k string) {
				c.Principals = append(c.Principals, walkPrincipal(w, name, v, k))
			})
		}},
	}
}

// backoff lists the keys of a backoff.
func backoff(b *retry.Backoff) []field {
	return []field{
		value("backoff", &b.Strategy),
		value("jitter", &b.Jitter),
		value("base", &b.Base, positive),
		value("multiplier", &b.Multiplier, atLeastOne),
		value("cap", &b.Cap, positive),
	}
}

// walkService walks one entry of services and fills in its protocol's
// defaults.
func walkService(w *walker, name string, n *yaml.Node, key string) Service {
	s := Service{Name: name, Breaker: Breaker{Enabled: true}} // unless the file says otherwise
	if !serviceName.MatchString(name) {
		w.reportf(w.lines[key], key, "invalid service name: use lower-case letters, digits, '_' and '-'")
	}
	w.mapping(n, key,
		value("protocol", &s.Protocol, knownProtocol),
		value("base_topic", &s.BaseTopic, topicRoot),
		value("gateway_name", &s.GatewayName, topicLevel),
		value("node_names", &s.NodeNames),
		value("full_topic", &s.FullTopic, tasmotaFullTopic),
		value("status_topic", &s.StatusTopic, topicLevels),
		value("online_payload", &s.OnlinePayload, notEmpty),
		value("offline_payload", &s.OfflinePayload, notEmpty),
		value("url", &s.URL, webhookURL),
		stringMap("headers", &s.Headers, httpHeader),
		value("timeout", &s.Timeout, positive),
		value("method", &s.Method, httpMethod),
		value("allow_insecure", &s.AllowInsecure),
		value("read_timeout", &s.ReadTimeout, positive),
		value("mqtt_username", &s.MQTTUsername, notEmpty, mqttName),
		value("mqtt_password", &s.MQTTPassword, minLength(MinPasswordLength)),
		value("client_id", &s.ClientID, notEmpty, mqttName),
		section("retry", append([]field{
			value("max_attempts", &s.Retry.MaxAttempts, attempts),
			value("allow_more_attempts", &s.Retry.AllowMoreAttempts),
			value("read_back", &s.Retry.ReadBack),
			value("attempt_timeout", &s.Retry.AttemptTimeout, positive),
			value("deadline", &s.Retry.Deadline, positive),
			classes("retry_on", &s.Retry.RetryOn),
			classes("never_retry", &s.Retry.NeverRetry),
			value("max_retry_after", &s.Retry.MaxRetryAfter, positive),
			section("budget",
				value("ratio", &s.Retry.Budget.Ratio, ratio),
				value("min_retries", &s.Retry.Budget.MinRetries, atLeast(1)),
				value("window", &s.Retry.Budget.Window, positive),
			),
		}, backoff(&s.Retry.Backoff)...)...),
		section("breaker",
			value("enabled", &s.Breaker.Enabled),
			value("failure_threshold", &s.Breaker.FailureThreshold, atLeast(1)),
			value("failure_ratio", &s.Breaker.FailureRatio, ratio),
			value("window", &s.Breaker.Window, positive),
			value("min_calls", &s.Breaker.MinCalls, atLeast(1)),
			value("open_for", &s.Breaker.OpenFor, positive),
			value("max_open_for", &s.Breaker.MaxOpenFor, positive),
			value("max_probes", &s.Breaker.MaxProbes, atLeast(1)),
			value("probe_timeout", &s.Breaker.ProbeTimeout, positive),
			value("successes_to_close", &s.Breaker.SuccessesToClose, atLeast(1)),
			value("hold", &s.Breaker.Hold),
		),
	)
	w.checkAttempts(join(key, "retry"), s)
	if k := join(key, "protocol"); s.Protocol == "" && !w.reported[k] && !w.reported[key] {
		w.reportf(w.lines[key], k, "missing (known: %s)", strings.Join(protocolNames, ", "))
	}
	w.checkProtocolKeys(key, s)
	w.checkTasmotaKeys(key, s)
	w.checkHTTPService(key, s)
	s = s.withDefaults()
	if w.lines[join(join(key, "retry"), "read_back")] == 0 {
		s.Retry.ReadBack = s.Retry.ReadBack || protocols[s.Protocol].Retry.ReadBack // a bool's default: esphome's is true
	}
	if s.Protocol == ProtocolStatusTopic && s.OnlinePayload == s.OfflinePayload && !w.reported[join(key, "online_payload")] && !w.reported[join(key, "offline_payload")] {
		k, line := w.at(join(key, "offline_payload"), join(key, "online_payload"), key)
		w.reportf(line, k, "online_payload and offline_payload are both %q; they must differ", s.OnlinePayload)
	}
	w.checkBackoff(join(key, "retry"), s.Retry.Backoff)
	// A probe must outlast its attempt, or a device that answers late but
	// within attempt_timeout fails every probe and the breaker never
	// closes. Left out, probe_timeout grows to the attempt timeout.
	if s.Protocol != ProtocolStatusTopic && s.Breaker.ProbeTimeout < s.Retry.AttemptTimeout {
		bkey := join(key, "breaker")
		if k := join(bkey, "probe_timeout"); w.lines[k] == 0 {
			s.Breaker.ProbeTimeout = s.Retry.AttemptTimeout
		} else if !w.reported[k] && s.Notifies() {
			w.reportf(w.lines[k], k, "probe_timeout %s is less than timeout %s: a probe would count as failed before its POST had the time to answer", fmtDuration(s.Breaker.ProbeTimeout), fmtDuration(s.Timeout))
		} else if !w.reported[k] {
			w.reportf(w.lines[k], k, "probe_timeout %s is less than retry.attempt_timeout %s: a probe would count as failed before its device had the time to answer", fmtDuration(s.Breaker.ProbeTimeout), fmtDuration(s.Retry.AttemptTimeout))
		}
	}
	if b := s.Breaker; b.MaxOpenFor < b.OpenFor {
		bkey := join(key, "breaker")
		if k := join(bkey, "max_open_for"); !w.reported[k] && !w.reported[join(bkey, "open_for")] {
			k, line := w.at(k, join(bkey, "open_for"), bkey)
			w.reportf(line, k, "max_open_for %s is less than open_for %s", fmtDuration(b.MaxOpenFor), fmtDuration(b.OpenFor))
		}
	}
	return s
}

// walkDevice walks one entry of devices. Its service, address and TTL are
// resolved by check, once the whole file is read.
func walkDevice(w *walker, id string, n *yaml.Node, key string) Device {
	d := Device{Device: devices.Device{ID: id}}
	var safety, offline string
	if err := devices.ValidID(id); err != nil {
		w.report(w.lines[key], key, err)
	}
	w.mapping(n, key,
		value("service", &d.Service, notEmpty),
		value("class", &d.Class),
		value("address", &d.Address, topicLevels),
		value("ttl", &d.TTL, ttl),
		value("attempt_timeout", &d.AttemptTimeout, positive),
		value("read_back", &d.ReadBack),
		value("safety", &safety, safetyLevel),
		value("sleepy", &d.Sleep.Sleepy),
		value("wake_interval", &d.Sleep.WakeInterval, ttl),
		value("awake_window", &d.Sleep.AwakeWindow, positive),
		value("offline", &offline, offlinePolicy),
	)
	if safety == "critical" {
		d.Safety = devices.SafetyCritical
	}
	d.Offline = devices.Offline(offline) // checked by offlinePolicy; "" is the default
	wkey, akey := join(key, "wake_interval"), join(key, "awake_window")
	switch {
	case d.Sleep.Sleepy && d.Sleep.WakeInterval == 0 && !w.reported[wkey]:
		w.reportf(w.lines[join(key, "sleepy")], wkey, "missing: a sleepy device needs its wake-up (or check-in) interval, such as 5m")
	case !d.Sleep.Sleepy && w.lines[wkey] != 0:
		w.reportf(w.lines[wkey], wkey, "only for a sleepy device: add sleepy: true")
	case !d.Sleep.Sleepy && w.lines[akey] != 0:
		w.reportf(w.lines[akey], akey, "only for a sleepy device: add sleepy: true")
	}
	if d.Sleep.Sleepy && d.Sleep.AwakeWindow == 0 {
		d.Sleep.AwakeWindow = DefaultAwakeWindow
	}
	if d.Sleep.Sleepy && d.Sleep.AwakeWindow > d.Sleep.WakeInterval && d.Sleep.WakeInterval > 0 && !w.reported[akey] {
		w.reportf(w.lines[akey], akey, "%s is longer than wake_interval %s: the device would never sleep", fmtDuration(d.Sleep.AwakeWindow), fmtDuration(d.Sleep.WakeInterval))
	}
	if k := join(key, "class"); d.Class == "" && !w.reported[k] && !w.reported[key] {
		w.reportf(w.lines[key], k, "missing (known: %s)", classNames())
	}
	return d
}

// checkProtocolKeys reports the keys a service's protocol does not take:
// those of a status_topic service or of a webhook service given to
// another protocol, those of a commanded service given to a status_topic
// one, which Hearth sends no commands, and the MQTT base topic and
// attempt timeout of a webhook, which its url and timeout replace. It
// reports a missing status_topic or url.
func (w *walker) checkProtocolKeys(key string, s Service) {
	if s.Protocol == "" || w.reported[join(key, "protocol")] {
		return
	}
	switch s.Protocol {
	case ProtocolStatusTopic:
		if k := join(key, "status_topic"); s.StatusTopic == "" && !w.reported[k] {
			w.reportf(w.lines[key], k, "missing; a status_topic service needs the topic it reports its status on")
		}
		for _, name := range []string{"base_topic", "retry"} {
			if k := join(key, name); w.lines[k] != 0 {
				w.reportf(w.lines[k], k, "a status_topic service takes no %s: Hearth only watches it and sends it no commands", name)
			}
		}
	case ProtocolHomie:
		w.checkHomieBase(key, s)
	case ProtocolWebhook:
		if k := join(key, "url"); s.URL == "" && !w.reported[k] {
			w.reportf(w.lines[key], k, "missing; a webhook service needs the http:// or https:// URL it POSTs notifications to")
		}
		if k := join(key, "base_topic"); w.lines[k] != 0 {
			w.reportf(w.lines[k], k, "a webhook service takes no base_topic: Hearth reaches it over HTTP, at its url")
		}
		if k := join(join(key, "retry"), "attempt_timeout"); w.lines[k] != 0 {
			w.reportf(w.lines[k], k, "a webhook service takes no attempt_timeout: its timeout bounds each POST")
		}
	}
	if s.Protocol != ProtocolStatusTopic {
		for _, name := range []string{"status_topic", "online_payload", "offline_payload"} {
			if k := join(key, name); w.lines[k] != 0 && !w.reported[k] {
				w.reportf(w.lines[k], k, "only for protocol status_topic, not %s", s.Protocol)
			}
		}
	}
	if k := join(key, "read_timeout"); !s.Commands() && w.lines[k] != 0 && !w.reported[k] {
		w.reportf(w.lines[k], k, "only for services that take commands (%s), not %s: Hearth reads no device through it", protocolsWhere(Service.Commands), s.Protocol)
	}
	for _, name := range []string{"gateway_name", "node_names"} {
		if k := join(key, name); s.Protocol != ProtocolZWaveJS && w.lines[k] != 0 && !w.reported[k] {
			w.reportf(w.lines[k], k, "only for protocol zwavejs, not %s", s.Protocol)
		}
	}
	if !s.UsesMQTT() {
		for _, name := range []string{"mqtt_username", "mqtt_password", "client_id"} {
			if k := join(key, name); w.lines[k] != 0 && !w.reported[k] {
				w.reportf(w.lines[k], k, "only for services that use MQTT (%s), not %s: Hearth reaches it over HTTP", protocolsWhere(Service.UsesMQTT), s.Protocol)
			}
		}
	}
	if s.Protocol != ProtocolWebhook && s.Protocol != ProtocolHTTP {
		for _, name := range []string{"url", "headers", "timeout"} {
			if k := join(key, name); w.lines[k] != 0 && !w.reported[k] {
				w.reportf(w.lines[k], k, "only for protocols webhook and http, not %s", s.Protocol)
			}
		}
	}
}

// check resolves what depends on more than one key and reports what does
// not fit together.
func (c *Config) check(w *walker) {
	m := &c.MQTT
	if m.TLS != (TLS{}) && !w.reported["mqtt.url"] {
		switch scheme, _, _ := strings.Cut(m.URL, "://"); strings.ToLower(scheme) {
		case "ssl", "mqtts":
		case "":
			w.reportf(w.lines["mqtt.tls"], "mqtt.tls", "TLS settings need an ssl:// or mqtts:// mqtt.url; without one Hearth runs the embedded broker, which takes none")
		default:
			w.reportf(w.lines["mqtt.tls"], "mqtt.tls", "TLS settings need an ssl:// or mqtts:// mqtt.url, not %s://", scheme)
		}
	}
	if m.TLS.CertFile != "" && m.TLS.KeyFile == "" {
		w.reportf(w.lines["mqtt.tls.cert_file"], "mqtt.tls.cert_file", "needs mqtt.tls.key_file too")
	}
	if m.TLS.KeyFile != "" && m.TLS.CertFile == "" {
		w.reportf(w.lines["mqtt.tls.key_file"], "mqtt.tls.key_file", "needs mqtt.tls.cert_file too")
	}
	c.checkServerTLS(w)
	c.checkBrokerLimits(w)
	w.checkBackoff("mqtt.reconnect", m.Reconnect)
	if m.Reconnect.Strategy == retry.ServerProvided && !w.reported["mqtt.reconnect.backoff"] {
		w.reportf(w.lines["mqtt.reconnect.backoff"], "mqtt.reconnect.backoff", "retry_after is for services that send Retry-After; a broker does not (use fixed, linear, exponential or fibonacci)")
	}
	c.checkTopics(w)
	c.checkDevices(w)
	c.checkAutomations(w)
	c.checkPrincipals(w)
	c.checkAccounts(w)
	c.checkAnonymous(w)
}

// checkServerTLS reports an mqtt.mqtts or http.tls that is half given:
// a certificate without its key or the other way round, an mqtts listener
// without a certificate or a certificate without a listener, or mqtts
// with an external broker.
func (c *Config) checkServerTLS(w *walker) {
	pair := func(key string, sc ServerCert) {
		if sc.CertFile != "" && sc.KeyFile == "" {
			w.reportf(w.lines[key+".cert_file"], key+".cert_file", "needs %s.key_file too", key)
		}
		if sc.KeyFile != "" && sc.CertFile == "" {
			w.reportf(w.lines[key+".key_file"], key+".key_file", "needs %s.cert_file too", key)
		}
	}
	pair("mqtt.mqtts", c.MQTT.MQTTS.Cert)
	pair("http.tls", c.HTTP.TLS)
	s := c.MQTT.MQTTS
	switch {
	case s == (MQTTS{}):
	case c.MQTT.URL != "":
		w.reportf(w.lines["mqtt.mqtts"], "mqtt.mqtts", "is a listener of the embedded broker; with mqtt.url no embedded broker runs (for TLS to an external broker use an mqtts:// mqtt.url and mqtt.tls)")
	case s.Listen == "" && !w.reported["mqtt.mqtts.listen"]:
		w.reportf(w.lines["mqtt.mqtts"], "mqtt.mqtts.listen", "is needed with mqtt.mqtts.cert_file and key_file: the address of the mqtts listener, such as 0.0.0.0:8883")
	case s.Cert == (ServerCert{}):
		w.reportf(w.lines["mqtt.mqtts.listen"], "mqtt.mqtts.listen", "needs mqtt.mqtts.cert_file and mqtt.mqtts.key_file: the server certificate the listener presents")
	}
}

// checkBrokerLimits reports limits of the embedded broker set together
// with an external broker's URL, where no embedded broker runs. A limit
// written with its default value is no mistake: the sample shows them all.
func (c *Config) checkBrokerLimits(w *walker) {
	m, d := &c.MQTT, Default().MQTT
	if m.URL == "" || w.reported["mqtt.url"] {
		return
	}
	limits := []struct {
		key string
		set bool
	}{
		{"mqtt.max_connect_rate", m.MaxConnectRate != d.MaxConnectRate},
		{"mqtt.connect_burst", m.ConnectBurst != d.ConnectBurst},
		{"mqtt.max_connections", m.MaxConnections != d.MaxConnections},
		{"mqtt.max_inflight", m.MaxInflight != d.MaxInflight},
		{"mqtt.connect_timeout", m.ConnectTimeout != d.ConnectTimeout},
		{"mqtt.max_unauthenticated", m.MaxUnauthenticated != d.MaxUnauthenticated},
		{"mqtt.max_keepalive", m.MaxClientKeepAlive != d.MaxClientKeepAlive},
		{"mqtt.login_failures_per_minute", m.LoginFailuresPerMinute != d.LoginFailuresPerMinute},
	}
	for _, l := range limits {
		if l.set {
			w.reportf(w.lines[l.key], l.key, "limits the embedded broker, which does not run when mqtt.url is set; set the external broker's own limits instead")
		}
	}
}

// checkTopics reports base topics, and tasmota services' topics, that
// overlap Hearth's prefix, Home Assistant's discovery prefix or each
// other: a bridge under Hearth's prefix
// would take Hearth's own topics for commands, two bridges on one base
// topic cannot be told apart, and a bridge's account may publish under
// its base topic (a tasmota service's account on its stat and tele
// topics), so an overlap would let it publish another's commands.
// Tasmota services are not checked against each other: their topics
// follow the same FullTopic by design, and the broker's stamp tells their
// reports apart.
func (c *Config) checkTopics(w *walker) {
	type root struct {
		key, topic string   // the key and the value it names
		filters    []string // the topics it reserves
		tasmota    bool
	}
	var roots []root
	if !w.reported["prefix"] {
		roots = append(roots, root{key: "prefix", topic: c.Prefix, filters: []string{c.Prefix + "/#"}})
	}
	if p := c.HomeAssistant.DiscoveryPrefix; p != "" && !w.reported["homeassistant.discovery_prefix"] {
		// Whoever writes a discovery config can make Home Assistant's
		// own principal command a device (see acl.New).
		roots = append(roots, root{key: "homeassistant.discovery_prefix", topic: p, filters: []string{p + "/#"}})
	}
	overlaps := func(filters []string, tasmota bool) (root, bool) {
		for _, r := range roots {
			if tasmota && r.tasmota {
				continue
			}
			for _, f := range filters {
				for _, g := range r.filters {
					if topic.Overlap(f, g) { // one is the other or under it
						return r, true
					}
				}
			}
		}
		return root{}, false
	}
	for _, s := range c.Services {
		skey := join("services", s.Name)
		r := root{key: join(skey, "base_topic"), topic: s.BaseTopic, filters: []string{s.BaseTopic + "/#"}}
		what := "base topic"
		if s.Protocol == ProtocolTasmota {
			r = root{key: join(skey, "full_topic"), topic: s.FullTopic, filters: tasmotaFilters(s.FullTopic), tasmota: true}
			what = "full topic"
		}
		if w.reported[r.key] || w.reported[skey] || r.topic == "" {
			continue
		}
		_, line := w.at(r.key, skey)
		if _, explicit := w.lines[r.key]; !explicit {
			what = "default " + what
		}
		if o, ok := overlaps(r.filters, r.tasmota); ok {
			w.reportf(line, r.key, "%s %q overlaps %s %q; Hearth and each bridge need topics of their own", what, r.topic, o.key, o.topic)
		}
		roots = append(roots, r)
	}
}

// checkDevices resolves each device's service, address and TTL, and
// reports services that do not exist and addresses used twice on one
// service.
func (c *Config) checkDevices(w *walker) {
	// names are the services that take commands: the ones a device may
	// name.
	var names []string
	for _, s := range c.Services {
		if s.Commands() {
			names = append(names, s.Name)
		}
	}
	type owner struct {
		key  string
		line int
	}
	addresses := map[[2]string]owner{}
	for i := range c.Devices {
		d := &c.Devices[i]
		key := join("devices", d.ID)
		skey := join(key, "service")
		s, found := c.Service(d.Service)
		switch {
		case w.reported[skey] || w.reported[key]:
		case found && s.Notifies():
			w.reportf(w.lines[skey], skey, "service %q is a notify service (protocol %s): it receives notifications, not commands, so no device can be reached through it", d.Service, s.Protocol)
		case found && !s.Commands():
			w.reportf(w.lines[skey], skey, "service %q only reports its status (protocol %s); Hearth sends it no commands, so no device can be reached through it", d.Service, s.Protocol)
		case d.Service == "" && len(names) == 1:
			d.Service = names[0]
		case d.Service == "" && len(names) == 0 && len(c.Services) > 0:
			w.reportf(w.lines[key], skey, "missing, and no configured service takes commands (a status_topic or webhook service reaches no device)")
		case d.Service == "" && len(names) == 0:
			w.reportf(w.lines[key], skey, "missing, and no services are configured")
		case d.Service == "":
			w.reportf(w.lines[key], skey, "missing; with more than one service, name one of: %s", strings.Join(names, ", "))
		case len(names) == 0:
			w.reportf(w.lines[skey], skey, "no service %q (no services are configured)", d.Service)
		case !found:
			w.reportf(w.lines[skey], skey, "no service %q (services: %s)", d.Service, strings.Join(names, ", "))
		}
		if d.Address == "" {
			d.Address = d.ID
		}
		if d.TTL == 0 && d.Sleep.Sleepy {
			d.TTL = d.Sleep.WakeInterval // a command is worth one wake
		}
		if d.TTL == 0 {
			d.TTL = c.Defaults.TTL
		}
		if d.Service == "" {
			continue
		}
		c.resolveAttemptTimeout(w, d, key)
		akey, line := w.at(join(key, "address"), key)
		if w.reported[akey] {
			continue
		}
		if s, _ := c.Service(d.Service); s.Protocol == ProtocolZigbee2MQTT && endsInNumber(d.Address) {
			w.reportf(line, join(key, "address"), "%q ends in '/' and a number, which Zigbee2MQTT does not allow in a friendly_name", d.Address)
			continue
		} else if s.Protocol == ProtocolZigbee2MQTT && strings.Count(d.Address, "/") >= MaxZigbeeNameLevels {
			w.reportf(line, join(key, "address"), "%q has more than %d topic levels: the ACL that keeps everyone but Hearth off a device's set and get topics covers friendly names of up to %d levels", d.Address, MaxZigbeeNameLevels, MaxZigbeeNameLevels)
			continue
		} else if s.Protocol == ProtocolZigbee2MQTT && hasCommandLevel(d.Address) {
			w.reportf(line, join(key, "address"), "%q has a level \"set\" or \"get\", which Zigbee2MQTT reads as a command topic", d.Address)
			continue
		}
		k := [2]string{d.Service, d.Address}
		if s, _ := c.Service(d.Service); s.Protocol == ProtocolZWaveJS {
			node, err := zwaveAddress(d.Address, s.NodeNames)
			if err != nil {
				w.reportf(line, join(key, "address"), "%s", err)
				continue
			}
			k[1] = node
		}
		if s, _ := c.Service(d.Service); s.Protocol == ProtocolHTTP {
			if err := httpAddress(d.Address); err != nil {
				w.reportf(line, join(key, "address"), "%s", err)
				continue
			}
		}
		if s, _ := c.Service(d.Service); s.Protocol == ProtocolShelly {
			comp, err := shellyAddress(d.Address, d.Class)
			if err != nil {
				w.reportf(line, join(key, "address"), "%s", err)
				continue
			}
			k[1] = comp
		}
		if s, _ := c.Service(d.Service); s.Protocol == ProtocolTasmota && !w.reported[join(key, "class")] {
			relay, err := tasmotaAddress(d.Address, d.Class)
			if err != nil {
				w.reportf(line, join(key, "address"), "%s", err)
				continue
			}
			k[1] = relay
		}
		if s, _ := c.Service(d.Service); s.Protocol == ProtocolHomie {
			prop, err := homieAddress(d.Address, d.Class)
			if err != nil {
				w.reportf(line, join(key, "address"), "%s", err)
				continue
			}
			k[1] = prop
		}
		if s, _ := c.Service(d.Service); s.Protocol == ProtocolESPHome {
			if err := esphomeAddress(d.Address, d.Class); err != nil {
				w.reportf(line, join(key, "address"), "%s", err)
				continue
			}
		}
		if o, taken := addresses[k]; taken {
			w.reportf(line, join(key, "address"), "%q is already the address of %s (line %d) on service %s", d.Address, o.key, o.line, d.Service)
			continue
		}
		addresses[k] = owner{key, w.lines[key]}
	}
}

// resolveAttemptTimeout sets d's attempt timeout (key is devices.<id>):
// its own attempt_timeout, else its service's retry.attempt_timeout when
// the file gives one, else the longer of its class's default
// (ClassAttemptTimeouts) and its protocol's default. One
// longer than the device's TTL is an error: the TTL would cut every
// attempt short. The service's breaker.probe_timeout grows to it when the
// file gives none, as it does to the service's attempt timeout; one given
// shorter is an error, since a probe to the device would count as failed
// before the device had the time to answer.
func (c *Config) resolveAttemptTimeout(w *walker, d *Device, key string) {
	s, found := c.Service(d.Service)
	if !found || !s.Commands() {
		return
	}
	if w.lines[join(key, "read_back")] == 0 {
		d.ReadBack = s.Retry.ReadBack
	}
	tkey := join(key, "attempt_timeout")
	own := w.lines[tkey] != 0
	switch {
	case w.reported[tkey]:
		return
	case own && d.AttemptTimeout > d.TTL:
		w.reportf(w.lines[tkey], tkey, "%s is longer than the device's ttl %s: the TTL would end every attempt before its timeout", fmtDuration(d.AttemptTimeout), fmtDuration(d.TTL))
		return
	case !own && w.lines[join(join(join("services", s.Name), "retry"), "attempt_timeout")] != 0:
		d.AttemptTimeout = s.Retry.AttemptTimeout // the operator's word for the service's devices
	case !own:
		d.AttemptTimeout = max(ClassAttemptTimeouts[d.Class], s.Retry.AttemptTimeout)
	}
	for i := range c.Services {
		svc := &c.Services[i]
		if svc.Name != s.Name || svc.Breaker.ProbeTimeout >= d.AttemptTimeout {
			continue
		}
		pkey := join(join(join("services", svc.Name), "breaker"), "probe_timeout")
		if w.lines[pkey] == 0 {
			svc.Breaker.ProbeTimeout = d.AttemptTimeout
			continue
		}
		if w.reported[pkey] {
			continue
		}
		from := fmt.Sprintf("%s, line %d", tkey, w.lines[tkey])
		if !own {
			from = fmt.Sprintf("the default of class %s", d.Class)
		}
		w.reportf(w.lines[pkey], pkey, "probe_timeout %s is less than the attempt timeout %s of device %s (%s): a probe to it would count as failed before the device had the time to answer", fmtDuration(svc.Breaker.ProbeTimeout), fmtDuration(d.AttemptTimeout), d.ID, from)
	}
}

// MaxZigbeeNameLevels is the most topic levels of a Zigbee2MQTT device's
// address (its friendly_name): zigbee2mqtt.MaxNameLevels, the depth its
// command filters enumerate (config imports no protocol; a test in
// cmd/hearthd keeps the two equal).
const MaxZigbeeNameLevels = 4

// hasCommandLevel reports whether a level after the first of a friendly
// name is "set" or "get".
func hasCommandLevel(name string) bool {
	levels := strings.Split(name, "/")
	for _, l := range levels[1:] {
		if l == "set" || l == "get" {
			return true
		}
	}
	return false
}

// endsInNumber reports whether the last of several topic levels is a
// number, as in "kitchen/2".
func endsInNumber(topic string) bool {
	i := strings.LastIndexByte(topic, '/')
	if i < 0 {
		return false
	}
	last := topic[i+1:]
	return last != "" && strings.Trim(last, "0123456789") == ""
}

// checkBackoff reports a cap below the base of the backoff at key.
func (w *walker) checkBackoff(key string, b retry.Backoff) {
	if b.Base <= 0 || b.Cap <= 0 || b.Cap >= b.Base {
		return
	}
	ckey, bkey := join(key, "cap"), join(key, "base")
	if w.reported[ckey] || w.reported[bkey] {
		return
	}
	if line, ok := w.lines[ckey]; ok {
		w.reportf(line, ckey, "%s is less than base %s", fmtDuration(b.Cap), fmtDuration(b.Base))
		return
	}
	k, line := w.at(bkey, key)
	w.reportf(line, k, "%s is more than cap %s", fmtDuration(b.Base), fmtDuration(b.Cap))
}

// checkAttempts reports a max_attempts beyond MaxAttempts without
// allow_more_attempts, at key, s's retry section.
func (w *walker) checkAttempts(key string, s Service) {
	r := s.Retry
	k := join(key, "max_attempts")
	if r.MaxAttempts <= MaxAttempts || r.AllowMoreAttempts || w.reported[k] {
		return
	}
	why := "the radio layer already retries"
	if s.Notifies() {
		why = "a few spaced tries within the notification's TTL ride out a short outage"
	}
	w.reportf(w.lines[k], k, "must be from 1 to %d, got %d; %s (set allow_more_attempts: true to go beyond)", MaxAttempts, r.MaxAttempts, why)
}
