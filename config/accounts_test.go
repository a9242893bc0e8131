package config

import (
	"reflect"
	"strings"
	"testing"
)

func TestServiceAccountsParse(t *testing.T) {
	c, err := Parse("hearth.yaml", []byte(`services:
  zigbee:
    protocol: zigbee2mqtt
  zigbee_upstairs:
    protocol: zigbee2mqtt
    base_topic: z2m_upstairs
    mqtt_username: upstairs
    mqtt_password: upstairs-secret
    client_id: z2m-upstairs
  zwave:
    protocol: zwavejs
    gateway_name: attic
  cloud:
    protocol: status_topic
    status_topic: cloud/status
mqtt:
  users:
    dashboard:
      password: dashboard-secret
      publish: ["dashboard/#", "notes/+/text"]
    reader: {password: reader-secret}
principals:
  ha:
    mqtt_username: homeassistant
    mqtt_password: ha-secret-1
    mqtt_publish: ["statestream/#"]
    allow: {"*": ["*"]}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ service, username, password, clientID string }{
		{"zigbee", "zigbee", "", ""}, // the service's name; the password comes from the credentials file
		{"zigbee_upstairs", "upstairs", "upstairs-secret", "z2m-upstairs"},
		{"zwave", "zwave", "", "ZWAVE_GATEWAY-attic"}, // Z-Wave JS UI's own client ID
		{"cloud", "cloud", "", ""},
	} {
		s, _ := c.Service(tc.service)
		if s.MQTTUsername != tc.username || s.MQTTPassword != tc.password || s.ClientID != tc.clientID {
			t.Errorf("service %s: username %q, password %q, client ID %q; want %q, %q, %q", tc.service, s.MQTTUsername, s.MQTTPassword, s.ClientID, tc.username, tc.password, tc.clientID)
		}
	}
	if want := []BrokerUser{
		{Username: "dashboard", Password: "dashboard-secret", Publish: []string{"dashboard/#", "notes/+/text"}},
		{Username: "reader", Password: "reader-secret"},
	}; !reflect.DeepEqual(c.MQTT.Users, want) {
		t.Errorf("mqtt.users = %+v; want %+v (mqtt.users no longer need principals)", c.MQTT.Users, want)
	}
	if p, _ := c.Principal("ha"); !reflect.DeepEqual(p.MQTTPublish, []string{"statestream/#"}) {
		t.Errorf("principal ha mqtt_publish = %q", p.MQTTPublish)
	}
	if c.MQTT.AllowAnonymous || c.HTTP.AllowAnonymous {
		t.Error("allow_anonymous defaults to true; want false: a fresh install is not open")
	}
}

func TestAnonymousParse(t *testing.T) {
	c, err := Parse("hearth.yaml", []byte("mqtt: {allow_anonymous: true}\nhttp: {allow_anonymous: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.MQTT.AllowAnonymous || !c.HTTP.AllowAnonymous {
		t.Errorf("allow_anonymous on the default loopback listeners: mqtt %v, http %v; want both true", c.MQTT.AllowAnonymous, c.HTTP.AllowAnonymous)
	}
	for _, listen := range []string{"127.0.0.1:1883", "127.8.9.1:1883", "[::1]:1883", "localhost:1883", "LOCALHOST:0"} {
		if _, err := Parse("hearth.yaml", []byte("mqtt: {allow_anonymous: true, listen: '"+listen+"'}\n")); err != nil {
			t.Errorf("anonymous on loopback %s: %v; want no error", listen, err)
		}
	}
	c, err = Parse("hearth.yaml", []byte("mqtt:\n  listen: 0.0.0.0:1883\n  allow_anonymous: true\n  allow_anonymous_beyond_loopback: true\nhttp:\n  listen: ':8080'\n  allow_anonymous: true\n  allow_anonymous_beyond_loopback: true\n"))
	if err != nil || !c.MQTT.AllowAnonymousBeyondLoopback || !c.HTTP.AllowAnonymousBeyondLoopback {
		t.Errorf("anonymous beyond loopback, said explicitly: %v; want accepted", err)
	}
}

func TestAccountErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"anonymous mqtt on every interface", "mqtt:\n  listen: 0.0.0.0:1883\n  allow_anonymous: true\n",
			`hearth.yaml:3: mqtt.allow_anonymous: is true and mqtt.listen "0.0.0.0:1883" is not a loopback address, so anyone who can reach it could connect unauthenticated; listen on 127.0.0.1, drop allow_anonymous and use the generated credentials, or set mqtt.allow_anonymous_beyond_loopback: true if this is wanted`},
		{"anonymous mqtt on an empty host", "mqtt:\n  listen: ':1883'\n  allow_anonymous: true\n",
			`hearth.yaml:3: mqtt.allow_anonymous: is true and mqtt.listen ":1883" is not a loopback address, so anyone who can reach it could connect unauthenticated; listen on 127.0.0.1, drop allow_anonymous and use the generated credentials, or set mqtt.allow_anonymous_beyond_loopback: true if this is wanted`},
		{"anonymous http on a LAN address", "http:\n  listen: 192.168.1.10:8080\n  allow_anonymous: true\n",
			`hearth.yaml:3: http.allow_anonymous: is true and http.listen "192.168.1.10:8080" is not a loopback address, so anyone who can reach it could connect unauthenticated; listen on 127.0.0.1, drop allow_anonymous and use the generated credentials, or set http.allow_anonymous_beyond_loopback: true if this is wanted`},
		{"anonymous on a host name", "http:\n  listen: hub.local:8080\n  allow_anonymous: true\n",
			`hearth.yaml:3: http.allow_anonymous: is true and http.listen "hub.local:8080" is not a loopback address, so anyone who can reach it could connect unauthenticated; listen on 127.0.0.1, drop allow_anonymous and use the generated credentials, or set http.allow_anonymous_beyond_loopback: true if this is wanted`},
		{"anonymous mqtt with an mqtts listener on every interface", "mqtt:\n  allow_anonymous: true\n  mqtts: {listen: '0.0.0.0:8883', cert_file: c.pem, key_file: k.pem}\n",
			`hearth.yaml:2: mqtt.allow_anonymous: is true and mqtt.mqtts.listen "0.0.0.0:8883" is not a loopback address, so anyone who can reach it could connect unauthenticated; listen on 127.0.0.1, drop allow_anonymous and use the generated credentials, or set mqtt.allow_anonymous_beyond_loopback: true if this is wanted`},
		{"beyond loopback alone", "mqtt:\n  allow_anonymous_beyond_loopback: true\n",
			`hearth.yaml:2: mqtt.allow_anonymous_beyond_loopback: has no effect without mqtt.allow_anonymous: true`},
		{"anonymous with principals", principalsBase + "mqtt: {allow_anonymous: true}\nprincipals:\n  t:\n    http_token: 0123456789abcdef\n    allow: {front_door: [lock]}\n",
			`hearth.yaml:7: mqtt.allow_anonymous: cannot be true with principals: they need the broker to authenticate every client (remove allow_anonymous, or give every client a principal)`},
		{"anonymous http with principals", principalsBase + "http: {allow_anonymous: true}\nprincipals:\n  t:\n    http_token: 0123456789abcdef\n    allow: {front_door: [lock]}\n",
			`hearth.yaml:7: http.allow_anonymous: cannot be true with principals: they need the HTTP API to authenticate every client (remove allow_anonymous, or give every client a principal)`},
		{"anonymous with an external broker", "mqtt: {url: 'tcp://nas:1883', allow_anonymous: true}\n",
			`hearth.yaml:1: mqtt.allow_anonymous: only for the embedded broker; with mqtt.url, the external broker decides who may connect`},
		{"short service password", z2m + "    mqtt_password: short\n",
			`hearth.yaml:4: services.zigbee.mqtt_password: must be at least 8 bytes long, got 5`},
		{"empty service username", z2m + "    mqtt_username: ''\n",
			`hearth.yaml:4: services.zigbee.mqtt_username: must not be empty (leave the key out for the default)`},
		{"account on a webhook", "services:\n  ntfy:\n    protocol: webhook\n    url: https://ntfy.sh/x\n    mqtt_username: ntfy\n",
			`hearth.yaml:5: services.ntfy.mqtt_username: only for services that use MQTT (esphome, homie, shelly, status_topic, tasmota, zigbee2mqtt, zwavejs), not webhook: Hearth reaches it over HTTP`},
		{"two services, one username", z2m + "    mqtt_username: bridge\n  cloud:\n    protocol: status_topic\n    status_topic: cloud/status\n    mqtt_username: bridge\n",
			`hearth.yaml:8: services.cloud.mqtt_username: username "bridge" is already the username of services.zigbee; every service needs an account of its own`},
		{"service username of a broker user", z2m + "mqtt:\n  users:\n    zigbee: {password: bridge-secret}\n",
			`hearth.yaml:2: services.zigbee.mqtt_username: default username (the service's name) "zigbee" is already the username of mqtt.users.zigbee; every service needs an account of its own`},
		{"service username of Hearth", z2m + "    mqtt_username: hearthd\n",
			`hearth.yaml:4: services.zigbee.mqtt_username: username "hearthd" is already the username of Hearth itself; every service needs an account of its own`},
		{"service named as the generated principal", "services:\n  default:\n    protocol: zigbee2mqtt\n",
			`hearth.yaml:2: services.default.mqtt_username: default username (the service's name) "default" is already the username of the generated principal default; every service needs an account of its own`},
		{"client ID twice", "mqtt: {client_id: hub}\n" + z2m + "    client_id: hub\n",
			`hearth.yaml:5: services.zigbee.client_id: "hub" is already the client ID of mqtt.client_id; a client ID is bound to one account`},
		{"user publishing on the prefix", "mqtt:\n  users:\n    script:\n      password: script-secret\n      publish: [\"hearth/#\"]\n",
			`hearth.yaml:5: mqtt.users.script.publish: "hearth/#" overlaps prefix ("hearth/#"): only Hearth and the bridge that owns a topic may publish there`},
		{"user publishing on a bridge", z2m + "mqtt:\n  users:\n    script:\n      password: script-secret\n      publish: [\"zigbee2mqtt/+/set\"]\n",
			`hearth.yaml:8: mqtt.users.script.publish: "zigbee2mqtt/+/set" overlaps services.zigbee.base_topic ("zigbee2mqtt/#"): only Hearth and the bridge that owns a topic may publish there`},
		{"user publishing everywhere", z2m + "mqtt:\n  users:\n    script:\n      password: script-secret\n      publish: [\"#\"]\n",
			`hearth.yaml:8: mqtt.users.script.publish: "#" overlaps prefix ("hearth/#"): only Hearth and the bridge that owns a topic may publish there`},
		{"user publishing Home Assistant discovery", "mqtt:\n  users:\n    dashboard:\n      password: dashboard-secret\n      publish: [\"dashboard/#\", \"homeassistant/#\"]\n",
			`hearth.yaml:5: mqtt.users.dashboard.publish: "homeassistant/#" overlaps homeassistant.discovery_prefix ("homeassistant/#"): only Hearth and the bridge that owns a topic may publish there`},
		{"principal publishing on a status topic", z2m + "  cloud:\n    protocol: status_topic\n    status_topic: cloud/status\ndevices:\n  front_door: {class: lock, service: zigbee}\nprincipals:\n  t:\n    http_token: 0123456789abcdef\n    mqtt_publish: [\"cloud/+\"]\n    allow: {front_door: [lock]}\n",
			`hearth.yaml:12: principals.t.mqtt_publish: "cloud/+" overlaps services.cloud.status_topic ("cloud/status"): only Hearth and the bridge that owns a topic may publish there`},
		{"bad filter", "mqtt:\n  users:\n    script:\n      password: script-secret\n      publish: [\"a/#/b\"]\n",
			`hearth.yaml:5: mqtt.users.script.publish[0]: "a/#/b": '#' must be the whole last topic level`},
		{"empty level", "mqtt:\n  users:\n    script:\n      password: script-secret\n      publish: [\"a//b\"]\n",
			`hearth.yaml:5: mqtt.users.script.publish[0]: "a//b" has an empty topic level; separate levels with one '/' and put none at either end`},
		{"publish not a list", "mqtt:\n  users:\n    script:\n      password: script-secret\n      publish: a/b\n",
			`hearth.yaml:5: mqtt.users.script.publish: want a list of MQTT topic filters, such as ["dashboard/#"], got "a/b"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("hearth.yaml", []byte(tc.yaml))
			if err == nil {
				t.Fatalf("no error; want %s", tc.want)
			}
			if err.Error() != tc.want {
				t.Errorf("error\n got  %s\n want %s", err, tc.want)
			}
		})
	}
}

func TestCheckAnonymousAfterFlags(t *testing.T) {
	c, err := Parse("hearth.yaml", []byte("mqtt: {allow_anonymous: true}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckAnonymous("hearth.yaml"); err != nil {
		t.Fatalf("on loopback: %v", err)
	}
	c.MQTT.Listen = "0.0.0.0:1883" // as -mqtt-listen sets it
	err = c.CheckAnonymous("hearth.yaml")
	if err == nil || !strings.HasPrefix(err.Error(), `hearth.yaml: mqtt.allow_anonymous: is true and mqtt.listen "0.0.0.0:1883" is not a loopback address`) {
		t.Errorf("CheckAnonymous after -mqtt-listen 0.0.0.0:1883 = %v; want the key named", err)
	}
}
