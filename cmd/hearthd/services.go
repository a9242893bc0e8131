package main

import (
	"fmt"

	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/protocols/mqtt"
	"github.com/hearthd/hearth/protocols/webhook"
	"github.com/hearthd/hearth/retry"
)

// watch returns the handler of a watched service's status topic: its
// online and offline payloads drive the service's breaker, as a bridge's
// own state does; any other payload is logged and ignored. With the
// embedded broker authenticating, only the service's own account's
// messages count (trustedPublisher); others are dropped and counted.
func (d *daemon) watch(s config.Service) mqtt.Handler {
	publisher, stamp := d.trustedPublisher(s)
	trust := &mqtt.Trust{Publisher: publisher, StampProperty: stamp, Logger: d.log.With("service", s.Name), What: "status_topic"}
	d.countUntrusted(s.Name, trust.Dropped)
	return func(m mqtt.Message) {
		if !trust.Trusted(m) {
			return
		}
		switch string(m.Payload) {
		case s.OnlinePayload:
			d.disp.BridgeState(s.Name, true, m.Retained)
		case s.OfflinePayload:
			d.disp.BridgeState(s.Name, false, m.Retained)
		default:
			d.log.Warn("watched service: status payload is neither its online nor its offline payload; ignored",
				"service", s.Name, "topic", m.Topic, "payload", string(m.Payload),
				"online_payload", s.OnlinePayload, "offline_payload", s.OfflinePayload)
		}
	}
}

// notifyService builds the dispatcher's notify service of a webhook
// service: a webhook.Sender on its url, headers and timeout, with its
// retry policy, budget and breaker, which r draws the breaker's jitter
// from.
func notifyService(s config.Service, r retry.Rand) (dispatcher.Service, error) {
	sender, err := webhook.New(webhook.Options{URL: s.URL, Headers: s.Headers, Timeout: s.Timeout})
	if err != nil {
		return dispatcher.Service{}, fmt.Errorf("service %s: %w", s.Name, err)
	}
	b := s.Retry.Budget
	svc := dispatcher.Service{
		Name:     s.Name,
		Notifier: sender,
		Policy:   s.Retry.Policy,
		Budget:   retry.NewBudget(b.Ratio, b.MinRetries, b.Window),
		Hold:     s.Breaker.Hold,
	}
	if s.Breaker.Enabled {
		svc.Breaker = breakerOptions(s.Breaker, r)
	}
	return svc, nil
}
