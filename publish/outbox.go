// Package publish is Hearth's outbox for its own MQTT messages: results,
// mirrored state and availability, breaker states and notifications. It
// keeps them in order per device, publishes devices side by side, holds
// them while the connection is down, and never makes a producer wait.
package publish

import (
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"log/slog"
	"strings"
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

// outboxLanes is how many publishes the outbox keeps in flight at once:
// one per lane. A broker's Receive Maximum below it (Mosquitto's
// max_inflight_messages is 20 by default) holds the excess in the
// MQTT client until a PUBACK frees a slot.
const outboxLanes = 32

// Outbox publishes Hearth's own messages, in the order they were pushed
// per device, so that the results of one command never overtake each
// other and a result never overtakes the state that confirmed it; messages
// of different devices go out side by side, in lanes: a topic's lane is
// chosen by the first level below the prefix (the device, "services" or
// "notifications"), and each lane publishes one message at a time and
// waits for its PUBACK. A retained mirror (device state, availability)
// queued again while waiting keeps its place and takes the newest payload,
// so a mirror replaced before it went out never goes out. Pushing never
// blocks: a producer (the intake, a device worker, the MQTT connection's
// OnConnect) must never wait for the connection it may be the one to
// restore. While the connection is down the outbox holds its messages;
// results are bounded by the commands in flight, mirrors by the number of
// devices.
type Outbox struct {
	prefix string // topics' prefix and its slash: "hearth/"
	lanes  []*lane
}

// lane is one ordered queue of the outbox and the goroutine that
// publishes it.
type lane struct {
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

// New returns the outbox of the topics below prefix ("hearth"), which
// publishes through pub once Run runs.
func New(prefix string, pub Publisher, log *slog.Logger) *Outbox {
	o := &Outbox{prefix: prefix + "/", lanes: make([]*lane, outboxLanes)}
	for i := range o.lanes {
		o.lanes[i] = &lane{pub: pub, log: log, mirrors: map[string][]byte{},
			wake: make(chan struct{}, 1), up: make(chan struct{}, 1)}
	}
	return o
}

// lane returns the lane of topic: messages on the same first level below
// the prefix share one.
func (o *Outbox) lane(topic string) *lane {
	key, _ := strings.CutPrefix(topic, o.prefix)
	if i := strings.IndexByte(key, '/'); i >= 0 {
		key = key[:i]
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	return o.lanes[h.Sum32()%uint32(len(o.lanes))]
}

// Push queues v, JSON-encoded, for topic at QoS 1; see PushRaw.
func (o *Outbox) Push(topic string, v any, retained bool) {
	l := o.lane(topic)
	b, err := json.Marshal(v)
	if err != nil {
		l.log.Error("encode message", "topic", topic, "err", err)
		return
	}
	l.push(topic, b, retained)
}

// PushRaw queues payload for topic at QoS 1; it never blocks. A retained message replaces
// any queued retained message for the same topic.
func (o *Outbox) PushRaw(topic string, payload []byte, retained bool) {
	o.lane(topic).push(topic, payload, retained)
}

func (l *lane) push(topic string, payload []byte, retained bool) {
	l.mu.Lock()
	if retained {
		if _, queued := l.mirrors[topic]; !queued {
			l.queue = append(l.queue, outMsg{topic: topic, retained: true})
		}
		l.mirrors[topic] = payload
	} else {
		l.queue = append(l.queue, outMsg{topic, payload, false})
	}
	l.mu.Unlock()
	signal(l.wake)
}

// Kick tells a waiting outbox that the connection is back.
func (o *Outbox) Kick() {
	for _, l := range o.lanes {
		signal(l.up)
	}
}

// Run publishes every lane until ctx ends, then drains them (see drain),
// side by side, and returns when all are done.
func (o *Outbox) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, l := range o.lanes {
		wg.Go(func() { l.run(ctx) })
	}
	wg.Wait()
}

// signal wakes the one waiting on ch, buffered 1, without blocking.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// requeue puts m back at the head of its queue.
func (l *lane) requeue(m outMsg) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m.retained {
		if _, newer := l.mirrors[m.topic]; newer {
			return // a newer payload is queued already
		}
		l.mirrors[m.topic] = m.payload
		m.payload = nil
	}
	l.queue = append([]outMsg{m}, l.queue...)
}

// next takes the oldest queued message.
func (l *lane) next() (outMsg, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.queue) == 0 {
		return outMsg{}, false
	}
	m := l.queue[0]
	l.queue[0] = outMsg{}
	l.queue = l.queue[1:]
	if m.retained {
		m.payload = l.mirrors[m.topic]
		delete(l.mirrors, m.topic)
	}
	return m, true
}

