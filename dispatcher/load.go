package dispatcher

// ServiceLoad is what waits on one service at a moment (Dispatcher.Load).
type ServiceLoad struct {
	Service string
	// Notify: a notify service (Service.Notifier), which takes
	// notifications, not commands: its Pending, Sleepy and Held are 0.
	Notify bool
	// Pending counts the service's commands accepted and not ended yet:
	// waiting their turn in their device's queue, or being attempted
	// (in backoff, waiting for a report, a wake, the breaker...).
	Pending int
	// Sleepy counts, of Pending, the commands to sleepy devices.
	Sleepy int
	// Held counts, of Pending, the commands waiting for the service's
	// open breaker to let them through (Service.Hold), reported queued
	// with reason breaker_open.
	Held int
	// RetryTokens is how many retries the service's retry budget allows
	// now (retry.Budget.Tokens); +Inf without a budget.
	RetryTokens float64
	// Witnessed counts the attempts that timed out in the service's
	// silence and wait for the answer of the witness read out now
	// (service.Silence): their verdict for the breaker is not given yet.
	Witnessed int
}

// Load returns what waits on each service that takes commands or
// notifications, in Options order; watched-only services are left out.
// It takes each device's lock in turn, briefly: a snapshot for metrics,
// not a consistent cut.
func (d *Dispatcher) Load() []ServiceLoad {
	now := d.now()
	out := make([]ServiceLoad, 0, len(d.serviceNames))
	at := make(map[string]int, len(d.serviceNames))
	for _, name := range d.serviceNames {
		s := d.services[name]
		if s.Bridge == nil && s.Notifier == nil {
			continue
		}
		l := ServiceLoad{Service: name, Notify: s.Notifier != nil, RetryTokens: s.Budget.Tokens(now)}
		if s.breaker != nil {
			l.Held = int(s.breaker.Held.Load())
		}
		if s.silence != nil {
			l.Witnessed = s.silence.Waiting()
		}
		at[name] = len(out)
		out = append(out, l)
	}
	for _, q := range d.devices {
		q.mu.Lock()
		n := q.m.Pending()
		q.mu.Unlock()
		i, ok := at[q.svc.Name]
		if !ok || n == 0 {
			continue
		}
		out[i].Pending += n
		if q.dev.Sleep.Sleepy {
			out[i].Sleepy += n
		}
	}
	return out
}
