package config

import (
	"strings"
	"time"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/retry"
)

// ProtocolZigbee2MQTT is the protocol of a service that is a Zigbee2MQTT
// bridge, reached over MQTT under its base topic.
const ProtocolZigbee2MQTT = "zigbee2mqtt"

// ProtocolZWaveJS is the protocol of a service that is Z-Wave JS UI's MQTT
// gateway, reached over MQTT under its prefix (base_topic) and, for its
// API, its MQTT name (gateway_name). A device's address on it is the node
// as the gateway names it in topics, "<node>" or "<location>/<node>" (raw
// names are sanitised as the gateway does), with "/<endpoint>" for a
// Multi Channel endpoint beyond 0 (see Service.NodeNames).
const ProtocolZWaveJS = "zwavejs"

// ProtocolStatusTopic is the protocol of a service that Hearth does not
// command but whose health it watches: the service (a cloud presence
// service, say) publishes OnlinePayload or OfflinePayload on StatusTopic,
// and its breaker follows. Local automations name such a service in
// fallback_for and requires. No device may name it as its service.
const ProtocolStatusTopic = "status_topic"

// ProtocolWebhook is the protocol of a notify service reached over HTTP
// (ntfy, Gotify, a Home Assistant webhook): Hearth POSTs every
// notification it publishes on <prefix>/notifications, as the same JSON,
// to its URL, through its retry policy and breaker. No device may name it
// as its service.
const ProtocolWebhook = "webhook"

// Limits of the schema.
const (
	// MaxAttempts is the most attempts a service's retry policy may ask
	// for unless it sets allow_more_attempts. Zigbee, Z-Wave and Matter
	// already retry at the radio layer, so Hearth adds few attempts of its
	// own.
	MaxAttempts = 3
	// MaxAllowedAttempts is the most attempts with allow_more_attempts.
	MaxAllowedAttempts = 100
	// MaxKeepAlive is the longest MQTT keep alive: the protocol carries it
	// as a 16-bit number of seconds.
	MaxKeepAlive = 65535 * time.Second
	// MaxInflight is the largest mqtt.max_inflight: MQTT 5 carries the
	// Receive Maximum in 16 bits.
	MaxInflight = 65535
	// MaxSessionExpiry is the longest mqtt.session_expiry: MQTT 5 carries
	// the Session Expiry Interval as a 32-bit number of seconds, whose
	// largest value, 0xFFFFFFFF, means "never expires" (MQTT 5.0
	// §3.1.2.11.2), which Hearth never asks for.
	MaxSessionExpiry = (1<<32 - 2) * time.Second
)

// Config is Hearth's whole configuration. Parse fills what the file leaves
// out with the default documented on each field.
type Config struct {
	// Prefix is the topic prefix of Hearth's MQTT contract (<prefix>/<device>/set
	// and so on): one or more topic levels without wildcards. Default "hearth".
	Prefix string
	// DataDir is the directory of the bbolt store. Default "data".
	DataDir string
	// Defaults hold values that devices may override.
	Defaults Defaults
	// MQTT is the connection to the broker.
	MQTT MQTT
	// HTTP is the HTTP API.
	HTTP HTTP
	// HomeAssistant is Home Assistant MQTT discovery.
	HomeAssistant HomeAssistant
	// Services are the bridges and services that reach devices, in file
	// order. Default none.
	Services []Service
	// Devices are the configured devices, in file order. Default none.
	Devices []Device
	// Automations are the local automations, in file order. Default none.
	Automations []Automation
	// Principals are who may command what, in file order. Default none,
	// and then ApplyCredentials adds DefaultPrincipal, which may command
	// everything, unless both MQTT and HTTP allow anonymous clients.
	Principals []Principal
	// GeneratedPrincipal is set by ApplyCredentials when the last of
	// Principals is the generated DefaultPrincipal rather than one of the
	// file's. Parse leaves it false.
	GeneratedPrincipal bool
}

// Defaults hold values that devices may override.
type Defaults struct {
	// TTL is how long a command stays worth doing when neither the command
	// nor its device says: positive, at most devices.MaxTTL. Default 60s.
	TTL time.Duration
}

