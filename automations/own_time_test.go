package automations

import (
	"fmt"
	"testing"
	"time"
)

// A payload's "time" that is no receive time of now (seconds taken for
// ms, a duration, a device clock never set, a time forged far ahead) is
// not the event's time: two presses a minute apart that carry the same
// such "time" are two events with two op_ids, not one op_id that the
// intake would answer the second time with the first press's result.
func TestOwnTimeFarFromNowIsNotTheEventsTime(t *testing.T) {
	for _, stamp := range []string{
		`25`,                      // a duration in ms
		fmt.Sprint(friday.Unix()), // seconds, not ms: January 1970
		`"1970-01-01T00:00:01Z"`,  // a clock never set
		fmt.Sprint(friday.AddDate(1, 0, 0).UnixMilli()), // a year ahead
	} {
		h := start(t, friday, sceneRule(&MQTTTrigger{Topic: "button/x"}))
		payload := fmt.Appendf(nil, `{"action":"single","time":%s}`, stamp)
		h.e.Message("button/x", payload, false)
		h.sync()
		h.clock.Advance(time.Minute)
		h.e.Message("button/x", payload, false)
		h.sync()
		cmds := h.rec.Commands()
		if len(cmds) != 2 {
			t.Fatalf("time %s: %d commands for two presses a minute apart; want 2", stamp, len(cmds))
		}
		if a, b := cmds[0].Payload["op_id"], cmds[1].Payload["op_id"]; a == b {
			t.Errorf("time %s: one op_id %v for two presses a minute apart; want two", stamp, a)
		}
	}
}
