package dispatcher

import (
	"strings"
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

// After the store lost its op_ids (a quarantine at 18:00), a command
// issued before then is refused stale_command within the dedup window,
// nothing sent, its detail naming the quarantine; one issued after it, and
// one without issued_at, are taken.
func TestCommandIssuedBeforeLostDedupIsRefusedStaleWithinTheWindow(t *testing.T) {
	at := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC) // the rig's clock reads 19:00
	r := startSleepy(t, sleepyOptions{awake: true, lostDedup: LostDedup{At: at, Until: at.Add(7 * 24 * time.Hour)}})

	r.submit(`{"occupied_heating_setpoint":21,"op_id":"old","issued_at":"2026-11-29T17:59:59Z"}`)
	old := r.await("old's result", func(res devices.Result) bool { return res.OpID == "old" })
	if old.Status != devices.Rejected || old.Reason != devices.ReasonStaleCommand ||
		!strings.Contains(old.Detail, "2026-11-29T18:00:00Z") || !strings.Contains(old.Detail, "quarantined") {
		t.Errorf("issued before the quarantine: %s/%s (%s); want rejected stale_command naming 2026-11-29T18:00:00Z", old.Status, old.Reason, old.Detail)
	}
	if _, stored, _ := r.journal.Lookup("old"); stored {
		t.Error("the refused command was stored")
	}

	r.submit(`{"occupied_heating_setpoint":21,"op_id":"new","issued_at":"2026-11-29T18:00:01Z"}`)
	r.status("new", devices.Accepted)
	if m := r.next(); m.verb != "set" {
		t.Fatalf("new: %s reached the bridge; want a set", m.verb)
	}
	r.submit(`{"occupied_heating_setpoint":19,"op_id":"ageless"}`)
	r.status("ageless", devices.Accepted)
}

// Past the window (Until), the lost records would have been pruned
// anyway: a command issued before the quarantine is judged by its TTL
// alone.
func TestCommandIssuedBeforeLostDedupIsTakenAfterTheWindow(t *testing.T) {
	at := time.Date(2026, 11, 29, 18, 0, 0, 0, time.UTC)
	r := startSleepy(t, sleepyOptions{awake: true, lostDedup: LostDedup{At: at, Until: at.Add(time.Hour)}}) // until 19:00, now
	r.submit(`{"occupied_heating_setpoint":21,"op_id":"old","issued_at":"2026-11-29T17:59:59Z","ttl":"2h"}`)
	r.status("old", devices.Accepted)
}
