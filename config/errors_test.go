package config

import (
	"errors"
	"testing"
)

// z2m is a valid services section, for cases that need one.
const z2m = "services:\n  zigbee:\n    protocol: zigbee2mqtt\n"

// TestParseErrors checks, per kind of mistake, the exact problem reported:
// file, line, dotted key and message.
func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string
	}{
		// Keys.
		{"unknown top-level key", "prfix: home\n", `hearth.yaml:1: prfix: unknown key (did you mean prefix? known here: prefix, data_dir, defaults, mqtt, http, homeassistant, services, devices, automations, principals)`},
		{"unknown nested key", "mqtt:\n  tsl: {}\n", `hearth.yaml:2: mqtt.tsl: unknown key (did you mean tls? known here: listen, url, username, password, client_id, keepalive, session_expiry, tls, mqtts, reconnect, republish_rate, max_connect_rate, connect_burst, max_connections, max_inflight, connect_timeout, max_unauthenticated, max_keepalive, login_failures_per_minute, allow_anonymous, allow_anonymous_beyond_loopback, users)`},
		{"unknown device key", z2m + "devices:\n  lamp:\n    class: light\n    colour: red\n", `hearth.yaml:7: devices.lamp.colour: unknown key (known here: service, class, address, ttl, attempt_timeout, read_back, safety, sleepy, wake_interval, awake_window, offline)`},
		{"unknown key without a near match", "http:\n  port: 80\n", `hearth.yaml:2: http.port: unknown key (known here: listen, allow_anonymous, allow_anonymous_beyond_loopback, tls)`},
		{"duplicate top-level key", "prefix: a\nprefix: b\n", `hearth.yaml:2: prefix: duplicate key (first at line 1)`},
		{"duplicate device", z2m + "devices:\n  lamp: {class: light}\n  lamp: {class: switch}\n", `hearth.yaml:6: devices.lamp: duplicate key (first at line 5)`},
		{"merge key", "mqtt: &m {listen: ':1'}\nhttp:\n  <<: *m\n", `hearth.yaml:3: http: merge keys (<<) are not supported; write the keys out`},

		// Types.
		{"word for a whole number", z2m + "    retry:\n      max_attempts: two\n", `hearth.yaml:5: services.zigbee.retry.max_attempts: want a whole number, got "two"`},
		{"fraction for a whole number", z2m + "    retry:\n      max_attempts: 2.5\n", `hearth.yaml:5: services.zigbee.retry.max_attempts: want a whole number, got 2.5`},
		{"quoted number for a whole number", z2m + "    retry:\n      max_attempts: \"2\"\n", `hearth.yaml:5: services.zigbee.retry.max_attempts: want a whole number, got "2"`},
		{"word for a number", z2m + "    retry:\n      multiplier: double\n", `hearth.yaml:5: services.zigbee.retry.multiplier: want a number, got "double"`},
		{"infinite number", z2m + "    retry:\n      multiplier: .inf\n", `hearth.yaml:5: services.zigbee.retry.multiplier: want a finite number, got .inf`},
		{"yes for a bool", "mqtt:\n  tls:\n    insecure_skip_verify: yes\n", `hearth.yaml:3: mqtt.tls.insecure_skip_verify: want true or false, got "yes"`},
		{"mapping for a string", "prefix: {home: 1}\n", `hearth.yaml:1: prefix: want a string, got a mapping`},
		{"list for a string", "data_dir: [a, b]\n", `hearth.yaml:1: data_dir: want a string, got a list`},
		{"scalar for a mapping", "mqtt: embedded\n", `hearth.yaml:1: mqtt: want a mapping, got "embedded"`},
		{"list for a service", "services:\n  zigbee: [zigbee2mqtt]\n", `hearth.yaml:2: services.zigbee: want a mapping, got a list`},
		{"scalar for a device", z2m + "devices:\n  lamp: light\n", `hearth.yaml:5: devices.lamp: want a mapping, got "light"`},
		{"list for a key", "? [a, b]\n: c\n", `hearth.yaml:1: want a key name, got a list`},
		{"list for services", "services:\n  - zigbee\n", `hearth.yaml:2: services: want a mapping, got a list`},
		{"top level is a list", "- prefix\n", `hearth.yaml:1: want a mapping, got a list`},

		// Durations.
		{"bare number duration", "defaults:\n  ttl: 60\n", `hearth.yaml:2: defaults.ttl: want a duration, got 60 (no unit); use a Go duration such as 10s`},
		{"bare fraction duration", "defaults:\n  ttl: 1.5\n", `hearth.yaml:2: defaults.ttl: want a duration, got 1.5 (no unit); use a Go duration such as 10s`},
		{"word duration", "defaults:\n  ttl: soon\n", `hearth.yaml:2: defaults.ttl: want a duration, got "soon"; use a Go duration such as 10s`},
		{"duration without unit after hours", "defaults:\n  ttl: 1h30\n", `hearth.yaml:2: defaults.ttl: want a duration, got "1h30"; use a Go duration such as 10s`},
		{"zero duration", "defaults:\n  ttl: 0s\n", `hearth.yaml:2: defaults.ttl: must be positive, got 0s`},
		{"negative duration", "mqtt:\n  reconnect:\n    base: -1s\n", `hearth.yaml:3: mqtt.reconnect.base: must be positive, got -1s`},
		{"ttl over the limit", "defaults:\n  ttl: 1000h\n", `hearth.yaml:2: defaults.ttl: must be at most 720h (30 days), got 1000h`},
		{"device offline unknown word", z2m + "devices:\n  lamp:\n    class: light\n    offline: wait\n", `hearth.yaml:7: devices.lamp.offline: must be fail or queue, got "wait"`},
		{"device offline as a bool", z2m + "devices:\n  lamp:\n    class: light\n    offline: false\n", `hearth.yaml:7: devices.lamp.offline: must be fail or queue, got "false"`},
		{"device ttl zero", z2m + "devices:\n  lamp:\n    class: light\n    ttl: 0s\n", `hearth.yaml:7: devices.lamp.ttl: must be positive, got 0s`},
		{"keepalive fraction of a second", "mqtt:\n  keepalive: 1500ms\n", `hearth.yaml:2: mqtt.keepalive: must be whole seconds, as MQTT counts it, got 1.5s`},
		{"keepalive over 16 bits", "mqtt:\n  keepalive: 20h\n", `hearth.yaml:2: mqtt.keepalive: must be at most 18h12m15s, as MQTT counts it in 16 bits, got 20h`},
		{"session expiry negative", "mqtt:\n  url: tcp://broker:1883\n  session_expiry: -1m\n", `hearth.yaml:3: mqtt.session_expiry: must be 0 (a clean session at every connect) or more, got -1m`},
		{"session expiry fraction of a second", "mqtt:\n  session_expiry: 90500ms\n", `hearth.yaml:2: mqtt.session_expiry: must be whole seconds, as MQTT counts it, got 1m30.5s`},
		{"session expiry beyond 32 bits", "mqtt:\n  session_expiry: 1193047h\n", `hearth.yaml:2: mqtt.session_expiry: must be at most 1193046h28m14s, as MQTT counts it in 32 bits (its largest value means never), got 1193047h`},
		{"session expiry without unit", "mqtt:\n  session_expiry: 300\n", `hearth.yaml:2: mqtt.session_expiry: want a duration, got 300 (no unit); use a Go duration such as 10s`},
		{"session expiry as a word", "mqtt:\n  session_expiry: forever\n", `hearth.yaml:2: mqtt.session_expiry: want a duration, got "forever"; use a Go duration such as 10s`},
		{"attempt timeout zero", z2m + "    retry:\n      attempt_timeout: 0s\n", `hearth.yaml:5: services.zigbee.retry.attempt_timeout: must be positive, got 0s`},

		// Ranges and backoff.
		{"zero attempts", z2m + "    retry:\n      max_attempts: 0\n", `hearth.yaml:5: services.zigbee.retry.max_attempts: must be from 1 to 3, got 0; the radio layer already retries`},
		{"four attempts", z2m + "    retry:\n      max_attempts: 4\n", `hearth.yaml:5: services.zigbee.retry.max_attempts: must be from 1 to 3, got 4; the radio layer already retries (set allow_more_attempts: true to go beyond)`},
		{"four attempts, not allowed", z2m + "    retry:\n      max_attempts: 4\n      allow_more_attempts: false\n", `hearth.yaml:5: services.zigbee.retry.max_attempts: must be from 1 to 3, got 4; the radio layer already retries (set allow_more_attempts: true to go beyond)`},
		{"too many even when allowed", z2m + "    retry:\n      allow_more_attempts: true\n      max_attempts: 101\n", `hearth.yaml:6: services.zigbee.retry.max_attempts: must be at most 100 even with allow_more_attempts, got 101`},
		{"bad class in an aliased list", "services:\n  a:\n    protocol: zigbee2mqtt\n    base_topic: za\n    retry:\n      retry_on: &c [transient, timout]\n  b:\n    protocol: zigbee2mqtt\n    base_topic: zb\n    retry:\n      retry_on: *c\n",
			`hearth.yaml:6: services.a.retry.retry_on: unknown error class "timout"; want transient, permanent, a class such as timeout or unavailable, or http_<code>` + "\n" +
				`hearth.yaml:11: services.b.retry.retry_on: unknown error class "timout"; want transient, permanent, a class such as timeout or unavailable, or http_<code>`},
		{"breaker threshold zero", z2m + "    breaker:\n      failure_threshold: 0\n", `hearth.yaml:5: services.zigbee.breaker.failure_threshold: must be at least 1, got 0`},
		{"breaker ratio above one", z2m + "    breaker: {failure_ratio: 2}\n", `hearth.yaml:4: services.zigbee.breaker.failure_ratio: must be more than 0 and at most 1, got 2`},
		{"breaker max open below open", z2m + "    breaker:\n      open_for: 10m\n", `hearth.yaml:5: services.zigbee.breaker.open_for: max_open_for 5m is less than open_for 10m`},
		{"breaker probe shorter than its attempt", z2m + "    retry:\n      attempt_timeout: 15s\n    breaker:\n      probe_timeout: 10s\n", `hearth.yaml:7: services.zigbee.breaker.probe_timeout: probe_timeout 10s is less than retry.attempt_timeout 15s: a probe would count as failed before its device had the time to answer`},
		{"fallback for a service without a breaker", z2m + "    breaker: {enabled: false}\ndevices:\n  lamp: {class: light}\nautomations:\n  r:\n    fallback_for: zigbee\n    triggers:\n      - mqtt: {topic: a/b}\n    actions:\n      - notify: {title: t}\n", `hearth.yaml:9: automations.r.fallback_for: service "zigbee" has its breaker disabled (breaker.enabled: false), so this never changes`},
		// Regression: an automation commanding a device whose class is
		// misspelt reported the class, not a panic.
		{"command to a device of unknown class", z2m + "devices:\n  hall_light: {class: lamp}\nautomations:\n  r:\n    triggers:\n      - schedule: {cron: \"0 23 * * *\"}\n    actions:\n      - command: {device: hall_light, target: {state: \"ON\"}}\n", `hearth.yaml:5: devices.hall_light.class: unknown class "lamp" (known: light, switch, lock, cover, climate, valve, alarm, sensor)`},
		{"trigger on the command topics", z2m + "automations:\n  r:\n    triggers:\n      - mqtt: {topic: \"hearth/front_door/#\"}\n    actions:\n      - notify: {title: t}\n", `hearth.yaml:7: automations.r.triggers[0].mqtt.topic: "hearth/front_door/#" can match Hearth's command topics (hearth/<device>/set); watch the results (hearth/<device>/result) or the state (hearth/<device>) instead`},
		{"publish to a bridge's command topic", z2m + "automations:\n  r:\n    triggers:\n      - mqtt: {topic: go}\n    actions:\n      - publish: {topic: \"zigbee2mqtt/Front Door/set\", payload: UNLOCK, retain: true}\n", `hearth.yaml:9: automations.r.actions[0].publish.topic: "zigbee2mqtt/Front Door/set" is a command topic of service zigbee: a raw publish skips Hearth's op_id, confirmation and safety checks; use a command action`},
		{"publish under hearth's prefix", z2m + "automations:\n  r:\n    triggers:\n      - mqtt: {topic: go}\n    actions:\n      - publish: {topic: hearth/plug/set, payload: ON}\n", `hearth.yaml:9: automations.r.actions[0].publish.topic: "hearth/plug/set" is under Hearth's prefix hearth/: Hearth does not receive its own publishes; use a command action for a device`},
		{"breaker max open given below open", z2m + "    breaker:\n      open_for: 1m\n      max_open_for: 30s\n", `hearth.yaml:6: services.zigbee.breaker.max_open_for: max_open_for 30s is less than open_for 1m`},
		{"breaker hold not a boolean", z2m + "    breaker: {hold: sometimes}\n", `hearth.yaml:4: services.zigbee.breaker.hold: want true or false, got "sometimes"`},
		{"republish rate zero", "mqtt:\n  republish_rate: 0\n", `hearth.yaml:2: mqtt.republish_rate: must be at least 1, got 0`},
		{"unknown backoff", z2m + "    retry:\n      backoff: exponentail\n", `hearth.yaml:5: services.zigbee.retry.backoff: unknown backoff "exponentail"; want one of fixed, linear, exponential, fibonacci, retry_after`},
		{"backoff not a name", z2m + "    retry:\n      backoff: 2\n", `hearth.yaml:5: services.zigbee.retry.backoff: want a backoff name, got 2`},
		{"unknown jitter", z2m + "    retry:\n      jitter: half\n", `hearth.yaml:5: services.zigbee.retry.jitter: unknown jitter "half"; want one of none, full, equal, decorrelated`},
		{"jitter as a boolean", z2m + "    retry:\n      jitter: false\n", `hearth.yaml:5: services.zigbee.retry.jitter: want a jitter name, got false`},
		{"retry_after for the broker", "mqtt:\n  reconnect:\n    backoff: retry_after\n", `hearth.yaml:3: mqtt.reconnect.backoff: retry_after is for services that send Retry-After; a broker does not (use fixed, linear, exponential or fibonacci)`},
		{"unknown error class", z2m + "    retry:\n      retry_on: [transient, timout]\n", `hearth.yaml:5: services.zigbee.retry.retry_on: unknown error class "timout"; want transient, permanent, a class such as timeout or unavailable, or http_<code>`},
		{"status code out of range", z2m + "    retry:\n      never_retry:\n        - http_503\n        - http_600\n", `hearth.yaml:7: services.zigbee.retry.never_retry: unknown error class "http_600"; want transient, permanent, a class such as timeout or unavailable, or http_<code>`},
		{"canceled is never retried", z2m + "    retry:\n      retry_on: [canceled]\n", `hearth.yaml:5: services.zigbee.retry.retry_on: "canceled" cannot be listed: a cancellation is never retried nor counted as a failure`},
		{"class list as a word", z2m + "    retry:\n      retry_on: transient\n", `hearth.yaml:5: services.zigbee.retry.retry_on: want a list of error classes, such as [transient], got "transient"`},
		{"class as a number", z2m + "    retry:\n      never_retry: [503]\n", `hearth.yaml:5: services.zigbee.retry.never_retry: want an error class, got 503`},
		{"deadline zero", z2m + "    retry:\n      deadline: 0s\n", `hearth.yaml:5: services.zigbee.retry.deadline: must be positive, got 0s`},
		{"max_retry_after negative", z2m + "    retry:\n      max_retry_after: -1m\n", `hearth.yaml:5: services.zigbee.retry.max_retry_after: must be positive, got -1m`},
		{"budget ratio above one", z2m + "    retry:\n      budget:\n        ratio: 1.5\n", `hearth.yaml:6: services.zigbee.retry.budget.ratio: must be more than 0 and at most 1, got 1.5`},
		{"budget ratio zero", z2m + "    retry:\n      budget: {ratio: 0}\n", `hearth.yaml:5: services.zigbee.retry.budget.ratio: must be more than 0 and at most 1, got 0`},
		{"budget floor zero", z2m + "    retry:\n      budget: {min_retries: 0}\n", `hearth.yaml:5: services.zigbee.retry.budget.min_retries: must be at least 1, got 0`},
		{"budget window", z2m + "    retry:\n      budget: {window: 0s}\n", `hearth.yaml:5: services.zigbee.retry.budget.window: must be positive, got 0s`},
		{"multiplier below one", z2m + "    retry:\n      multiplier: 0.5\n", `hearth.yaml:5: services.zigbee.retry.multiplier: must be at least 1, got 0.5`},
		{"cap below base", z2m + "    retry:\n      base: 2s\n      cap: 1s\n", `hearth.yaml:6: services.zigbee.retry.cap: 1s is less than base 2s`},
		{"base above default cap", "mqtt:\n  reconnect:\n    base: 2m\n", `hearth.yaml:3: mqtt.reconnect.base: 2m is more than cap 1m`},

		// Services.
		{"unknown protocol", "services:\n  zwave:\n    protocol: zwave-js\n", `hearth.yaml:3: services.zwave.protocol: unknown protocol "zwave-js" (known: esphome, homie, http, shelly, status_topic, tasmota, webhook, zigbee2mqtt, zwavejs)`},
		{"missing protocol", "services:\n  zigbee:\n    base_topic: z2m\n", `hearth.yaml:2: services.zigbee.protocol: missing (known: esphome, homie, http, shelly, status_topic, tasmota, webhook, zigbee2mqtt, zwavejs)`},
		{"service without settings", "services:\n  zigbee:\n", `hearth.yaml:2: services.zigbee.protocol: missing (known: esphome, homie, http, shelly, status_topic, tasmota, webhook, zigbee2mqtt, zwavejs)`},
		{"invalid service name", "services:\n  Zig Bee:\n    protocol: zigbee2mqtt\n", `hearth.yaml:2: services."Zig Bee": invalid service name: use lower-case letters, digits, '_' and '-'`},
		{"base topic equals prefix", "prefix: home\n" + z2m + "    base_topic: home\n", `hearth.yaml:5: services.zigbee.base_topic: base topic "home" overlaps prefix "home"; Hearth and each bridge need topics of their own`},
		{"base topic under prefix", "prefix: home\n" + z2m + "    base_topic: home/zigbee\n", `hearth.yaml:5: services.zigbee.base_topic: base topic "home/zigbee" overlaps prefix "home"; Hearth and each bridge need topics of their own`},
		{"default base topic equals prefix", "prefix: zigbee2mqtt\n" + z2m, `hearth.yaml:3: services.zigbee.base_topic: default base topic "zigbee2mqtt" overlaps prefix "zigbee2mqtt"; Hearth and each bridge need topics of their own`},
		{"two services on one base topic", z2m + "  garden:\n    protocol: zigbee2mqtt\n", `hearth.yaml:4: services.garden.base_topic: default base topic "zigbee2mqtt" overlaps services.zigbee.base_topic "zigbee2mqtt"; Hearth and each bridge need topics of their own`},
		{"base topic with wildcard", z2m + "    base_topic: z2m/#\n", `hearth.yaml:4: services.zigbee.base_topic: "z2m/#" contains '#', an MQTT wildcard`},

		// Devices.
		{"device naming a missing service", z2m + "devices:\n  lamp:\n    service: zigbe\n    class: light\n", `hearth.yaml:6: devices.lamp.service: no service "zigbe" (services: zigbee)`},
		{"device naming a service when there are none", "devices:\n  lamp:\n    service: zigbee\n    class: light\n", `hearth.yaml:3: devices.lamp.service: no service "zigbee" (no services are configured)`},
		{"device without service among two", z2m + "  garden:\n    protocol: zigbee2mqtt\n    base_topic: garden\ndevices:\n  lamp:\n    class: light\n", `hearth.yaml:8: devices.lamp.service: missing; with more than one service, name one of: zigbee, garden`},
		{"device without service and no services", "devices:\n  lamp:\n    class: light\n", `hearth.yaml:2: devices.lamp.service: missing, and no services are configured`},
		{"invalid device id", z2m + "devices:\n  hall/lamp:\n    class: light\n", `hearth.yaml:5: devices."hall/lamp": device id "hall/lamp" contains '/', which cannot stand in one MQTT topic level`},
		{"reserved device id", z2m + "devices:\n  bridge:\n    class: light\n", `hearth.yaml:5: devices.bridge: device id "bridge" is reserved for hearth's own topics`},
		{"unknown safety level", z2m + "devices:\n  garage:\n    class: cover\n    safety: high\n", `hearth.yaml:7: devices.garage.safety: must be critical or normal, got "high"`},
		{"unknown class", z2m + "devices:\n  hall_light:\n    class: lamp\n", `hearth.yaml:6: devices.hall_light.class: unknown class "lamp" (known: light, switch, lock, cover, climate, valve, alarm, sensor)`},
		{"quoted device id in the key", z2m + "devices:\n  Hall Light:\n    class: lamp\n", `hearth.yaml:6: devices."Hall Light".class: unknown class "lamp" (known: light, switch, lock, cover, climate, valve, alarm, sensor)`},
		{"missing class", z2m + "devices:\n  hall_light:\n    address: Hall\n", `hearth.yaml:5: devices.hall_light.class: missing (known: light, switch, lock, cover, climate, valve, alarm, sensor)`},
		{"device without settings", z2m + "devices:\n  hall_light:\n", `hearth.yaml:5: devices.hall_light.class: missing (known: light, switch, lock, cover, climate, valve, alarm, sensor)`},
		{"address used twice", z2m + "devices:\n  a:\n    class: light\n    address: Hall\n  b:\n    class: light\n    address: Hall\n", `hearth.yaml:10: devices.b.address: "Hall" is already the address of devices.a (line 5) on service zigbee`},
		{"address equal to another device's id", z2m + "devices:\n  hall:\n    class: light\n  b:\n    class: light\n    address: hall\n", `hearth.yaml:9: devices.b.address: "hall" is already the address of devices.hall (line 5) on service zigbee`},
		{"address ending in a number", z2m + "devices:\n  a:\n    class: light\n    address: kitchen/2\n", `hearth.yaml:7: devices.a.address: "kitchen/2" ends in '/' and a number, which Zigbee2MQTT does not allow in a friendly_name`},
		{"address deeper than the ACL covers", z2m + "devices:\n  a:\n    class: light\n    address: a/b/c/d/e\n", `hearth.yaml:7: devices.a.address: "a/b/c/d/e" has more than 4 topic levels: the ACL that keeps everyone but Hearth off a device's set and get topics covers friendly names of up to 4 levels`},
		{"address with a set level", z2m + "devices:\n  a:\n    class: light\n    address: hall/set/lamp\n", `hearth.yaml:7: devices.a.address: "hall/set/lamp" has a level "set" or "get", which Zigbee2MQTT reads as a command topic`},
		{"address with wildcard", z2m + "devices:\n  a:\n    class: light\n    address: hall+\n", `hearth.yaml:7: devices.a.address: "hall+" contains '+', an MQTT wildcard`},
		{"empty address", z2m + "devices:\n  a:\n    class: light\n    address: \"\"\n", `hearth.yaml:7: devices.a.address: must not be empty (leave the key out for the default)`},

		// Listen addresses.
		{"listen without port", "mqtt:\n  listen: localhost\n", `hearth.yaml:2: mqtt.listen: want host:port such as 127.0.0.1:8080, got "localhost"`},
		{"listen port too high", "http:\n  listen: 127.0.0.1:65536\n", `hearth.yaml:2: http.listen: port "65536" is not a number from 0 to 65535`},
		{"listen port by name", "http:\n  listen: localhost:http\n", `hearth.yaml:2: http.listen: port "http" is not a number from 0 to 65535`},
		{"listen bad host", "http:\n  listen: my host:80\n", `hearth.yaml:2: http.listen: host "my host" is neither an IP address nor a host name`},

		// Broker URL and TLS.
		{"url with http scheme", "mqtt:\n  url: http://broker:1883\n", `hearth.yaml:2: mqtt.url: unknown scheme "http" (known: tcp, ssl, mqtt, mqtts)`},
		{"websocket url", "mqtt:\n  url: wss://broker/mqtt\n", `hearth.yaml:2: mqtt.url: MQTT over WebSocket (ws://, wss://) is not supported yet; use tcp://, mqtt://, ssl:// or mqtts://`},
		{"url without scheme", "mqtt:\n  url: broker:1883\n", `hearth.yaml:2: mqtt.url: want a URL such as tcp://broker.local:1883; this one has no scheme`},
		{"url without port", "mqtt:\n  url: tcp://broker\n", `hearth.yaml:2: mqtt.url: no port; want tcp://broker:1883 or another port`},
		{"url without host", "mqtt:\n  url: tcp://:1883\n", `hearth.yaml:2: mqtt.url: no host; want tcp://host:port`},
		{"url with port zero", "mqtt:\n  url: ssl://broker:0\n", `hearth.yaml:2: mqtt.url: port "0" is not a number from 1 to 65535`},
		{"url with credentials", "mqtt:\n  url: tcp://hearth:secret@broker:1883\n", `hearth.yaml:2: mqtt.url: put credentials in mqtt.username and mqtt.password, not in the URL`},
		{"url with bad port", "mqtt:\n  url: tcp://hearth:x\n", `hearth.yaml:2: mqtt.url: not a valid URL: invalid port ":x" after host`},
		{"tcp url with path", "mqtt:\n  url: tcp://broker:1883/mqtt\n", `hearth.yaml:2: mqtt.url: a tcp:// URL takes no path`},
		{"tls without url", "mqtt:\n  tls:\n    ca_file: ca.pem\n", `hearth.yaml:2: mqtt.tls: TLS settings need an ssl:// or mqtts:// mqtt.url; without one Hearth runs the embedded broker, which takes none`},
		{"tls with tcp url", "mqtt:\n  url: tcp://broker:1883\n  tls:\n    insecure_skip_verify: true\n", `hearth.yaml:3: mqtt.tls: TLS settings need an ssl:// or mqtts:// mqtt.url, not tcp://`},
		{"cert without key", "mqtt:\n  url: ssl://broker:8883\n  tls:\n    cert_file: c.pem\n", `hearth.yaml:4: mqtt.tls.cert_file: needs mqtt.tls.key_file too`},
		{"key without cert", "mqtt:\n  url: ssl://broker:8883\n  tls:\n    key_file: k.pem\n", `hearth.yaml:4: mqtt.tls.key_file: needs mqtt.tls.cert_file too`},
		{"mqtts cert without key", "mqtt:\n  mqtts:\n    listen: ':8883'\n    cert_file: c.pem\n", `hearth.yaml:4: mqtt.mqtts.cert_file: needs mqtt.mqtts.key_file too`},
		{"mqtts key without cert", "mqtt:\n  mqtts:\n    listen: ':8883'\n    key_file: k.pem\n", `hearth.yaml:4: mqtt.mqtts.key_file: needs mqtt.mqtts.cert_file too`},
		{"mqtts without listen", "mqtt:\n  mqtts:\n    cert_file: c.pem\n    key_file: k.pem\n", `hearth.yaml:2: mqtt.mqtts.listen: is needed with mqtt.mqtts.cert_file and key_file: the address of the mqtts listener, such as 0.0.0.0:8883`},
		{"mqtts without certificate", "mqtt:\n  mqtts:\n    listen: ':8883'\n", `hearth.yaml:3: mqtt.mqtts.listen: needs mqtt.mqtts.cert_file and mqtt.mqtts.key_file: the server certificate the listener presents`},
		{"mqtts with an external broker", "mqtt:\n  url: tcp://nas:1883\n  mqtts: {listen: ':8883', cert_file: c.pem, key_file: k.pem}\n", `hearth.yaml:3: mqtt.mqtts: is a listener of the embedded broker; with mqtt.url no embedded broker runs (for TLS to an external broker use an mqtts:// mqtt.url and mqtt.tls)`},
		{"mqtts bad listen", "mqtt:\n  mqtts: {listen: 'nowhere', cert_file: c.pem, key_file: k.pem}\n", `hearth.yaml:2: mqtt.mqtts.listen: want host:port such as 127.0.0.1:8080, got "nowhere"`},
		{"http tls cert without key", "http:\n  tls:\n    cert_file: c.pem\n", `hearth.yaml:3: http.tls.cert_file: needs http.tls.key_file too`},
		{"http tls key without cert", "http:\n  tls:\n    key_file: k.pem\n", `hearth.yaml:3: http.tls.key_file: needs http.tls.cert_file too`},

		// The embedded broker's limits.
		{"connect rate zero", "mqtt:\n  max_connect_rate: 0\n", `hearth.yaml:2: mqtt.max_connect_rate: must be more than 0, got 0`},
		{"connect rate negative", "mqtt:\n  max_connect_rate: -2.5\n", `hearth.yaml:2: mqtt.max_connect_rate: must be more than 0, got -2.5`},
		{"connect rate as a word", "mqtt:\n  max_connect_rate: fast\n", `hearth.yaml:2: mqtt.max_connect_rate: want a number, got "fast"`},
		{"connect rate with a unit", "mqtt:\n  max_connect_rate: 100/s\n", `hearth.yaml:2: mqtt.max_connect_rate: want a number, got "100/s"`},
		{"connect burst zero", "mqtt:\n  connect_burst: 0\n", `hearth.yaml:2: mqtt.connect_burst: must be at least 1, got 0`},
		{"connect burst fraction", "mqtt:\n  connect_burst: 1.5\n", `hearth.yaml:2: mqtt.connect_burst: want a whole number, got 1.5`},
		{"max connections zero", "mqtt:\n  max_connections: 0\n", `hearth.yaml:2: mqtt.max_connections: must be at least 1, got 0`},
		{"max inflight zero", "mqtt:\n  max_inflight: 0\n", `hearth.yaml:2: mqtt.max_inflight: must be from 1 to 65535, got 0`},
		{"max inflight beyond 16 bits", "mqtt:\n  max_inflight: 65536\n", `hearth.yaml:2: mqtt.max_inflight: must be from 1 to 65535, got 65536`},
		{"connect timeout zero", "mqtt:\n  connect_timeout: 0s\n", `hearth.yaml:2: mqtt.connect_timeout: must be positive, got 0s`},
		{"connect timeout without unit", "mqtt:\n  connect_timeout: 5\n", `hearth.yaml:2: mqtt.connect_timeout: want a duration, got 5 (no unit); use a Go duration such as 10s`},
		{"max unauthenticated zero", "mqtt:\n  max_unauthenticated: 0\n", `hearth.yaml:2: mqtt.max_unauthenticated: must be at least 1, got 0`},
		{"max keepalive fraction", "mqtt:\n  max_keepalive: 1500ms\n", `hearth.yaml:2: mqtt.max_keepalive: must be whole seconds, as MQTT counts it, got 1.5s`},
		{"max keepalive beyond 16 bits", "mqtt:\n  max_keepalive: 65536s\n", `hearth.yaml:2: mqtt.max_keepalive: must be at most 18h12m15s, as MQTT counts it in 16 bits, got 18h12m16s`},
		{"login failures zero", "mqtt:\n  login_failures_per_minute: 0\n", `hearth.yaml:2: mqtt.login_failures_per_minute: must be more than 0, got 0`},
		{"limit before authentication with url", "mqtt:\n  url: tcp://broker:1883\n  max_keepalive: 60s\n",
			`hearth.yaml:3: mqtt.max_keepalive: limits the embedded broker, which does not run when mqtt.url is set; set the external broker's own limits instead`},
		{"broker limit with url", "mqtt:\n  url: tcp://broker:1883\n  max_connections: 50\n",
			`hearth.yaml:3: mqtt.max_connections: limits the embedded broker, which does not run when mqtt.url is set; set the external broker's own limits instead`},
		{"broker limits before url", "mqtt:\n  max_connect_rate: 20\n  connect_burst: 1\n  max_inflight: 100\n  url: ssl://broker:8883\n",
			"hearth.yaml:2: mqtt.max_connect_rate: limits the embedded broker, which does not run when mqtt.url is set; set the external broker's own limits instead\n" +
				"hearth.yaml:3: mqtt.connect_burst: limits the embedded broker, which does not run when mqtt.url is set; set the external broker's own limits instead\n" +
				"hearth.yaml:4: mqtt.max_inflight: limits the embedded broker, which does not run when mqtt.url is set; set the external broker's own limits instead"},

		// Prefix and data_dir.
		{"empty prefix", "prefix: \"\"\n", `hearth.yaml:1: prefix: must not be empty (leave the key out for the default)`},
		{"prefix with empty level", "prefix: home//hearth\n", `hearth.yaml:1: prefix: "home//hearth" has an empty topic level; separate levels with one '/' and put none at either end`},
		{"prefix with trailing slash", "prefix: hearth/\n", `hearth.yaml:1: prefix: "hearth/" has an empty topic level; separate levels with one '/' and put none at either end`},
		{"prefix with plus", "prefix: home/+\n", `hearth.yaml:1: prefix: "home/+" contains '+', an MQTT wildcard`},
		{"prefix with hash", "prefix: \"#\"\n", `hearth.yaml:1: prefix: "#" contains '#', an MQTT wildcard`},
		{"prefix with dollar", "prefix: $SYS/hearth\n", `hearth.yaml:1: prefix: "$SYS/hearth" starts with '$', which brokers keep for their own topics`},
		{"empty data_dir", "data_dir: \"\"\n", `hearth.yaml:1: data_dir: must not be empty (leave the key out for the default)`},

		// The file itself.
		{"yaml syntax error on line 1", "prefix: a: b\n", `hearth.yaml:1: invalid YAML: mapping values are not allowed in this context`},
		{"yaml tab indentation", "mqtt:\n\tlisten: x\n", `hearth.yaml:2: invalid YAML: found character that cannot start any token`},
		{"yaml unclosed flow", "http: {listen: x\n", `hearth.yaml:1: invalid YAML: did not find expected ',' or '}'`},
		{"two documents", "prefix: a\n---\nprefix: b\n", `hearth.yaml:2: a second YAML document; a config file holds one`},
		{"syntax error in a second document", "prefix: a\n---\nprefix: [\n", `hearth.yaml:3: invalid YAML: did not find expected node content`},
		{"not utf-8", "prefix: a\nhttp: \xff\n", `hearth.yaml:2: not valid UTF-8; a config file is UTF-8 text`},
		{"control character", "prefix: a\x07\n", `hearth.yaml:1: control character U+0007 is not allowed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("hearth.yaml", []byte(tt.yaml))
			if err == nil {
				t.Fatalf("Parse() = %+v, want error %q", c, tt.want)
			}
			if c != nil {
				t.Errorf("Parse() returned a config with its error")
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Errorf("Parse() error is %T, want *Error", err)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("Parse() error:\ngot  %s\nwant %s", got, tt.want)
			}
		})
	}
}
