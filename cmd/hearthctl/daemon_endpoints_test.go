package main

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/dispatcher"
)

// The demo's devices, in config order, as hearthctl devices prints them
// but for STATE, which the tests' commands change.
func TestDevicesListsEveryDeviceInConfigOrder(t *testing.T) {
	addr := demoAddr(t)
	code, stdout, stderr := hearthctl("-addr", addr, "devices")
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d, stderr %q; want 0", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	want := [][]string{
		{"DEVICE", "SERVICE", "CLASS", "AVAILABILITY", "PENDING", "BREAKER", "NOTE", "STATE"},
		{"hall_light", "zigbee", "light", "online", "0", "closed", "-"},
		{"kitchen_light", "zigbee", "light", "online", "0", "closed", "-"},
		{"coffee_maker", "zigbee", "switch", "online", "0", "closed", "-"},
		{"front_door", "zigbee", "lock", "online", "0", "closed", "safety-critical"},
		{"living_blinds", "zigbee", "cover", "online", "0", "closed", "-", `{"position":40,"state":"OPEN","tilt":0}`},
		{"bedroom_trv", "zigbee", "climate", "online", "0", "closed", "-", `{"current_heating_setpoint":20,"local_temperature":19.5,"preset":"manual","system_mode":"off"}`},
		{"porch_plug", "tasmota", "switch", "online", "0", "closed", "-", `{"state":"ON"}`},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), stdout)
	}
	for i, l := range lines {
		got := strings.Fields(l)
		if len(got) != 8 || strings.Join(got[:len(want[i])], " ") != strings.Join(want[i], " ") {
			t.Errorf("line %d: %q, want %q", i, got, want[i])
		}
	}

	code, stdout, _ = hearthctl("-addr", addr, "devices", "-json")
	var ids []string
	for _, l := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
		var d dispatcher.DeviceStatus
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatalf("-json line %q: %v", l, err)
		}
		ids = append(ids, d.ID)
	}
	if got := strings.Join(ids, ","); code != 0 || got != "hall_light,kitchen_light,coffee_maker,front_door,living_blinds,bedroom_trv,porch_plug" {
		t.Errorf("-json: exit %d, ids %s; want 0 and the seven in config order", code, got)
	}
}

var leadingTime = regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ  `)

// A command sent through the API, followed on the event stream: its
// accepted result, the light's new state, its succeeded result; and only
// its device's, with -device.
func TestWatchFollowsACommandThroughHearthd(t *testing.T) {
	addr := demoAddr(t)
	w := startWatch(time.Now(), "-addr", addr, "watch", "-device", "hall_light", "-n", "3")
	w.stderr.waitFor(t, "hearthctl watch: following "+addr+"/api/v1/events?device=hall_light\n")
	if code, _, stderr := hearthctl("-addr", addr, "send", "kitchen_light", `{"state":"ON","brightness":34,"op_id":"cli-watch-other"}`, "-wait", "10s"); code != 0 {
		t.Fatalf("send kitchen_light: exit %d, %s", code, stderr)
	}
	if code, _, stderr := hearthctl("-addr", addr, "send", "hall_light", `{"state":"ON","brightness":33,"op_id":"cli-watch"}`); code != 0 {
		t.Fatalf("send hall_light: exit %d, %s", code, stderr)
	}
	code := w.exit(t)
	got := leadingTime.ReplaceAllString(w.stdout.String(), "T  ")
	want := "" +
		`T  result        hall_light     op_id=cli-watch status=accepted attempts=0 target={"brightness":33,"state":"ON"}` + "\n" +
		`T  state         hall_light     {"brightness":33,"color_temp":250,"state":"ON"}` + "\n" +
		`T  result        hall_light     op_id=cli-watch status=succeeded attempts=1 target={"brightness":33,"state":"ON"} state={"brightness":33,"color_temp":250,"state":"ON"}` + "\n"
	if code != 0 || got != want {
		t.Errorf("exit %d, stdout\n%s\nstderr\n%s\nwant exit 0, stdout\n%s", code, got, w.stderr, want)
	}
}

// status of the demo after its run: ready, the breakers closed (zigbee's
// again), all seven devices online, nothing pending, the one command the demo's outage
// failed fast, and as many dead letters as hearthctl deadletters lists.
func TestStatusSummarizesHearthd(t *testing.T) {
	addr := demoAddr(t)
	_, dl, _ := hearthctl("-addr", addr, "deadletters", "-since", "24h", "-json")
	code, stdout, stderr := hearthctl("-addr", addr, "status")
	since := `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`
	want := regexp.MustCompile("^" +
		regexp.QuoteMeta("hearthd:      "+addr+" ready\n"+
			"breakers:     zigbee closed; tasmota closed\n"+
			"devices:      7: 7 online, 0 offline, 0 unknown\n"+
			"pending:      none\n"+
			"failures:     1 failed command since ") + since + regexp.QuoteMeta(", newest first:\n") +
		"  " + since + regexp.QuoteMeta("  kitchen_light  ") + `demo-\d+-\d+-6` + regexp.QuoteMeta("  failed (breaker_open: the circuit breaker of service zigbee is open)\n") +
		regexp.QuoteMeta("dead letters: "+strconv.Itoa(strings.Count(dl, "\n"))+" since ") + since + regexp.QuoteMeta(" (hearthctl deadletters -since 24h)\n") + "$")
	if code != 0 || !want.MatchString(stdout) || stderr != "" {
		t.Errorf("exit %d, stderr %q, stdout\n%s\nwant exit 0, stdout matching\n%s", code, stderr, stdout, want)
	}
}
