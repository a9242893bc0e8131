package tasmota

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/eclipse/paho.golang/paho"
)

// stampedPublisher is an MQTT 5 client that sets the stamp property itself,
// as the embedded broker would for the username it verified.
type stampedPublisher struct{ c *paho.Client }

func newStampedPublisher(t *testing.T, addr string) stampedPublisher {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := paho.NewClient(paho.ClientConfig{Conn: conn})
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if _, err := c.Connect(ctx, &paho.Connect{ClientID: fmt.Sprintf("stamped-%d", seq.Add(1)), CleanStart: true, KeepAlive: 30}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.Disconnect(&paho.Disconnect{})
		<-c.Done()
	})
	return stampedPublisher{c}
}

// publish sends payload on topic at QoS 1 with the stamp username ("" for
// none).
func (p stampedPublisher) publish(t *testing.T, topic, payload, username string) {
	t.Helper()
	props := &paho.PublishProperties{}
	if username != "" {
		props.User = paho.UserProperties{{Key: "hearth-username", Value: username}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	if _, err := p.c.Publish(ctx, &paho.Publish{Topic: topic, QoS: 1, Payload: []byte(payload), Properties: props}); err != nil {
		t.Fatal(err)
	}
}
