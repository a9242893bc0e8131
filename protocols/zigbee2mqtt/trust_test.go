package zigbee2mqtt

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

// With Publisher, a report, an availability or a bridge state that the
// bridge's account did not publish (another username's stamp, or none)
// reaches no sink and is counted; the bridge's own do reach it.
func TestReportsCountOnlyFromThePublisher(t *testing.T) {
	addr := startBroker(t)
	a, s, _ := startAdapter(t, addr, Options{Publisher: "zigbee", StampProperty: "hearth-username"})
	p := newStampedPublisher(t, addr)
	for _, forger := range []string{"mallory", ""} {
		p.publish(t, "zigbee2mqtt/front door", `{"state":"LOCK","lock_state":"locked"}`, forger)
		p.publish(t, "zigbee2mqtt/front door/availability", `online`, forger)
		p.publish(t, "zigbee2mqtt/bridge/state", `online`, forger)
	}
	p.publish(t, "zigbee2mqtt/front door", `{"state":"UNLOCK"}`, "zigbee")
	if c := s.next(t); c.kind != "report" || c.name != "door" || c.state["state"] != "UNLOCK" {
		t.Errorf("first call on the sink: %+v; want the bridge's own report of UNLOCK, nothing forged before it", c)
	}
	if got := a.Untrusted(); got != 6 {
		t.Errorf("Untrusted() = %d; want 6", got)
	}
	if a.BridgeOnline() {
		t.Error("a forged bridge state set the bridge online")
	}
}

// Without Publisher every report counts, stamped or not (an external
// broker, whose ACL makes the topic the bridge's).
func TestWithoutPublisherEveryReportCounts(t *testing.T) {
	addr := startBroker(t)
	a, s, _ := startAdapter(t, addr, Options{})
	p := newStampedPublisher(t, addr)
	p.publish(t, "zigbee2mqtt/front door", `{"state":"LOCK"}`, "mallory")
	if c := s.next(t); c.kind != "report" || c.state["state"] != "LOCK" {
		t.Errorf("call on the sink: %+v; want the report", c)
	}
	if a.Untrusted() != 0 {
		t.Errorf("Untrusted() = %d; want 0", a.Untrusted())
	}
}
