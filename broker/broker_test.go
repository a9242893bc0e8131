package broker

import (
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The broker listens on a free port when asked for port 0 and says which,
// and it carries a payload above Hearth's 64 KiB command limit, so that
// such a command reaches Hearth and gets a rejection instead of costing
// the sender its connection.
func TestPortZeroAndLargePayloads(t *testing.T) {
	b, err := Start(Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if strings.HasSuffix(b.Addr(), ":0") || b.URL() != "tcp://"+b.Addr() {
		t.Fatalf("Addr %q URL %q; want the chosen port", b.Addr(), b.URL())
	}
	got := make(chan int, 1)
	c := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("t"))
	wait(t, c.Connect())
	defer c.Disconnect(0)
	wait(t, c.Subscribe("big", 1, func(_ paho.Client, m paho.Message) { got <- len(m.Payload()) }))
	payload := strings.Repeat("x", 100<<10)
	wait(t, c.Publish("big", 1, false, payload))
	select {
	case n := <-got:
		if n != len(payload) {
			t.Errorf("received %d bytes; want %d", n, len(payload))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the 100 KiB message never arrived")
	}
}

func TestListenErrorNamesTheAddress(t *testing.T) {
	b, err := Start(Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = Start(Options{Listen: b.Addr()})
	if err == nil || !strings.Contains(err.Error(), b.Addr()) {
		t.Errorf("second broker on %s: %v; want an error naming the address", b.Addr(), err)
	}
}

func wait(t *testing.T, tok paho.Token) {
	t.Helper()
	if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatalf("mqtt: %v", tok.Error())
	}
}
