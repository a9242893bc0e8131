package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/hearthd/hearth/api"
	"github.com/hearthd/hearth/automations"
	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/buildinfo"
	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/health"
	"github.com/hearthd/hearth/protocols/mqtt"
	"github.com/hearthd/hearth/protocols/zigbee2mqtt"
	"github.com/hearthd/hearth/protocols/zwavejs"
	"github.com/hearthd/hearth/retry"
	"github.com/hearthd/hearth/store"
)

// deps are what tests replace: time, randomness and the log. A nil clock
// or rand means the real one.
type deps struct {
	clock clockwork.Clock // every TTL, timeout and backoff, reconnects included
	rand  retry.Rand      // the dispatcher's backoff jitter
	// connRand is the reconnect jitter of Hearth's MQTT connection.
	connRand retry.Rand
	logger   *slog.Logger
	// lockTimeout bounds the wait for the store's file lock; 0 means the
	// store's default.
	lockTimeout time.Duration
	// httpLimits shortens the HTTP server's timeouts; zero fields take
	// the defaults (httpapi.go).
	httpLimits httpLimits
	// random draws generated passwords and tokens; nil means crypto/rand.
	random io.Reader
	// onFreshRead and onFreshState, if set, hear each fresh read of a
	// safety-critical device after the start, and its answer
	// (dispatcher.Options.OnFreshRead, OnFreshState).
	onFreshRead, onFreshState func(devices.Device)
	// connOptions, if set, changes the options of the connection to an
	// external broker before it is made: tests shorten its client ID
	// conflict timings.
	connOptions func(*mqtt.Options)
}

// daemon is a running hearthd: every part wired, started by start and
// stopped by stop, in dependency order.
type daemon struct {
	cfg     *config.Config
	log     *slog.Logger
	store   *store.Store
	broker  *broker.Broker // nil when an external broker is used
	intake  *intake
	conn    link // inline in the embedded broker, or a Conn to an external one
	disp    *dispatcher.Dispatcher
	health  *health.Checker
	metrics *health.Metrics
	// cmdMetrics feeds metrics from the dispatcher and the connection.
	cmdMetrics *commandMetrics
	// storeQ tells of a quarantine of the store until it is acknowledged.
	storeQ *storeQuarantine
	engine *automations.Engine
	authz  *authorizer
	// ha is Home Assistant's MQTT discovery.
	ha *homeAssistant
	// onReload are what else a SIGHUP reload of principals updates (the
	// broker's users, the HTTP API's tokens).
	onReload []func(*config.Config)

	httpSrv *http.Server
	httpLn  net.Listener
	// principals authenticate the HTTP API; results wakes its waits.
	principals httpPrincipals
	results    api.Waiter
	// events fans the dispatcher's results, states, availabilities and
	// breaker transitions out to GET /api/v1/events.
	events *api.Events
	// endHTTP ends every HTTP request's context: stop calls it once the
	// dispatcher has stopped, so that a POST whose command the stopped
	// intake will never answer, and a GET waiting for an op, return
	// before the server shuts down.
	endHTTP context.CancelFunc

	brokerURL string
	// credentialsPath is <data_dir>/credentials.yaml, read again at every
	// reload; random draws the secrets of accounts a reload adds.
	credentialsPath string
	random          io.Reader
	// internalPassword is the password of Hearth's own account on its
	// embedded broker, config.InternalUsername; drawn at every start and
	// told nobody. Hearth's traffic is inline and logs in with no
	// account; the account keeps the broker's user table from being empty
	// (which would admit everyone) and Hearth's client ID reserved.
	internalPassword string
	// clientID and hearthUsername are Hearth's MQTT client ID and
	// username (config.InternalUsername with the embedded broker).
	clientID, hearthUsername string
	// mqttAuth maps the embedded broker's usernames to principals and
	// holds the ACL table the broker asks; see setPrincipals.
	mqttAuth atomic.Pointer[mqttAuth]
	// beforeStop, if set, runs first in stop: for parts that use the
	// embedded broker from outside, such as the demo's simulator.
	beforeStop func()

	stopDisp, stopConn context.CancelFunc
	// onLinkLost are told when the MQTT connection to an external broker
	// is lost (an adapter that answers reads from what it heard live).
	// Set before the connection runs.
	onLinkLost []func()
	// stopEngine stops the automations, before the dispatcher.
	stopEngine         context.CancelFunc
	dispDone, connDone chan struct{}
	// failed receives the error that ended the dispatcher while hearthd
	// runs (its pending commands could not be read): hearthd can no
	// longer run a command, so run stops with it rather than stay up
	// and ready. Buffered: the dispatcher's goroutine never waits on it.
	failed     chan error
	engineDone chan struct{}
	pruneDone  chan struct{}
	haDone     chan struct{}
	httpDone   chan struct{}
	stopOnce   sync.Once
}

