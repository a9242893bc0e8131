package config

import (
	"errors"
	"os"
	"testing"
)

// FuzzParse feeds Parse arbitrary files: it must never panic, and what it
// refuses it refuses with an *Error whose every problem names the file.
func FuzzParse(f *testing.F) {
	for _, path := range []string{"../configs/hearth.yaml", "testdata/broken.yaml"} {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("mqtt: {listen: '0.0.0.0:1883', allow_anonymous: true}\n"))
	f.Add([]byte("mqtt: {url: 'tcp://broker:1883', session_expiry: 1193046h28m14s}\n"))
	f.Add([]byte("mqtt: {allow_anonymous: true, mqtts: {listen: ':8883', cert_file: c.pem}}\nhttp: {tls: {key_file: k.pem}}\n"))
	f.Add([]byte("services:\n  z:\n    protocol: zigbee2mqtt\n    mqtt_username: z\n    client_id: c\nmqtt:\n  users:\n    u: {password: 12345678, publish: ['a/+/#']}\n"))
	f.Add([]byte("principals:\n  p:\n    http_token: 0123456789abcdef\n    mqtt_publish: ['#']\n    allow: {'*': ['*']}\n"))
	f.Add([]byte("services:\n  z: {protocol: zigbee2mqtt}\ndevices:\n  l: {class: light, offline: queue}\n  d: {class: lock, offline: fail}\n  t: {class: climate, sleepy: true, wake_interval: 5m, offline: wait}\n"))
	f.Add([]byte("services:\n  z: {protocol: zwavejs, node_names: true}\ndevices:\n  a: {class: switch, address: kitchen_double/2}\n  b: {class: light, address: Living Room/Lamp}\n  c: {class: switch, address: 12/0}\n"))
	f.Add([]byte("services:\n  w: {protocol: shelly}\ndevices:\n  a: {class: switch, address: shellyplus1-a/switch:0}\n  g: {class: cover, safety: critical, address: shellyplus1-b/switch:0/input:100}\n  l: {class: light, address: dimmer/light:1}\n"))
	f.Add([]byte("services:\n  h: {protocol: homie, base_topic: homie/5}\ndevices:\n  a: {class: switch, address: plug-1/relay/on}\n  l: {class: light, address: kitchen-light/light/power,brightness}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if err == nil {
			if c == nil {
				t.Fatal("Parse returned neither a config nor an error")
			}
			return
		}
		var e *Error
		if !errors.As(err, &e) || len(e.Problems) == 0 {
			t.Fatalf("Parse error %v is not an *Error with problems", err)
		}
		for _, p := range e.Problems {
			if p.File != "fuzz.yaml" || p.Message == "" {
				t.Fatalf("problem %+v does not name the file or says nothing", p)
			}
		}
	})
}
