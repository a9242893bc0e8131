package simulator

import (
	"errors"
	"maps"
	"reflect"
	"testing"
)

func TestParsePayload(t *testing.T) {
	tests := []struct {
		in      string
		want    map[string]any
		wantErr bool
	}{
		{in: `{"state":"ON","brightness":12}`, want: map[string]any{"state": "ON", "brightness": 12.0}},
		{in: ` {"state":""} `, want: map[string]any{"state": ""}},
		{in: `ON`, want: map[string]any{"state": "ON"}},
		{in: "lock\n", want: map[string]any{"state": "lock"}},
		{in: `"OFF"`, want: map[string]any{"state": "OFF"}},
		{in: ``, wantErr: true},
		{in: `   `, wantErr: true},
		{in: `{"state":`, wantErr: true},
		{in: `[1,2]`, wantErr: true},
		{in: `12`, wantErr: true},
		{in: `true`, wantErr: true},
		{in: `null`, wantErr: true},
		{in: `"unterminated`, wantErr: true},
	}
	for _, tt := range tests {
		got, err := parsePayload([]byte(tt.in))
		if tt.wantErr {
			if !errors.Is(err, errMalformed) {
				t.Errorf("parsePayload(%q) = %v, %v; want errMalformed", tt.in, got, err)
			}
			continue
		}
		if err != nil || !maps.Equal(got, tt.want) {
			t.Errorf("parsePayload(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestApply(t *testing.T) {
	tests := []struct {
		name      string
		class     string
		from      map[string]any // nil: the class's initial state
		set       map[string]any
		want      map[string]any
		wantValid int
		problems  int
	}{
		{"light on from level 0 goes full", ClassLight, nil, map[string]any{"state": "on"},
			map[string]any{"state": "ON", "brightness": 254, "color_temp": 250}, 1, 0},
		{"light brightness turns on", ClassLight, nil, map[string]any{"brightness": 128.0},
			map[string]any{"state": "ON", "brightness": 128, "color_temp": 250}, 1, 0},
		{"light brightness 0 turns off, keeps level", ClassLight,
			map[string]any{"state": "ON", "brightness": 90, "color_temp": 250}, map[string]any{"brightness": 0.0},
			map[string]any{"state": "OFF", "brightness": 90, "color_temp": 250}, 1, 0},
		{"light explicit state wins", ClassLight, nil, map[string]any{"state": "OFF", "brightness": 128.0},
			map[string]any{"state": "OFF", "brightness": 128, "color_temp": 250}, 2, 0},
		{"light clamps and rounds", ClassLight, nil, map[string]any{"brightness": 300.0, "color_temp": 99.6},
			map[string]any{"state": "ON", "brightness": 254, "color_temp": 150}, 2, 0},
		{"light on keeps level", ClassLight,
			map[string]any{"state": "OFF", "brightness": 40, "color_temp": 250}, map[string]any{"state": "ON"},
			map[string]any{"state": "ON", "brightness": 40, "color_temp": 250}, 1, 0},
		{"light toggle", ClassLight,
			map[string]any{"state": "ON", "brightness": 40, "color_temp": 250}, map[string]any{"state": "TOGGLE"},
			map[string]any{"state": "OFF", "brightness": 40, "color_temp": 250}, 1, 0},
		{"light bad values and unknown keys", ClassLight, nil,
			map[string]any{"state": "DIM", "brightness": "50", "transition": 2.0},
			map[string]any{"state": "OFF", "brightness": 0, "color_temp": 250}, 0, 3},
		{"light takes xy color, to 4 decimals", ClassLight, nil, map[string]any{"color": map[string]any{"x": 0.70061, "y": 0.29934}},
			map[string]any{"state": "OFF", "brightness": 0, "color_temp": 250, "color": map[string]any{"x": 0.7006, "y": 0.2993}, "color_mode": "xy"}, 1, 0},
		{"light refuses a color it cannot take", ClassLight, nil, map[string]any{"color": map[string]any{"r": 255.0, "g": 0.0, "b": 0.0}},
			map[string]any{"state": "OFF", "brightness": 0, "color_temp": 250}, 0, 1},
		{"trv rounds its setpoint to 0.5 and clamps it", ClassClimate, nil, map[string]any{"current_heating_setpoint": 21.3, "system_mode": "heat"},
			map[string]any{"system_mode": "heat", "current_heating_setpoint": 21.5, "local_temperature": 19.5, "preset": "manual"}, 2, 0},
		{"trv clamps", ClassClimate, nil, map[string]any{"current_heating_setpoint": 40.0, "preset": "eco"},
			map[string]any{"system_mode": "off", "current_heating_setpoint": 30.0, "local_temperature": 19.5, "preset": "eco"}, 2, 0},
		{"trv refuses an unknown mode", ClassClimate, nil, map[string]any{"system_mode": "cool"},
			map[string]any{"system_mode": "off", "current_heating_setpoint": 20.0, "local_temperature": 19.5, "preset": "manual"}, 0, 1},
		{"switch on", ClassSwitch, nil, map[string]any{"state": "On"}, map[string]any{"state": "ON"}, 1, 0},
		{"switch ignores brightness", ClassSwitch, nil, map[string]any{"state": "ON", "brightness": 9.0},
			map[string]any{"state": "ON"}, 1, 1},
		{"switch state not a string", ClassSwitch, nil, map[string]any{"state": true},
			map[string]any{"state": "OFF"}, 0, 1},
		{"lock unlock", ClassLock, nil, map[string]any{"state": "unlock"},
			map[string]any{"state": "UNLOCK", "lock_state": "unlocked"}, 1, 0},
		{"lock lock", ClassLock, map[string]any{"state": "UNLOCK", "lock_state": "unlocked"}, map[string]any{"state": "LOCK"},
			map[string]any{"state": "LOCK", "lock_state": "locked"}, 1, 0},
		{"lock has no toggle", ClassLock, nil, map[string]any{"state": "TOGGLE"},
			map[string]any{"state": "LOCK", "lock_state": "locked"}, 0, 1},
		{"lock_state is read-only", ClassLock, nil, map[string]any{"lock_state": "unlocked"},
			map[string]any{"state": "LOCK", "lock_state": "locked"}, 0, 1},
		{"cover open", ClassCover, nil, map[string]any{"state": "open"},
			map[string]any{"state": "OPEN", "position": 100, "tilt": 0}, 1, 0},
		{"cover close", ClassCover, map[string]any{"state": "OPEN", "position": 60, "tilt": 5}, map[string]any{"state": "CLOSE"},
			map[string]any{"state": "CLOSE", "position": 0, "tilt": 5}, 1, 0},
		{"cover stop keeps position", ClassCover, map[string]any{"state": "OPEN", "position": 60, "tilt": 5}, map[string]any{"state": "stop"},
			map[string]any{"state": "OPEN", "position": 60, "tilt": 5}, 1, 0},
		{"cover position opens", ClassCover, nil, map[string]any{"position": 1.0},
			map[string]any{"state": "OPEN", "position": 1, "tilt": 0}, 1, 0},
		{"cover position 0 closes", ClassCover, map[string]any{"state": "OPEN", "position": 60, "tilt": 0}, map[string]any{"position": 0.0},
			map[string]any{"state": "CLOSE", "position": 0, "tilt": 0}, 1, 0},
		{"cover position wins over state", ClassCover, nil, map[string]any{"state": "OPEN", "position": 30.0},
			map[string]any{"state": "OPEN", "position": 30, "tilt": 0}, 2, 0},
		{"cover tilt", ClassCover, nil, map[string]any{"tilt": 150.0},
			map[string]any{"state": "CLOSE", "position": 0, "tilt": 100}, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := tt.from
			if st == nil {
				st = initialState(tt.class)
			}
			st = maps.Clone(st)
			set := maps.Clone(tt.set)
			valid, problems := apply(tt.class, st, tt.set)
			if !reflect.DeepEqual(st, tt.want) {
				t.Errorf("state = %v, want %v", st, tt.want)
			}
			if valid != tt.wantValid {
				t.Errorf("valid = %d, want %d", valid, tt.wantValid)
			}
			if len(problems) != tt.problems {
				t.Errorf("problems = %q, want %d of them", problems, tt.problems)
			}
			if !reflect.DeepEqual(set, tt.set) {
				t.Errorf("apply modified the set: %v", tt.set)
			}
		})
	}
}

func TestCommandTopic(t *testing.T) {
	tests := []struct {
		base, topic, name, verb string
		ok                      bool
	}{
		{"zigbee2mqtt", "zigbee2mqtt/lamp/set", "lamp", "set", true},
		{"zigbee2mqtt", "zigbee2mqtt/kitchen/floor_light/set", "kitchen/floor_light", "set", true},
		{"zigbee2mqtt", "zigbee2mqtt/kitchen/floor_light/get", "kitchen/floor_light", "get", true},
		{"z2m/up", "z2m/up/door/set", "door", "set", true},
		{"zigbee2mqtt", "zigbee2mqtt/lamp", "", "", false},
		{"zigbee2mqtt", "zigbee2mqtt/lamp/availability", "", "", false},
		{"zigbee2mqtt", "zigbee2mqtt/set", "", "", false},
		{"zigbee2mqtt", "other/lamp/set", "", "", false},
		{"zigbee2mqtt", "zigbee2mqttx/lamp/set", "", "", false},
		{"zigbee2mqtt", "zigbee2mqtt/lamp/set/state", "", "", false},
	}
	for _, tt := range tests {
		name, verb, ok := commandTopic(tt.base, tt.topic)
		if name != tt.name || verb != tt.verb || ok != tt.ok {
			t.Errorf("commandTopic(%q, %q) = %q, %q, %v; want %q, %q, %v",
				tt.base, tt.topic, name, verb, ok, tt.name, tt.verb, tt.ok)
		}
	}
}

func TestCheckFriendlyName(t *testing.T) {
	good := []string{"lamp", "kitchen/floor light", "0x00158d0001cded1c", "a/b/c", "bridges"}
	bad := []string{"", "/lamp", "lamp/", "a//b", "a/+", "#", "bridge", "bridge/x", "x/set", "x/get", "x/availability"}
	for _, n := range good {
		if err := checkFriendlyName(n); err != nil {
			t.Errorf("checkFriendlyName(%q) = %v, want nil", n, err)
		}
	}
	for _, n := range bad {
		if err := checkFriendlyName(n); err == nil {
			t.Errorf("checkFriendlyName(%q) = nil, want an error", n)
		}
	}
}

func TestReportIsSortedJSON(t *testing.T) {
	d := &device{Device: Device{Name: "l", Class: ClassLight, LinkQuality: 87}, state: initialState(ClassLight)}
	if got, want := string(d.report()), `{"brightness":0,"color_temp":250,"linkquality":87,"state":"OFF"}`; got != want {
		t.Errorf("report = %s, want %s", got, want)
	}
	if _, ok := d.state["linkquality"]; ok {
		t.Error("report added linkquality to the state")
	}
}
