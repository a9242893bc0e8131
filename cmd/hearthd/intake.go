package main

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/protocols/mqtt"
)

// intake hands command messages from <prefix>/<device>/set to the
// dispatcher, and acknowledges each to its publisher only once the
// dispatcher has answered it (Request.Done): stored and accepted, or
// rejected with a result. With the embedded broker, the broker hands it
// the commands directly (command), so that the PUBACK the publisher gets
// is this acknowledgement, and a command the store could not take gets
// none (broker.Command.Nack); with an external broker they come through
// Hearth's subscription (handle), and the acknowledgement is Hearth's
// PUBACK to that broker, as before.
//
// It may be called before the dispatcher runs (the embedded broker starts
// first): a command then waits until open, or is dropped unacknowledged
// at stop. Dispatcher.Submit blocking while the dispatcher's queue is full
// is the backpressure of every publisher at once.
type intake struct {
	prefix string
	log    *slog.Logger
	// principal names the principal that published a message that came
	// through the subscription: nil means unauthenticated.
	principal func(mqtt.Message) string
	// principalOf names the principal of a username the embedded broker
	// verified ("" for none): nil means unauthenticated.
	principalOf func(username string) string

	// acked, if set, hears how long each command waited, from its
	// arrival here, for its acknowledgement (a PUBACK with the embedded
	// broker; Hearth's PUBACK to an external one), in real time: set
	// before the first command.
	acked func(time.Duration)

	disp  *dispatcher.Dispatcher // set by open, before ready is closed
	ready chan struct{}
	// stopped is closed by stop: a command that waits for open is then
	// not taken.
	stopped  chan struct{}
	stopOnce sync.Once
}

func newIntake(prefix string, log *slog.Logger) *intake {
	return &intake{prefix: prefix + "/", log: log, ready: make(chan struct{}), stopped: make(chan struct{})}
}

// open lets commands through to disp, which must be about to run: a
// command waiting for room in its queue is released only by its Run
// (or its stop, ErrStopped).
func (in *intake) open(disp *dispatcher.Dispatcher) {
	in.disp = disp
	close(in.ready)
}

// stop releases the commands that wait for open, unacknowledged.
func (in *intake) stop() { in.stopOnce.Do(func() { close(in.stopped) }) }

// handle takes a command that came through Hearth's subscription to an
// external broker. The broker has PUBACKed its publisher already; the
// acknowledgement to the broker, store_error included, is as it always
// was. A command the broker kept in Hearth's session while it was away
// (mqtt.Message.Backlog) says so to the dispatcher, which refuses a risky
// one whose age is unknown.
func (in *intake) handle(m mqtt.Message) {
	req := dispatcher.Request{Payload: m.Payload, Retained: m.Retained, Backlog: m.Backlog}
	if in.principal != nil {
		req.Principal = in.principal(m)
	}
	in.submit(m.Topic, req, m.Ack, m.Ack)
}

// command takes a command the embedded broker handed over
// (broker.Options.OnCommand), on its publisher's read loop: while it
// waits for the dispatcher's queue, the broker reads nothing more from
// that publisher. The embedded broker keeps no session for Hearth: every
// command is live.
func (in *intake) command(c broker.Command) {
	req := dispatcher.Request{Payload: c.Payload, Retained: c.Retained}
	if in.principalOf != nil && c.Username != "" {
		req.Principal = in.principalOf(c.Username)
	}
	in.submit(c.Topic, req, c.Ack, c.Nack)
}

// submit hands req, a command on topic (its Device and Done are set
// here), to the dispatcher, which calls ack once it has answered it, or
// nack if it could not store it (rejected, store_error): that command was
// not taken, and its publisher must not hear otherwise. An empty retained
// message, someone clearing a retained command from the broker, is acked
// at once: nothing to answer.
func (in *intake) submit(topic string, req dispatcher.Request, ack, nack func()) {
	arrived := time.Now()
	device, ok := strings.CutPrefix(topic, in.prefix)
	if ok {
		device, ok = strings.CutSuffix(device, "/set")
	}
	if !ok || (req.Retained && len(req.Payload) == 0) {
		ack()
		return
	}
	select {
	case <-in.ready:
	case <-in.stopped:
		in.log.Warn("command not taken: hearthd is stopping", "topic", topic)
		return
	}
	req.Device = device
	req.Done = func(r devices.Result) {
		if r.Status == devices.Rejected && r.Reason == devices.ReasonStoreError {
			nack()
			return
		}
		ack()
		if in.acked != nil {
			in.acked(time.Since(arrived))
		}
	}
	err := in.disp.Submit(context.Background(), req)
	if err != nil {
		// Shutting down: the command was not accepted and is not acked.
		in.log.Warn("command not taken", "topic", topic, "err", err)
	}
}