func (l *lane) run(ctx context.Context) {
	for {
		if ctx.Err() != nil {
			l.drain()
			return
		}
		if m, ok := l.next(); ok {
			l.publish(ctx, m)
			continue
		}
		select {
		case <-l.wake:
		case <-ctx.Done():
			l.drain()
			return
		}
	}
}

// publish sends m until it is out, refused for good, tried maxPublishTries
// times, or ctx ends. While the connection is down it waits for kick; after
// any other failure it tries again a second later (or at once on kick).
func (l *lane) publish(ctx context.Context, m outMsg) {
	failures := 0
	for {
		err := l.publishOnce(ctx, m)
		switch {
		case err == nil:
			return
		case ctx.Err() != nil:
			l.requeue(m) // stopping: drain tries it once more
			return
		case Refused(err):
			l.log.Error("publish refused by the broker; dropped", "topic", m.topic, "err", err)
			return
		case NotSent(err), DeliveryUnknown(err):
			select {
			case <-l.up:
			case <-ctx.Done():
				return
			}
		case failures+1 >= maxPublishTries:
			l.log.Error("publish failed; dropped after retries", "topic", m.topic, "tries", maxPublishTries, "err", err)
			return
		default:
			failures++
			l.log.Warn("publish failed; retrying", "topic", m.topic, "err", err)
			select {
			case <-l.up:
			case <-time.After(retryPublishAfter):
			case <-ctx.Done():
				return
			}
		}
	}
}

// Publisher publishes one message and waits for the broker's
// acknowledgement (protocols/mqtt's Client). Its errors say what became
// of the message: NotSent, DeliveryUnknown, Refused, or a failure the
// outbox retries.
type Publisher interface {
	Publish(ctx context.Context, topic string, qos byte, retained bool, payload []byte) error
}

// DeliveryUnknown reports whether err says that a send may or may not
// have arrived (its connection was lost before the acknowledgement): an
// error with a method DeliveryUnknown() bool that returns true.
func DeliveryUnknown(err error) bool {
	var du interface{ DeliveryUnknown() bool }
	return errors.As(err, &du) && du.DeliveryUnknown()
}

// NotSent reports whether err says that nothing was sent (the connection
// was down): an error with a method NotSent() bool that returns true.
func NotSent(err error) bool {
	var ns interface{ NotSent() bool }
	return errors.As(err, &ns) && ns.NotSent()
}

// stopGrace is how long a publish already waiting for its PUBACK may go
// on once the outbox stops: cancelling it would leave its delivery
// unknown, and the drain would send it a second time.
const stopGrace = 2 * time.Second

// publishOnce publishes m and waits for its PUBACK, up to publishTimeout,
// or stopGrace after ctx ends.
func (l *lane) publishOnce(ctx context.Context, m outMsg) error {
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
	return l.pub.Publish(pctx, m.topic, 1, m.retained, m.payload)
}

// Refused reports whether err says the broker refused the message for
// good (a PUBACK reason code of 0x80 or more, such as "not authorized"):
// sending it again cannot help. It is an error with a method Permanent()
// bool that returns true.
func Refused(err error) bool {
	var p interface{ Permanent() bool }
	return errors.As(err, &p) && p.Permanent()
}

// drain publishes what is still queued at shutdown, for at most two
// seconds, so the last results go out before the offline announcement.
func (l *lane) drain() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for {
		m, ok := l.next()
		if !ok {
			return
		}
		if err := l.pub.Publish(ctx, m.topic, 1, m.retained, m.payload); err != nil {
			l.log.Warn("shutdown: unpublished messages dropped", "topic", m.topic, "err", err)
			return
		}
	}
}
