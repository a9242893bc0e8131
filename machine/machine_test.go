package machine

import (
	"testing"
	"time"

	"github.com/hearthd/hearth/devices"
)

var t0 = time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)

var radiator = devices.Device{ID: "radiator", Class: devices.Climate,
	Sleep: devices.Sleep{Sleepy: true, WakeInterval: time.Hour, AwakeWindow: 10 * time.Second}}

func setpoint(id string, v float64) devices.Op {
	return devices.Op{OpID: id, Device: "radiator", Target: devices.Target{"current_heating_setpoint": v},
		Status: devices.Accepted, AcceptedAt: t0, Deadline: t0.Add(time.Hour)}
}

// A command that ended where it waited (a sleepy device's command at its
// TTL) stays in the waiting list until the worker next plans; a newer
// command arriving in that gap must not end it a second time (a second
// result, a second dead letter), and the ended one leaves the queue.
func TestSupersedeNeverEndsAnEndedCommandAgain(t *testing.T) {
	m := New(radiator)
	old := m.Accept(setpoint("old", 21), Fresh)
	if _, ok := m.End(old, devices.Expired, devices.ReasonTTLElapsed, "", nil, t0); !ok {
		t.Fatal("End of a pending command reported it ended already")
	}
	if ended := m.Supersede(setpoint("new", 18), t0); len(ended) != 0 {
		t.Errorf("Supersede ended %d commands (%+v); want none: the old command had ended already", len(ended), ended[0].Op)
	}
	if w := m.Waiting(); len(w) != 0 {
		t.Errorf("%d commands wait; want the ended one dropped", len(w))
	}
}

// A command resumed after a restart with an attempt recorded, and
// superseded before Hearth sent it again, cannot say that attempt went
// out: the crash may have come between the record and the send.
func TestSupersededResumedAttemptSaysItsDeliveryIsUnknown(t *testing.T) {
	m := New(radiator)
	op := setpoint("old", 21)
	op.Attempts = 1
	m.Accept(op, Resumed)
	ended := m.Supersede(setpoint("new", 18), t0)
	want := "superseded by op_id new after 1 attempt, the last recorded before a restart (its delivery unknown)"
	if len(ended) != 1 || ended[0].Op.Detail != want || ended[0].Op.Attempts != 1 {
		t.Fatalf("Supersede ended %+v; want old with 1 attempt and detail %q", ended, want)
	}
}

// An attempt recorded but not yet handed to the bridge when its command
// is superseded never reached the device: the superseded record takes
// it back and says "before it was sent".
func TestSupersededBeforeItsSendTakesTheRecordedAttemptBack(t *testing.T) {
	m := New(radiator)
	m.Accept(setpoint("old", 21), Fresh)
	m.Wake(t0)
	p := m.Plan(t0)
	if len(p.Eligible) != 1 || m.Deliver(p.Eligible[0], p.Gen, t0) != Deliver {
		t.Fatalf("plan at a wake: %+v; want old delivered", p)
	}
	m.Current().RecordAttempt(false, t0)
	ended := m.Supersede(setpoint("new", 18), t0)
	if len(ended) != 1 || ended[0].Op.Attempts != 0 || ended[0].Op.Detail != "superseded by op_id new before it was sent" {
		t.Fatalf("Supersede ended %+v; want old with 0 attempts, never sent", ended)
	}
}

// The superseded detail says how many sets went out, and whether the last
// one's delivery is unknown.
func TestSupersededDetail(t *testing.T) {
	for _, c := range []struct {
		sent    int
		unknown bool
		want    string
	}{
		{0, false, "superseded by op_id X before it was sent"},
		{0, true, "superseded by op_id X before it was sent"},
		{1, false, "superseded by op_id X after 1 attempt was sent"},
		{2, false, "superseded by op_id X after 2 attempts were sent"},
		{2, true, "superseded by op_id X after 2 attempts, the last recorded before a restart (its delivery unknown)"},
	} {
		if got := supersededDetail("X", c.sent, c.unknown); got != c.want {
			t.Errorf("supersededDetail(%d, %v) = %q; want %q", c.sent, c.unknown, got, c.want)
		}
	}
}

