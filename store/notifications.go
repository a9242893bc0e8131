package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/hearthd/hearth/devices"
)

// bucketNotifications is the notify services' outbox: one record per
// notification and notify service it goes to, keyed by the service's
// name, a 0x00 byte and the notification's id, holding a
// devices.OutboxNotification's JSON ("seq" first) in the record frame.
// A store from before it gets the bucket, empty, at its first Open.
var bucketNotifications = []byte("notifications")

// notificationKey is the key of service's entry of notification id.
func notificationKey(service, id string) []byte {
	k := make([]byte, 0, len(service)+1+len(id))
	k = append(k, service...)
	k = append(k, 0)
	return append(k, id...)
}

// SaveNotifications stores ns in the notify services' outbox, durably and
// in order: when it returns nil they are committed and fsync'd, through
// the same group commit as Save, together or not at all. Each gets a Seq
// one more than the last entry's ever stored (the bucket's sequence),
// which Notifications orders by. An entry whose service and id are
// stored already is left as it is (its Seq too), so saving again is
// harmless.
//
// An entry with an empty ID or Service, a Service holding a 0x00 byte, a
// zero QueuedAt or Deadline, or a Payload that is not valid JSON fails
// the whole call before anything is queued, naming the entry. With no
// entries it stores nothing. After Close it returns ErrClosed. *Store
// satisfies notify.Outbox with it.
func (s *Store) SaveNotifications(ns ...devices.OutboxNotification) error {
	if len(ns) == 0 {
		return s.openErr()
	}
	keys := make([][]byte, len(ns))
	bodies := make([][]byte, len(ns))
	for i, n := range ns {
		body, err := encodeNotification(n)
		if err != nil {
			return fmt.Errorf("save notification %d (id %q, service %q): %w", i, n.ID, n.Service, err)
		}
		keys[i], bodies[i] = notificationKey(n.Service, n.ID), body
	}
	return s.submit(&request{apply: func(b buckets) error {
		for i, key := range keys {
			if b.notes.Get(key) != nil {
				continue
			}
			seq, err := b.notes.NextSequence()
			if err != nil {
				return fmt.Errorf("assign seq to notification: %w", err)
			}
			if err := b.notes.Put(key, frameWithSeq(bucketNotifications, key, bodies[i], seq)); err != nil {
				return fmt.Errorf("save notification %s: %w", recordName(bucketNotifications, key), err)
			}
		}
		return nil
	}})
}

// DeleteNotifications removes service's entries of ids from the outbox,
// durably (a group commit, like SaveNotifications). An id not stored is
// no error. With no ids it deletes nothing. After Close it returns
// ErrClosed.
func (s *Store) DeleteNotifications(service string, ids ...string) error {
	if len(ids) == 0 {
		return s.openErr()
	}
	keys := make([][]byte, len(ids))
	for i, id := range ids {
		keys[i] = notificationKey(service, id)
	}
	return s.submit(&request{apply: func(b buckets) error {
		for _, key := range keys {
			if err := b.notes.Delete(key); err != nil {
				return fmt.Errorf("delete %s: %w", recordName(bucketNotifications, key), err)
			}
		}
		return nil
	}})
}

// Notifications returns every entry of the outbox, of every service, in
// Seq order (the order they were stored); nil when there is none. A
// record that fails its checksum is an error wrapping ErrDamaged that
// names it; one that does not decode is an error naming it. It reads the
// whole bucket, which the notify queues' bounds keep small: call it at
// start. After Close it returns ErrClosed.
func (s *Store) Notifications() ([]devices.OutboxNotification, error) {
	var out []devices.OutboxNotification
	err := s.view(func(b buckets) error {
		return b.notes.ForEach(func(k, v []byte) error {
			var n devices.OutboxNotification
			if err := unframeJSON(bucketNotifications, k, v, &n); err != nil {
				return err
			}
			if !bytes.Equal(notificationKey(n.Service, n.ID), k) {
				return fmt.Errorf("decode %s: record says service %q, id %q", recordName(bucketNotifications, k), n.Service, n.ID)
			}
			out = append(out, n)
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b devices.OutboxNotification) int {
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
	return out, nil
}

// encodeNotification checks n and returns its JSON without "seq" (the
// writer adds it: frameWithSeq).
func encodeNotification(n devices.OutboxNotification) ([]byte, error) {
	switch {
	case n.ID == "":
		return nil, fmt.Errorf("empty id")
	case n.Service == "":
		return nil, fmt.Errorf("empty service")
	case strings.IndexByte(n.Service, 0) >= 0:
		return nil, fmt.Errorf("service name holds a 0x00 byte")
	case n.QueuedAt.IsZero() || n.Deadline.IsZero():
		return nil, fmt.Errorf("zero queued_at or deadline")
	case !json.Valid(n.Payload):
		return nil, fmt.Errorf("payload is not valid JSON")
	}
	n.Seq = 0
	b, err := json.Marshal(n)
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	if !bytes.HasPrefix(b, zeroSeq) {
		return nil, fmt.Errorf("encode: JSON does not start with %s", zeroSeq)
	}
	b[len(zeroSeq)-1] = '{'
	return b[len(zeroSeq)-1:], nil
}

// notificationName names an outbox record's key in errors: service and
// id, or the key's bytes when it has no 0x00 byte.
func notificationName(key []byte) string {
	service, id, ok := bytes.Cut(key, []byte{0})
	if !ok {
		return fmt.Sprintf("notification with key %q", key)
	}
	return fmt.Sprintf("notification %q of service %q", id, service)
}

// verifyNotifications checks every outbox record at Open: its frame's
// checksum and that it decodes as an entry of its key. A record that
// fails is not the store's damage: it is returned (its key and error),
// for Open to delete and report (DroppedNotifications), so that one bad
// notification does not quarantine the store and end its pending
// commands. An error from bbolt's own walk is returned as err.
func verifyNotifications(b *bolt.Bucket) (bad []droppedNotification, err error) {
	err = b.ForEach(func(k, v []byte) error {
		if v == nil {
			return nil
		}
		var n devices.OutboxNotification
		if err := unframeJSON(bucketNotifications, k, v, &n); err != nil {
			if !isRecordError(err) {
				err = &recordError{bucket: string(bucketNotifications), key: string(k), what: "record does not decode: " + err.Error()}
			}
			bad = append(bad, droppedNotification{key: bytes.Clone(k), err: err})
			return nil
		}
		if !bytes.Equal(notificationKey(n.Service, n.ID), k) {
			bad = append(bad, droppedNotification{key: bytes.Clone(k), err: &recordError{bucket: string(bucketNotifications), key: string(k), what: fmt.Sprintf("record says service %q, id %q", n.Service, n.ID)}})
		}
		return nil
	})
	return bad, err
}

// droppedNotification is an outbox record Open found damaged.
type droppedNotification struct {
	key []byte
	err error
}

// DroppedNotifications returns the errors (each wrapping ErrDamaged and
// naming the record: notification "x" of service "y") of the outbox
// records this Open found failing their checksum or not decoding, and
// deleted, in key order; nil when there was none. Such a notification
// is not sent. The rest of the store is as it was: a damaged outbox
// record does not quarantine the store (the next damaged record of any
// other bucket does). hearthd logs each at ERROR.
func (s *Store) DroppedNotifications() []error { return s.droppedNotes }
