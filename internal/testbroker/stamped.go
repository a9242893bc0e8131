package testbroker

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
)

// wait bounds each operation of a StampedPublisher.
const wait = 5 * time.Second

var clients atomic.Int64

// StampedPublisher is an MQTT 5 client that sets the embedded broker's
// username stamp (the user property "hearth-username") itself, as the
// embedded broker does for the username it verified: for tests of an
// adapter's trust check against a broker that stamps nothing.
type StampedPublisher struct{ c *paho.Client }

// NewStampedPublisher connects a StampedPublisher to addr (host:port); it
// disconnects when t ends.
func NewStampedPublisher(t testing.TB, addr string) StampedPublisher {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{Conn: conn})
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: fmt.Sprintf("stamped-%d", clients.Add(1)), CleanStart: true, KeepAlive: 30}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Disconnect(&paho.Disconnect{})
		<-c.Done()
	})
	return StampedPublisher{c}
}

// Publish sends payload on topic at QoS 1 with the stamp username ("" for
// none) and waits for the PUBACK.
func (p StampedPublisher) Publish(t testing.TB, topic, payload, username string) {
	t.Helper()
	props := &paho.PublishProperties{}
	if username != "" {
		props.User = paho.UserProperties{{Key: "hearth-username", Value: username}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if _, err := p.c.Publish(ctx, &paho.Publish{Topic: topic, QoS: 1, Payload: []byte(payload), Properties: props}); err != nil {
		t.Fatal(err)
	}
}
