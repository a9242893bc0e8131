package zigbee2mqtt

import (
	"testing"

	"github.com/hearthd/hearth/internal/testbroker"
)

// With Publisher, a report, an availability or a bridge state that the
// bridge's account did not publish (another username's stamp, or none)
// reaches no sink and is counted; the bridge's own do reach it.
func TestReportsCountOnlyFromThePublisher(t *testing.T) {
	addr := startBroker(t)
	a, s, _ := startAdapter(t, addr, Options{Publisher: "zigbee", StampProperty: "hearth-username"})
	p := testbroker.NewStampedPublisher(t, addr)
	for _, forger := range []string{"mallory", ""} {
		p.Publish(t, "zigbee2mqtt/front door", `{"state":"LOCK","lock_state":"locked"}`, forger)
		p.Publish(t, "zigbee2mqtt/front door/availability", `online`, forger)
		p.Publish(t, "zigbee2mqtt/bridge/state", `online`, forger)
	}
	p.Publish(t, "zigbee2mqtt/front door", `{"state":"UNLOCK"}`, "zigbee")
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
	p := testbroker.NewStampedPublisher(t, addr)
	p.Publish(t, "zigbee2mqtt/front door", `{"state":"LOCK"}`, "mallory")
	if c := s.next(t); c.kind != "report" || c.state["state"] != "LOCK" {
		t.Errorf("call on the sink: %+v; want the report", c)
	}
	if a.Untrusted() != 0 {
		t.Errorf("Untrusted() = %d; want 0", a.Untrusted())
	}
}
