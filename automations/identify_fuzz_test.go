package automations

import (
	"testing"
)

// FuzzIdentifyEvent feeds the event identity arbitrary payloads: it never
// panics, gives one payload one identity, and the same identity to two
// payloads that differ only in a volatile field.
func FuzzIdentifyEvent(f *testing.F) {
	f.Add([]byte(`{"time":1764763200000,"value":0,"sequence":7}`), "action")
	f.Add([]byte(`{"action":"single","linkquality":96,"last_seen":"2026-12-03T12:00:00Z"}`), "action")
	f.Add([]byte(`not json`), "")
	f.Add([]byte(`[1,2]`), "x")
	f.Add([]byte(`{"time":"x","last_seen":1e300}`), "time")
	f.Fuzz(func(t *testing.T, payload []byte, field string) {
		obj, isObject := jsonObject(payload)
		m := &MQTTTrigger{Topic: "a/#"}
		id1, _ := identify(m, "a/b", payload, obj, isObject)
		id2, _ := identify(m, "a/b", payload, obj, isObject)
		if id1 != id2 {
			t.Fatalf("identify(%q) is not deterministic", payload)
		}
		if field != "" {
			identify(&MQTTTrigger{Topic: "a/#", EventID: []string{field}}, "a/b", payload, obj, isObject)
		}
		if !isObject {
			return
		}
		obj["linkquality"] = 1.0
		with, _ := identify(m, "a/b", payload, obj, isObject)
		obj["linkquality"] = 2.0
		other, _ := identify(m, "a/b", payload, obj, isObject)
		if with != other {
			t.Fatalf("identify of %q changed with linkquality, a volatile field", payload)
		}
	})
}