// MQTT is the connection to the broker: the embedded one, or an external
// one when URL is set.
type MQTT struct {
	// Listen is the embedded broker's listen address, host:port. Unused
	// when URL is set. Default "127.0.0.1:1883".
	Listen string
	// URL is an external broker (tcp://, ssl://, mqtt://, mqtts://; MQTT over
	// WebSocket is not supported yet). When it is set no
	// embedded broker runs. Default "": run the embedded broker.
	URL string
	// Username and Password are the credentials Hearth connects with.
	// Default "": none.
	Username string
	Password string
	// ClientID is Hearth's MQTT client ID. Default "": the daemon chooses
	// one ("hearth-<host name>-<hash of the data directory>", unique per
	// instance), since config does not read the host.
	ClientID string
	// KeepAlive is the MQTT keep alive: whole seconds, at most MaxKeepAlive.
	// Default 30s.
	KeepAlive time.Duration
	// SessionExpiry is how long an external broker (URL) keeps Hearth's
	// MQTT session after a connection ends: the command subscription and
	// the commands published to it meanwhile, delivered when Hearth is
	// back (a restart of hearthd, of the broker with persistence on, a
	// network cut). Whole seconds, at most MaxSessionExpiry; 0 starts a
	// clean session at every connect, and whatever is published while
	// Hearth is away is lost. Unused with the embedded broker, which
	// lives and dies with hearthd. Default 5m.
	SessionExpiry time.Duration
	// TLS configures the connection to an ssl:// or mqtts:// URL.
	TLS TLS
	// MQTTS is the embedded broker's MQTT over TLS listener, beside
	// Listen. Embedded broker only. Default none.
	MQTTS MQTTS
	// Reconnect spaces Hearth's own connects and reconnects. Default
	// exponential backoff with full jitter, base 1s, multiplier 2, cap 60s.
	Reconnect retry.Backoff
	// RepublishRate is how many retained messages per second (a device's
	// state or availability) Hearth publishes again after each (re)connect,
	// never assuming the broker kept them: paced, so that a hub full of
	// devices does not add a burst to the crowd reconnecting after a power
	// cut. At least 1. Default 100.
	RepublishRate int

	// Users are the embedded broker's clients that command nothing
	// through Hearth and are not a configured service (a dashboard that
	// only reads, a script that publishes on its own topics), by
	// username. Embedded broker only. Default none.
	Users []BrokerUser

	// AllowAnonymous makes the embedded broker admit every client,
	// verifying nobody and applying no ACL: the behaviour before
	// authentication was on by default. An error with principals, with an
	// external broker (URL), and with a Listen that is not loopback
	// unless AllowAnonymousBeyondLoopback is set too. Default false: the
	// broker admits only Hearth, the services' accounts, the principals
	// and Users.
	AllowAnonymous bool
	// AllowAnonymousBeyondLoopback says that AllowAnonymous on a Listen
	// address other than loopback (127.0.0.0/8, ::1, localhost) is
	// wanted. Only with AllowAnonymous. Default false.
	AllowAnonymousBeyondLoopback bool

	// The embedded broker's limits, which guard it against a flood of
	// reconnects after a power cut. They apply only when URL is empty; set
	// to other than their defaults together with URL they are an error.

	// MaxConnectRate is how many CONNECTs a second the embedded broker
	// accepts, a token bucket; a CONNECT beyond it is refused as "server
	// busy", so that the client backs off and retries. More than 0.
	// Default 100.
	MaxConnectRate float64
	// ConnectBurst is the token bucket's size: how many CONNECTs the
	// embedded broker accepts at once after a quiet spell. At least 1; no
	// second accepts more than MaxConnectRate (rounded up) + ConnectBurst −
	// 1. Default 10, so that the few clients of a hub that start together
	// (Hearth, its bridges, Home Assistant) are not refused: 1 would keep
	// every second within MaxConnectRate but refuse any two CONNECTs less
	// than 1/MaxConnectRate apart.
	ConnectBurst int
	// MaxConnections is how many clients may be connected to the embedded
	// broker at once; a CONNECT beyond it is refused as "server busy". At
	// least 1. Default 0: no limit.
	MaxConnections int
	// MaxInflight is the embedded broker's receive maximum per client: how
	// many QoS 1 and 2 publishes a client may have in flight to it (MQTT 5
	// Receive Maximum). 1 to the constant MaxInflight. Default 1024.
	MaxInflight int

	// The embedded broker's limits before authentication (key, default):
	// ConnectTimeout (connect_timeout, 5s) is how long a new connection
	// has to send its whole CONNECT; MaxUnauthenticated
	// (max_unauthenticated, 64) how many connections may be open and not
	// yet admitted, a quarter of them from one address; MaxClientKeepAlive
	// (max_keepalive, 5m, whole seconds) the longest keep alive a client
	// is granted, 0 or more being cut to it; LoginFailuresPerMinute
	// (login_failures_per_minute, 10) each address's budget of refused
	// logins, after which its CONNECTs are refused unchecked until the
	// budget refills. See broker.Options for what each does.
	ConnectTimeout         time.Duration
	MaxUnauthenticated     int
	MaxClientKeepAlive     time.Duration
	LoginFailuresPerMinute float64
}

