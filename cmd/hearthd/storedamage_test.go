package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/hearthd/hearth/api"
	"github.com/hearthd/hearth/broker"
	"github.com/hearthd/hearth/config"
	"github.com/hearthd/hearth/devices"
	"github.com/hearthd/hearth/store"
)

// A store as a running Hearth leaves it: ended commands (the dedup of
// their op_ids), commands pending with an attempt in flight, audit
// entries and dead letters, and device states.
const (
	damageEnded   = 600
	damagePending = 12
	damageAudit   = 200
	damageDead    = 60
)

// damageStore fills a fresh store in dir as above, an hour before t0,
// and returns its ops by op_id. The commands are the generated
// principal's, as the harness's automation sends them.
func damageStore(t *testing.T, dir string) map[string]devices.Op {
	t.Helper()
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	at := t0.Add(-time.Hour)
	ops := map[string]devices.Op{}
	var batch []devices.Op
	for i := range damageEnded {
		// One a minute over the ten hours before at.
		at := at.Add(time.Duration(i-damageEnded) * time.Minute)
		op := devices.Op{OpID: fmt.Sprintf("ended-%03d", i), Device: "hall_light", Principal: config.DefaultPrincipal,
			Target: devices.Target{"state": "ON", "brightness": float64(i % 255)}, AcceptedAt: at, IssuedAt: at,
			Deadline: at.Add(time.Minute), Status: devices.Succeeded, Attempts: 1, LastSentAt: at, UpdatedAt: at}
		batch = append(batch, op)
		ops[op.OpID] = op
	}
	for i := range damagePending {
		op := devices.Op{OpID: fmt.Sprintf("pending-%02d", i), Device: "plug", Principal: config.DefaultPrincipal,
			Target: devices.Target{"state": "ON"}, AcceptedAt: at, IssuedAt: at,
			Deadline: at.Add(3 * time.Hour), Status: devices.Accepted, Attempts: 1, LastSentAt: at, UpdatedAt: at}
		batch = append(batch, op)
		ops[op.OpID] = op
	}
	if err := s.Save(batch...); err != nil {
		t.Fatal(err)
	}
	var audit []devices.AuditEntry
	for i := range damageAudit {
		audit = append(audit, devices.AuditEntry{At: at, Event: devices.AuditSent, OpID: fmt.Sprintf("door-%03d", i),
			Device: "front_door", Action: "lock", Attempt: 1, Detail: "sent"})
	}
	if err := s.AppendAudit(audit...); err != nil {
		t.Fatal(err)
	}
	var dead []devices.Op
	for i := range damageDead {
		dead = append(dead, devices.Op{OpID: fmt.Sprintf("dead-%02d", i), Device: "blinds",
			Target: devices.Target{"position": 50.0}, AcceptedAt: at, Deadline: at.Add(time.Minute),
			Status: devices.Failed, Reason: devices.ReasonTimeout, Attempts: 2, UpdatedAt: at})
	}
	if err := s.AddDeadLetters(dead...); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveState("hall_light", map[string]any{"state": "ON"}, at); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return ops
}

// storeDamage is one way a power cut or a failing SD card leaves
// hearth.db, and the least of the ops that salvage must recover from it.
type storeDamage struct {
	name   string
	damage func(b []byte) []byte
	// minOps is the fewest ops a salvage must copy; the damaged pages
	// take the rest.
	minOps int
}

var pageSize = os.Getpagesize()

