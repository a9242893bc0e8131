package publish

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"
)

// gatedPublisher records publishes; a publish to a topic in hold waits
// until the test releases it.
type gatedPublisher struct {
	mu   sync.Mutex
	hold map[string]chan struct{}
	sent []string    // topic=payload, in the order the publishes returned
	out  chan string // each publish as it returns
}

func newGatedPublisher() *gatedPublisher {
	return &gatedPublisher{hold: map[string]chan struct{}{}, out: make(chan string, 64)}
}

func (p *gatedPublisher) Publish(ctx context.Context, topic string, _ byte, _ bool, payload []byte) error {
	p.mu.Lock()
	gate := p.hold[topic]
	p.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	m := topic + "=" + string(payload)
	p.mu.Lock()
	p.sent = append(p.sent, m)
	p.mu.Unlock()
	p.out <- m
	return nil
}

func (p *gatedPublisher) next(t *testing.T) string {
	t.Helper()
	select {
	case m := <-p.out:
		return m
	case <-time.After(5 * time.Second):
		t.Fatal("timed out waiting for a publish")
		return ""
	}
}

// twoLanes returns two device names whose topics the outbox puts in
// different lanes.
func twoLanes(o *Outbox) (string, string) {
	a := "dev0"
	for i := 1; ; i++ {
		b := fmt.Sprintf("dev%d", i)
		if o.lane("hearth/"+a+"/result") != o.lane("hearth/"+b+"/result") {
			return a, b
		}
	}
}

// A device whose publish waits for its PUBACK holds up only its own
// messages: another device's go out meanwhile, and the first device's
// next message goes out after its first, never before.
func TestOutboxKeepsOrderPerDeviceAndDevicesSideBySide(t *testing.T) {
	pub := newGatedPublisher()
	o := New("hearth", pub, slog.New(slog.DiscardHandler))
	a, b := twoLanes(o)
	gate := make(chan struct{})
	pub.hold["hearth/"+a+"/result"] = gate
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); o.Run(ctx) }()
	defer func() { cancel(); <-done }()

	o.PushRaw("hearth/"+a+"/result", []byte("a1"), false)
	o.PushRaw("hearth/"+a, []byte("a-state"), true)
	o.PushRaw("hearth/"+b+"/result", []byte("b1"), false)
	if got, want := pub.next(t), "hearth/"+b+"/result=b1"; got != want {
		t.Fatalf("first publish out: %q; want %q while %s's waits for its PUBACK", got, want, a)
	}
	close(gate)
	if got, want := pub.next(t), "hearth/"+a+"/result=a1"; got != want {
		t.Fatalf("second publish out: %q; want %q", got, want)
	}
	if got, want := pub.next(t), "hearth/"+a+"="+"a-state"; got != want {
		t.Fatalf("third publish out: %q; want %q: a device's messages keep their order", got, want)
	}
}

// A retained mirror replaced while it waits goes out once, with the
// newest payload, in the place of the first.
func TestOutboxMirrorReplacedBeforeItWentOutGoesOutOnceWithTheNewest(t *testing.T) {
	pub := newGatedPublisher()
	o := New("hearth", pub, slog.New(slog.DiscardHandler))
	gate := make(chan struct{})
	pub.hold["hearth/lamp/result"] = gate
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); o.Run(ctx) }()

	o.PushRaw("hearth/lamp/result", []byte("r1"), false)
	o.PushRaw("hearth/lamp", []byte(`{"state":"ON"}`), true)
	o.PushRaw("hearth/lamp/result", []byte("r2"), false)
	o.PushRaw("hearth/lamp", []byte(`{"state":"OFF"}`), true)
	close(gate)
	for range 3 {
		pub.next(t)
	}
	cancel()
	<-done
	want := []string{"hearth/lamp/result=r1", `hearth/lamp={"state":"OFF"}`, "hearth/lamp/result=r2"}
	if !slices.Equal(pub.sent, want) {
		t.Errorf("published %q; want %q", pub.sent, want)
	}
}