// start opens the store, starts the embedded broker (unless cfg names an
// external one), connects, resumes pending commands and serves HTTP. On
// error everything already started is stopped again.
func start(cfg *config.Config, dp deps) (_ *daemon, err error) {
	if dp.clock == nil {
		dp.clock = clockwork.NewRealClock()
	}
	log := dp.logger
	d := &daemon{cfg: cfg, log: log, health: health.NewChecker(), metrics: health.NewMetrics()}
	d.cmdMetrics = &commandMetrics{m: d.metrics}
	defer func() {
		if err != nil {
			d.stop()
		}
	}()

	sh := &storeHealth{log: log, metrics: d.metrics, clock: dp.clock}
	// A damaged store is moved aside and a fresh one opened (quarantine.go
	// tells of it); a locked or unreadable one stops the start.
	d.store, err = store.Open(cfg.DataDir, store.Options{LockTimeout: dp.lockTimeout, OnCommit: sh.onCommit, OnCommitTime: d.metrics.StoreCommitTook, OnDamage: sh.onDamage,
		Quarantine: true, Now: dp.clock.Now})
	if err != nil {
		return nil, err
	}
	sh.path = d.store.Path() // before the first commit: nothing writes yet
	log.Info("store open", "path", d.store.Path())
	for _, err := range d.store.DroppedNotifications() {
		// One bad outbox record is not the store's damage: it is deleted
		// and that notification is not sent (docs/STORE.md).
		log.Error("stored notification damaged: deleted, not sent", "path", d.store.Path(), "err", err)
	}
	d.storeQ, err = newStoreQuarantine(d.store, cfg.Prefix, log, d.metrics, dp.clock)
	if err != nil {
		return nil, err
	}
	// Under the store's lock, so that two instances never write the
	// credentials file at once.
	if dp.random == nil {
		dp.random = cryptoRand
	}
	d.credentialsPath, d.random = config.CredentialsPath(cfg.DataDir), dp.random
	path, added, err := credentials(cfg, dp.random)
	if err != nil {
		return nil, err
	}
	logAccounts(log, cfg, path, added)
	d.authz = newAuthorizer(cfg)

	clientID := hearthClientID(cfg)
	d.brokerURL = cfg.MQTT.URL
	username, password := cfg.MQTT.Username, cfg.MQTT.Password
	if d.brokerURL == "" {
		username = config.InternalUsername
	}
	d.clientID, d.hearthUsername = clientID, username
	auth, err := newMQTTAuth(cfg, username, clientID)
	if err != nil {
		return nil, err
	}
	d.mqttAuth.Store(auth)
	d.onReload = append(d.onReload, d.setPrincipals)
	// The intake exists before the embedded broker, which hands it
	// commands from its start; it lets them through once the dispatcher
	// runs.
	d.intake = newIntake(cfg.Prefix, log)
	d.intake.acked = d.metrics.PubackWait
	if d.brokerURL == "" {
		// Hearth's own account, with or without principals.
		d.internalPassword = newInternalPassword()
		username, password = config.InternalUsername, d.internalPassword
		var mqtts *tls.Config
		if cfg.MQTT.MQTTS.Listen != "" {
			certs, err := loadServerCert("mqtt.mqtts", cfg.MQTT.MQTTS.Cert)
			if err != nil {
				return nil, err
			}
			d.onReload = append(d.onReload, func(*config.Config) { certs.reload(log) })
			mqtts = certs.tlsConfig()
		}
		bm := newBrokerMetrics(d.metrics.Registry())
		d.broker, err = broker.Start(broker.Options{
			Listen:         cfg.MQTT.Listen,
			TLSListen:      cfg.MQTT.MQTTS.Listen,
			TLSConfig:      mqtts,
			MaxConnectRate: cfg.MQTT.MaxConnectRate,
			ConnectBurst:   cfg.MQTT.ConnectBurst,
			MaxConnections: cfg.MQTT.MaxConnections,
			MaxInflight:    cfg.MQTT.MaxInflight,
			// Limits before authentication.
			ConnectTimeout:         cfg.MQTT.ConnectTimeout,
			MaxUnauthenticated:     cfg.MQTT.MaxUnauthenticated,
			MaxKeepAlive:           cfg.MQTT.MaxClientKeepAlive,
			LoginFailuresPerMinute: cfg.MQTT.LoginFailuresPerMinute,
			// Hearth's link is inline: it never CONNECTs, so no client ID
			// is exempt from the accept guard.
			// The accept guard measures load on the host, in real time,
			// not on dp.clock: tests hold dp.clock still while hearthd,
			// the simulator and the automation connect, and a token
			// bucket on a clock that stands still never refills, so it
			// would refuse every CONNECT after the first (hearthd's own
			// reconnects included) until the test moved time on.
			Clock:  clockwork.NewRealClock(),
			Logger: log.With("component", "broker"),
			// With mqtt.allow_anonymous the table is empty and the
			// broker admits everyone, verifying nobody: nothing is
			// stamped and nothing denied.
			Users:                 brokerUsers(cfg, d.internalPassword),
			StampUsernameProperty: usernameProperty,
			// Hearth's client ID, each bridge's client_id (Z-Wave JS
			// UI's ZWAVE_GATEWAY-<gateway_name> by default).
			ClientIDOwners: auth.table.ClientIDOwners(),
			DenyPublish: func(username, topic string) bool {
				denied := d.mqttAuth.Load().denies(username, topic)
				if denied {
					bm.publishes.Inc()
				}
				return denied
			},
			OnConnect: bm.connect,
			// Commands go straight to the intake, which acks each once
			// the dispatcher has stored (or rejected) it: a PUBACK from
			// this broker means stored. A publisher that outruns the
			// intake is slowed at the broker's per-client cap, never
			// dropped.
			CommandFilter: cfg.Prefix + "/+/set",
			OnCommand:     d.intake.command,
		})
		if err != nil {
			return nil, fmt.Errorf("%w (choose another address with -mqtt-listen or mqtt.listen, or use an external broker with -mqtt-url)", err)
		}
		bm.watchLimits(d.metrics.Registry(), d.broker)
		d.brokerURL = d.broker.URL()
		log.Info("embedded broker listening", "addr", d.broker.Addr())
		if a := d.broker.TLSAddr(); a != "" {
			log.Info("embedded broker listening for mqtts", "addr", a, "cert_file", cfg.MQTT.MQTTS.Cert.CertFile)
		}
	}

	d.httpLn, err = net.Listen("tcp", cfg.HTTP.Listen)
	if err != nil {
		return nil, fmt.Errorf("http: listen on %s: %w (choose another address with -http-listen or http.listen)", cfg.HTTP.Listen, err)
	}

	tlsConf, err := tlsConfig(cfg.MQTT)
	if err != nil {
		return nil, err
	}
	var disp *dispatcher.Dispatcher
	// Inline with the embedded broker (see link.go): OnSession and
	// OnConnect run once, at Run.
	connOpts := mqtt.Options{
		URL:       d.brokerURL,
		ClientID:  clientID,
		Username:  username,
		Password:  password,
		TLS:       tlsConf,
		KeepAlive: cfg.MQTT.KeepAlive,
		Reconnect: cfg.MQTT.Reconnect,

		// An external broker's: it outlives hearthd and keeps the commands
		// published while Hearth is away. Inline has no session.
		SessionExpiry: cfg.MQTT.SessionExpiry,
		// Where the commands kept in the session end (mqtt.Message.Backlog):
		// Hearth's own topic, which its account may publish and nobody
		// else's (acl: only Hearth publishes under the prefix but +/set).
		SessionMarker: cfg.Prefix + "/bridge/session",
		Status: mqtt.Announcement{
			Topic:   cfg.Prefix + "/bridge/state",
			Online:  "online",
			Offline: "offline",
		},
		OnLost: func() {
			if disp != nil {
				disp.Disconnected()
			}
			for _, f := range d.onLinkLost {
				f()
			}
		},
		OnSession: func() {
			if disp != nil {
				disp.Session()
			}
		},
		OnConnect: func(ctx context.Context) {
			d.cmdMetrics.connected()
			if disp != nil {
				disp.Reconnected()
			}
			go d.ha.announce(ctx) // its publishes wait for acknowledgements
			go d.storeQ.publish(ctx)
		},
		Clock:  dp.clock,
		Rand:   dp.connRand,
		Logger: log.With("component", "mqtt"),
	}
	if dp.connOptions != nil {
		dp.connOptions(&connOpts)
	}
	d.conn = newLink(d.broker, connOpts)
	d.ha = newHomeAssistant(cfg, d.conn, log.With("component", "homeassistant"), buildinfo.Resolve(version, revision).Version)

	breakerRand := dp.rand // stateless in tests
	if breakerRand == nil {
		breakerRand = sharedRand{}
	}
	var services []dispatcher.Service
	// adapters are started once the dispatcher exists: each subscribes to
	// its bridge's topics and feeds sink.
	var adapters []func(ctx context.Context, sink reports) error
	var watched []config.Service
	// bridgeService is the dispatcher's service of a bridge adapter.
	bridgeService := func(s config.Service, bridge dispatcher.Bridge) {
		b := s.Retry.Budget
		svc := dispatcher.Service{
			Name:        s.Name,
			Bridge:      bridge,
			Policy:      s.Retry.Policy,
			Budget:      retry.NewBudget(b.Ratio, b.MinRetries, b.Window),
			Hold:        s.Breaker.Hold,
			ReadTimeout: s.ReadTimeout,
		}
		if s.Breaker.Enabled {
			svc.Breaker = breakerOptions(s.Breaker, breakerRand)
			d.metrics.BreakerState(s.Name, breaker.Closed.String())
		}
		services = append(services, svc)
		if s.Retry.MaxAttempts > config.MaxAttempts {
			log.Warn("service allows more attempts than the radio layer needs; retries may hammer a sick network",
				"service", s.Name, "max_attempts", s.Retry.MaxAttempts, "recommended_max", config.MaxAttempts)
		}
	}
	for _, s := range cfg.Services {
		var devs []devices.Device
		for _, dev := range cfg.Devices {
			if dev.Service == s.Name {
				devs = append(devs, dev.Device)
			}
		}
		switch s.Protocol {
		case config.ProtocolZigbee2MQTT:
			publisher, stamp := d.trustedPublisher(s)
			a := zigbee2mqtt.New(d.conn, zigbee2mqtt.Options{
				Service:       s.Name,
				BaseTopic:     s.BaseTopic,
				Devices:       devs,
				Logger:        log.With("component", "zigbee2mqtt", "service", s.Name),
				Publisher:     publisher,
				StampProperty: stamp,
			})
			d.countUntrusted(s.Name, a.Untrusted)
			adapters = append(adapters, func(ctx context.Context, sink reports) error { return a.Start(ctx, sink) })
			bridgeService(s, a)
		case config.ProtocolZWaveJS:
			publisher, stamp := d.trustedPublisher(s)
			a := zwavejs.New(d.conn, zwavejs.Options{
				Service:       s.Name,
				BaseTopic:     s.BaseTopic,
				GatewayName:   s.GatewayName,
				NodeNames:     s.NodeNames,
				Devices:       devs,
				Logger:        log.With("component", "zwavejs", "service", s.Name),
				Publisher:     publisher,
				StampProperty: stamp,
			})
			d.countUntrusted(s.Name, a.Untrusted)
			adapters = append(adapters, func(ctx context.Context, sink reports) error { return a.Start(ctx, sink) })
			bridgeService(s, a)
		case config.ProtocolShelly:
			a, start := d.shellyAdapter(s, devs, log)
			adapters = append(adapters, start)
			bridgeService(s, a)
		case config.ProtocolTasmota:
			a, start, err := d.tasmotaAdapter(s, devs, log)
			if err != nil {
				return nil, fmt.Errorf("service %s: %w", s.Name, err)
			}
			adapters = append(adapters, start)
			bridgeService(s, a)
		case config.ProtocolHomie:
			a, start := d.homieAdapter(s, devs, log)
			adapters = append(adapters, start)
			bridgeService(s, a)
		case config.ProtocolESPHome:
			a, start := d.esphomeAdapter(s, devs, log)
			adapters = append(adapters, start)
			bridgeService(s, a)
		case config.ProtocolHTTP:
			a, start, err := d.httpDevAdapter(s, devs, log)
			if err != nil {
				return nil, err
			}
			adapters = append(adapters, start)
			bridgeService(s, a)
			services[len(services)-1].Direct = true // reached over HTTP, not MQTT
		case config.ProtocolWebhook:
			svc, err := notifyService(s, breakerRand)
			if err != nil {
				return nil, err
			}
			if svc.Breaker != nil {
				d.metrics.BreakerState(s.Name, breaker.Closed.String())
			}
			services = append(services, svc)
		case config.ProtocolStatusTopic:
			if !s.Breaker.Enabled {
				log.Warn("watched service has its breaker disabled: nothing watches it", "service", s.Name)
				continue
			}
			b := breakerOptions(s.Breaker, breakerRand)
			d.metrics.BreakerState(s.Name, breaker.Closed.String())
			services = append(services, dispatcher.Service{Name: s.Name, Breaker: b})
			watched = append(watched, s)
		default:
			return nil, fmt.Errorf("service %s: protocol %q is not supported", s.Name, s.Protocol)
		}
	}
	d.events = api.NewEvents(dp.clock)
	devs := make([]dispatcher.Device, len(cfg.Devices))
	for i, dev := range cfg.Devices {
		d.metrics.CommandClass(dev.Service, string(dev.Class))
		devs[i] = dispatcher.Device{Device: dev.Device, TTL: dev.TTL, AttemptTimeout: dev.AttemptTimeout, ReadBack: dev.ReadBack}
	}
	disp, err = dispatcher.New(dispatcher.Options{
		Prefix:        cfg.Prefix,
		Services:      services,
		Devices:       devs,
		Journal:       d.store,
		Publisher:     d.conn,
		Authorizer:    d.authz,
		Audit:         d.store,
		DeadLetters:   d.store,
		NotifyOutbox:  d.store,
		Clock:         dp.clock,
		Rand:          dp.rand,
		RepublishRate: cfg.MQTT.RepublishRate,
		// Transitions are logged by the dispatcher, counted here and
		// passed to the automations, which start with every breaker
		// closed.
		OnBreakerChange: func(c dispatcher.BreakerChange) {
			d.metrics.BreakerTransition(c.Service, c.From.String(), c.To.String())
			if d.engine != nil {
				d.engine.BreakerState(c.Service, c.To.String(), c.Replay)
			}
			d.events.Breaker(c)
		},
		OnResult: func(r devices.Result) {
			d.results.Notify(r)
			d.ha.result(r)
			d.events.Result(r)
		},
		OnEnd:        d.cmdMetrics.ended,
		OnAttempt:    d.cmdMetrics.attempted,
		OnRetryAfter: d.metrics.RetryAfter,
		OnState: func(device string, state map[string]any) {
			d.ha.state(device, state)
			d.events.State(device, state)
		},
		OnAvailability: func(device string, online bool) {
			d.ha.availability(device, online)
			d.events.Availability(device, online)
		},
		OnFreshRead:  dp.onFreshRead,
		OnFreshState: dp.onFreshState,
		// op_ids the quarantined store held are lost: commands issued
		// before the quarantine are refused for the dedup window.
		LostDedup: d.storeQ.lostDedup(),
		Logger:    log.With("component", "dispatcher"),
	})
	if err != nil {
		return nil, err
	}
	d.disp = disp
	d.cmdMetrics.watch(disp, d.conn.Connected)
	sh.setNotify(disp.Notify)
	d.storeQ.publisher = d.conn
	if n, ok := d.storeQ.notification(); ok {
		disp.Notify(n) // published once connected, and to every notify service
	}
	autoLog := log.With("component", "automations")
	act := actuator{disp: disp, conn: d.conn, log: autoLog}
	// A safety-critical device's retained state is from before the start:
	// no condition holds on it until a live report or the dispatcher's
	// fresh read after the start confirms it.
	needsLive := map[string]bool{}
	for _, dev := range cfg.Devices {
		needsLive[dev.ID] = dev.SafetyCritical()
	}
	// The same on every start, so that an event redelivered after a
	// restart gives its first op_ids; unknown outside, so that nobody can
	// take a future command's op_id first.
	autoKey, err := automationKey(cfg.DataDir, dp.random)
	if err != nil {
		return nil, err
	}
	d.engine, err = automations.New(automations.Options{
		Rules:     cfg.Automations,
		Commander: act,
		Publisher: act,
		Notifier:  act,
		Clock:     dp.clock,
		Logger:    autoLog,
		NeedsLive: func(device string) bool { return needsLive[device] },
		Key:       autoKey,
		Confirmed: func(device string) map[string]any {
			s, ok := disp.Device(device)
			if !ok {
				return nil
			}
			return s.State
		},
	})
	if err != nil {
		return nil, fmt.Errorf("automations: %w", err)
	}
	d.metrics.Registry().MustRegister(newAutomationMetrics(d.engine))
	states, err := d.store.States()
	if err != nil {
		return nil, err
	}
	restored := make(map[string]map[string]any, len(states))
	for id, s := range states {
		restored[id] = s.State
	}
	disp.Restore(restored)
	for id, s := range restored {
		d.ha.state(id, s) // what a lock or cover shows until it reports
	}

	// Subscriptions are registered before the first connect, which makes
	// them: the intake's (with an external broker), then every bridge.
	if d.broker != nil {
		// The embedded broker verified the username it hands over with
		// each command; it no longer routes commands to subscribers, so
		// Hearth does not subscribe to them.
		d.intake.principalOf = func(username string) string { return d.mqttAuth.Load().principalOf(username) }
	} else {
		// An external broker tells nobody who published; its ACL is what
		// keeps <prefix>/+/set to the accounts allowed there. Without
		// principals in the file, what comes through it is the generated
		// principal's.
		d.intake.principal = func(mqtt.Message) string { return d.mqttAuth.Load().external }
		if err := d.conn.SubscribeManualAck(context.Background(), cfg.Prefix+"/+/set", 1, d.intake.handle); err != nil {
			return nil, err
		}
	}
	sink := reports{Dispatcher: disp, engine: d.engine, ha: d.ha}
	for _, start := range adapters {
		if err := start(context.Background(), sink); err != nil {
			return nil, err
		}
	}
	for _, s := range watched {
		if err := d.conn.Subscribe(context.Background(), s.StatusTopic, 1, d.watch(s)); err != nil {
			return nil, err
		}
	}
	filters := d.engine.Topics()
	for _, filter := range filters {
		if err := d.conn.Subscribe(context.Background(), filter, 1, func(m mqtt.Message) {
			if firstMatch(filters, m.Topic) == filter {
				// A message that matches several of the filters reaches
				// each of their handlers: the engine takes it once, from
				// the first. (Copies a broker sends once per overlapping
				// subscription are one event to the engine: a repeat.)
				d.engine.Message(m.Topic, m.Payload, m.Retained)
			}
		}); err != nil {
			return nil, err
		}
	}
	if err := d.ha.subscribe(context.Background()); err != nil {
		return nil, err
	}

	d.health.Add("mqtt", func() error {
		if err := d.conn.Conflict(); err != nil {
			return err
		}
		if !d.conn.Connected() {
			return fmt.Errorf("not connected to %s", d.brokerURL)
		}
		return nil
	})
	// Not ready while the store's commits fail; ready again once one
	// succeeds (storehealth.go).
	d.health.Add("store", sh.check)
	// Hearth serves commands on the fresh store: degraded, not unready,
	// until an operator acknowledges the quarantine.
	d.health.AddDegraded("store_quarantine", d.storeQ.check)
	// An open breaker means a service is down, not that Hearth is: the
	// breakers are shown beside the checks, never fail readiness.
	d.health.AddInfo("breakers", func() any { return disp.Breakers() })
	d.health.AddInfo("automations", func() any { return d.engine.Status() })

	var dispCtx, connCtx context.Context
	// Before the intake: see prune. A damaged store found here ends the
	// start, as Open's check would have.
	if err := d.pruneOnce(dp.clock); err != nil {
		return nil, err
	}
	dispCtx, d.stopDisp = context.WithCancel(context.Background())
	connCtx, d.stopConn = context.WithCancel(context.Background())
	d.dispDone, d.connDone, d.httpDone = make(chan struct{}), make(chan struct{}), make(chan struct{})
	d.failed = make(chan error, 1)
	d.intake.open(disp)
	go func() {
		defer close(d.dispDone)
		if err := disp.Run(dispCtx); err != nil {
			log.Error("the dispatcher stopped: hearthd cannot run commands, so it stops", "err", err)
			d.failed <- err
		}
	}()
	// The automations stop before the dispatcher: their last commands
	// and notifications still reach it, and its stop stores them.
	var engineCtx context.Context
	engineCtx, d.stopEngine = context.WithCancel(context.Background())
	d.engineDone = make(chan struct{})
	go func() {
		defer close(d.engineDone)
		d.engine.Run(engineCtx)
	}()
	go func() {
		defer close(d.connDone)
		d.conn.Run(connCtx)
	}()
	d.pruneDone = make(chan struct{})
	go func() {
		defer close(d.pruneDone)
		d.prune(dispCtx, dp.clock)
	}()
	d.haDone = make(chan struct{})
	go func() {
		defer close(d.haDone)
		d.ha.run(dispCtx)
	}()
	mux := http.NewServeMux()
	d.health.Register(mux)
	d.metrics.Register(mux)
	api.Register(mux, disp)
	api.RegisterDevices(mux, disp)
	// A principal's stream carries the results of its own commands
	// only, unless it sees every principal's (as the ops listing).
	seesAll := func(principal string) bool { return d.mayAckQuarantine(principal) == nil }
	d.events.LimitResults(seesAll, d.store)
	api.RegisterEvents(mux, d.events, disp)
	// A principal allowed every device lists every principal's commands,
	// their audit trail and dead letters; another, its own.
	api.RegisterOps(mux, api.OpsList{Source: opsSource{d.store}, Logger: log.With("component", "api"), SeesAll: seesAll})
	api.RegisterAudit(mux, auditSource{d.store}, seesAll)
	api.RegisterDeadLetters(mux, deadLetterSource{d.store}, seesAll)
	api.RegisterCommands(mux, d.commandAPI(dp.clock))
	api.RegisterStore(mux, api.Store{Health: d.storeQ, MayAck: d.mayAckQuarantine, Logger: log.With("component", "api")})
	api.RegisterUI(mux) // the status page: GET / and /ui/, no data, open
	d.setHTTPPrincipals(cfg)
	d.onReload = append(d.onReload, d.setHTTPPrincipals)
	var httpCtx context.Context
	httpCtx, d.endHTTP = context.WithCancel(context.Background())
	// The certificate loads before d.httpSrv is set: stop waits for the
	// server's goroutine once it is, and a start that fails here never
	// ran one.
	scheme := "http"
	var certs *serverCert
	if cfg.HTTP.TLS.CertFile != "" {
		// HTTPS: ServeTLS takes the certificate from TLSConfig (reloaded
		// on SIGHUP) and offers HTTP/2 besides HTTP/1.1.
		if certs, err = loadServerCert("http.tls", cfg.HTTP.TLS); err != nil {
			return nil, err
		}
		d.onReload = append(d.onReload, func(*config.Config) { certs.reload(log) })
		scheme = "https"
	}
	var served net.Listener
	d.httpSrv, served = newHTTPServer(api.Authenticate(&d.principals, api.JSONErrors(mux)), d.httpLn, dp.httpLimits) // see httpapi.go
	d.httpSrv.BaseContext = func(net.Listener) context.Context { return httpCtx }
	if certs != nil {
		d.httpSrv.TLSConfig = certs.tlsConfig()
	}
	go func() {
		defer close(d.httpDone)
		serve := d.httpSrv.Serve
		if scheme == "https" {
			serve = func(ln net.Listener) error { return d.httpSrv.ServeTLS(ln, "", "") }
		}
		if err := serve(served); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", "err", err)
		}
	}()
	log.Info("hearthd started", "broker", d.brokerURL, "http", d.httpLn.Addr().String(), "scheme", scheme,
		"services", len(cfg.Services), "devices", len(cfg.Devices), "prefix", cfg.Prefix)
	return d, nil
}