// TLS configures the connection to a TLS broker URL. File paths are read by
// the daemon, not by config. Every zero value means "as Go's crypto/tls
// does by default": the system roots and no client certificate.
type TLS struct {
	// CAFile is a PEM file of roots to trust instead of the system's.
	CAFile string
	// CertFile and KeyFile are a PEM client certificate and its key; they
	// are given together or not at all.
	CertFile string
	KeyFile  string
	// InsecureSkipVerify turns off verification of the broker's
	// certificate. For testing only.
	InsecureSkipVerify bool
}

// MQTTS is an MQTT over TLS listener of the embedded broker (8883 by
// IANA's registration of secure-mqtt), TLS 1.2 at least.
type MQTTS struct {
	// Listen is its address, host:port. Default "": no such listener.
	Listen string
	// Cert is the server certificate it presents; required with Listen.
	Cert ServerCert
}

// ServerCert names a server's PEM certificate (chain, leaf first) and its
// PEM private key; both are given or neither. The daemon reads them at
// start and again on SIGHUP.
type ServerCert struct {
	CertFile string
	KeyFile  string
}

// HomeAssistant is how Hearth shows itself to Home Assistant.
type HomeAssistant struct {
	// Discovery announces every device as the Home Assistant entity of
	// its class, with a command event entity, and each service's breaker
	// as a binary_sensor (device class problem), by MQTT discovery,
	// retained, again whenever Home Assistant's birth message says
	// online; false removes the entities an earlier run announced
	// (package homeassistant). Default true.
	Discovery bool
	// DiscoveryPrefix is Home Assistant's discovery prefix, whose
	// <prefix>/status carries its birth message. Default "homeassistant".
	DiscoveryPrefix string
}

// HTTP is the HTTP API.
type HTTP struct {
	// Listen is the listen address, host:port. Default "127.0.0.1:8080".
	Listen string
	// AllowAnonymous opens the API (every path under /api/) to requests
	// without a bearer token; /healthz, /readyz and /metrics are open
	// either way. An error with principals, and with a Listen that is not
	// loopback unless AllowAnonymousBeyondLoopback is set too. Default
	// false: every /api/ request needs a principal's http_token (the
	// generated principal "default" when the file names none).
	AllowAnonymous bool
	// AllowAnonymousBeyondLoopback says that AllowAnonymous on a Listen
	// address other than loopback is wanted. Only with AllowAnonymous.
	// Default false.
	AllowAnonymousBeyondLoopback bool
	// TLS, when its files are given, makes the API HTTPS instead of HTTP
	// (TLS 1.2 at least) on Listen. Default none: plain HTTP.
	TLS ServerCert
}

