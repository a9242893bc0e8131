package main

// Review of issue 5 (safety-critical actions): a failing test of a
// guarantee of docs/SAFETY.md.

import (
	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/simulator"
	"testing"
	"time"
)

// Guarantee 5 ("the permission is checked again before every attempt")
// and issue 5 item 3 ("re-check authorization at that moment"): the
// authorization check runs before the fresh read, and nothing checks it
// again after the read, so a permission revoked while the lock is being
// read (up to read_timeout, 5 s by default) does not stop the UNLOCK.
func TestReviewPermissionRevokedDuringTheReadStopsTheUnlock(t *testing.T) {
	h := newHarness(t, harnessOptions{simLogin: bridgeLogin, automationLogin: bridgeLogin, config: tabletConfig("[lock, unlock]"),
		faults: simulator.Faults{Silent: []string{"front_door"}}})
	// The simulated lock is offline (it ignores everything); a fake bridge
	// answers the get when the test says, and records every set.
	gets := make(chan struct{}, 4)
	sets := make(chan string, 4)
	fake := paho.NewClient(paho.NewClientOptions().AddBroker(h.d.brokerURL).SetClientID("fake-z2m").
		SetUsername(bridgeLogin.username).SetPassword(bridgeLogin.password))
	mustToken(t, fake.Connect())
	defer fake.Disconnect(0)
	mustToken(t, fake.Subscribe("zigbee2mqtt/front_door/get", 1, func(paho.Client, paho.Message) { gets <- struct{}{} }))
	mustToken(t, fake.Subscribe("zigbee2mqtt/front_door/set", 1, func(_ paho.Client, m paho.Message) { sets <- string(m.Payload()) }))

	h.submitAs("tablet", "front_door", `{"state":"UNLOCK","op_id":"revoked-mid-read"}`)
	if r := h.result("revoked-mid-read"); r.Status != devices.Accepted {
		t.Fatalf("first result: %s/%s (%s); want accepted", r.Status, r.Reason, r.Detail)
	}
	select {
	case <-gets: // the read is under way: authorization already passed
	case <-time.After(eventWait):
		t.Fatal("no get reached the lock")
	}
	next, err := config.Parse("test.yaml", []byte(tabletConfig("[lock]")))
	if err != nil {
		t.Fatal(err)
	}
	h.d.reload(next) // the tablet may no longer unlock
	mustToken(t, fake.Publish("zigbee2mqtt/front_door", 1, false, `{"state":"LOCK","lock_state":"locked"}`))

	// The end: refused at the send. (Had the set gone out, the command
	// would wait for a confirmation the silent lock never sends, and no
	// end would come.)
	r := h.await(func(r devices.Result) bool { return r.OpID == "revoked-mid-read" && r.Status.Terminal() }, "the end of revoked-mid-read")
	if r.Status != devices.Failed || r.Reason != devices.ReasonUnauthorized || r.Attempts != 0 {
		t.Errorf("revoked-mid-read: %s/%s after %d attempts (%s); want failed/unauthorized after 0", r.Status, r.Reason, r.Attempts, r.Detail)
	}
	select {
	case s := <-sets:
		t.Errorf("the lock received %s after the tablet's permission to unlock was revoked; want nothing sent", s)
	default:
	}
}
