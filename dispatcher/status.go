package dispatcher

import (
	"time"
)

// DeviceStatus is a device as the status endpoints show it (GET
// /api/v1/devices): its configuration, the state Hearth mirrors on
// <prefix>/<device>, its availability, a sleepy device's awake lease, how
// many of its commands are pending and its service's breaker.
type DeviceStatus struct {
	ID             string `json:"id"`
	Service        string `json:"service"`
	Class          string `json:"class"`
	SafetyCritical bool   `json:"safety_critical"`
	Sleepy         bool   `json:"sleepy"`
	// State is the last state mirrored on <prefix>/<device> (reports
	// merged, what the store restored at the start included); null
	// when none is known.
	State map[string]any `json:"state"`
	// Availability is "online" or "offline" as the bridge last reported
	// it, "unknown" before it did.
	Availability string `json:"availability"`
	// Lease is a sleepy device's awake lease; nil (left out) for a
	// device that is always listening.
	Lease *LeaseStatus `json:"lease,omitempty"`
	// Pending counts the device's commands accepted and not ended
	// (waiting, held for a wake or an open breaker, or being attempted).
	Pending int `json:"pending"`
	// Breaker is the state of its service's circuit breaker (closed,
	// open or half_open); "" (left out) when the service has none.
	Breaker string `json:"breaker,omitempty"`
}

// LeaseStatus is a sleepy device's awake lease at a moment.
type LeaseStatus struct {
	// Awake: the device listens now.
	Awake bool `json:"awake"`
	// Until is when the lease ends (or ended); zero (left out) before
	// the first wake.
	Until time.Time `json:"until,omitzero"`
}

// Devices returns the status of every device, in Options order. Each
// device's fields are read at once under its own lock, which no send
// holds; the list is not one instant across devices. Safe for concurrent
// use.
func (d *Dispatcher) Devices() []DeviceStatus {
	now := d.now()
	out := make([]DeviceStatus, 0, len(d.deviceIDs))
	for _, id := range d.deviceIDs {
		out = append(out, d.devices[id].status(now))
	}
	return out
}

// Device returns the status of device id, and false for an unknown
// device.
func (d *Dispatcher) Device(id string) (DeviceStatus, bool) {
	q, ok := d.devices[id]
	if !ok {
		return DeviceStatus{}, false
	}
	return q.status(d.now()), true
}

// status reads q's status at now.
func (q *deviceQueue) status(now time.Time) DeviceStatus {
	s := DeviceStatus{
		ID: q.dev.ID, Service: q.dev.Service, Class: string(q.dev.Class),
		SafetyCritical: q.dev.SafetyCritical(), Sleepy: q.dev.Sleep.Sleepy,
		Availability: "unknown",
	}
	q.mu.Lock()
	s.State = q.m.State()
	online, known := q.m.Available()
	s.Pending = q.m.Pending()
	lease := q.m.Lease(now)
	q.mu.Unlock()
	if known {
		s.Availability = onlineWord(online)
	}
	if s.Sleepy {
		s.Lease = &LeaseStatus{Awake: lease.Awake, Until: lease.Until.UTC()}
	}
	if b := q.svc.breaker; b != nil {
		s.Breaker = b.Snapshot(now).State.String()
	}
	return s
}