// Service is one bridge or service that reaches devices.
type Service struct {
	// Name is the service's name in the file: lower-case letters, digits,
	// '_' and '-'.
	Name string
	// Protocol is how Hearth talks to the service. Required:
	// ProtocolZigbee2MQTT, ProtocolZWaveJS, ProtocolStatusTopic or
	// ProtocolWebhook.
	Protocol string
	// BaseTopic is the bridge's MQTT base topic. Default per protocol:
	// "zigbee2mqtt" for zigbee2mqtt and "zwave" for zwavejs, the bridges'
	// own defaults; none for status_topic and webhook, which take no
	// base_topic.
	BaseTopic string
	// GatewayName is a zwavejs gateway's MQTT name, the <name> of its
	// <base_topic>/_CLIENTS/ZWAVE_GATEWAY-<name> topics (its status and
	// API): one topic level. zwavejs only. Default "zwave-js-ui", Z-Wave
	// JS UI's default.
	GatewayName string
	// NodeNames says a zwavejs gateway names its nodes in topics (its
	// "Use nodes name instead of numeric nodeIDs"): a device address
	// <node>/<n> with n a number is then endpoint n of that node
	// ("kitchen_double/2"). false (the default) reads it as node ID n at
	// location <node> ("bed/7"), as before endpoints could be addressed;
	// "12/2" (both numbers) and <location>/<node>/<endpoint> are an
	// endpoint either way. zwavejs only.
	NodeNames bool
	// FullTopic is the FullTopic of a tasmota service's devices (their
	// Tasmota FullTopic setting), with %prefix% and %topic% as whole
	// levels. tasmota only. Default DefaultTasmotaFullTopic.
	FullTopic string
	// StatusTopic is the MQTT topic (no wildcards) on which a status_topic
	// service says whether it is up. Required for status_topic, and only
	// for it.
	StatusTopic string
	// OnlinePayload and OfflinePayload are the payloads on StatusTopic that
	// mean up and down. status_topic only. Defaults "online" and "offline".
	OnlinePayload  string
	OfflinePayload string
	// URL is where a webhook service's notifications are POSTed: an
	// absolute http:// or https:// URL with a host. Required for webhook,
	// and only for it. It may hold a token (Gotify's ?token=); Hearth
	// leaves its query and user info out of logs.
	URL string
	// Headers are sent with every POST of a webhook service, such as
	// Authorization: Bearer <token>; names are HTTP tokens, values hold
	// no control characters but tab. webhook only. Default none.
	Headers map[string]string
	// Timeout bounds one POST of a webhook service; its Retry's
	// AttemptTimeout is set to it. webhook only. Default 10s.
	// For an http service (ProtocolHTTP, which also takes URL, its base
	// URL, and Headers) it bounds each request. Default 5s.
	Timeout time.Duration
	// Method is the method an http service's commands are sent with:
	// PUT, POST or PATCH, upper case. http only. Default PUT.
	Method string
	// AllowInsecure lets an http service's URL be plain http:// to a
	// host that is not loopback. http only. Default false.
	AllowInsecure bool
	// ReadTimeout is how long the fresh read of a safety-critical
	// device's state before an attempt (a /get for Zigbee2MQTT) waits for
	// the device's report; without one by then a risky action (unlock,
	// open a garage door) fails state_unknown with nothing sent. Services
	// that take commands only. Default 5s.
	ReadTimeout time.Duration
	// MQTTUsername and MQTTPassword are the account the service (the
	// bridge itself, or whoever publishes a status_topic) connects to the
	// broker with; Hearth's broker admits it, and an ACL binds the
	// service's topics to it. MQTT services only (every protocol but
	// webhook: Service.UsesMQTT). Default username: the service's name; default
	// password: the one generated into the credentials file
	// (<data_dir>/credentials.yaml), which ApplyCredentials fills in. A
	// password in the config file wins over the file's.
	MQTTUsername string
	MQTTPassword string
	// ClientID, when set, is the MQTT client ID the service connects with,
	// reserved to its account so that nobody else can take the bridge's
	// session. MQTT services only. Default "" (none reserved), but for
	// zwavejs "ZWAVE_GATEWAY-<gateway_name>", the client ID Z-Wave JS UI
	// uses.
	ClientID string
	// Retry is how Hearth retries commands sent through the service, or a
	// webhook service's notifications. A status_topic service takes no
	// commands and no retry section: its Retry is the zero value.
	Retry Retry
	// Breaker is the service's circuit breaker.
	Breaker Breaker
}

