package config

import (
	"bytes"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// sampleExample returns the worked example of configs/hearth.yaml: the
// commented lines between its BEGIN and END markers, uncommented.
func sampleExample(t *testing.T) []byte {
	t.Helper()
	return sampleBlock(t, "worked example")
}

// sampleBlock returns the commented lines of configs/hearth.yaml between
// "# ----- BEGIN <name>" and "# ----- END <name>", uncommented.
func sampleBlock(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile("../configs/hearth.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	in := false
	found := false
	for i, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "# ----- BEGIN "+name):
			in, found = true, true
			continue
		case strings.HasPrefix(line, "# ----- END "+name):
			if !in {
				t.Fatalf("line %d: END before BEGIN", i+1)
			}
			return out.Bytes()
		case !in:
			continue
		case line == "#":
			out.WriteString("\n")
		case strings.HasPrefix(line, "# "):
			out.WriteString(strings.TrimPrefix(line, "# ") + "\n")
		default:
			t.Fatalf("configs/hearth.yaml:%d: a line of the %s is not commented out: %q", i+1, name, line)
		}
	}
	t.Fatalf("%s not found (BEGIN %v) in configs/hearth.yaml", name, found)
	return nil
}

// TestSampleWorkedExample keeps the commented worked example of the sample
// valid and meaning what its comments say.
func TestSampleWorkedExample(t *testing.T) {
	c, err := Parse("configs/hearth.yaml (worked example)", sampleExample(t))
	if err != nil {
		t.Fatalf("Parse(worked example) error:\n%v", err)
	}
	s, ok := c.Service("cloud_presence")
	if want := (Service{Name: "cloud_presence", Protocol: ProtocolStatusTopic, StatusTopic: "cloud_presence/status", Breaker: Breaker{Enabled: true}}).withDefaults(); !ok || !reflect.DeepEqual(s, want) {
		t.Errorf("service cloud_presence = %+v, want %+v (the defaults, as its comments say)", s, want)
	}
	hook, ok := c.Service("home_assistant")
	wantHook := webhookDefaults("home_assistant", "http://homeassistant.local:8123/api/webhook/hearth-notifications")
	wantHook.Headers = map[string]string{"X-Hearth-Instance": "hub"}
	if !ok || !reflect.DeepEqual(hook, wantHook) {
		t.Errorf("service home_assistant = %+v, want %+v (the defaults, as its comments say, and its header)", hook, wantHook)
	}
	for id, class := range map[string]devices.Class{"hall_motion": devices.Sensor, "hall_light": devices.Light} {
		if d, ok := c.Device(id); !ok || d.Class != class || d.Service != "zigbee" {
			t.Errorf("device %s = %+v, want a %s on zigbee", id, d, class)
		}
	}
	away := "away"
	want := []Automation{
		{
			Name:        "hall_light_from_motion",
			FallbackFor: "cloud_presence",
			Triggers:    []Trigger{{State: &StateTrigger{Device: "hall_motion", Attribute: "occupancy", To: true}}},
			Conditions:  []Condition{{Time: &TimeCondition{After: 17 * 60, Before: 7 * 60}}},
			Actions: []Action{
				{Command: &CommandAction{Device: "hall_light", Target: devices.Target{"state": "ON", "brightness": 102.0}, TTL: 30 * time.Second}},
				{Notify: &NotifyAction{Title: "Presence service down", Message: "hall light driven by the local motion sensor", Severity: "warning"}},
			},
		},
		{
			Name:     "hall_light_off",
			Requires: []string{"cloud_presence"},
			Triggers: []Trigger{
				{Schedule: &ScheduleTrigger{Cron: "0 23 * * *"}},
				{MQTT: &MQTTTrigger{Topic: "alarm/armed", Payload: &away}},
				{Breaker: &BreakerTrigger{Service: "cloud_presence", To: "closed"}},
			},
			Conditions: []Condition{{State: &StateCondition{Device: "hall_light", Attribute: "state", Op: "eq", Value: "ON"}}},
			Actions: []Action{
				{Command: &CommandAction{Device: "hall_light", Target: devices.Target{"state": "OFF"}}},
				{Publish: &PublishAction{Topic: "hearth_example/hall", Payload: "off"}},
			},
		},
	}
	if !reflect.DeepEqual(c.Automations, want) {
		t.Errorf("worked example automations:\ngot  %s\nwant %s", show(c.Automations), show(want))
	}
}

// TestSamplePrincipalsExample keeps the commented principals example of
// the sample valid and meaning what its comments say.
func TestSamplePrincipalsExample(t *testing.T) {
	c, err := Parse("configs/hearth.yaml (principals example)", sampleBlock(t, "principals example"))
	if err != nil {
		t.Fatalf("Parse(principals example) error:\n%v", err)
	}
	if !c.Authentication() || len(c.Principals) != 2 {
		t.Fatalf("principals = %+v; want wall_tablet and home_assistant", c.Principals)
	}
	if want := []BrokerUser{{Username: "dashboard", Password: "change-me-dashboard", Publish: []string{"dashboard/#"}}}; !reflect.DeepEqual(c.MQTT.Users, want) {
		t.Errorf("mqtt.users = %+v; want %+v", c.MQTT.Users, want)
	}
	tablet, _ := c.Principal("wall_tablet")
	if tablet.MQTTUsername != "tablet" || tablet.MQTTPassword != "change-me-tablet" || tablet.HTTPToken == "" || !reflect.DeepEqual(tablet.MQTTPublish, []string{"tablet/#"}) {
		t.Errorf("wall_tablet = %+v", tablet)
	}
	for _, tc := range []struct {
		device, action string
		want           bool
	}{
		{"hall_light", devices.ActionOn, true},
		{"front_door", devices.ActionLock, true},
		{"front_door", devices.ActionUnlock, false},
		{"hall_light", devices.ActionSet, false},
	} {
		if got := tablet.Allow.Allows(tc.device, tc.action); got != tc.want {
			t.Errorf("wall_tablet Allows(%s, %s) = %v; want %v, as the comment says", tc.device, tc.action, got, tc.want)
		}
	}
	if ha, _ := c.Principal("home_assistant"); !ha.Allow.Allows("front_door", devices.ActionUnlock) {
		t.Errorf("home_assistant may not unlock the front door; want everything allowed")
	}
}
