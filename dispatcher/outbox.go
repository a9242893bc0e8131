package dispatcher

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"
)

// outboxSize bounds the messages waiting to be published; producers block
// while it is full.
const outboxSize = 8192

// publishTimeout bounds the wait for one PUBACK.
const publishTimeout = 10 * time.Second

// outbox publishes Hearth's own messages in order from one goroutine, so
// that results of one command never overtake each other, and holds them
// while the connection is down instead of dropping them.
type outbox struct {
	pub  Publisher
	log  *slog.Logger
	msgs chan outMsg
	up   chan struct{} // signalled when the connection is back
}

type outMsg struct {
	topic    string
	payload  []byte
	retained bool
}

func newOutbox(pub Publisher, log *slog.Logger) *outbox {
	return &outbox{pub: pub, log: log, msgs: make(chan outMsg, outboxSize), up: make(chan struct{}, 1)}
}

// push queues v, JSON-encoded, for topic at QoS 1.
func (o *outbox) push(topic string, v any, retained bool) {
	b, err := json.Marshal(v)
	if err != nil {
		o.log.Error("encode message", "topic", topic, "err", err)
		return
	}
	o.pushRaw(topic, b, retained)
}

func (o *outbox) pushRaw(topic string, payload []byte, retained bool) {
	o.msgs <- outMsg{topic, payload, retained}
}

// kick tells a waiting outbox that the connection is back.
func (o *outbox) kick() {
	select {
	case o.up <- struct{}{}:
	default:
	}
}

func (o *outbox) run(ctx context.Context) {
	for {
		select {
		case m := <-o.msgs:
			o.publish(ctx, m)
		case <-ctx.Done():
			o.drain()
			return
		}
	}
}

// publish sends m, waiting for the connection to come back as often as it
// takes, until ctx ends.
func (o *outbox) publish(ctx context.Context, m outMsg) {
	for {
		pctx, cancel := context.WithTimeout(ctx, publishTimeout)
		err := o.pub.Publish(pctx, m.topic, 1, m.retained, m.payload)
		cancel()
		if err == nil || ctx.Err() != nil {
			return
		}
		o.log.Warn("publish failed; holding it until the connection is back", "topic", m.topic, "err", err)
		select {
		case <-o.up:
		case <-ctx.Done():
			return
		}
	}
}

// drain publishes what is still queued at shutdown, briefly, so the last
// results go out before the offline announcement.
func (o *outbox) drain() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for {
		select {
		case m := <-o.msgs:
			if o.pub.Publish(ctx, m.topic, 1, m.retained, m.payload) != nil {
				return
			}
		default:
			return
		}
	}
}