// Breaker is a service's circuit breaker (see package breaker). Defaults:
// enabled true, failure_threshold 5, failure_ratio 0.5 over window 30s with min_calls
// 10, open_for 30s growing ×2 per trip (equal jitter) up to max_open_for
// 5m, max_probes 1, probe_timeout 10s, successes_to_close 1, hold false.
type Breaker struct {
	// Enabled turns the breaker on. Default true.
	Enabled bool
	// FailureThreshold: consecutive failures that trip it; at least 1.
	FailureThreshold int
	// FailureRatio: the share of failures within Window that trips it,
	// once MinCalls outcomes fall within; more than 0, at most 1.
	FailureRatio float64
	Window       time.Duration
	MinCalls     int
	// OpenFor is how long the first trip keeps it open; each further
	// trip without a close in between doubles it, with equal jitter (a
	// random time in [t/2, t]), up to MaxOpenFor.
	OpenFor    time.Duration
	MaxOpenFor time.Duration
	// MaxProbes: probes a half-open breaker lets out at once; at least 1.
	MaxProbes int
	// ProbeTimeout: a probe without an outcome by then counts as a
	// failure.
	ProbeTimeout time.Duration
	// SuccessesToClose: probe successes that close it; at least 1.
	SuccessesToClose int
	// Hold makes commands wait, reported queued, while the breaker is
	// open, until a probe succeeds within their TTL; without it they end
	// failed/breaker_open at once.
	Hold bool
}

// OpenBackoff returns the growth of the breaker's open duration: OpenFor
// doubling per trip up to MaxOpenFor, with equal jitter so that a floor of
// half the duration always holds.
func (b Breaker) OpenBackoff() retry.Backoff {
	return retry.Backoff{Strategy: retry.Exponential, Base: b.OpenFor, Multiplier: 2, Cap: b.MaxOpenFor, Jitter: retry.Equal}
}

// Retry is a service's retry policy: retry.Policy's fields, the switch
// that allows more than MaxAttempts, and the service's retry budget.
//
// Defaults per protocol (zigbee2mqtt): max_attempts 2, because Zigbee
// retries at the radio layer; attempt_timeout 5s; exponential backoff with
// full jitter, base 1s, multiplier 2, cap 10s; no deadline of its own (the
// command's TTL); retry_on [transient]; never_retry []; max_retry_after 1h.
// For webhook: max_attempts 3; attempt_timeout is the service's timeout
// (10s); exponential backoff with full jitter, base 2s, multiplier 2, cap
// 60s; the rest as for zigbee2mqtt, so that 408, 425, 429 and 5xx but 501
// and 505 are retried, honouring Retry-After.
type Retry struct {
	retry.Policy
	// AllowMoreAttempts lets MaxAttempts go beyond MaxAttempts (up to
	// MaxAllowedAttempts); the daemon logs a warning at start when it is
	// used. Default false.
	AllowMoreAttempts bool
	// Budget limits the service's retries.
	Budget Budget
	// ReadBack makes an attempt that no report confirmed within its
	// timeout read the device's state (a /get for Zigbee2MQTT) before
	// the policy decides on a resend, for every device of the service
	// that does not say otherwise (devices.<id>.read_back): for a bridge
	// whose devices do not report after a set (Zigbee2MQTT with
	// optimistic: false). Default false.
	ReadBack bool
}

// Budget is a service's retry budget (see retry.Budget): within any
// Window, retries ≤ max(MinRetries, Ratio·first attempts).
type Budget struct {
	// Ratio is the fraction of first attempts that may be retried:
	// greater than 0, at most 1. Default 0.2.
	Ratio float64
	// MinRetries is the floor of retries per window: at least 1. Default 3.
	MinRetries int
	// Window is the sliding window the counts cover. Default 10s.
	Window time.Duration
}

