package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"

	"github.com/hearthd/hearth/automations"
	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
)

// rules maps the configured automations to the engine's rules, field by
// field: config validated them already.
func rules(cfg []config.Automation) []automations.Rule {
	out := make([]automations.Rule, 0, len(cfg))
	for _, a := range cfg {
		r := automations.Rule{Name: a.Name, FallbackFor: a.FallbackFor, Requires: a.Requires}
		for _, t := range a.Triggers {
			var at automations.Trigger
			switch {
			case t.State != nil:
				at.State = &automations.StateTrigger{Device: t.State.Device, Attribute: t.State.Attribute, To: t.State.To, From: t.State.From}
			case t.MQTT != nil:
				at.MQTT = &automations.MQTTTrigger{Topic: t.MQTT.Topic, Payload: t.MQTT.Payload}
			case t.Schedule != nil:
				at.Schedule = &automations.ScheduleTrigger{Cron: t.Schedule.Cron}
			case t.Breaker != nil:
				at.Breaker = &automations.BreakerTrigger{Service: t.Breaker.Service, To: t.Breaker.To}
			}
			r.Triggers = append(r.Triggers, at)
		}
		for _, c := range a.Conditions {
			var ac automations.Condition
			switch {
			case c.State != nil:
				ac.State = &automations.StateCondition{Device: c.State.Device, Attribute: c.State.Attribute, Op: c.State.Op, Value: c.State.Value}
			case c.Time != nil:
				ac.Time = &automations.TimeCondition{After: c.Time.After, Before: c.Time.Before, Weekdays: c.Time.Weekdays}
			}
			r.Conditions = append(r.Conditions, ac)
		}
		for _, x := range a.Actions {
			var aa automations.Action
			switch {
			case x.Command != nil:
				aa.Command = &automations.CommandAction{Device: x.Command.Device, Target: maps.Clone(map[string]any(x.Command.Target)), TTL: x.Command.TTL}
			case x.Publish != nil:
				aa.Publish = &automations.PublishAction{Topic: x.Publish.Topic, Payload: x.Publish.Payload, Retain: x.Publish.Retain}
			case x.Notify != nil:
				aa.Notify = &automations.NotifyAction{Title: x.Notify.Title, Message: x.Notify.Message, Severity: x.Notify.Severity}
			}
			r.Actions = append(r.Actions, aa)
		}
		out = append(out, r)
	}
	return out
}

// actuator carries the automations' actions: commands go through the
// dispatcher's intake like any other (stored, attempted, confirmed,
// reported on <prefix>/<device>/result), notifications through its
// outbox, and publishes straight to the broker.
type actuator struct {
	disp *dispatcher.Dispatcher
	conn link
	log  *slog.Logger
}

// Command submits payload, a JSON command with its op_id, for device. It
// returns once the command is taken into the intake queue; its result
// follows on the result topic.
func (a actuator) Command(ctx context.Context, device string, payload []byte) error {
	return a.disp.Submit(ctx, dispatcher.Request{
		Device:    device,
		Payload:   payload,
		Principal: automationPrincipal,
		Done: func(r devices.Result) {
			if r.Status == devices.Rejected {
				a.log.Error("automation command rejected", "device", device, "op_id", r.OpID, "reason", r.Reason, "detail", r.Detail)
			}
		},
	})
}

// Publish publishes at QoS 1.
func (a actuator) Publish(ctx context.Context, topic string, payload []byte, retained bool) error {
	if err := a.conn.Publish(ctx, topic, 1, retained, payload); err != nil {
		return fmt.Errorf("publish %s: %w", topic, err)
	}
	return nil
}

// Notify publishes n on <prefix>/notifications.
func (a actuator) Notify(_ context.Context, n automations.Notification) error {
	a.disp.Notify(dispatcher.Notification{Title: n.Title, Message: n.Message, Severity: n.Severity, Source: n.Source, At: n.At})
	return nil
}

// reports passes a bridge's reports to the dispatcher and, so that
// automations see every device's state, to the automations engine.
type reports struct {
	*dispatcher.Dispatcher
	engine *automations.Engine
}

func (r reports) Report(device string, state map[string]any, retained bool) {
	r.Dispatcher.Report(device, state, retained)
	r.engine.DeviceState(device, state, retained)
}
