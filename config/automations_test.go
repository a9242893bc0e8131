package config

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// home is a file with a commanded service, a watched one and two devices,
// for the automation cases.
const home = `services:
  zigbee:
    protocol: zigbee2mqtt
  cloud:
    protocol: status_topic
    status_topic: cloud/presence/status
devices:
  motion: {service: zigbee, class: sensor}
  lamp: {service: zigbee, class: light}
automations:
`

// TestAutomationErrors checks, per kind of mistake in the automations
// section and in a status_topic service, the exact problem reported.
func TestAutomationErrors(t *testing.T) {
	rule := func(body string) string { return home + "  r:\n" + body }
	const trig = "    triggers:\n      - mqtt: {topic: go}\n"
	const act = "    actions:\n      - notify: {title: t}\n"
	tests := []struct {
		name, yaml, want string
	}{
		{"no triggers", rule(act), `hearth.yaml:11: automations.r.triggers: missing; an automation needs at least one of its triggers`},
		{"no actions", rule(trig), `hearth.yaml:11: automations.r.actions: missing; an automation needs at least one of its actions`},
		{"two kinds in one trigger", rule("    triggers:\n      - {mqtt: {topic: go}, schedule: {cron: '@daily'}}\n" + act), `hearth.yaml:13: automations.r.triggers[0]: want exactly one of state, mqtt, schedule, breaker, got 2 keys`},
		{"unknown trigger kind", rule("    triggers:\n      - timer: {every: 5m}\n" + act), `hearth.yaml:13: automations.r.triggers[0].timer: unknown key (known here: state, mqtt, schedule, breaker)`},
		{"triggers not a list", rule("    triggers: {mqtt: {topic: go}}\n" + act), `hearth.yaml:12: automations.r.triggers: want a list of triggers, got a mapping`},
		{"bad cron", rule("    triggers:\n      - schedule: {cron: '* * *'}\n" + act), `hearth.yaml:13: automations.r.triggers[0].schedule.cron: invalid cron expression "* * *": expected exactly 5 fields, found 3: [* * *] (want 5 fields, minute hour day-of-month month day-of-week, or a descriptor such as @hourly)`},
		{"state trigger without attribute", rule("    triggers:\n      - state: {device: motion}\n" + act), `hearth.yaml:13: automations.r.triggers[0].state.attribute: missing`},
		{"state trigger to a list", rule("    triggers:\n      - state: {device: motion, attribute: occupancy, to: [true]}\n" + act), `hearth.yaml:13: automations.r.triggers[0].state.to: want a string, a number or true/false, got a list`},
		{"unknown device in a trigger", rule("    triggers:\n      - state: {device: hall, attribute: occupancy}\n" + act), `hearth.yaml:13: automations.r.triggers[0].state.device: no device "hall" in devices`},
		{"unknown service in a breaker trigger", rule("    triggers:\n      - breaker: {service: zigbe}\n" + act), `hearth.yaml:13: automations.r.triggers[0].breaker.service: no service "zigbe" (services: zigbee, cloud)`},
		{"unknown fallback service", rule("    fallback_for: cloud_presence\n" + trig + act), `hearth.yaml:12: automations.r.fallback_for: no service "cloud_presence" (services: zigbee, cloud)`},
		{"unknown required service", rule("    requires: [cloud, zwave]\n" + trig + act), `hearth.yaml:12: automations.r.requires[1]: no service "zwave" (services: zigbee, cloud)`},
		{"requires its fallback", rule("    fallback_for: cloud\n    requires: [cloud]\n" + trig + act), `hearth.yaml:13: automations.r.requires: names cloud, the service of fallback_for: the automation could never run`},
		{"unknown op", rule(trig + "    conditions:\n      - state: {device: lamp, attribute: brightness, op: gte, value: 10}\n" + act), `hearth.yaml:15: automations.r.conditions[0].state.op: unknown op "gte" (known: eq, ne, lt, le, gt, ge)`},
		{"condition without value", rule(trig + "    conditions:\n      - state: {device: lamp, attribute: state}\n" + act), `hearth.yaml:15: automations.r.conditions[0].state.value: missing`},
		{"time without bounds", rule(trig + "    conditions:\n      - time: {weekdays: [mon]}\n" + act), `hearth.yaml:15: automations.r.conditions[0].time: needs after, before or both`},
		{"time as a number", rule(trig + "    conditions:\n      - time: {after: 2200}\n" + act), `hearth.yaml:15: automations.r.conditions[0].time.after: want a time of day as HH:MM, such as "07:30", got "2200"`},
		{"empty time window", rule(trig + "    conditions:\n      - time: {after: '07:00', before: '07:00'}\n" + act), `hearth.yaml:15: automations.r.conditions[0].time.before: equals after (07:00): an empty window`},
		{"unknown weekday", rule(trig + "    conditions:\n      - time:\n          after: '07:00'\n          weekdays: [mon, tues]\n" + act), `hearth.yaml:17: automations.r.conditions[0].time.weekdays[1]: unknown weekday "tues" (known: mon, tue, wed, thu, fri, sat, sun, or the whole names)`},
		{"command to a sensor", rule(trig + "    actions:\n      - command: {device: motion, target: {state: 'ON'}}\n"), `hearth.yaml:15: automations.r.actions[0].command.target: not a command motion (a sensor) takes: devices of class sensor take no commands`},
		{"relative command", rule(trig + "    actions:\n      - command: {device: lamp, target: {brightness_step: 10}}\n"), `hearth.yaml:15: automations.r.actions[0].command.target: not a command lamp (a light) takes: brightness_step is a relative change; send the absolute target instead`},
		{"out of range target", rule(trig + "    actions:\n      - command:\n          device: lamp\n          target: {brightness: 300}\n"), `hearth.yaml:17: automations.r.actions[0].command.target: not a command lamp (a light) takes: brightness must be within 0–254, got 300`},
		{"command ttl without unit", rule(trig + "    actions:\n      - command: {device: lamp, target: {state: 'ON'}, ttl: 30}\n"), `hearth.yaml:15: automations.r.actions[0].command.ttl: want a duration, got 30 (no unit); use a Go duration such as 10s`},
		{"command without target", rule(trig + "    actions:\n      - command: {device: lamp}\n"), `hearth.yaml:15: automations.r.actions[0].command.target: missing`},
		{"toggle beside a target", rule(trig + "    actions:\n      - command: {device: lamp, target: {state: 'ON'}, toggle: state}\n"), `hearth.yaml:15: automations.r.actions[0].command.toggle: is set beside target; a command has one or the other`},
		{"toggle of an attribute that cannot flip", rule(trig + "    actions:\n      - command: {device: lamp, toggle: brightness}\n"), `hearth.yaml:15: automations.r.actions[0].command.toggle: unknown toggle "brightness" (known: state)`},
		{"toggle of a sensor", rule(trig + "    actions:\n      - command: {device: motion, toggle: state}\n"), `hearth.yaml:15: automations.r.actions[0].command.toggle: motion is a sensor; only a light or a switch can be toggled`},
		{"repeat window too long", rule("    triggers:\n      - mqtt: {topic: go, repeat_window: 2h}\n" + act), `hearth.yaml:13: automations.r.triggers[0].mqtt.repeat_window: must be at most 1h, got 2h`},
		{"repeat window without unit", rule("    triggers:\n      - mqtt: {topic: go, repeat_window: 2}\n" + act), `hearth.yaml:13: automations.r.triggers[0].mqtt.repeat_window: want a duration, got 2 (no unit); use a Go duration such as 10s`},
		{"fields as a list", rule("    triggers:\n      - mqtt: {topic: go, fields: [action]}\n" + act), `hearth.yaml:13: automations.r.triggers[0].mqtt.fields: want a mapping, got a list`},
		{"a field's value a mapping", rule("    triggers:\n      - mqtt:\n          topic: go\n          fields: {action: {x: 1}}\n" + act), `hearth.yaml:15: automations.r.triggers[0].mqtt.fields.action: want a string, a number or true/false, got a mapping`},
		{"event_id not a list", rule("    triggers:\n      - mqtt: {topic: go, event_id: action}\n" + act), `hearth.yaml:13: automations.r.triggers[0].mqtt.event_id: want a list of strings, got "action"`},
		{"publish to a wildcard", rule(trig + "    actions:\n      - publish: {topic: 'a/+', payload: x}\n"), `hearth.yaml:15: automations.r.actions[0].publish.topic: "a/+" contains '+', an MQTT wildcard`},
		{"unknown severity", rule(trig + "    actions:\n      - notify: {title: t, severity: fatal}\n"), `hearth.yaml:15: automations.r.actions[0].notify.severity: unknown severity "fatal" (known: info, warning, critical)`},
		{"unknown automation key", rule(trig + act + "    fallback: cloud\n"), `hearth.yaml:16: automations.r.fallback: unknown key (known here: fallback_for, requires, triggers, conditions, actions)`},

		// status_topic services.
		{"status_topic without topic", "services:\n  cloud:\n    protocol: status_topic\n", `hearth.yaml:2: services.cloud.status_topic: missing; a status_topic service needs the topic it reports its status on`},
		{"status_topic with a wildcard", "services:\n  cloud:\n    protocol: status_topic\n    status_topic: cloud/#\n", `hearth.yaml:4: services.cloud.status_topic: "cloud/#" contains '#', an MQTT wildcard`},
		{"status_topic with retry", "services:\n  cloud:\n    protocol: status_topic\n    status_topic: s\n    retry: {max_attempts: 2}\n", `hearth.yaml:5: services.cloud.retry: a status_topic service takes no retry: Hearth only watches it and sends it no commands`},
		{"status_topic with base_topic", "services:\n  cloud:\n    protocol: status_topic\n    status_topic: s\n    base_topic: cloud\n", `hearth.yaml:5: services.cloud.base_topic: a status_topic service takes no base_topic: Hearth only watches it and sends it no commands`},
		{"same online and offline payload", "services:\n  cloud:\n    protocol: status_topic\n    status_topic: s\n    offline_payload: online\n", `hearth.yaml:5: services.cloud.offline_payload: online_payload and offline_payload are both "online"; they must differ`},
		{"status_topic keys on zigbee2mqtt", z2m + "    status_topic: s\n", `hearth.yaml:4: services.zigbee.status_topic: only for protocol status_topic, not zigbee2mqtt`},
		{"automation without settings", home + "  r:\n" + trig + act + "  x: ~\n" + "", `hearth.yaml:16: automations.x.triggers: missing; an automation needs at least one of its triggers` + "\n" + `hearth.yaml:16: automations.x.actions: missing; an automation needs at least one of its actions`},
		{"device naming a status_topic service", "services:\n  cloud:\n    protocol: status_topic\n    status_topic: s\ndevices:\n  lamp: {service: cloud, class: light}\n", `hearth.yaml:6: devices.lamp.service: service "cloud" only reports its status (protocol status_topic); Hearth sends it no commands, so no device can be reached through it`},
		{"device without service beside a status_topic one", z2m + "  cloud:\n    protocol: status_topic\n    status_topic: s\ndevices:\n  lamp: {class: light}\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Parse("hearth.yaml", []byte(tt.yaml))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Parse() error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse() = %+v, want error %q", c, tt.want)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("Parse() error:\ngot  %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestAutomationsParsed(t *testing.T) {
	c, err := Parse("hearth.yaml", []byte(home+`  lamp_on:
    fallback_for: cloud
    requires: [zigbee]
    triggers:
      - state: {device: motion, attribute: occupancy, to: true, from: false}
      - mqtt: {topic: "alarm/+/armed", payload: away}
      - mqtt: {topic: "door/#"}
      - schedule: {cron: "@hourly"}
      - breaker: {service: cloud, to: half_open}
    conditions:
      - time: {after: "22:30", before: "06:00", weekdays: [fri, saturday]}
      - state: {device: lamp, attribute: brightness, op: lt, value: 100}
      - state: {device: lamp, attribute: state, value: "OFF"}
    actions:
      - command: {device: lamp, target: {state: "ON", brightness: 102}, ttl: 30s}
      - publish: {topic: x/y, payload: 7, retain: true}
      - notify: {message: m}
`))
	if err != nil {
		t.Fatalf("Parse() error: %v", err)
	}
	away := "away"
	want := []Automation{{
		Name:        "lamp_on",
		FallbackFor: "cloud",
		Requires:    []string{"zigbee"},
		Triggers: []Trigger{
			{State: &StateTrigger{Device: "motion", Attribute: "occupancy", To: true, From: false}},
			{MQTT: &MQTTTrigger{Topic: "alarm/+/armed", Payload: &away}},
			{MQTT: &MQTTTrigger{Topic: "door/#"}},
			{Schedule: &ScheduleTrigger{Cron: "@hourly"}},
			{Breaker: &BreakerTrigger{Service: "cloud", To: "half_open"}},
		},
		Conditions: []Condition{
			{Time: &TimeCondition{After: 22*60 + 30, Before: 6 * 60, Weekdays: []time.Weekday{time.Friday, time.Saturday}}},
			{State: &StateCondition{Device: "lamp", Attribute: "brightness", Op: "lt", Value: 100.0}},
			{State: &StateCondition{Device: "lamp", Attribute: "state", Op: "eq", Value: "OFF"}},
		},
		Actions: []Action{
			{Command: &CommandAction{Device: "lamp", Target: devices.Target{"state": "ON", "brightness": 102.0}, TTL: 30 * time.Second}},
			{Publish: &PublishAction{Topic: "x/y", Payload: "7", Retain: true}},
			{Notify: &NotifyAction{Message: "m", Severity: "info"}},
		},
	}}
	if !reflect.DeepEqual(c.Automations, want) {
		t.Errorf("Automations:\ngot  %s\nwant %s", show(c.Automations), show(want))
	}
	s, _ := c.Service("cloud")
	wantS := Service{Name: "cloud", Protocol: ProtocolStatusTopic, StatusTopic: "cloud/presence/status", OnlinePayload: "online", OfflinePayload: "offline", MQTTUsername: "cloud", Breaker: defaultBreaker}
	wantS.Breaker.Enabled = true
	if !reflect.DeepEqual(s, wantS) {
		t.Errorf("Service(cloud) = %+v, want %+v", s, wantS)
	}
}

// show renders automations for a failure message, pointers followed.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