// Device is one configured device.
type Device struct {
	devices.Device
	// TTL is the device's default command TTL: its own ttl from the file,
	// or else its wake_interval when it is sleepy, or else Defaults.TTL.
	TTL time.Duration
	// AttemptTimeout is how long one attempt at the device waits for the
	// report that confirms it: its own attempt_timeout from the file, or
	// else its service's retry.attempt_timeout if the file gives one, or
	// else the longer of its class's default (ClassAttemptTimeouts: a
	// cover's travel, a lock's motor) and its protocol's default (5s).
	// The command's TTL still bounds every wait.
	AttemptTimeout time.Duration
	// ReadBack: an attempt that went unconfirmed reads the device's state
	// before a resend: its own read_back from the file, or else its
	// service's retry.read_back. Default false.
	ReadBack bool
}

// ClassAttemptTimeouts are the attempt timeouts of the classes whose
// device reports its new state only once a motor has run, when the file
// gives the device none: a cover 30 s (a roller blind travels 10–30 s, a
// garage door 12–20 s, and Zigbee2MQTT publishes the position when the
// motor stops), a lock 15 s (a motor lock turns in 2–5 s, but a jam
// retries before it reports, and a Z-Wave lock answers after its
// supervision report), a valve 20 s (a motorized ball valve turns in
// 5–15 s). A class default replaces only Hearth's own protocol default:
// a retry.attempt_timeout written for the service is the operator's word
// for all its devices (and keeps a file meaning what it meant before
// class defaults), and a device's own attempt_timeout wins over both.
// Lights, switches and the others take the service's.
var ClassAttemptTimeouts = map[devices.Class]time.Duration{
	devices.Cover: 30 * time.Second,
	devices.Lock:  15 * time.Second,
	devices.Valve: 20 * time.Second,
}

// ZWaveClientIDPrefix is the start of the MQTT client ID of Z-Wave JS
// UI's gateway, "ZWAVE_GATEWAY-<name>", as the gateway names itself (and
// its _CLIENTS topics).
const ZWaveClientIDPrefix = "ZWAVE_GATEWAY-"

// DefaultAwakeWindow is a sleepy device's awake_window when the file
// gives none: 10 s, about how long a Z-Wave node listens after its
// wake-up notification before it is sent back to sleep.
const DefaultAwakeWindow = 10 * time.Second

// Default returns the configuration of an empty file: every default, no
// services and no devices.
func Default() *Config {
	return &Config{
		Prefix:   "hearth",
		DataDir:  "data",
		Defaults: Defaults{TTL: 60 * time.Second},
		MQTT: MQTT{
			Listen:         "127.0.0.1:1883",
			KeepAlive:      30 * time.Second,
			SessionExpiry:  5 * time.Minute,
			Reconnect:      retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 60 * time.Second},
			RepublishRate:  100,
			MaxConnectRate: 100,
			ConnectBurst:   10,
			MaxInflight:    1024,

			ConnectTimeout:         5 * time.Second,
			MaxUnauthenticated:     64,
			MaxClientKeepAlive:     5 * time.Minute,
			LoginFailuresPerMinute: 10,
		},
		HTTP:          HTTP{Listen: "127.0.0.1:8080"},
		HomeAssistant: HomeAssistant{Discovery: true, DiscoveryPrefix: "homeassistant"},
	}
}

