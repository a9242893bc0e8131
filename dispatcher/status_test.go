package dispatcher

import (
	"testing"
	"time"

	"github.com/hearthd/hearth/breaker"
	"github.com/hearthd/hearth/devices"
)

// A sleepy device's status counts its queued commands as pending, shows
// its lease asleep before a wake and awake until the window's end after
// one, its availability and mirrored state, and its service's breaker.
func TestDeviceStatusOfASleepyDevice(t *testing.T) {
	r := startSleepy(t, sleepyOptions{breaker: &breaker.Options{FailureThreshold: 3, OpenFor: func(int) time.Duration { return time.Minute }}})
	s, ok := r.d.Device("radiator")
	if !ok {
		t.Fatal("radiator unknown")
	}
	want := DeviceStatus{ID: "radiator", Service: "zw", Class: "climate", Sleepy: true, Availability: "unknown",
		Lease: &LeaseStatus{Awake: false}, Breaker: "closed"}
	if !equalStatus(s, want) {
		t.Errorf("at the start: %+v; want %+v", s, want)
	}
	r.submit(`{"current_heating_setpoint":22,"op_id":"A"}`)
	r.status("A", devices.Queued)
	r.submit(`{"occupied_heating_setpoint":20,"op_id":"B"}`)
	r.status("B", devices.Queued)
	r.d.Availability("radiator", true) // no wake: it was never offline
	r.d.Report("radiator", map[string]any{"local_temperature": 19.5}, true)
	s, _ = r.d.Device("radiator")
	want.Pending, want.Availability, want.State = 2, "online", map[string]any{"local_temperature": 19.5}
	if !equalStatus(s, want) {
		t.Errorf("two queued: %+v; want %+v", s, want)
	}

	woke := r.clock.Now()
	r.d.NodeStatus("radiator", devices.NodeAwake, false)
	s = r.d.Devices()[0]
	if s.Lease == nil || !s.Lease.Awake || !s.Lease.Until.Equal(woke.Add(10*time.Second)) {
		t.Errorf("awake: lease %+v; want awake until %s", s.Lease, woke.Add(10*time.Second))
	}
}

func equalStatus(a, b DeviceStatus) bool {
	if a.ID != b.ID || a.Service != b.Service || a.Class != b.Class || a.SafetyCritical != b.SafetyCritical || a.Sleepy != b.Sleepy ||
		a.Availability != b.Availability || a.Pending != b.Pending || a.Breaker != b.Breaker || len(a.State) != len(b.State) {
		return false
	}
	for k, v := range b.State {
		if a.State[k] != v {
			return false
		}
	}
	if (a.Lease == nil) != (b.Lease == nil) {
		return false
	}
	return a.Lease == nil || (a.Lease.Awake == b.Lease.Awake && a.Lease.Until.Equal(b.Lease.Until))
}
