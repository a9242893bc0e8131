package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// publishTimeout bounds the wait for one PUBACK.
const publishTimeout = 10 * time.Second

// retryPublishAfter spaces retries of a publish that failed while the
// connection stayed up (a PUBACK that timed out). It is housekeeping on the
// real clock.
const retryPublishAfter = time.Second

// maxPublishTries bounds the tries of one message on a connection that
// stays up but does not take it, so that one message cannot hold up every
// later one; waits for a reconnect do not count.
const maxPublishTries = 5

// outbox publishes Hearth's own messages from one goroutine, in the order
// they were pushed, so that the results of one command never overtake each
// other and a result never overtakes the state that confirmed it. A
// retained mirror (device state, availability) queued again while waiting
// keeps its place and takes the newest payload. Pushing never blocks: a producer
// (the intake, a device worker, the MQTT connection's OnConnect) must never
// wait for the connection it may be the one to restore. While the
// connection is down the outbox holds its messages; results are bounded by
// the commands in flight, mirrors by the number of devices.
type outbox struct {
	pub Publisher
	log *slog.Logger

	mu      sync.Mutex
	queue   []outMsg          // in push order; a retained entry's payload is in mirrors
	mirrors map[string][]byte // topic → newest payload of its queued retained entry
	wake    chan struct{}     // something was pushed
	up      chan struct{}     // the connection is back
}

type outMsg struct {
	topic    string
	payload  []byte
	retained bool
}

func newOutbox(pub Publisher, log *slog.Logger) *outbox {
	return &outbox{pub: pub, log: log, mirrors: map[string][]byte{},
		wake: make(chan struct{}, 1), up: make(chan struct{}, 1)}
}

// push queues v, JSON-encoded, for topic at QoS 1; see pushRaw.
func (o *outbox) push(topic string, v any, retained bool) {
	b, err := json.Marshal(v)
	if err != nil {
		o.log.Error("encode message", "topic", topic, "err", err)
		return
	}
	o.pushRaw(topic, b, retained)
}

// pushRaw queues payload for topic at QoS 1. A retained message replaces
// any queued retained message for the same topic.
func (o *outbox) pushRaw(topic string, payload []byte, retained bool) {
	o.mu.Lock()
	if retained {
		if _, queued := o.mirrors[topic]; !queued {
			o.queue = append(o.queue, outMsg{topic: topic, retained: true})
		}
		o.mirrors[topic] = payload
	} else {
		o.queue = append(o.queue, outMsg{topic, payload, false})
	}
	o.mu.Unlock()
	signal(o.wake)
}

// kick tells a waiting outbox that the connection is back.
func (o *outbox) kick() { signal(o.up) }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// requeue puts m back at the head of its queue.
func (o *outbox) requeue(m outMsg) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if m.retained {
		if _, newer := o.mirrors[m.topic]; newer {
			return // a newer payload is queued already
		}
		o.mirrors[m.topic] = m.payload
		m.payload = nil
	}
	o.queue = append([]outMsg{m}, o.queue...)
}

// next takes the oldest queued message.
func (o *outbox) next() (outMsg, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.queue) == 0 {
		return outMsg{}, false
	}
	m := o.queue[0]
	o.queue[0] = outMsg{}
	o.queue = o.queue[1:]
	if m.retained {
		m.payload = o.mirrors[m.topic]
		delete(o.mirrors, m.topic)
	}
	return m, true
}

func (o *outbox) run(ctx context.Context) {
	for {
		if ctx.Err() != nil {
			o.drain()
			return
		}
		if m, ok := o.next(); ok {
			o.publish(ctx, m)
			continue
		}
		select {
		case <-o.wake:
		case <-ctx.Done():
			o.drain()
			return
		}
	}
}

// publish sends m until it is out, refused for good, tried maxPublishTries
// times, or ctx ends. While the connection is down it waits for kick; after
// any other failure it tries again a second later (or at once on kick).
func (o *outbox) publish(ctx context.Context, m outMsg) {
	failures := 0
	for {
		err := o.publishOnce(ctx, m)
		switch {
		case err == nil:
			return
		case ctx.Err() != nil:
			o.requeue(m) // stopping: drain tries it once more
			return
		case permanent(err):
			o.log.Error("publish refused by the broker; dropped", "topic", m.topic, "err", err)
			return
		case notSent(err), deliveryUnknown(err):
			select {
			case <-o.up:
			case <-ctx.Done():
				return
			}
		case failures+1 >= maxPublishTries:
			o.log.Error("publish failed; dropped after retries", "topic", m.topic, "tries", maxPublishTries, "err", err)
			return
		default:
			failures++
			o.log.Warn("publish failed; retrying", "topic", m.topic, "err", err)
			select {
			case <-o.up:
			case <-time.After(retryPublishAfter):
			case <-ctx.Done():
				return
			}
		}
	}
}

// stopGrace is how long a publish already waiting for its PUBACK may go
// on once the outbox stops: cancelling it would leave its delivery
// unknown, and the drain would send it a second time.
const stopGrace = 2 * time.Second

// publishOnce publishes m and waits for its PUBACK, up to publishTimeout,
// or stopGrace after ctx ends.
func (o *outbox) publishOnce(ctx context.Context, m outMsg) error {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), publishTimeout)
	defer cancel()
	finished := make(chan struct{})
	defer close(finished)
	stop := context.AfterFunc(ctx, func() {
		t := time.NewTimer(stopGrace)
		defer t.Stop()
		select {
		case <-t.C:
			cancel()
		case <-finished:
		}
	})
	defer stop()
	return o.pub.Publish(pctx, m.topic, 1, m.retained, m.payload)
}

// permanent reports whether err says the broker refused the message for
// good (a PUBACK reason code of 0x80 or more, such as "not authorized"):
// sending it again cannot help.
func permanent(err error) bool {
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}

// drain publishes what is still queued at shutdown, for at most two
// seconds, so the last results go out before the offline announcement.
func (o *outbox) drain() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for {
		m, ok := o.next()
		if !ok {
			return
		}
		if err := o.pub.Publish(ctx, m.topic, 1, m.retained, m.payload); err != nil {
			o.log.Warn("shutdown: unpublished messages dropped", "topic", m.topic, "err", err)
			return
		}
	}
}
