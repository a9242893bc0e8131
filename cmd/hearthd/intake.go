package main

import (
	"context"
	"log/slog"
	"strings"

	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/protocols/mqtt"
)

// intake hands command messages from <prefix>/<device>/set to the
// dispatcher, and acknowledges each to the broker only once the dispatcher
// has answered it: stored and accepted, or rejected.
type intake struct {
	prefix string
	disp   *dispatcher.Dispatcher
	log    *slog.Logger
	// principal names the principal that published a message; nil when
	// the broker cannot say (an external one): every command is then
	// unauthenticated.
	principal func(mqtt.Message) string
}

func newIntake(prefix string, disp *dispatcher.Dispatcher, log *slog.Logger) *intake {
	return &intake{prefix: prefix + "/", disp: disp, log: log}
}

func (in *intake) handle(m mqtt.Message) {
	device, ok := strings.CutPrefix(m.Topic, in.prefix)
	if ok {
		device, ok = strings.CutSuffix(device, "/set")
	}
	if !ok || (m.Retained && len(m.Payload) == 0) {
		// An empty retained message is someone clearing a retained
		// command from the broker: nothing to answer.
		m.Ack()
		return
	}
	principal := ""
	if in.principal != nil {
		principal = in.principal(m)
	}
	err := in.disp.Submit(context.Background(), dispatcher.Request{
		Device:    device,
		Payload:   m.Payload,
		Retained:  m.Retained,
		Principal: principal,
		Done:      func(devices.Result) { m.Ack() },
	})
	if err != nil {
		// Shutting down: the command was not accepted and is not acked.
		in.log.Warn("command not taken", "topic", m.Topic, "err", err)
	}
}