// protocols holds, per known protocol, a service with that protocol's
// defaults.
var protocols = map[string]Service{
	ProtocolZigbee2MQTT: {
		BaseTopic:   "zigbee2mqtt",
		ReadTimeout: 5 * time.Second,
		Retry: Retry{
			Policy: retry.Policy{
				MaxAttempts:    2,
				AttemptTimeout: 5 * time.Second,
				Backoff:        retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 10 * time.Second},
				MaxRetryAfter:  retry.DefaultMaxRetryAfter,
			},
			Budget: Budget{Ratio: retry.DefaultBudgetRatio, MinRetries: retry.DefaultBudgetMinRetries, Window: retry.DefaultBudgetWindow},
		},
		Breaker: defaultBreaker,
	},
	// Z-Wave routes and retransmits each frame and Z-Wave JS holds
	// commands for sleeping nodes: 2 attempts, as Zigbee.
	ProtocolZWaveJS: {
		BaseTopic:   "zwave",
		GatewayName: "zwave-js-ui",
		ReadTimeout: 5 * time.Second,
		Retry: Retry{
			Policy: retry.Policy{
				MaxAttempts:    2,
				AttemptTimeout: 5 * time.Second,
				Backoff:        retry.Backoff{Base: time.Second, Multiplier: 2, Cap: 10 * time.Second},
				MaxRetryAfter:  retry.DefaultMaxRetryAfter,
			},
			Budget: Budget{Ratio: retry.DefaultBudgetRatio, MinRetries: retry.DefaultBudgetMinRetries, Window: retry.DefaultBudgetWindow},
		},
		Breaker: defaultBreaker,
	},
	// A status_topic service has a breaker like any other and no retry
	// policy: Hearth sends it nothing.
	ProtocolStatusTopic: {
		OnlinePayload:  "online",
		OfflinePayload: "offline",
		Breaker:        defaultBreaker,
	},
	// A notify service: no base topic, and the retry policy of an HTTP
	// service that may ask for time with 429 or 503 and Retry-After.
	ProtocolWebhook: {
		Timeout: 10 * time.Second,
		Retry: Retry{
			Policy: retry.Policy{
				MaxAttempts:   3,
				Backoff:       retry.Backoff{Base: 2 * time.Second, Multiplier: 2, Cap: 60 * time.Second},
				MaxRetryAfter: retry.DefaultMaxRetryAfter,
			},
			Budget: Budget{Ratio: retry.DefaultBudgetRatio, MinRetries: retry.DefaultBudgetMinRetries, Window: retry.DefaultBudgetWindow},
		},
		Breaker: defaultBreaker,
	},
}

// defaultBreaker holds every protocol's breaker defaults, package breaker's.
var defaultBreaker = Breaker{
	FailureThreshold: breaker.DefaultFailureThreshold,
	FailureRatio:     breaker.DefaultFailureRatio,
	Window:           breaker.DefaultWindow,
	MinCalls:         breaker.DefaultMinCalls,
	OpenFor:          breaker.DefaultOpenFor,
	MaxOpenFor:       breaker.DefaultMaxOpenFor,
	MaxProbes:        breaker.DefaultMaxProbes,
	ProbeTimeout:     breaker.DefaultProbeTimeout,
	SuccessesToClose: breaker.DefaultSuccessesToClose,
}

// protocolNames lists the known protocols, sorted, for error messages.
var protocolNames = []string{ProtocolStatusTopic, ProtocolWebhook, ProtocolZigbee2MQTT, ProtocolZWaveJS}

// protocolsWhere lists the known protocols (protocolNames) of whose
// services ok holds, joined for an error message: "shelly, tasmota, ...".
func protocolsWhere(ok func(Service) bool) string {
	var out []string
	for _, p := range protocolNames {
		if ok(Service{Protocol: p}) {
			out = append(out, p)
		}
	}
	return strings.Join(out, ", ")
}

// Commands reports whether Hearth sends commands through s: whether
// devices may name it as their service.
func (s Service) Commands() bool {
	return s.Protocol != ProtocolStatusTopic && s.Protocol != ProtocolWebhook
}

// UsesMQTT reports whether s reaches Hearth over MQTT and so has an MQTT
// account (MQTTUsername, MQTTPassword): every protocol but webhook and
// http.
func (s Service) UsesMQTT() bool {
	return s.Protocol != "" && s.Protocol != ProtocolWebhook && s.Protocol != ProtocolHTTP
}

// Notifies reports whether s is a notify service, which receives every
// notification (protocol webhook).
func (s Service) Notifies() bool { return s.Protocol == ProtocolWebhook }

