package homeassistant

import (
	"encoding/json"
	"reflect"
	"testing"
)

func decode(t *testing.T, payload []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(payload, &m); err != nil {
		t.Fatalf("payload %s: %v", payload, err)
	}
	return m
}

func TestServiceEntityPayload(t *testing.T) {
	topic, payload := Discovery{Version: "1.4.0"}.ServiceEntity("z2m")
	if want := "homeassistant/binary_sensor/hearth/service_z2m/config"; topic != want {
		t.Errorf("topic %q; want %q", topic, want)
	}
	want := map[string]any{
		"name":                  "z2m problem",
		"unique_id":             "hearth_hearth_service_z2m",
		"default_entity_id":     "binary_sensor.hearth_service_z2m",
		"device_class":          "problem",
		"entity_category":       "diagnostic",
		"state_topic":           "hearth/services/z2m/state",
		"value_template":        "{{ 'OFF' if value_json.state == 'closed' else 'ON' }}",
		"payload_on":            "ON",
		"payload_off":           "OFF",
		"json_attributes_topic": "hearth/services/z2m/state",
		"qos":                   1.0,
		"availability": []any{map[string]any{
			"topic":                 "hearth/bridge/state",
			"payload_available":     "online",
			"payload_not_available": "offline",
		}},
		"device": map[string]any{
			"identifiers":  []any{"hearth_hearth"},
			"name":         "Hearth",
			"manufacturer": "Hearth",
			"model":        "hearthd",
			"sw_version":   "1.4.0",
		},
		"origin": map[string]any{"name": "Hearth", "sw_version": "1.4.0"},
	}
	if got := decode(t, payload); !reflect.DeepEqual(got, want) {
		t.Errorf("payload\n got %v\nwant %v", got, want)
	}
}

func TestServiceEntityFollowsConfiguredPrefixesAndNode(t *testing.T) {
	d := Discovery{Prefix: "ha", NodeID: "attic", TopicPrefix: "home/hearth"}
	topic, payload := d.ServiceEntity("cloud")
	if want := "ha/binary_sensor/attic/service_cloud/config"; topic != want {
		t.Errorf("topic %q; want %q", topic, want)
	}
	got := decode(t, payload)
	for key, want := range map[string]any{
		"unique_id":             "hearth_attic_service_cloud",
		"default_entity_id":     "binary_sensor.attic_service_cloud",
		"state_topic":           "home/hearth/services/cloud/state",
		"json_attributes_topic": "home/hearth/services/cloud/state",
	} {
		if got[key] != want {
			t.Errorf("%s = %v; want %v", key, got[key], want)
		}
	}
	if avail := got["availability"].([]any)[0].(map[string]any)["topic"]; avail != "home/hearth/bridge/state" {
		t.Errorf("availability topic %v; want home/hearth/bridge/state", avail)
	}
	dev := got["device"].(map[string]any)
	if !reflect.DeepEqual(dev["identifiers"], []any{"hearth_attic"}) {
		t.Errorf("device identifiers %v; want [hearth_attic]", dev["identifiers"])
	}
	if _, ok := dev["sw_version"]; ok {
		t.Errorf("device sw_version %v with no Version; want it left out", dev["sw_version"])
	}
	if got, want := d.StatusTopic(), "ha/status"; got != want {
		t.Errorf("StatusTopic %q; want %q", got, want)
	}
	if got, want := (Discovery{}).StatusTopic(), "homeassistant/status"; got != want {
		t.Errorf("default StatusTopic %q; want %q", got, want)
	}
}

// Service names are restricted to [a-z0-9_-] by config; a name outside
// that still yields a topic level and an entity id Home Assistant accepts.
func TestServiceEntityIDsStayValid(t *testing.T) {
	for _, tc := range []struct {
		service, topic, entityID, uniqueID string
	}{
		{"zwave-js", "homeassistant/binary_sensor/hearth/service_zwave-js/config", "binary_sensor.hearth_service_zwave_js", "hearth_hearth_service_zwave-js"},
		{"z2m_2", "homeassistant/binary_sensor/hearth/service_z2m_2/config", "binary_sensor.hearth_service_z2m_2", "hearth_hearth_service_z2m_2"},
		{"Cam/1+#", "homeassistant/binary_sensor/hearth/service_Cam_1__/config", "binary_sensor.hearth_service_cam_1__", "hearth_hearth_service_Cam_1__"},
	} {
		topic, payload := Discovery{}.ServiceEntity(tc.service)
		got := decode(t, payload)
		if topic != tc.topic || got["default_entity_id"] != tc.entityID || got["unique_id"] != tc.uniqueID {
			t.Errorf("%q: topic %q, default_entity_id %v, unique_id %v; want %q, %q, %q",
				tc.service, topic, got["default_entity_id"], got["unique_id"], tc.topic, tc.entityID, tc.uniqueID)
		}
	}
}

func TestIsBirth(t *testing.T) {
	for payload, want := range map[string]bool{"online": true, "online\n": true, "offline": false, "": false, "Online": false} {
		if got := IsBirth([]byte(payload)); got != want {
			t.Errorf("IsBirth(%q) = %v; want %v", payload, got, want)
		}
	}
}

func TestServiceStateTopic(t *testing.T) {
	if got, want := (Discovery{}).ServiceStateTopic("z2m"), "hearth/services/z2m/state"; got != want {
		t.Errorf("ServiceStateTopic %q; want %q", got, want)
	}
}
