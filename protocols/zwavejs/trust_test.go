package zwavejs

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

// With Publisher, a value, a node status or the gateway's status that the
// gateway's account did not publish (another username's stamp, or none)
// reaches no sink and is counted; the gateway's own do reach it.
func TestValuesCountOnlyFromThePublisher(t *testing.T) {
	addr := startBroker(t)
	a, s, _ := startAdapter(t, addr, Options{Publisher: "zwave", StampProperty: "hearth-username"})
	p := newStampedPublisher(t, addr)
	for _, forger := range []string{"mallory", ""} {
		p.publish(t, "zwave/hall/front_door/98/0/currentMode", `{"time":1,"value":255}`, forger)
		p.publish(t, "zwave/hall/front_door/status", `{"time":1,"value":true,"status":"Alive","nodeId":5}`, forger)
		p.publish(t, "zwave/_CLIENTS/ZWAVE_GATEWAY-zwave-js-ui/status", `{"time":1,"value":true}`, forger)
	}
	p.publish(t, "zwave/hall/front_door/98/0/currentMode", `{"time":2,"value":0}`, "zwave")
	if c := s.next(t); c.kind != "report" || c.name != "door" || c.state["state"] != "UNLOCK" {
		t.Errorf("first call on the sink: %+v; want the gateway's own report of UNLOCK, nothing forged before it", c)
	}
	if got := a.Untrusted(); got != 6 {
		t.Errorf("Untrusted() = %d; want 6", got)
	}
	if a.BridgeOnline() {
		t.Error("a forged gateway status set the gateway online")
	}
}
