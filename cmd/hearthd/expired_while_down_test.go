package main

import (
	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/dispatcher"
	"github.com/hearthd/hearth/simulator"
	"github.com/hearthd/hearth/store"
	"strings"
	"testing"
	"time"
)

// An UNLOCK whose TTL passed while Hearth was down ends expired at the next
// start, is notified, and its audit trail ends with ended
// expired/ttl_elapsed.
//
// Guarantee 9 (failures reach a person) and 10 (everything on record): an
// UNLOCK accepted, never sent, and pending across a restart whose TTL
// passed while Hearth was down ends expired at the next start
// (dispatcher.resume). It must be notified, and its audit trail must end
// with ended expired/ttl_elapsed, as for any other expiry.
func TestUnlockExpiredWhileDownIsNotifiedAndAudited(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	// The lock never answers a get, so the UNLOCK is still being read when
	// the hub loses power: accepted, pending, never sent.
	h := newHarness(t, harnessOptions{config: safetyConfig, dataDir: dir, brokerURL: b.URL(), faults: simulator.Faults{IgnoreGets: []string{"Front Door"}}})
	h.settle("front_door")
	h.publish("front_door", `{"state":"UNLOCK","op_id":"stale"}`)
	if r := h.result("stale"); r.Status != devices.Accepted {
		t.Fatalf("first result: %s/%s; want accepted", r.Status, r.Reason)
	}
	h.wantTraffic(`get Front Door {"state":""}`)
	clock := h.clock
	h.stopHearth()

	notes := make(chan paho.Message, 16)
	watcher := paho.NewClient(paho.NewClientOptions().AddBroker(b.URL()).SetClientID("expiry-notes").SetAutoReconnect(false))
	mustToken(t, watcher.Connect())
	defer watcher.Disconnect(0)
	mustToken(t, watcher.Subscribe("hearth/notifications", 1, func(_ paho.Client, m paho.Message) { notes <- m }))

	clock.Advance(dispatcher.DefaultRiskyTTL + time.Second) // the hub was down past the UNLOCK's TTL
	h2 := newHarness(t, harnessOptions{config: safetyConfig, dataDir: dir, clock: clock, brokerURL: b.URL(), automation: h})
	r := h2.await(func(r devices.Result) bool { return r.OpID == "stale" && r.Status.Terminal() }, "the final result of stale")
	if r.Status != devices.Expired || r.Reason != devices.ReasonTTLElapsed {
		t.Fatalf("stale: %s/%s; want expired/ttl_elapsed", r.Status, r.Reason)
	}
	h2.wantTraffic()

	trail, err := h2.d.store.Audit(store.AuditQuery{OpID: "stale"})
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	for _, e := range trail {
		s := string(e.Event)
		if e.Status != "" {
			s += " " + string(e.Status) + "/" + string(e.Reason)
		}
		events = append(events, s)
	}
	if len(events) == 0 || events[len(events)-1] != "ended expired/ttl_elapsed" {
		t.Errorf("audit trail of an UNLOCK that expired while Hearth was down: %q; want it to end with \"ended expired/ttl_elapsed\"", events)
	}
	select {
	case m := <-notes:
		if !strings.Contains(string(m.Payload()), `"op_id":"stale"`) {
			t.Errorf("notification %s; want one about op_id stale", m.Payload())
		}
	case <-time.After(2 * time.Second):
		t.Errorf("no notification on hearth/notifications for an UNLOCK that expired while Hearth was down")
	}
}
