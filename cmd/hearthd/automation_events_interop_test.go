package main

import (
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// sceneAutomation turns the hall light on at a scene of the hall button,
// as Z-Wave JS UI publishes it. Its filter, +/hall_button/scene, partly
// overlaps the Zigbee2MQTT bridge's zigbee2mqtt/#: Mosquitto may send a
// message on zigbee2mqtt/hall_button/scene once per subscription. Its
// second trigger, hearth-test/marker, lets a test see that every run
// queued before it has run: a rule's runs go one at a time, in order.
const sceneAutomation = `  hall_light:
    service: zigbee
    class: light
automations:
  scene_light:
    triggers:
      - mqtt: {topic: "+/hall_button/scene"}
      - mqtt: {topic: hearth-test/marker}
    actions:
      - command: {device: hall_light, target: {state: "ON"}}
`

const sceneTopic = "zigbee2mqtt/hall_button/scene"

// sceneRuns waits for the run of scene_light the n-th marker triggers
// (counting from 1) and returns the op_ids of the commands scene_light
// sent before that run, in order: those of the earlier markers' runs
// included, that of the n-th's not.
func sceneRuns(hd *proc, n int) []string {
	hd.t.Helper()
	from := 0
	for range n {
		from = hd.mustLine(`msg="automations: rule runs" component=automations rule=scene_light trigger="mqtt hearth-test/marker"`, from) + 1
	}
	lines, _ := hd.out.since(0)
	opID := regexp.MustCompile(`msg="automations: command sent" component=automations rule=scene_light device=hall_light op_id=(auto-\S+)`)
	var ids []string
	for _, l := range lines[:from] {
		if m := opID.FindStringSubmatch(l); m != nil {
			ids = append(ids, m[1])
		}
	}
	return ids
}

// One scene notification that reaches Hearth 8 times within a second (a
// weak link re-sends it 4 times, and Mosquitto delivers each copy once
// per overlapping subscription) runs the rule once and sends one command.
// The same notification with its sequence number changing is 3 events
// more: 3 runs more. After a kill -9 and a restart, the first
// notification redelivered as it was (its own time included) runs the
// rule again but its command has the op_id of the first: Hearth's intake
// refuses it, and the light, turned off meanwhile, gets no set.
func TestAutomationRunsOncePerEventAgainstMosquitto(t *testing.T) {
	checkLeaks(t)
	b := startMosquitto(t)
	hearthdBin, simBin := builtBinaries(t)
	data := t.TempDir()
	cfg := writeInteropConfigDevices(t, b.url(), data, "      max_attempts: 2", sceneAutomation)
	sim := startProc(t, "hearth-sim", simBin, "-broker", b.url(), "-config", cfg)
	sim.mustLine("hearth-sim ready", 0)
	hd := startProc(t, "hearthd", hearthdBin, "-config", cfg)
	hd.mustLine(`msg="mqtt connected"`, 0)

	at := time.Now().UnixMilli()
	scene := func(seq int, at int64) string {
		return fmt.Sprintf(`{"time":%d,"value":0,"sequence":%d}`, at, seq)
	}
	first := scene(1, at)
	b.pub("-t", sceneTopic, "-m", first)
	for i := 1; i < 4; i++ { // the re-sends, each stamped when it came
		b.pub("-t", sceneTopic, "-m", scene(1, at+int64(i)*100))
	}
	b.pub("-t", "hearth-test/marker", "-m", "1")
	ids := sceneRuns(hd, 1)
	if len(ids) != 1 {
		t.Fatalf("scene_light sent %d commands for one scene notification (4 copies, each maybe twice): %v; want 1", len(ids), ids)
	}
	hd.mustLine(`msg="automations: repeat of an event ignored"`, 0)

	for seq := 2; seq <= 4; seq++ {
		b.pub("-t", sceneTopic, "-m", scene(seq, at+int64(seq)*1000))
	}
	b.pub("-t", "hearth-test/marker", "-m", "2")
	ids = sceneRuns(hd, 2)
	if len(ids) != 5 {
		t.Fatalf("scene_light sent %d commands before the second marker's: %v; want 5: the first scene, the first marker, 3 scenes with new sequence numbers", len(ids), ids)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		seen[id] = true
	}
	if len(seen) != 5 {
		t.Errorf("op_ids %v; want 5 different ones", ids)
	}

	// The light is turned off, then Hearth is killed.
	results := b.subscribe(0, "hearth/hall_light/result")
	sets := b.subscribe(0, "zigbee2mqtt/hall_light/set")
	b.pub("-t", "hearth/hall_light/set", "-m", `{"state":"OFF","op_id":"off1"}`)
	for {
		r, _ := results.result("hearth/hall_light/result")
		if r.OpID == "off1" && r.Status.Terminal() {
			if r.Status != devices.Succeeded {
				t.Fatalf("off1 ended %s/%s; want succeeded", r.Status, r.Reason)
			}
			break
		}
	}
	if m := sets.next(); m.payload != `{"state":"OFF"}` {
		t.Fatalf("set %s; want OFF", m)
	}
	if err := hd.signal(syscall.SIGKILL); err == nil {
		t.Fatal("hearthd exited 0 on SIGKILL")
	}

	hd = startProc(t, "hearthd", hearthdBin, "-config", cfg)
	hd.mustLine(`msg="mqtt connected"`, 0)
	b.pub("-t", sceneTopic, "-m", first) // redelivered as it was
	b.pub("-t", "hearth-test/marker", "-m", "3")
	again := sceneRuns(hd, 1)
	if len(again) != 1 || again[0] != ids[0] {
		t.Fatalf("after the restart scene_light sent %v before the marker's; want the first scene's op_id %s again", again, ids[0])
	}
	// The marker's command is new, and turns the light on: that set is
	// the only one. The redelivered scene's was refused by its op_id.
	if m := sets.next(); m.payload != `{"state":"ON"}` {
		t.Fatalf("set %s after the restart; want the marker's ON", m)
	}
	if more := sets.sync(b); len(more) != 0 {
		t.Errorf("sets after the marker's: %v; want none: the redelivered scene's command is the first one", more)
	}
	for _, l := range func() []string { l, _ := hd.out.since(0); return l }() {
		if strings.Contains(l, "op_id="+ids[0]) && strings.Contains(l, "level=ERROR") {
			t.Errorf("the redelivered scene's command was logged as an error: %s", l)
		}
	}
}