// withDefaults returns s with every zero field set to its protocol's
// default. An unknown protocol leaves s as it is.
func (s Service) withDefaults() Service {
	d, ok := protocols[s.Protocol]
	if !ok {
		return s
	}
	b, db := &s.Breaker, d.Breaker
	setDefault(&b.FailureThreshold, db.FailureThreshold)
	setDefault(&b.FailureRatio, db.FailureRatio)
	setDefault(&b.Window, db.Window)
	setDefault(&b.MinCalls, db.MinCalls)
	setDefault(&b.OpenFor, db.OpenFor)
	setDefault(&b.MaxOpenFor, db.MaxOpenFor)
	setDefault(&b.MaxProbes, db.MaxProbes)
	setDefault(&b.ProbeTimeout, db.ProbeTimeout)
	setDefault(&b.SuccessesToClose, db.SuccessesToClose)
	if s.UsesMQTT() {
		setDefault(&s.MQTTUsername, s.Name)
	}
	if s.Protocol == ProtocolStatusTopic {
		setDefault(&s.OnlinePayload, d.OnlinePayload)
		setDefault(&s.OfflinePayload, d.OfflinePayload)
		return s
	}
	if s.BaseTopic == "" {
		s.BaseTopic = d.BaseTopic
	}
	if s.GatewayName == "" {
		s.GatewayName = d.GatewayName
	}
	setDefault(&s.FullTopic, d.FullTopic)
	if s.Protocol == ProtocolZWaveJS && s.ClientID == "" {
		s.ClientID = ZWaveClientIDPrefix + s.GatewayName
	}
	setDefault(&s.ReadTimeout, d.ReadTimeout)
	r, dr := &s.Retry, d.Retry
	if s.Protocol == ProtocolWebhook {
		setDefault(&s.Timeout, d.Timeout)
		r.AttemptTimeout = s.Timeout // one attempt is one POST
	}
	if s.Protocol == ProtocolHTTP {
		setDefault(&s.Timeout, d.Timeout)
		s.Method = strings.ToUpper(s.Method)
		setDefault(&s.Method, d.Method)
	}
	if r.MaxAttempts == 0 {
		r.MaxAttempts = dr.MaxAttempts
	}
	if r.AttemptTimeout == 0 {
		r.AttemptTimeout = dr.AttemptTimeout
	}
	if r.Backoff.Base == 0 {
		r.Backoff.Base = dr.Backoff.Base
	}
	if r.Backoff.Multiplier == 0 {
		r.Backoff.Multiplier = dr.Backoff.Multiplier
	}
	if r.Backoff.Cap == 0 {
		r.Backoff.Cap = dr.Backoff.Cap
	}
	if r.MaxRetryAfter == 0 {
		r.MaxRetryAfter = dr.MaxRetryAfter
	}
	if r.RetryOn == nil {
		r.RetryOn = []retry.Class{retry.GroupTransient}
	}
	if len(r.NeverRetry) == 0 {
		r.NeverRetry = nil // an empty list and none mean the same
	}
	if r.Budget.Ratio == 0 {
		r.Budget.Ratio = dr.Budget.Ratio
	}
	if r.Budget.MinRetries == 0 {
		r.Budget.MinRetries = dr.Budget.MinRetries
	}
	if r.Budget.Window == 0 {
		r.Budget.Window = dr.Budget.Window
	}
	return s
}

// setDefault sets *p to d if it is the zero value.
func setDefault[T comparable](p *T, d T) {
	var zero T
	if *p == zero {
		*p = d
	}
}

// Device returns the device with the given ID. It searches c.Devices in
// order; callers on a hot path build their own index.
func (c *Config) Device(id string) (Device, bool) {
	for _, d := range c.Devices {
		if d.ID == id {
			return d, true
		}
	}
	return Device{}, false
}

// Service returns the service with the given name.
func (c *Config) Service(name string) (Service, bool) {
	for _, s := range c.Services {
		if s.Name == name {
			return s, true
		}
	}
	return Service{}, false
}
