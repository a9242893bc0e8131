package main

import (
	"sync/atomic"

	"github.com/hearthd/hearth/buildinfo"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/health"
)

// commandMetrics feeds health.Metrics from the dispatcher's hooks
// (dispatcher.Options.OnEnd, OnAttempt, OnRetryAfter) and its Load, and
// counts the MQTT connection's reconnects. Its methods never block.
type commandMetrics struct {
	m *health.Metrics
	// connects counts the MQTT connection's connects: every one after
	// the first is a reconnect.
	connects atomic.Int64
}

// ended counts a command's end (dispatcher.Options.OnEnd).
func (c *commandMetrics) ended(e dispatcher.End) {
	op := e.Op
	end := health.CommandEnd{
		Service:     e.Device.Service,
		Class:       string(e.Device.Class),
		Status:      string(op.Status),
		Reason:      string(op.Reason),
		Accepted:    !op.AcceptedAt.IsZero(),
		Attempts:    op.Attempts,
		Duration:    op.UpdatedAt.Sub(op.AcceptedAt),
		Confirm:     -1,
		SafetyAlert: e.SafetyAlert,
	}
	if op.Status == devices.Succeeded && !op.LastSentAt.IsZero() {
		end.Confirm = op.UpdatedAt.Sub(op.LastSentAt)
	}
	c.m.CommandEnded(end)
}

// attempted counts an attempt sent (dispatcher.Options.OnAttempt); a
// resend of the same attempt is not another.
func (c *commandMetrics) attempted(a dispatcher.Attempt) {
	if !a.Resend {
		c.m.AttemptSent(a.Device.Service, string(a.Device.Class), a.Number)
	}
}

// connected counts a connect of Hearth's MQTT connection
// (mqtt.Options.OnConnect): every one after the first is a reconnect.
func (c *commandMetrics) connected() {
	if c.connects.Add(1) > 1 {
		c.m.MQTTReconnected()
	}
}

// watch exports the dispatcher's load per service, the MQTT connection's
// state and the build, read at each scrape.
func (c *commandMetrics) watch(disp *dispatcher.Dispatcher, mqttUp func() bool) {
	c.m.WatchLoad(func() []health.ServiceLoad {
		loads := disp.Load()
		out := make([]health.ServiceLoad, len(loads))
		for i, l := range loads {
			out[i] = health.ServiceLoad{Service: l.Service, Commands: !l.Notify, Pending: l.Pending,
				Sleepy: l.Sleepy, Held: l.Held, Witnessed: l.Witnessed, RetryTokens: l.RetryTokens}
		}
		return out
	})
	c.m.WatchMQTT(mqttUp)
	b := buildinfo.Resolve(version, revision)
	c.m.BuildInfo(b.Version, b.Revision, b.GoVersion)
}
