package zwavejs

import (
	"testing"

	"github.com/hearthd/hearth/internal/testbroker"
)

// With Publisher, a value, a node status or the gateway's status that the
// gateway's account did not publish (another username's stamp, or none)
// reaches no sink and is counted; the gateway's own do reach it.
func TestValuesCountOnlyFromThePublisher(t *testing.T) {
	addr := startBroker(t)
	a, s, _ := startAdapter(t, addr, Options{Publisher: "zwave", StampProperty: "hearth-username"})
	p := testbroker.NewStampedPublisher(t, addr)
	for _, forger := range []string{"mallory", ""} {
		p.Publish(t, "zwave/hall/front_door/98/0/currentMode", `{"time":1,"value":255}`, forger)
		p.Publish(t, "zwave/hall/front_door/status", `{"time":1,"value":true,"status":"Alive","nodeId":5}`, forger)
		p.Publish(t, "zwave/_CLIENTS/ZWAVE_GATEWAY-zwave-js-ui/status", `{"time":1,"value":true}`, forger)
	}
	p.Publish(t, "zwave/hall/front_door/98/0/currentMode", `{"time":2,"value":0}`, "zwave")
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
