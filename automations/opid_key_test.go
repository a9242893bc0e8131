package automations

import (
	"testing"
	"time"
)

// A schedule's op_id is known ahead from the rule's name, its cron and
// the time: a principal who sends a command of its own with that op_id
// first would have the schedule's command refused (op_id_conflict).
// Keyed, op_ids are derived the same way on every start with the same
// key, and nobody without the key can tell them ahead.
func TestScheduleOpIDsDependOnTheEngineKey(t *testing.T) {
	rule := Rule{
		Name:     "night",
		Triggers: []Trigger{{Schedule: &ScheduleTrigger{Cron: "0 23 * * *"}}},
		Actions:  []Action{{Command: &CommandAction{Device: "front_door", Target: map[string]any{"state": "LOCK"}}}},
	}
	opID := func(key string) any {
		h := startWith(t, time.Date(2026, 11, 27, 22, 30, 0, 0, cet), Options{Key: []byte(key)}, rule)
		h.advance(time.Hour)
		cmds := h.rec.Commands()
		if len(cmds) != 1 {
			t.Fatalf("%d commands; want 1", len(cmds))
		}
		return cmds[0].Payload["op_id"]
	}
	a, again, other := opID("key one"), opID("key one"), opID("key two")
	if a != again {
		t.Errorf("op_ids %v and %v for the 23:00 run with one key; want equal", a, again)
	}
	if a == other {
		t.Errorf("op_id %v for the 23:00 run with two keys; want two op_ids", a)
	}
}