// stop shuts down in reverse dependency order: no new commands (one the
// intake has not handed to the dispatcher is never acked), the automations (what their last
// runs raised still reaches the dispatcher), the dispatcher (pending commands and notifications
// stay stored), the MQTT connection (which announces offline), HTTP, the
// embedded broker, the store.
func (d *daemon) stop() {
	d.stopOnce.Do(func() {
		if d.beforeStop != nil {
			d.beforeStop()
		}
		if d.intake != nil {
			d.intake.stop()
		}
		if d.stopEngine != nil {
			d.stopEngine()
			<-d.engineDone
		}
		if d.stopDisp != nil {
			d.stopDisp()
			<-d.dispDone
			<-d.pruneDone
			<-d.haDone
		}
		if d.events != nil {
			d.events.Close() // no event stream holds the shutdown
		}
		if d.endHTTP != nil {
			d.endHTTP()
		}
		if d.stopConn != nil {
			d.stopConn()
			<-d.connDone
		}
		if d.httpSrv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			d.httpSrv.Shutdown(ctx)
			cancel()
			<-d.httpDone
		} else if d.httpLn != nil {
			d.httpLn.Close()
		}
		if d.broker != nil {
			d.broker.Close()
		}
		if d.store != nil {
			if err := d.store.Close(); err != nil {
				d.log.Error("close store", "err", err)
			}
		}
		if d.httpSrv != nil {
			d.log.Info("hearthd stopped")
		}
	})
}

