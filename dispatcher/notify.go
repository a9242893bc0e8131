package dispatcher

import (
	"encoding/json"

	"github.com/hearthd/hearth/notify"
)

// Notify publishes n on <prefix>/notifications through the outbox, which
// holds it while the connection is down, and queues the same JSON for
// every notify service (Service.Notifier), whose worker delivers it
// through the service's retry policy and breaker once Run runs. A zero
// At is now; an empty ID is a new ULID. It never blocks. With
// Options.NotifyOutbox, the copy for each notify service is stored
// before it is queued and is sent after a restart until it is delivered
// or expires; the publish on <prefix>/notifications is not stored (the
// outbox holds it only while Hearth runs).
func (d *Dispatcher) Notify(n notify.Notification) {
	if n.At.IsZero() {
		n.At = d.now()
	}
	if n.ID == "" {
		n.ID = d.newOpID()
	}
	n.At = n.At.UTC()
	b, err := json.Marshal(n)
	if err != nil {
		d.log.Error("notification not encoded", "err", err) // plain fields: cannot happen
		return
	}
	d.out.PushRaw(d.prefix+"/notifications", b, false)
	d.notes.Enqueue(n, b)
}

// NotifyStatus returns the counts of every notify service, in Options
// order; nil when there is none.
func (d *Dispatcher) NotifyStatus() []notify.Status { return d.notes.Status() }

// notifyService is s as its notification queue delivers to it.
func notifyService(s *Service) notify.Service {
	n := notify.Service{Name: s.Name, Notifier: s.Notifier, Policy: s.Policy, Budget: s.Budget, Hold: s.Hold, Queue: s.NotifyQueue}
	if s.breaker != nil {
		n.Gate = s.breaker
	}
	return n
}