// An attempt recorded and taken back before its send (the breaker's
// permit went stale) leaves no unsent mark: a supersede after that takes
// back nothing more, and the record keeps the attempts that were sent
// ("after 1 attempt was sent", never -1 attempts).
func TestSupersedeAfterATakenBackAttemptKeepsTheSentOnes(t *testing.T) {
	lamp := devices.Device{ID: "lamp", Class: devices.Light}
	on := devices.Op{OpID: "old", Device: "lamp", Target: devices.Target{"state": "ON"},
		Status: devices.Accepted, AcceptedAt: t0, Deadline: t0.Add(time.Minute)}
	off := devices.Op{OpID: "new", Device: "lamp", Target: devices.Target{"state": "OFF"}}

	m := New(lamp)
	c := m.Accept(on, Fresh)
	m.Next()
	c.RecordAttempt(false, t0) // attempt 1
	c.Sending()                // handed to the bridge
	prev, _ := c.RecordAttempt(false, t0)
	c.Unsent(prev) // attempt 2 taken back: never sent
	ended := m.Supersede(off, t0)
	if len(ended) != 1 || ended[0].Op.Attempts != 1 || ended[0].Op.Sends != 1 ||
		ended[0].Op.Detail != "superseded by op_id new after 1 attempt was sent" {
		t.Fatalf("superseded %+v; want 1 attempt, 1 send, \"after 1 attempt was sent\"", ended[0].Op)
	}

	m = New(lamp)
	c = m.Accept(on, Fresh)
	m.Next()
	prev, _ = c.RecordAttempt(false, t0)
	c.Unsent(prev)
	ended = m.Supersede(off, t0)
	if len(ended) != 1 || ended[0].Op.Attempts != 0 || ended[0].Op.Sends != 0 ||
		ended[0].Op.Detail != "superseded by op_id new before it was sent" {
		t.Fatalf("superseded %+v; want 0 attempts, 0 sends, \"before it was sent\"", ended[0].Op)
	}
}

// The offline gate: a device its bridge reports offline fails a command
// at once where its offline setting is fail, keeps it waiting (queued)
// within its TTL where it is queue, ends it expired when the TTL passes
// meanwhile, and hands a retry whose policy deadline passed back to the
// attempts.
func TestOfflineGate(t *testing.T) {
	plug := devices.Device{ID: "plug", Class: devices.Switch}
	queued := plug
	queued.Offline = devices.OfflineQueue
	on := devices.Op{OpID: "on", Device: "plug", Target: devices.Target{"state": "ON"},
		Status: devices.Accepted, AcceptedAt: t0, Deadline: t0.Add(time.Minute)}
	for _, c := range []struct {
		name    string
		dev     devices.Device
		offline bool
		now     time.Time
		until   time.Time
		want    GateKind
		reason  devices.Reason
	}{
		{"online", plug, false, t0, t0.Add(time.Minute), GateOpen, ""},
		{"offline, fail", plug, true, t0, t0.Add(time.Minute), GateEnd, devices.ReasonDeviceOffline},
		{"offline, queue", queued, true, t0, t0.Add(time.Minute), GateWait, ""},
		{"offline, queue, TTL passed", queued, true, t0.Add(time.Minute), t0.Add(time.Minute), GateEnd, devices.ReasonTTLElapsed},
		{"offline, queue, retry's deadline passed", queued, true, t0.Add(30 * time.Second), t0.Add(20 * time.Second), GatePassed, ""},
	} {
		m := New(c.dev)
		cmd := m.Accept(on, Fresh)
		m.Availability(true, t0)
		if c.offline {
			m.Availability(false, t0)
		}
		g := m.OfflineGate(cmd, c.now, c.until, "zigbee")
		if g.Kind != c.want || g.Reason != c.reason {
			t.Errorf("%s: gate %+v; want kind %d, reason %q", c.name, g, c.want, c.reason)
		}
	}
}