// Retention of ended commands: an op_id repeated within opRetention gets
// the stored result; older ended commands are deleted every pruneEvery.
const (
	opRetention = 7 * 24 * time.Hour
	pruneEvery  = time.Hour
)

// prune deletes ended commands older than opRetention, audit entries
// older than auditRetention and dead letters older than
// deadLetterRetention (by the injected clock) every pruneEvery of
// real time, until ctx ends; start prunes once before the dispatcher takes
// commands, so that an op_id past retention is never answered from the
// store.
// The schedule is housekeeping on the real clock, so that it adds no waiter
// to a test's fake clock.
func (d *daemon) prune(ctx context.Context, clock clockwork.Clock) {
	tick := time.NewTicker(pruneEvery)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			_ = d.pruneOnce(clock) // logged
		case <-ctx.Done():
			return
		}
	}
}

// pruneOnce deletes ended commands older than opRetention, audit
// entries older than auditRetention and dead letters older than
// deadLetterRetention now. It returns the errors that say the store is
// damaged (store.ErrDamaged); it logs every error.
func (d *daemon) pruneOnce(clock clockwork.Clock) error {
	return errors.Join(
		d.pruneOlder(clock, "audit trail", auditRetention, d.store.PruneAudit),
		d.pruneOlder(clock, "dead letters", deadLetterRetention, d.store.PruneDeadLetters),
		d.pruneOlder(clock, "ended commands", opRetention, d.store.PruneTerminal),
	)
}

