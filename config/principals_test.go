package config

import (
	"reflect"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

const principalsBase = z2m + "devices:\n  front_door: {class: lock}\n  hall: {class: light}\n"

func TestPrincipalsParse(t *testing.T) {
	c, err := Parse("hearth.yaml", []byte(principalsBase+`mqtt:
  users:
    zigbee2mqtt: {password: bridge-secret}
principals:
  tablet:
    mqtt_username: tablet
    mqtt_password: tablet-secret
    http_token: 0123456789abcdef0123
    allow:
      "*": [lock, "on", "off"]
      front_door: [lock]
`))
	if err != nil {
		t.Fatal(err)
	}
	p, ok := c.Principal("tablet")
	if !ok || p.MQTTUsername != "tablet" || p.MQTTPassword != "tablet-secret" || p.HTTPToken != "0123456789abcdef0123" {
		t.Fatalf("principal = %+v, %v", p, ok)
	}
	if !c.Authentication() {
		t.Error("Authentication() = false with a principal")
	}
	for _, tc := range []struct {
		device, action string
		want           bool
	}{
		{"front_door", devices.ActionLock, true},
		{"front_door", devices.ActionUnlock, false},
		{"hall", devices.ActionOn, true},
		{"hall", devices.ActionSet, false},
	} {
		if got := p.Allow.Allows(tc.device, tc.action); got != tc.want {
			t.Errorf("Allows(%s, %s) = %v, want %v", tc.device, tc.action, got, tc.want)
		}
	}
	if len(c.MQTT.Users) != 1 || !reflect.DeepEqual(c.MQTT.Users[0], BrokerUser{Username: "zigbee2mqtt", Password: "bridge-secret"}) {
		t.Errorf("mqtt.users = %+v", c.MQTT.Users)
	}
}

func TestPrincipalsErrors(t *testing.T) {
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown action", principalsBase + "principals:\n  tablet:\n    http_token: 0123456789abcdef\n    allow: {front_door: [unbolt]}\n",
			`hearth.yaml:10: principals.tablet.allow.front_door: unknown action "unbolt" (known: *, arm, close, disarm, lock, off, on, open, set, stop, unlock)`},
		{"unknown device", principalsBase + "principals:\n  tablet:\n    http_token: 0123456789abcdef\n    allow:\n      front_dor: [lock]\n",
			`hearth.yaml:11: principals.tablet.allow.front_dor: no device "front_dor" (did you mean front_door? or "*" for every device)`},
		{"no credentials", principalsBase + "principals:\n  tablet:\n    allow: {front_door: [lock]}\n",
			`hearth.yaml:8: principals.tablet: names no way to authenticate: give mqtt_username and mqtt_password, http_token, or both`},
		{"no allow", principalsBase + "principals:\n  tablet:\n    http_token: 0123456789abcdef\n",
			`hearth.yaml:8: principals.tablet.allow: missing: list what the principal may command, e.g. allow: {front_door: [lock]}`},
		{"short token", principalsBase + "principals:\n  tablet:\n    http_token: short\n    allow: {front_door: [lock]}\n",
			`hearth.yaml:9: principals.tablet.http_token: must be at least 16 bytes long, got 5`},
		{"username without password", principalsBase + "principals:\n  tablet:\n    mqtt_username: tablet\n    allow: {front_door: [lock]}\n",
			`hearth.yaml:9: principals.tablet.mqtt_password: missing: mqtt_username needs mqtt_password`},
		{"mqtt with an external broker", principalsBase + "mqtt: {url: 'tcp://nas:1883'}\nprincipals:\n  tablet:\n    mqtt_username: tablet\n    mqtt_password: tablet-secret\n    allow: {front_door: [lock]}\n",
			`hearth.yaml:10: principals.tablet.mqtt_username: only with the embedded broker: an external broker (mqtt.url) does not tell Hearth who published a command; give the principal an http_token instead`},
		{"same token twice", principalsBase + "principals:\n  a:\n    http_token: 0123456789abcdef\n    allow: {front_door: [lock]}\n  b:\n    http_token: 0123456789abcdef\n    allow: {front_door: [lock]}\n",
			`hearth.yaml:12: principals.b.http_token: is already the token of principals.a; every principal needs its own`},
		{"username of a broker user", principalsBase + "mqtt:\n  users:\n    tablet: {password: tablet-secret}\nprincipals:\n  tablet:\n    mqtt_username: tablet\n    mqtt_password: tablet-secret\n    allow: {front_door: [lock]}\n",
			`hearth.yaml:12: principals.tablet.mqtt_username: "tablet" is already the username of mqtt.users.tablet`},
		{"Hearth's own username", principalsBase + "principals:\n  tablet:\n    mqtt_username: hearthd\n    mqtt_password: tablet-secret\n    allow: {front_door: [lock]}\n",
			`hearth.yaml:9: principals.tablet.mqtt_username: the username "hearthd" is Hearth's own`},
		{"user without password", principalsBase + "mqtt:\n  users:\n    zigbee2mqtt: {}\nprincipals:\n  t:\n    http_token: 0123456789abcdef\n    allow: {front_door: [lock]}\n",
			`hearth.yaml:9: mqtt.users.zigbee2mqtt.password: missing`},
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

func TestReadTimeout(t *testing.T) {
	c, err := Parse("hearth.yaml", []byte(z2m+"    read_timeout: 2s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := c.Service("zigbee"); s.ReadTimeout != 2*time.Second {
		t.Errorf("read_timeout = %v, want 2s", s.ReadTimeout)
	}
	c, _ = Parse("hearth.yaml", []byte(z2m))
	if s, _ := c.Service("zigbee"); s.ReadTimeout != 5*time.Second {
		t.Errorf("default read_timeout = %v, want 5s", s.ReadTimeout)
	}
	_, err = Parse("hearth.yaml", []byte("services:\n  cloud:\n    protocol: status_topic\n    status_topic: cloud/status\n    read_timeout: 2s\n"))
	want := `hearth.yaml:5: services.cloud.read_timeout: only for services that take commands (esphome, homie, http, shelly, tasmota, zigbee2mqtt, zwavejs), not status_topic: Hearth reads no device through it`
	if err == nil || err.Error() != want {
		t.Errorf("read_timeout on a status_topic service: %v; want %s", err, want)
	}
}

func TestSleepyDevices(t *testing.T) {
	c, err := Parse("hearth.yaml", []byte(z2m+"devices:\n  radiator:\n    class: climate\n    sleepy: true\n    wake_interval: 5m\n  door_sensor:\n    class: climate\n    sleepy: true\n    wake_interval: 1h\n    awake_window: 30s\n    ttl: 10m\n"))
	if err != nil {
		t.Fatal(err)
	}
	r, _ := c.Device("radiator")
	if want := (devices.Sleep{Sleepy: true, WakeInterval: 5 * time.Minute, AwakeWindow: DefaultAwakeWindow}); r.Sleep != want || r.TTL != 5*time.Minute {
		t.Errorf("radiator: sleep %+v, ttl %v; want %+v and the wake interval as TTL", r.Sleep, r.TTL, want)
	}
	d, _ := c.Device("door_sensor")
	if d.Sleep.AwakeWindow != 30*time.Second || d.TTL != 10*time.Minute {
		t.Errorf("door_sensor: awake window %v, ttl %v; want 30s and its own ttl 10m", d.Sleep.AwakeWindow, d.TTL)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"devices:\n  r:\n    class: climate\n    sleepy: true\n", `hearth.yaml:7: devices.r.wake_interval: missing: a sleepy device needs its wake-up (or check-in) interval, such as 5m`},
		{"devices:\n  r:\n    class: climate\n    wake_interval: 5m\n", `hearth.yaml:7: devices.r.wake_interval: only for a sleepy device: add sleepy: true`},
		{"devices:\n  r:\n    class: climate\n    sleepy: true\n    wake_interval: 10s\n    awake_window: 1m\n", `hearth.yaml:9: devices.r.awake_window: 1m is longer than wake_interval 10s: the device would never sleep`},
	} {
		_, err := Parse("hearth.yaml", []byte(z2m+tc.yaml))
		if err == nil || err.Error() != tc.want {
			t.Errorf("error %v; want %s", err, tc.want)
		}
	}
}

// TestDeviceOfflineKey checks that a device's offline key reaches the
// device as written, and that a device without one takes its class's
// default: fail, or queue for a sleepy device.
func TestDeviceOfflineKey(t *testing.T) {
	c, err := Parse("hearth.yaml", []byte(z2m+"devices:\n"+
		"  lamp: {class: light}\n"+
		"  held_lamp: {class: light, offline: queue}\n"+
		"  door: {class: lock, offline: fail}\n"+
		"  valve: {class: climate, sleepy: true, wake_interval: 5m}\n"+
		"  eager_valve: {class: climate, sleepy: true, wake_interval: 5m, offline: fail}\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct{ written, effective devices.Offline }{
		"lamp":        {devices.OfflineDefault, devices.OfflineFail},
		"held_lamp":   {devices.OfflineQueue, devices.OfflineQueue},
		"door":        {devices.OfflineFail, devices.OfflineFail},
		"valve":       {devices.OfflineDefault, devices.OfflineQueue},
		"eager_valve": {devices.OfflineFail, devices.OfflineFail},
	}
	for _, d := range c.Devices {
		w := want[d.ID]
		if d.Offline != w.written || d.OnOffline() != w.effective {
			t.Errorf("%s: offline %q, effective %q; want %q, %q", d.ID, d.Offline, d.OnOffline(), w.written, w.effective)
		}
	}
}
