package main

import (
	"context"

	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/protocols/mqtt"
)

// link is Hearth's MQTT link: what the dispatcher, the bridge adapters,
// the intake, the automations and readiness use of it. With the embedded
// broker it is an *mqtt.Inline, inside the broker's process: no socket,
// no PUBACK to wait for, never lost; with an external broker (mqtt.url)
// an *mqtt.Conn, which reconnects, resubscribes and leaves a will.
type link interface {
	Publish(ctx context.Context, topic string, qos byte, retained bool, payload []byte) error
	Subscribe(ctx context.Context, filter string, qos byte, h mqtt.Handler) error
	SubscribeManualAck(ctx context.Context, filter string, qos byte, h mqtt.Handler) error
	// Run opens the link and holds it until ctx ends; the hooks of
	// mqtt.Options (OnSession, OnConnect; OnLost on a Conn only) run from
	// it, once at start and, on a Conn, at every reconnect.
	Run(ctx context.Context) error
	Connected() bool
	Up() <-chan struct{}
	Conflict() error
	ClientID() string
}

var (
	_ link = (*mqtt.Conn)(nil)
	_ link = (*mqtt.Inline)(nil)
)

// newLink returns Hearth's link: inline in b, the embedded broker, when b
// is not nil (opts' URL, credentials, TLS, keep alive and reconnect are
// then unused, and OnLost never runs), else an mqtt.Conn made of opts.
func newLink(b *broker.Broker, opts mqtt.Options) link {
	if b == nil {
		return mqtt.New(opts)
	}
	return mqtt.NewInline(mqtt.InlineOptions{
		Broker:    inlineBroker{b},
		ClientID:  opts.ClientID,
		Status:    opts.Status,
		OnSession: opts.OnSession,
		OnConnect: opts.OnConnect,
		Logger:    opts.Logger,
	})
}

// inlineBroker is the embedded broker's inline client as mqtt.Inline
// needs it.
type inlineBroker struct{ b *broker.Broker }

func (ib inlineBroker) Publish(topic string, payload []byte, retained bool, qos byte) error {
	return ib.b.PublishInline(topic, payload, retained, qos)
}

// Subscribe hands h each message of broker.SubscribeInline, with its
// username stamp among the user properties, so that mqtt.Trust and the
// intake read it as they read a Conn's.
func (ib inlineBroker) Subscribe(filter string, retainAsPublished bool, h mqtt.Handler) (func(), error) {
	return ib.b.SubscribeInline(filter, func(m broker.InlineMessage) {
		retained := m.Retained
		if retainAsPublished {
			retained = m.RetainFlag
		}
		var user []mqtt.UserProperty
		if len(m.User) > 0 {
			user = make([]mqtt.UserProperty, len(m.User))
			for i, p := range m.User {
				user[i] = mqtt.UserProperty(p)
			}
		}
		h(mqtt.NewMessage(m.Topic, m.Payload, m.QoS, retained, user))
	})
}
