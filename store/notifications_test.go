package store

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hearthd/hearth/devices"
)

func outboxEntry(service, id string) devices.OutboxNotification {
	return devices.OutboxNotification{
		ID: id, Service: service, Device: "front_door", OpID: "op-" + id,
		QueuedAt: t0, Deadline: t0.Add(10 * time.Minute),
		Payload: json.RawMessage(`{"id":"` + id + `","title":"front_door: unlock failed"}`),
	}
}

// notificationIDs lists the outbox as service/id, in Seq order.
func notificationIDs(t *testing.T, s *Store) []string {
	t.Helper()
	ns, err := s.Notifications()
	if err != nil {
		t.Fatalf("Notifications: %v", err)
	}
	var out []string
	for _, n := range ns {
		out = append(out, n.Service+"/"+n.ID)
	}
	return out
}

// Entries survive a reopen of the file with every field and in the
// order they were stored; a deleted one is gone; saving one again keeps
// its place.
func TestOutboxNotificationsSurviveAReopenInOrderUntilDeleted(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, hooks{})
	// "b" sorts before "z" by key, but was stored later.
	if err := s.SaveNotifications(outboxEntry("ntfy", "z1"), outboxEntry("gotify", "z1")); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveNotifications(outboxEntry("ntfy", "b2")); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveNotifications(outboxEntry("ntfy", "z1")); err != nil { // again: keeps its Seq
		t.Fatal(err)
	}
	if err := s.DeleteNotifications("gotify", "z1", "never-stored"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir, hooks{})
	ns, err := s.Notifications()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(ns), 2; got != want {
		t.Fatalf("%d entries after the reopen, want %d: %+v", got, want, ns)
	}
	want := outboxEntry("ntfy", "z1")
	got := ns[0]
	if got.Seq != 1 || got.ID != want.ID || got.Service != want.Service || got.Device != want.Device || got.OpID != want.OpID ||
		!got.QueuedAt.Equal(want.QueuedAt) || !got.Deadline.Equal(want.Deadline) || string(got.Payload) != string(want.Payload) {
		t.Errorf("first entry = %+v, want %+v with seq 1", got, want)
	}
	if ns[1].ID != "b2" || ns[1].Seq != 3 {
		t.Errorf("second entry = %s seq %d, want b2 seq 3", ns[1].ID, ns[1].Seq)
	}
	if err := s.DeleteNotifications("ntfy", "z1", "b2"); err != nil {
		t.Fatal(err)
	}
	if got := notificationIDs(t, s); got != nil {
		t.Errorf("outbox after deleting both = %v, want empty", got)
	}
}

func TestSaveNotificationsRefusesBadEntriesStoringNothing(t *testing.T) {
	s := openStore(t, "", hooks{})
	for _, c := range []struct {
		name string
		edit func(*devices.OutboxNotification)
		want string
	}{
		{"no id", func(n *devices.OutboxNotification) { n.ID = "" }, "empty id"},
		{"no service", func(n *devices.OutboxNotification) { n.Service = "" }, "empty service"},
		{"NUL in service", func(n *devices.OutboxNotification) { n.Service = "a\x00b" }, "0x00"},
		{"no deadline", func(n *devices.OutboxNotification) { n.Deadline = time.Time{} }, "zero queued_at or deadline"},
		{"bad payload", func(n *devices.OutboxNotification) { n.Payload = json.RawMessage(`{"id":`) }, "not valid JSON"},
	} {
		bad := outboxEntry("ntfy", "bad")
		c.edit(&bad)
		err := s.SaveNotifications(outboxEntry("ntfy", "good"), bad)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "notification 1") {
			t.Errorf("%s: SaveNotifications = %v, want an error naming entry 1 and %q", c.name, err, c.want)
		}
	}
	if got := notificationIDs(t, s); got != nil {
		t.Errorf("outbox = %v, want nothing stored", got)
	}
}

// A store written before the outbox existed (no notifications bucket)
// opens, and its outbox is empty and writable.
func TestAStoreFromBeforeTheOutboxOpens(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, hooks{})
	if err := s.Save(newOp("a")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(dir+"/"+FileName, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.DeleteBucket(bucketNotifications) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, dir, hooks{})
	if got := notificationIDs(t, s); got != nil {
		t.Errorf("outbox of an old store = %v, want empty", got)
	}
	if _, found, err := s.Lookup("a"); !found || err != nil {
		t.Errorf("Lookup(a) = %v, %v; want the old op", found, err)
	}
	if err := s.SaveNotifications(outboxEntry("ntfy", "n1")); err != nil {
		t.Fatal(err)
	}
	if got := notificationIDs(t, s); len(got) != 1 || got[0] != "ntfy/n1" {
		t.Errorf("outbox = %v, want [ntfy/n1]", got)
	}
}

// A changed byte in an outbox record is not the whole store's damage at
// open: that record is deleted and named by DroppedNotifications, and
// the store opens as it is, not quarantined, its pending command still
// pending and the other notification kept. Before, one bad notification
// quarantined the store: every pending command ended store_damaged, the
// other notifications lost, old commands refused for the dedup window.
func TestADamagedOutboxRecordIsDroppedNotQuarantined(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, hooks{})
	if err := s.Save(newOp("unlock")); err != nil {
		t.Fatal(err)
	}
	n2 := outboxEntry("ntfy", "n2")
	n2.Payload = json.RawMessage(`{"id":"n2","title":"garage: close failed"}`)
	if err := s.SaveNotifications(outboxEntry("ntfy", "n1"), n2); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rewriteAll(t, dir, []byte(`front_door: unlock failed`), []byte(`front_door: unlock faileD`))
	s, err := Open(dir, Options{Quarantine: true, Now: func() time.Time { return t0 }})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	if _, found, err := s.Quarantine(); err != nil || found {
		t.Fatalf("Quarantine() found %v, err %v; want no quarantine", found, err)
	}
	dropped := s.DroppedNotifications()
	if len(dropped) != 1 || !errors.Is(dropped[0], ErrDamaged) || !strings.Contains(dropped[0].Error(), `notification "n1" of service "ntfy"`) {
		t.Fatalf("DroppedNotifications = %v; want one ErrDamaged naming n1", dropped)
	}
	if got := notificationIDs(t, s); len(got) != 1 || got[0] != "ntfy/n2" {
		t.Errorf("outbox = %v, want [ntfy/n2]", got)
	}
	ops, err := s.Pending()
	if err != nil || len(ops) != 1 || ops[0].OpID != "unlock" || ops[0].Status != devices.Accepted {
		t.Fatalf("Pending = %v, %v; want the unlock, accepted", ops, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(dir, Options{})
	if err != nil {
		t.Fatalf("second Open: %v", err)
	}
	defer s.Close()
	if d := s.DroppedNotifications(); d != nil {
		t.Errorf("second Open dropped %v; want none: the record was deleted", d)
	}
}