// pruneOlder deletes with prune what is older than retention now, and
// logs an error, or how many it deleted if any, naming what ("audit
// trail"). It returns the error if it wraps store.ErrDamaged.
func (d *daemon) pruneOlder(clock clockwork.Clock, what string, retention time.Duration, prune func(before time.Time) (int, error)) error {
	n, err := prune(clock.Now().Add(-retention))
	if err != nil {
		d.log.Error("prune "+what, "err", err)
		if errors.Is(err, store.ErrDamaged) {
			return fmt.Errorf("prune %s: %w", what, err)
		}
	} else if n > 0 {
		d.log.Info("pruned "+what, "count", n, "older_than", retention)
	}
	return nil
}

// httpAddr is the address HTTP listens on.
func (d *daemon) httpAddr() string { return d.httpLn.Addr().String() }

// defaultClientID is unique per instance: the host name and a hash of the
// absolute data directory, so that two instances on one host never take
// each other's session, and one instance keeps its ID across restarts.
func defaultClientID(dataDir string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "host"
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		abs = dataDir
	}
	sum := sha256.Sum256([]byte(abs))
	return fmt.Sprintf("hearth-%s-%x", strings.ReplaceAll(host, ".", "-"), sum[:4])
}

// tlsConfig builds the TLS configuration for an ssl://, mqtts:// or wss://
// broker URL, or returns nil for a plain one.
func tlsConfig(m config.MQTT) (*tls.Config, error) {
	if m.TLS == (config.TLS{}) {
		return nil, nil
	}
	c := &tls.Config{InsecureSkipVerify: m.TLS.InsecureSkipVerify, MinVersion: tls.VersionTLS12}
	if m.TLS.CAFile != "" {
		pem, err := os.ReadFile(m.TLS.CAFile)
		if err != nil {
			return nil, fmt.Errorf("mqtt.tls.ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("mqtt.tls.ca_file: %s holds no PEM certificate", m.TLS.CAFile)
		}
		c.RootCAs = pool
	}
	if m.TLS.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(m.TLS.CertFile, m.TLS.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("mqtt.tls.cert_file/key_file: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	return c, nil
}

// breakerOptions maps a service's breaker settings; the open duration
// grows by b.OpenBackoff, drawing jitter from r (which breakers share:
// it must be safe for concurrent use).
func breakerOptions(b config.Breaker, r retry.Rand) *breaker.Options {
	backoff := b.OpenBackoff()
	return &breaker.Options{
		FailureThreshold: b.FailureThreshold,
		FailureRatio:     b.FailureRatio,
		Window:           b.Window,
		MinCalls:         b.MinCalls,
		OpenFor:          func(trips int) time.Duration { return backoff.Delay(trips, 0, r) },
		MaxProbes:        b.MaxProbes,
		ProbeTimeout:     b.ProbeTimeout,
		SuccessesToClose: b.SuccessesToClose,
	}
}

// sharedRand draws from math/rand/v2's global source, which is safe for
// concurrent use.
type sharedRand struct{}

func (sharedRand) Int64N(n int64) int64 { return rand.Int64N(n) }