var storeDamages = []storeDamage{
	{"zero length", func([]byte) []byte { return nil }, 0},
	{"truncated to half", func(b []byte) []byte { return b[:len(b)/2] }, 1},
	{"one page in four zeroed", func(b []byte) []byte {
		for p := 2; (p+1)*pageSize <= len(b); p += 4 {
			clear(b[p*pageSize : (p+1)*pageSize])
		}
		return b
	}, 1},
	{"16 KiB of garbage in the middle", func(b []byte) []byte {
		r := rand.New(rand.NewPCG(15, 2))
		mid := len(b) / 2
		for i := mid; i < mid+16<<10 && i < len(b); i++ {
			b[i] = byte(r.Uint32())
		}
		return b
	}, 1},
	{"all zeros", func(b []byte) []byte { return make([]byte, len(b)) }, 0},
	{"both meta pages garbled", func(b []byte) []byte {
		r := rand.New(rand.NewPCG(15, 3))
		for _, p := range []int{0, 1} {
			for i := p*pageSize + 16; i < p*pageSize+80; i++ {
				b[i] = byte(r.Uint32())
			}
		}
		return b
	}, damageEnded * 9 / 10},
	{"200 random byte flips", func(b []byte) []byte {
		r := rand.New(rand.NewPCG(15, 4))
		for range 200 {
			i := 2*pageSize + r.IntN(len(b)-2*pageSize)
			b[i] ^= byte(1 + r.IntN(255))
		}
		return b
	}, 1},
}

// Every kind of damage to hearth.db that a power cut or a failing SD card
// leaves is quarantined, and Hearth starts on a fresh store: it serves a
// live command; the damaged file is kept byte for byte; the records that
// could be read and trusted are salvaged, unaltered, and counted; the
// notification, the retained hearth/bridge/store, the gauge and /readyz
// say so; no op_id of the damaged store runs again (each is answered from
// the salvaged record or refused as stale), and no pending command from
// it is sent again. (A full disk while running is not damage: see
// TestStoreCommitsFailingMakeReadyzFailUntilOneSucceeds.)
func TestEveryKindOfStoreDamageIsQuarantinedSalvagedAndAnnounced(t *testing.T) {
	for _, tc := range storeDamages {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ops := damageStore(t, dir)
			path := filepath.Join(dir, store.FileName)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			damaged := tc.damage(b)
			if err := os.WriteFile(path, damaged, 0o600); err != nil {
				t.Fatal(err)
			}

			brk, err := broker.Start(broker.Options{Listen: "127.0.0.1:0"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { brk.Close() })
			notes := subscribe(t, brk.URL(), "hearth/notifications")
			results := subscribe(t, brk.URL(), "hearth/+/result")
			h := newHarness(t, harnessOptions{dataDir: dir, brokerURL: brk.URL()})

			q, found, err := h.d.store.Quarantine()
			if err != nil || !found || q.Acked() {
				t.Fatalf("Quarantine() = %+v, %v, %v; want an unacknowledged quarantine", q, found, err)
			}
			if kept, err := os.ReadFile(q.File); err != nil || !bytes.Equal(kept, damaged) {
				t.Errorf("the quarantined file %q: %d bytes, %v; want the %d damaged bytes kept", q.File, len(kept), err, len(damaged))
			}
			t.Logf("cause: %s; salvaged %+v, skipped %+v, ended %d", q.Cause, q.Salvaged, q.Skipped, q.Ended)
			if q.Salvaged.Ops < tc.minOps {
				t.Errorf("salvaged %d ops; want at least %d", q.Salvaged.Ops, tc.minOps)
			}

			// Salvaged records are the ones stored, unaltered; a
			// pending one is ended store_damaged, never resumed.
			salvaged, pending := 0, 0
			for id, want := range ops {
				got, ok, err := h.d.store.Lookup(id)
				if err != nil {
					t.Fatalf("Lookup(%s) on the fresh store: %v", id, err)
				}
				if !ok {
					continue
				}
				salvaged++
				if got.Device != want.Device || fmt.Sprint(got.Target) != fmt.Sprint(want.Target) || got.Seq == 0 {
					t.Errorf("salvaged %s: %+v; want %+v", id, got, want)
				}
				switch {
				case want.Status.Terminal() && got.Status != want.Status:
					t.Errorf("salvaged %s: status %s; want %s as stored", id, got.Status, want.Status)
				case !want.Status.Terminal():
					pending++
					if got.Status != devices.Failed || got.Reason != devices.ReasonStoreDamaged {
						t.Errorf("salvaged pending %s: %s/%s; want failed/store_damaged", id, got.Status, got.Reason)
					}
				}
			}
			if salvaged != q.Salvaged.Ops || pending != q.Ended {
				t.Errorf("the fresh store holds %d of the ops (%d were pending); the record says %d salvaged, %d ended", salvaged, pending, q.Salvaged.Ops, q.Ended)
			}
			// Their results reach a subscriber: a pending command's
			// sender learns it ended.
			for range pending {
				r := awaitResult(t, results, func(r devices.Result) bool {
					return r.Status == devices.Failed && r.Reason == devices.ReasonStoreDamaged
				})
				if !strings.HasPrefix(r.OpID, "pending-") {
					t.Errorf("a store_damaged result for %s; want only the pending ones", r.OpID)
				}
			}

			for n := h.nextNotification(notes); ; n = h.nextNotification(notes) {
				if n.Source == "store" {
					if n.Severity != "critical" || n.Reason != reasonStoreQuarantined || !strings.Contains(n.Message, q.File) {
						t.Errorf("notification %+v; want critical store_quarantined naming %s", n, q.File)
					}
					break
				}
			}
			st, m := nextStoreState(t, h.watch("hearth/bridge/store"), api.StoreQuarantined)
			if !m.Retained() || st.StoreQuarantine == nil || st.File != q.File || st.Salvaged.Ops != q.Salvaged.Ops {
				t.Errorf("hearth/bridge/store: %+v (retained %v); want quarantined, %s, %d ops salvaged", st, m.Retained(), q.File, q.Salvaged.Ops)
			}
			if got := h.metric("hearth_store_quarantined"); got != 1 {
				t.Errorf("hearth_store_quarantined = %v; want 1", got)
			}
			if status, r := h.readyz(); status != http.StatusOK || r.Status != "degraded" {
				t.Errorf("/readyz: %d %+v; want 200 degraded", status, r)
			}

			h.settle("hall_light", "plug")
			h.publish("plug", `{"state":"OFF","op_id":"live"}`)
			if r := h.final("live"); r.Status != devices.Succeeded {
				t.Errorf("a live command: %s/%s; want succeeded", r.Status, r.Reason)
			}
			if e := h.nextSet(); e.Device != "plug" {
				t.Errorf("a set reached %s; want the live one, to plug", e.Device)
			}
			// Every old op_id, sent again as its sender would (with
			// its issued_at), is answered from its salvaged record or
			// refused: none is accepted, none reaches a device.
			for i, id := range sampleOpIDs() {
				dev, issued := ops[id].Device, ops[id].IssuedAt.Format(time.RFC3339)
				h.publish(dev, fmt.Sprintf(`{"state":"ON","op_id":%q,"issued_at":%q,"ttl":"12h"}`, id, issued))
				r := h.result(id)
				_, known, _ := h.d.store.Lookup(id)
				switch {
				case r.Status == devices.Rejected && r.Reason == devices.ReasonStaleCommand && !known:
				case r.Status == ops[id].Status && known:
				case r.Status == devices.Failed && r.Reason == devices.ReasonStoreDamaged && known:
				default:
					t.Errorf("old op_id %s (#%d) sent again: %s/%s (%s); want its stored result or rejected stale_command", id, i, r.Status, r.Reason, r.Detail)
				}
			}
			h.noSetsYet()
		})
	}
}

// sampleOpIDs returns every pending op_id and every tenth ended one.
func sampleOpIDs() []string {
	var ids []string
	for i := range damagePending {
		ids = append(ids, fmt.Sprintf("pending-%02d", i))
	}
	for i := 0; i < damageEnded; i += 10 {
		ids = append(ids, fmt.Sprintf("ended-%03d", i))
	}
	return ids
}

// awaitResult waits for a result on ch that match accepts, skipping
// others.
func awaitResult(t *testing.T, ch <-chan paho.Message, match func(devices.Result) bool) devices.Result {
	t.Helper()
	deadline := time.After(eventWait)
	for {
		select {
		case m := <-ch:
			var r devices.Result
			if err := json.Unmarshal(m.Payload(), &r); err != nil {
				t.Fatalf("%s is not a result: %s", m.Topic(), m.Payload())
			}
			if match(r) {
				return r
			}
		case <-deadline:
			t.Fatal("timed out waiting for a result")
			panic("unreachable")
		}
	}
}
